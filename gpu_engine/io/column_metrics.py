"""Column metrics of the rows written to one data file (spec "Manifests": value, null and NaN counts,
lower and upper bounds by field id), computed from Arrow data in :func:`to_arrow_schema` form.

A :class:`MetricsCollector` takes batches one at a time (a row group, a slice) and keeps exact running
counts and untruncated minimum and maximum per primitive field; :meth:`MetricsCollector.merge` combines
collectors of disjoint rows, and :meth:`MetricsCollector.result` applies each column's
:class:`~gpu_engine.io.metrics_config.MetricsMode` and serializes bounds (Appendix D):

- ``value_counts`` count every value of the column, nulls and NaNs included: a row for a field nested only
  in structs (a null struct makes its fields null), every element slot for a list element or map key or
  value (null and empty lists contribute none: Parquet's footer counts, which PyIceberg and Iceberg Java
  report, add one per null or empty list);
- ``nan_value_counts`` for float and double only; NaN is never a bound, so an all-NaN column has none;
- bounds use the IEEE 754 total order for zeros (``-0.0`` before ``0.0``), unsigned byte order for
  binary, fixed and uuid, code point (= UTF-8 byte) order for strings;
- ``truncate(N)`` cuts strings to N code points and binary/fixed to N bytes: the lower bound is the
  prefix, the upper bound the prefix with its last code point (byte) incremented, carrying over to the
  one before when it is U+10FFFF (0xFF) and skipping the surrogate range; without such an increment there
  is no upper bound. Other types keep full bounds under ``truncate(N)``;
- no bounds for fields inside a list or map (as Iceberg Java), nor for geometry, geography or variant.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..iceberg import serde
from ..iceberg import types as it
from ..iceberg.schema import Schema
from .arrow_nested import list_values
from .metrics_config import MetricsConfig

_MAX_CODE_POINT = 0x10FFFF
_SURROGATES = range(0xD800, 0xE000)
_INT_VIEW = {"date": pa.int32(), "time": pa.int64()}
_NO_BOUNDS = ("geometry", "geography", "variant", "unknown")


@dataclass(frozen=True)
class ColumnMetrics:
    """The metrics maps of a ``data_file`` entry, keyed by field id (bounds as Appendix D bytes)."""

    value_counts: dict[int, int] = field(default_factory=dict)
    null_value_counts: dict[int, int] = field(default_factory=dict)
    nan_value_counts: dict[int, int] = field(default_factory=dict)
    lower_bounds: dict[int, bytes] = field(default_factory=dict)
    upper_bounds: dict[int, bytes] = field(default_factory=dict)


@dataclass(frozen=True)
class LeafStats:
    """A primitive column's null and NaN counts and its least and greatest non-null, non-NaN values as
    the module doc orders them (physical, as :func:`min_max` gives them: dates as days, times and
    timestamps as integers in their unit, -0.0 before 0.0); None without such values, or where bounds
    are not kept. Reduced where the rows are (a device), added by :meth:`MetricsCollector.add_stats`."""

    nulls: int
    nans: int
    lower: Any = None
    upper: Any = None


@dataclass
class _Stats:
    """Running metrics of one primitive field: counts, and min/max over non-null non-NaN values."""

    values: int = 0
    nulls: int = 0
    nans: int = 0
    lower: Any = None
    upper: Any = None

    def add(self, values: int, nulls: int, nans: int, lower: Any, upper: Any) -> None:
        self.values += values
        self.nulls += nulls
        self.nans += nans
        if lower is not None and (self.lower is None or _key(lower) < _key(self.lower)):
            self.lower = lower
        if upper is not None and (self.upper is None or _key(upper) > _key(self.upper)):
            self.upper = upper


def _key(value: Any) -> Any:
    """A sort key giving -0.0 < 0.0 (both compare equal as floats); other values order as themselves."""
    if isinstance(value, float):
        return (value, not math.copysign(1.0, value) < 0)
    return value


@dataclass(frozen=True)
class _Leaf:
    field_id: int
    type: it.PrimitiveType
    repeated: bool  # inside a list or map


class MetricsCollector:
    """Metrics of the rows of a file, fed batch by batch (see the module doc)."""

    def __init__(self, schema: Schema, config: MetricsConfig) -> None:
        self.schema = schema
        self.config = config
        self._stats: dict[int, _Stats] = {}

    def add(self, data: pa.RecordBatch | pa.Table) -> None:
        """Count the rows of ``data`` (columns by Iceberg field name; absent ones are skipped). A table's
        primitive columns are counted whole (one kernel call per column, however many chunks)."""
        for f in self.schema.fields:
            index = data.schema.get_field_index(f.name)
            if index < 0:
                continue
            column = data.column(index)
            if isinstance(column, pa.Array):
                self._walk(column, f.field_id, f.type, False)
            elif isinstance(f.type, it.PrimitiveType):
                self._leaf(column, _Leaf(f.field_id, f.type, False))
            else:  # an empty table has no chunks, but its columns have 0 values
                for chunk in column.chunks or [pa.array([], column.type)]:
                    self._walk(chunk, f.field_id, f.type, False)

    def merge(self, other: MetricsCollector) -> None:
        """Add the counts and bounds of ``other`` (metrics of other rows of the same file)."""
        for fid, st in other._stats.items():
            self._stats.setdefault(fid, _Stats()).add(st.values, st.nulls, st.nans, st.lower, st.upper)

    def _walk(self, arr: pa.Array, fid: int, t: it.IcebergType, repeated: bool) -> None:
        if isinstance(t, it.PrimitiveType):
            self._leaf(arr, _Leaf(fid, t, repeated))
        elif isinstance(t, it.StructType):
            kids = arr.flatten()  # children with the struct's nulls merged in
            for f in t.fields:
                index = arr.type.get_field_index(f.name)
                if index >= 0:
                    self._walk(kids[index], f.field_id, f.type, repeated)
        elif isinstance(t, it.ListType):
            self._walk(list_values(arr), t.element_id, t.element, True)
        else:
            entries = list_values(arr)
            self._walk(entries.field(0), t.key_id, t.key, True)
            self._walk(entries.field(1), t.value_id, t.value, True)

    def _leaf(self, arr: pa.Array | pa.ChunkedArray, leaf: _Leaf) -> None:
        counts, bounds = self.wanted(leaf.field_id, leaf.type, repeated=leaf.repeated)
        if not counts:
            return
        nans = 0
        if leaf.type.name in ("float", "double"):
            nans = int(pc.sum(pc.is_nan(arr)).as_py() or 0)
        stats = LeafStats(arr.null_count, nans)
        if bounds and arr.null_count < len(arr):
            stats = LeafStats(arr.null_count, nans, *min_max(arr, leaf.type))
        self.add_stats(leaf.field_id, len(arr), stats)

    def wanted(self, field_id: int, t: it.PrimitiveType, *, repeated: bool = False) -> tuple[bool, bool]:
        """Whether the counts of primitive field ``field_id`` (of type ``t``; inside a list or map where
        ``repeated``) are kept, and whether its bounds are (see the module doc)."""
        mode = self.config.mode(field_id)
        bounds = mode.counts and mode.bounds and not repeated and t.name not in _NO_BOUNDS
        return mode.counts, bounds

    def add_stats(self, field_id: int, values: int, stats: LeafStats) -> None:
        """Count ``values`` more values of primitive field ``field_id``, reduced to ``stats``."""
        self._stats.setdefault(field_id, _Stats()).add(
            values, stats.nulls, stats.nans, stats.lower, stats.upper
        )

    def result(self) -> ColumnMetrics:
        out = ColumnMetrics()
        for fid, st in self._stats.items():
            t = self.schema.by_id[fid].type
            assert isinstance(t, it.PrimitiveType)
            out.value_counts[fid] = st.values
            out.null_value_counts[fid] = st.nulls
            if t.name in ("float", "double"):
                out.nan_value_counts[fid] = st.nans
            mode = self.config.mode(fid)
            length = mode.length if mode.kind == "truncate" else None
            if st.lower is not None and (lower := _serialize(t, st.lower, length, upper=False)) is not None:
                out.lower_bounds[fid] = lower
            if st.upper is not None and (upper := _serialize(t, st.upper, length, upper=True)) is not None:
                out.upper_bounds[fid] = upper
        return out


def _physical(arr: pa.Array, t: it.PrimitiveType) -> pa.Array:
    """``arr`` as values ordered as Iceberg orders them: extension storage, dates and times as integers."""
    if isinstance(arr.type, pa.BaseExtensionType):
        arr = arr.storage
    if t.name in _INT_VIEW:
        return arr.view(_INT_VIEW[t.name])
    if pa.types.is_timestamp(arr.type):
        return arr.view(pa.int64())
    return arr


def min_max(arr: pa.Array | pa.ChunkedArray, t: it.PrimitiveType) -> tuple[Any, Any]:
    """Minimum and maximum physical values of ``arr``'s non-null, non-NaN values (None, None: none)."""
    if isinstance(arr, pa.ChunkedArray):
        arr = pa.chunked_array([_physical(c, t) for c in arr.chunks])  # has rows: not empty
    else:
        arr = _physical(arr, t)
    if pa.types.is_floating(arr.type):
        # NaNs out first: Arrow's min_max skips quiet NaNs only, and a signaling one (quiet bit clear,
        # still a NaN) made it report 3.0 as the minimum of [1.0, sNaN, 3.0]
        arr = pc.if_else(pc.is_nan(arr), pa.scalar(None, arr.type), arr)
    mm = pc.min_max(arr)
    lo, hi = mm["min"].as_py(), mm["max"].as_py()
    if isinstance(lo, float) and (lo == 0.0 or hi == 0.0):
        values = arr.to_numpy(zero_copy_only=False)
        negative = np.signbit(values[values == 0])  # Arrow returns either zero for min and max
        if lo == 0.0:
            lo = -0.0 if negative.any() else 0.0
        if hi == 0.0:
            hi = -0.0 if negative.all() else 0.0
    return lo, hi


def _serialize(t: it.PrimitiveType, value: Any, length: int | None, *, upper: bool) -> bytes | None:
    """Appendix D bytes of a bound, truncated for ``truncate(length)`` (None: no upper bound exists)."""
    if length is not None and t.name == "string":
        text = truncate_upper_string(value, length) if upper else truncate_lower_string(value, length)
        return None if text is None else serde.to_bytes(t, text)
    if length is not None and (t.name == "binary" or isinstance(t, it.FixedType)):
        data = truncate_upper_binary(value, length) if upper else truncate_lower_binary(value, length)
        return None if data is None else serde.to_bytes(it.BINARY, data)  # fixed bounds may be shorter
    return serde.to_bytes(t, value)


def truncate_lower_string(value: str, length: int) -> str:
    """The first ``length`` code points: a lower bound of every string starting like ``value``."""
    return value[:length]


def truncate_upper_string(value: str, length: int) -> str | None:
    """The shortest string of at most ``length`` code points that is >= ``value``'s first ``length`` code
    points and greater than every string starting with them; ``value`` itself when not longer. None when
    no code point of the prefix can be incremented (all U+10FFFF)."""
    if len(value) <= length:
        return value
    for i in range(length - 1, -1, -1):
        code = ord(value[i]) + 1
        if code in _SURROGATES:
            code = _SURROGATES.stop
        if code <= _MAX_CODE_POINT:
            return value[:i] + chr(code)
    return None


def truncate_lower_binary(value: bytes, length: int) -> bytes:
    return bytes(value[:length])


def truncate_upper_binary(value: bytes, length: int) -> bytes | None:
    """As :func:`truncate_upper_string` for bytes: the prefix with its last byte below 0xFF incremented."""
    if len(value) <= length:
        return bytes(value)
    for i in range(length - 1, -1, -1):
        if value[i] < 0xFF:
            return bytes(value[:i]) + bytes([value[i] + 1])
    return None
