"""The elements of Arrow list arrays, also where pyarrow cannot make them.

pyarrow 26 cannot build an empty child array of an extension type: flattening a list of ``arrow.uuid`` (or a
map keyed by one, or a list of such lists) whose rows hold no element at all, only nulls or empty lists,
fails with "MakeBuilder: cannot construct builder for type extension<arrow.uuid>" (an all-null uuid map
column could not be appended). :func:`list_values` then returns an empty array of the element type with
every extension type replaced by its storage type, which holds, counts and converts the same.
"""

from __future__ import annotations

import pyarrow as pa


def list_values(lists: pa.Array) -> pa.Array:
    """``lists.flatten()`` (the elements of the valid lists, in order) of a list array."""
    try:
        return lists.flatten()
    except pa.ArrowNotImplementedError:
        offsets = lists.offsets
        if len(offsets) and offsets[-1].as_py() != offsets[0].as_py():
            raise  # there are elements: not the empty-extension case
        return pa.array([], storage_type(lists.type.value_type))


def storage_type(t: pa.DataType) -> pa.DataType:
    """``t`` with every extension type in it replaced by its storage type."""
    if isinstance(t, pa.BaseExtensionType):
        return storage_type(t.storage_type)
    if pa.types.is_struct(t):
        return pa.struct([t.field(i).with_type(storage_type(t.field(i).type)) for i in range(t.num_fields)])
    if pa.types.is_map(t):
        key, item = t.key_field, t.item_field
        return pa.map_(key.with_type(storage_type(key.type)), item.with_type(storage_type(item.type)))
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return pa.list_(t.value_field.with_type(storage_type(t.value_type)))
    return t
