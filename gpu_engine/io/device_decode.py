"""Which Parquet column reads a frame library's decoder (cuDF's GPU Parquet reader) produces exactly as
the host reader (:mod:`.parquet_projection`) does.

The frame path decodes a file's top-level columns as stored and casts each to the Arrow type of its
Iceberg field. That is the host reader's result only for primitive columns whose stored type converts
by a lossless cast or is the same: booleans, signed integers widened, float to double, decimals of the
same scale widened, dates, strings, and timestamps of the field's unit (a file's UTC adjustment is
reinterpreted as the field's, as the host reader does). Anything else (nested, binary, fixed, UUID,
time, INT96 or unsigned columns, a variant, a column name holding a dot, which cuDF reads as a nested
path) is named by :func:`frame_unsupported`, and the file is decoded on the host or refused, never
decoded differently.
"""

from __future__ import annotations

import pyarrow as pa

from ..iceberg import types as it
from .arrow_schema import to_arrow_type
from .parquet_projection import ColumnRead, Projection

_SIGNED = (pa.int8(), pa.int16(), pa.int32(), pa.int64())
_PHYSICAL = {
    "boolean": ("BOOLEAN",),
    "int": ("INT32",),
    "long": ("INT32", "INT64"),
    "float": ("FLOAT",),
    "double": ("FLOAT", "DOUBLE"),
    "date": ("INT32",),
    "string": ("BYTE_ARRAY",),
}
_DECIMAL_PHYSICAL = ("INT32", "INT64", "FIXED_LEN_BYTE_ARRAY")
_TIMESTAMPS = ("timestamp", "timestamptz", "timestamp_ns", "timestamptz_ns")


def frame_unsupported(proj: Projection) -> str | None:
    """Why a frame decoder cannot produce ``proj``'s columns as the host reader does (the first column
    at fault, named with its file and field id), or None when it can."""
    for read in proj.reads:
        if read.column is None:  # a constant, initial-default or null column: made on the host
            continue
        why = _why(read)
        if why is not None:
            return f"{read.where}: {why}"
    return None


def _why(read: ColumnRead) -> str | None:
    assert read.column is not None
    t, ft = read.field.type, read.file_type
    if "." in read.column:
        return "its name holds a dot (cuDF reads that as a nested column path)"
    if not isinstance(t, it.PrimitiveType) or read.physical is None or ft is None:
        return f"a {t} column is not decoded on the device yet"
    if read.physical == "INT96":
        return "INT96 timestamps are decoded on the host"
    if not _same_values(t, ft, read.physical):
        return f"stored as {ft} ({read.physical}): read as Iceberg {t} on the host"
    return None


def _same_values(t: it.PrimitiveType, ft: pa.DataType, physical: str) -> bool:
    """Whether casting the stored ``ft`` to ``t``'s Arrow type is what the host reader returns."""
    target = to_arrow_type(t)
    name = t.name
    if isinstance(t, it.DecimalType):
        return (
            physical in _DECIMAL_PHYSICAL
            and pa.types.is_decimal128(ft)
            and ft.scale == t.scale
            and ft.precision <= t.precision
        )
    if name in _TIMESTAMPS:
        return physical == "INT64" and pa.types.is_timestamp(ft) and ft.unit == target.unit
    if physical not in _PHYSICAL.get(name, ()):
        return False
    if name in ("int", "long"):
        return ft in _SIGNED and ft.bit_width <= target.bit_width
    if name == "double":
        return ft in (pa.float32(), pa.float64())
    if name == "string":
        return bool(pa.types.is_string(ft) or pa.types.is_large_string(ft))
    return bool(ft == target)
