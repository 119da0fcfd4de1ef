"""The elements of Arrow list arrays, and struct arrays, also where pyarrow cannot make them.

pyarrow 26 cannot build an empty child array of an extension type: flattening a list of ``arrow.uuid`` (or a
map keyed by one, or a list of such lists) whose rows hold no element at all, only nulls or empty lists,
fails with "MakeBuilder: cannot construct builder for type extension<arrow.uuid>" (an all-null uuid map
column could not be appended). :func:`list_values` then assembles the empty array of the element type from
its parts (extension arrays from their storage), with no builder.

``pa.StructArray.from_arrays`` of no children makes an array of no rows, whatever the rows asked for: a
struct whose every field was deleted (the spec allows ``struct<>``) lost the batch's row count, and with it
every row of a table holding only that column. :func:`struct_array` keeps the length.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa


def list_values(lists: pa.Array) -> pa.Array:
    """``lists.flatten()`` (the elements of the valid lists, in order) of a list or map array (of a map:
    its key-value structs)."""
    try:
        return lists.flatten() if not pa.types.is_map(lists.type) else _entries(lists).flatten()
    except pa.ArrowNotImplementedError:
        offsets = lists.offsets
        if len(offsets) and offsets[-1].as_py() != offsets[0].as_py():
            raise  # there are elements: not the empty-extension case
        t = lists.type
        return empty(pa.struct([t.key_field, t.item_field]) if pa.types.is_map(t) else t.value_type)


def _entries(maps: pa.Array) -> pa.Array:
    return maps.cast(pa.list_(pa.struct([maps.type.key_field, maps.type.item_field])))


def empty(t: pa.DataType) -> pa.Array:
    """An array of no value of type ``t``, made without a builder."""
    if isinstance(t, pa.BaseExtensionType):
        return pa.ExtensionArray.from_storage(t, empty(t.storage_type))
    if pa.types.is_struct(t):
        return pa.StructArray.from_arrays([empty(f.type) for f in t], fields=list(t))
    none = pa.array([0], pa.int32())
    if pa.types.is_map(t):
        return pa.MapArray.from_arrays(none, empty(t.key_type), empty(t.item_type), type=t)
    if pa.types.is_list(t):
        return pa.ListArray.from_arrays(none, empty(t.value_type), type=t)
    return pa.array([], t)


def struct_array(
    children: list[pa.Array], fields: list[pa.Field], length: int, mask: pa.Array | None = None
) -> pa.Array:
    """A struct array of ``length`` rows from its ``children`` (each of ``length``), null where ``mask``
    (a boolean array) is true; also with no children."""
    if children:
        return pa.StructArray.from_arrays(children, fields=fields, mask=mask)
    if mask is None or not mask.true_count:
        return pa.Array.from_buffers(pa.struct([]), length, [None], null_count=0, children=[])
    valid = np.logical_not(mask.to_numpy(zero_copy_only=False))
    bitmap = pa.py_buffer(np.packbits(valid, bitorder="little").tobytes())
    return pa.Array.from_buffers(
        pa.struct([]), length, [bitmap], null_count=length - int(valid.sum()), children=[]
    )
