"""Arrow data checked and cast to the Arrow form an Iceberg schema is written in.

:func:`write_schema` is :func:`~gpu_engine.io.arrow_schema.to_arrow_schema` with uuid as ``arrow.uuid``
(so Parquet gets the UUID logical type) and ``unknown`` fields omitted (Appendix A). :func:`conform_batch`
matches columns and struct fields by name, fills missing ones with their ``write-default`` (nulls for
optional fields without one) and casts types where no value changes (any integer width into int/long
with overflow checked, float into double, string/binary views, timestamp units without truncation,
time zones of timestamptz, decimals of the same scale that fit, list/large list/fixed-size list into
list). A column that is not in the schema, a missing required column, an incompatible type, a value that
does not fit, a null in a required field, values given for an ``unknown`` field and a time outside
00:00-24:00 (each only where its parents are not null: values beneath a null are never read) are each a
:class:`SchemaMismatch` naming the column.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import SchemaMismatch, UnsupportedFeature
from ..iceberg import types as it
from ..iceberg.schema import Schema
from ..iceberg.serde import MICROS_PER_DAY
from .arrow_nested import list_values, struct_array
from .arrow_schema import default_maker, field_metadata


def write_schema(schema: Schema) -> pa.Schema:
    """The Arrow schema written: :func:`to_arrow_schema` with uuid as ``arrow.uuid`` (Parquet UUID) and
    ``unknown`` fields omitted (Appendix A)."""
    return pa.schema(
        [f for f in (_write_field(f.name, f.field_id, f.type, not f.required) for f in schema.fields) if f]
    )


def _write_field(name: str, fid: int, t: it.IcebergType, nullable: bool) -> pa.Field | None:
    if t == it.UNKNOWN:
        return None
    try:
        return pa.field(name, write_type(t), nullable, metadata=field_metadata(fid))
    except UnsupportedFeature as exc:
        raise UnsupportedFeature(f"column {name!r}: {exc}") from None


def write_type(t: it.IcebergType) -> pa.DataType:
    if isinstance(t, it.StructType):
        fields = (_write_field(f.name, f.field_id, f.type, not f.required) for f in t.fields)
        stored = [f for f in fields if f]
        if not stored:  # Parquet has no group without fields (Java cannot write one either)
            raise UnsupportedFeature(
                f"writing Iceberg {t} columns is not supported: a struct with no stored field (none, or "
                "only unknown ones) cannot be written to Parquet"
            )
        return pa.struct(stored)
    if isinstance(t, it.ListType | it.MapType) and it.UNKNOWN in (
        (t.element,) if isinstance(t, it.ListType) else (t.key, t.value)
    ):  # an unknown column is left out of the file; a list element or map entry cannot be (Java refuses too)
        raise UnsupportedFeature(f"writing Iceberg {t} columns is not supported: unknown in a list or map")
    if isinstance(t, it.ListType):
        element = _write_field("element", t.element_id, t.element, not t.element_required)
        assert element is not None
        return pa.list_(element)
    if isinstance(t, it.MapType):
        key, value = (
            _write_field("key", t.key_id, t.key, False),
            _write_field("value", t.value_id, t.value, not t.value_required),
        )
        assert key is not None and value is not None
        return pa.map_(key, value)
    if t == it.UUID:
        return pa.uuid()
    if t.name in ("variant", "geometry", "geography"):
        raise UnsupportedFeature(f"writing Iceberg {t} columns is not supported")
    return it.to_arrow(t)


def conform_batch(batch: pa.RecordBatch, schema: Schema, target: pa.Schema | None = None) -> pa.RecordBatch:
    """``batch`` as :func:`write_schema` (columns by name): missing columns get their ``write-default`` (or
    nulls), types are cast where no value changes; :class:`SchemaMismatch` names the column otherwise."""
    target = write_schema(schema) if target is None else target
    names = batch.schema.names
    known = {f.name for f in schema.fields}
    for name in names:
        if name not in known or names.count(name) > 1:
            why = "appears twice" if name in known else "is not in the table schema"
            raise SchemaMismatch(f"column {name!r} {why}")
    arrays = []
    for f in schema.fields:
        if f.type == it.UNKNOWN:
            _check_unknown(batch.column(f.name) if f.name in names else None, f.name, None)
            continue
        tf = target.field(f.name)
        arr = batch.column(f.name) if f.name in names else None
        arrays.append(_conform_field(arr, f, tf.type, f.name, None, batch.num_rows))
    return pa.RecordBatch.from_arrays(arrays, schema=target)


def _conform_field(
    arr: pa.Array | None, f: it.NestedField, target: pa.DataType, name: str, live: pa.Array | None, n: int
) -> pa.Array:
    """``arr`` (None: missing) as field ``f``; ``live``: rows whose parents are all valid (None: all)."""
    if arr is None:
        if not f.has_write_default and f.required:
            raise SchemaMismatch(f"required column {name!r} is missing and has no write-default")
        # a struct's {} takes each field's own write-default (spec "Default values")
        arr = default_maker(f, f"column {name!r}", write=True)(n)
    out = _conform(arr, f.type, target, name, live)
    if f.required and out.null_count:
        bad = out.null_count if live is None else int(pc.sum(pc.and_(out.is_null(), live)).as_py() or 0)
        if bad:
            raise SchemaMismatch(f"column {name!r} is required but {bad} of its values are null")
        out = _without_nulls(out)  # the nulls lie under null parents: Parquet's levels make them null there
    return out


def _conform(
    arr: pa.Array, t: it.IcebergType, target: pa.DataType, name: str, live: pa.Array | None
) -> pa.Array:
    while isinstance(arr.type, pa.BaseExtensionType) or pa.types.is_dictionary(arr.type):
        arr = arr.storage if isinstance(arr.type, pa.BaseExtensionType) else arr.dictionary_decode()
    if pa.types.is_null(arr.type) and t != it.UNKNOWN:  # all null (pandas' empty columns): any type holds it
        nulls = pa.nulls(len(arr), target)  # a struct's required fields cleared below, as under any null
        nested = isinstance(t, (it.StructType, it.ListType, it.MapType))
        return _conform(nulls, t, target, name, live) if nested else nulls
    mask = arr.is_null() if arr.null_count else None
    if isinstance(t, it.StructType) and pa.types.is_struct(arr.type):
        names = [c.name for c in arr.type]
        if twice := next((n for n in names if names.count(n) > 1), None):  # one value would be dropped
            raise SchemaMismatch(f"column {name}.{twice!r} appears twice")
        kids = {c.name: arr.field(i) for i, c in enumerate(arr.type)}  # without the struct's nulls
        if extra := set(kids) - {f.name for f in t.fields}:
            raise SchemaMismatch(f"column {name}.{sorted(extra)[0]!r} is not in the table schema")
        here = arr.is_valid() if live is None else pc.and_(live, arr.is_valid())
        fields = {f.name: f for f in t.fields}
        for f in t.fields:
            if f.type == it.UNKNOWN:
                _check_unknown(kids.get(f.name), f"{name}.{f.name}", here)
        children = [
            _conform_field(kids.get(c.name), fields[c.name], c.type, f"{name}.{c.name}", here, len(arr))
            for c in target
        ]
        return struct_array(children, list(target), len(arr), mask)
    if isinstance(t, it.ListType) and (
        pa.types.is_list(arr.type)
        or pa.types.is_large_list(arr.type)
        or pa.types.is_fixed_size_list(arr.type)
    ):
        element = it.NestedField(t.element_id, "element", t.element, t.element_required)
        inner = _inner_live(arr, live)
        values = _conform_field(list_values(arr), element, target.value_type, f"{name}.element", inner, 0)
        return pa.ListArray.from_arrays(_offsets(pc.list_value_length(arr)), values, type=target, mask=mask)
    if isinstance(t, it.MapType) and pa.types.is_map(arr.type):
        entries = _entries(arr)
        flat = list_values(arr)
        key = it.NestedField(t.key_id, "key", t.key, True)
        value = it.NestedField(t.value_id, "value", t.value, t.value_required)
        inner = _inner_live(entries, live)
        keys = _conform_field(flat.field(0), key, target.key_type, f"{name}.key", inner, 0)
        items = _conform_field(flat.field(1), value, target.item_type, f"{name}.value", inner, 0)
        offsets = _offsets(pc.list_value_length(entries))
        return pa.MapArray.from_arrays(offsets, keys, items, type=target, mask=mask)
    if not isinstance(t, it.PrimitiveType) or not accepts(t, arr.type):
        raise SchemaMismatch(f"column {name!r}: Arrow type {arr.type} cannot be written as Iceberg {t}")
    storage = target.storage_type if isinstance(target, pa.BaseExtensionType) else target
    if arr.type != storage:
        try:
            arr = pc.cast(arr, storage, safe=True)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
            raise SchemaMismatch(
                f"column {name!r}: {arr.type} values do not fit Iceberg {t}: {exc}"
            ) from None
    read = arr if live is None else arr.filter(live)  # values under a null parent are never read
    if t == it.TIME and read.null_count < len(read):
        low, high = (v.cast(pa.int64()).as_py() for v in pc.min_max(read).values())
        if low < 0 or high >= MICROS_PER_DAY:
            raise SchemaMismatch(
                f"column {name!r}: time values outside 00:00-24:00 ({low} .. {high} microseconds)"
            )
    return pa.ExtensionArray.from_storage(target, arr) if isinstance(target, pa.BaseExtensionType) else arr


def _check_unknown(arr: pa.Array | None, name: str, live: pa.Array | None) -> None:
    """An ``unknown`` column holds only nulls (it is never written): values given for it would be lost."""
    if arr is None or pa.types.is_null(arr.type):
        return
    valid = arr.is_valid() if live is None else pc.and_(live, arr.is_valid())
    if pc.any(valid).as_py():
        raise SchemaMismatch(
            f"column {name!r} has type unknown, which holds only nulls, but values were given for it"
        )


def _inner_live(lists: pa.Array, live: pa.Array | None) -> pa.Array | None:
    """For the values of ``lists`` (as ``flatten`` gives them: those of valid lists), whether all their
    parents are valid: their list's row is ``live`` (None: all are)."""
    if live is None:
        return None
    counts = pc.list_value_length(lists).fill_null(0).to_numpy(zero_copy_only=False)
    return pa.array(np.repeat(live.to_numpy(zero_copy_only=False), counts), pa.bool_())


def _entries(arr: pa.Array) -> pa.Array:
    """A map array as the list of its key-value structs (Arrow's list kernels take no maps)."""
    return arr.cast(pa.list_(pa.struct([arr.type.key_field, arr.type.item_field])))


def _without_nulls(arr: pa.Array) -> pa.Array:
    """``arr`` with its null slots made valid (their values are whatever lies beneath, or empty lists)."""
    t = arr.type
    if isinstance(t, pa.BaseExtensionType):
        return pa.ExtensionArray.from_storage(t, _without_nulls(arr.storage))
    if pa.types.is_struct(t):
        return struct_array([arr.field(i) for i in range(t.num_fields)], list(t), len(arr))
    if pa.types.is_list(t):
        return pa.ListArray.from_arrays(_offsets(pc.list_value_length(arr)), list_values(arr), type=t)
    if pa.types.is_map(t):
        entries = _entries(arr)
        flat = list_values(arr)
        offsets = _offsets(pc.list_value_length(entries))
        return pa.MapArray.from_arrays(offsets, flat.field(0), flat.field(1), type=t)
    return pa.Array.from_buffers(t, len(arr), [None, *arr.buffers()[1:]], null_count=0, offset=arr.offset)


def _offsets(lengths: pa.Array) -> pa.Array:
    counts = lengths.fill_null(0).to_numpy(zero_copy_only=False)
    return pa.array(np.concatenate([[0], np.cumsum(counts)]).astype(np.int32))


def accepts(t: it.PrimitiveType, at: pa.DataType) -> bool:
    """Whether Arrow type ``at`` holds values of ``t`` (casts are checked: a value that changes fails)."""
    is_, name = pa.types, t.name
    binary = (
        is_.is_binary(at) or is_.is_large_binary(at) or is_.is_binary_view(at) or is_.is_fixed_size_binary(at)
    )
    if name in it.TIMESTAMP_NAMES:
        return bool(is_.is_timestamp(at) and (at.tz is None) == (name in ("timestamp", "timestamp_ns")))
    if isinstance(t, it.DecimalType):
        return bool(is_.is_decimal(at) and at.scale == t.scale)
    if isinstance(t, it.FixedType):
        return bool(binary)
    checks: dict[str, bool] = {
        "boolean": is_.is_boolean(at),
        "int": is_.is_integer(at),
        "long": is_.is_integer(at),
        "float": is_.is_float16(at) or is_.is_float32(at),
        "double": is_.is_floating(at),
        "date": is_.is_date(at),
        "time": is_.is_time(at),
        "string": is_.is_string(at) or is_.is_large_string(at) or is_.is_string_view(at),
        "binary": binary,
        "uuid": at == pa.binary(16),
        "unknown": is_.is_null(at),
    }
    return checks.get(name, False)


def physical_array(arr: pa.Array) -> pa.Array:
    """Storage values: dates as int32 days, times and timestamps as int64, extension types as storage."""
    if isinstance(arr.type, pa.BaseExtensionType):
        arr = arr.storage
    if pa.types.is_date32(arr.type):
        return arr.view(pa.int32())
    if pa.types.is_timestamp(arr.type) or pa.types.is_time64(arr.type):
        return arr.view(pa.int64())
    return arr
