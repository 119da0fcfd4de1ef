"""Iceberg partition transforms: parse, result type, applicability and kernel dispatch, one class each.

``apply("bucket[16]", "long", values, backend="auto")`` computes a transform on a pyarrow Array or
ChunkedArray (returns the same kind) or on a device :class:`~gpu_engine.backend.Column` (the result stays
on the device). The per-element work runs in :mod:`gpu_engine.kernels` on the CPU or the GPU.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from dataclasses import dataclass, replace
from typing import Any, ClassVar

import pyarrow as pa
import pyarrow.compute as pc

from ._deps import require
from .backend import columns as cols
from .backend import cudf_interop
from .backend.columns import Column, Layout
from .backend.select import BackendChoice, choose
from .errors import InvalidType, UnsupportedTransform
from .iceberg import types as it
from .kernels import bucket as kb
from .kernels.elementwise import is_device_array
from .kernels import temporal as kt
from .kernels import truncate as ktr

_INTEGERS = frozenset({"int", "long"})
_TIMESTAMPS = frozenset({"timestamp", "timestamptz", "timestamp_ns", "timestamptz_ns"})
_NANOS = frozenset({"timestamp_ns", "timestamptz_ns"})
_HASHABLE = frozenset(
    {"int", "long", "decimal", "date", "time", "string", "uuid", "fixed", "binary", *_TIMESTAMPS}
)
_NOT_IDENTITY = frozenset({"variant", "geometry", "geography"})


@dataclass(frozen=True)
class Transform(ABC):
    """A partition transform; subclasses implement one spec row of "Partition Transforms"."""

    name: ClassVar[str]

    def __str__(self) -> str:
        return self.name

    @abstractmethod
    def can_transform(self, source: it.PrimitiveType) -> bool: ...

    @abstractmethod
    def result_type(self, source: it.PrimitiveType) -> it.PrimitiveType: ...

    @abstractmethod
    def compute(self, source: it.PrimitiveType, column: Column) -> Column:
        """Transform a column whose buffers are on the side (host or device) the work should run."""


@dataclass(frozen=True)
class Identity(Transform):
    name: ClassVar[str] = "identity"

    def can_transform(self, source: it.PrimitiveType) -> bool:
        return source.name not in _NOT_IDENTITY

    def result_type(self, source: it.PrimitiveType) -> it.PrimitiveType:
        return source

    def compute(self, source: it.PrimitiveType, column: Column) -> Column:
        return column


@dataclass(frozen=True)
class Void(Transform):
    name: ClassVar[str] = "void"

    def can_transform(self, source: it.PrimitiveType) -> bool:
        return True

    def result_type(self, source: it.PrimitiveType) -> it.PrimitiveType:
        return source

    def compute(self, source: it.PrimitiveType, column: Column) -> Column:
        nulls = cols.from_arrow(pa.nulls(column.length, column.type))
        return nulls.to_device() if column.on_device else nulls


@dataclass(frozen=True)
class Bucket(Transform):
    num_buckets: int
    name: ClassVar[str] = "bucket"

    def __post_init__(self) -> None:
        if not 0 < self.num_buckets <= 0x7FFFFFFF:
            raise UnsupportedTransform(f"bucket[{self.num_buckets}]: N must be in 1..2147483647")

    def __str__(self) -> str:
        return f"bucket[{self.num_buckets}]"

    def can_transform(self, source: it.PrimitiveType) -> bool:
        return source.name in _HASHABLE

    def result_type(self, source: it.PrimitiveType) -> it.PrimitiveType:
        return it.INT

    def compute(self, source: it.PrimitiveType, column: Column) -> Column:
        return murmur3(source, column, self.num_buckets)


@dataclass(frozen=True)
class Truncate(Transform):
    width: int
    name: ClassVar[str] = "truncate"

    def __post_init__(self) -> None:
        if not 0 < self.width <= 0x7FFFFFFF:
            raise UnsupportedTransform(f"truncate[{self.width}]: W must be in 1..2147483647")

    def __str__(self) -> str:
        return f"truncate[{self.width}]"

    def can_transform(self, source: it.PrimitiveType) -> bool:
        return source.name in {"int", "long", "decimal", "string", "binary"}

    def result_type(self, source: it.PrimitiveType) -> it.PrimitiveType:
        return source

    def compute(self, source: it.PrimitiveType, column: Column) -> Column:
        if source.name in _INTEGERS:
            return replace(column, data=ktr.truncate_integers(column.data, self.width))
        if source.name == "decimal":
            return replace(column, data=ktr.truncate_decimal128(column.data, self.width))
        cut = ktr.truncate_utf8 if source.name == "string" else ktr.truncate_binary
        data, offsets = cut(column.data, column.offsets, self.width)
        return replace(column, data=data, offsets=offsets)


@dataclass(frozen=True)
class Temporal(Transform):
    """year, month, day and hour: whole units since 1970-01-01 00:00, floored for earlier values."""

    def can_transform(self, source: it.PrimitiveType) -> bool:
        return source.name in _TIMESTAMPS or (source.name == "date" and self.name != "hour")

    def result_type(self, source: it.PrimitiveType) -> it.PrimitiveType:
        return it.DATE if self.name == "day" else it.INT

    def compute(self, source: it.PrimitiveType, column: Column) -> Column:
        units = {"date": kt.DAYS, "timestamp_ns": kt.NANOS, "timestamptz_ns": kt.NANOS}
        unit = units.get(source.name, kt.MICROS)
        out = kt.extract(self.name, column.data, unit)
        arrow_type = pa.date32() if self.name == "day" else pa.int32()
        return replace(column, type=arrow_type, data=out, offsets=None)


@dataclass(frozen=True)
class Year(Temporal):
    name: ClassVar[str] = "year"


@dataclass(frozen=True)
class Month(Temporal):
    name: ClassVar[str] = "month"


@dataclass(frozen=True)
class Day(Temporal):
    name: ClassVar[str] = "day"


@dataclass(frozen=True)
class Hour(Temporal):
    name: ClassVar[str] = "hour"


_PARAMETERLESS: dict[str, Transform] = {
    t.name: t for t in (Identity(), Void(), Year(), Month(), Day(), Hour())
}
_PARAMETERIZED = re.compile(r"(bucket|truncate)\[\s*(\d+)\s*\]")


def parse_transform(text: str) -> Transform:
    """Parse Iceberg's transform string: identity, void, bucket[N], truncate[W], year, month, day, hour."""
    s = text.strip().lower()
    if s in _PARAMETERLESS:
        return _PARAMETERLESS[s]
    if m := _PARAMETERIZED.fullmatch(s):
        n = int(m.group(2))
        return Bucket(n) if m.group(1) == "bucket" else Truncate(n)
    raise UnsupportedTransform(
        f"unknown partition transform {text!r}: expected identity, void, bucket[N], truncate[W], "
        "year, month, day or hour"
    )


def murmur3(source: it.PrimitiveType, column: Column, buckets: int = 0) -> Column:
    """Iceberg's 32-bit hash (``buckets=0``) or bucket number of every value, as an int32 column."""
    name, data, layout = source.name, column.data, column.layout
    if name in _NANOS:
        out = kb.hash_timestamp_nanos(data, buckets)
    elif layout is Layout.FIXED and name in {"float", "double"}:
        out = kb.hash_floats(data, buckets)
    elif layout is Layout.FIXED:
        out = kb.hash_longs(data, buckets)
    elif layout is Layout.WORDS128:
        out = kb.hash_decimal128(data, buckets)
    elif layout is Layout.VARLEN:
        out = kb.hash_binary(data, column.offsets, buckets)
    elif layout is Layout.FIXED_BYTES:
        out = kb.hash_fixed(data, column.fixed_width, column.length, buckets)
    elif layout is Layout.BITS:
        out = kb.hash_booleans(data, 0, column.length, buckets)
    else:
        raise UnsupportedTransform(f"no 32-bit hash is defined for source type {source}")
    return replace(column, type=pa.int32(), data=out, offsets=None)


# -- Arrow input: which Arrow types each Iceberg source type accepts, and the canonical form ---------


def _canonical_arrow(source: it.PrimitiveType, arrow_type: pa.DataType) -> pa.DataType | None:
    """The Arrow type to compute on for ``arrow_type`` data declared as ``source`` (None: incompatible)."""
    name, is_ = source.name, pa.types
    if isinstance(arrow_type, pa.ExtensionType):
        arrow_type = arrow_type.storage_type
    if is_.is_string_view(arrow_type):
        arrow_type = pa.large_string()
    elif is_.is_binary_view(arrow_type):
        arrow_type = pa.large_binary()
    checks: dict[str, tuple[bool, pa.DataType]] = {
        "boolean": (is_.is_boolean(arrow_type), pa.bool_()),
        "int": (is_.is_integer(arrow_type), pa.int32()),
        "long": (is_.is_integer(arrow_type), pa.int64()),
        "float": (is_.is_floating(arrow_type), pa.float32()),
        "double": (is_.is_floating(arrow_type), pa.float64()),
        "date": (is_.is_date(arrow_type), pa.date32()),
        "time": (is_.is_time(arrow_type), pa.time64("us")),
        "string": (is_.is_string(arrow_type) or is_.is_large_string(arrow_type), arrow_type),
        "binary": (is_.is_binary(arrow_type) or is_.is_large_binary(arrow_type), arrow_type),
        "uuid": (arrow_type == pa.binary(16), pa.binary(16)),
        "unknown": (is_.is_null(arrow_type), pa.null()),
    }
    if name in checks:
        ok, target = checks[name]
        return target if ok else None
    if name in _TIMESTAMPS:
        unit = "ns" if name in _NANOS else "us"
        return pa.timestamp(unit, arrow_type.tz) if is_.is_timestamp(arrow_type) else None
    if isinstance(source, it.DecimalType):
        ok = is_.is_decimal(arrow_type) and arrow_type.scale == source.scale
        return pa.decimal128(source.precision, source.scale) if ok else None
    if isinstance(source, it.FixedType):
        return arrow_type if arrow_type == pa.binary(source.length) else None
    return None


def _check_arrow_type(arrow_type: pa.DataType, source: it.PrimitiveType) -> pa.DataType:
    target = _canonical_arrow(source, arrow_type)
    if target is None:
        raise InvalidType(
            f"values of Arrow type {arrow_type} cannot be read as Iceberg type {source} "
            f"(expected {it.to_arrow(source)} or a compatible Arrow type)"
        )
    return target


def _host_column(array: pa.Array, source: it.PrimitiveType) -> Column:
    target = _check_arrow_type(array.type, source)
    if isinstance(array.type, pa.ExtensionType):
        array = array.storage
    if array.type != target:
        array = pc.cast(array, target, safe=True)
    return cols.from_arrow(array)


def _result_arrow_type(transform: Transform, source: it.PrimitiveType, column: Column) -> pa.DataType:
    result = transform.result_type(source)
    if result == source:
        return column.type
    return pa.date32() if result == it.DATE else it.to_arrow(result)


def _run(transform: Transform, source: it.PrimitiveType, column: Column, choice: BackendChoice) -> Column:
    if choice.name == "cuda" and not column.on_device:
        column = column.to_device()
    out = transform.compute(source, column)
    return replace(out, type=_result_arrow_type(transform, source, column))


def _resolve(
    transform: str | Transform, source_type: str | it.PrimitiveType
) -> tuple[Transform, it.PrimitiveType]:
    t = parse_transform(transform) if isinstance(transform, str) else transform
    src = it.parse_type(source_type) if isinstance(source_type, str) else source_type
    if not t.can_transform(src):
        raise UnsupportedTransform(f"transform {t} cannot be applied to source type {src}")
    return t, src


def _apply_column(t: Transform, src: it.PrimitiveType, values: Any, backend: str) -> Any:
    if isinstance(values, Column):
        choice = choose(backend, data_on_device=values.on_device)
        return _run(t, src, values, choice)
    if isinstance(values, pa.ChunkedArray):
        choice = choose(backend)
        chunks = [cols.to_arrow(_run(t, src, _host_column(c, src), choice)) for c in values.chunks]
        if not chunks:
            probe = _host_column(pa.array([], type=it.to_arrow(src)), src)
            return pa.chunked_array([], type=_result_arrow_type(t, src, probe))
        return pa.chunked_array(chunks)
    if isinstance(values, pa.Array):
        choice = choose(backend)
        return cols.to_arrow(_run(t, src, _host_column(values, src), choice))
    if cudf_interop.is_cudf(values):
        column = cudf_interop.from_cudf(values)
        _check_arrow_type(column.type, src)
        return cudf_interop.to_cudf(_run(t, src, column, choose(backend, data_on_device=True)))
    if is_device_array(values):
        return _apply_device_array(t, src, values, backend)
    raise InvalidType(
        f"values of Python type {type(values).__name__}: expected a pyarrow Array/ChunkedArray, "
        "a cudf.Series, a gpu_engine.backend.Column or a 1-D device array (CuPy)"
    )


def _apply_device_array(t: Transform, src: it.PrimitiveType, values: Any, backend: str) -> Any:
    """A bare device array (CuPy, numba) of fixed-width values without nulls; returns one like it."""
    arrow_type = it.to_arrow(src)
    if cols.layout_of(arrow_type) is not Layout.FIXED:
        raise InvalidType(
            f"a bare device array cannot hold Iceberg {src} values; wrap the buffers in "
            "gpu_engine.backend.Column.from_cuda (with offsets, words or validity)"
        )
    expected = cols.physical_dtype(arrow_type)
    if values.dtype != expected:
        raise InvalidType(f"a {values.dtype} device array cannot hold Iceberg {src} values (need {expected})")
    column = Column.from_cuda(arrow_type, values)
    out = _run(t, src, column, choose(backend, data_on_device=True)).data
    if type(values).__module__.startswith("cupy"):
        return require("cupy", "returning CuPy arrays").asarray(out)
    return out


def apply(
    transform: str | Transform, source_type: str | it.PrimitiveType, values: Any, *, backend: str = "auto"
) -> Any:
    """Apply a partition transform (Iceberg string form) to values of an Iceberg source type.

    ``values``: a pyarrow Array or ChunkedArray (the result is the same kind, on the host) or a
    :class:`~gpu_engine.backend.Column` (the result is a Column on the same side). ``backend`` is
    "auto" (CUDA when a device is usable, else the CPU), "cpu" or "cuda" (an error without a device).
    """
    t, src = _resolve(transform, source_type)
    if isinstance(t, Identity) and isinstance(values, (pa.Array, pa.ChunkedArray)):
        _check_arrow_type(values.type, src)
        return values
    return _apply_column(t, src, values, backend)


def hash32(source_type: str | it.PrimitiveType, values: Any, *, backend: str = "auto") -> Any:
    """Iceberg's 32-bit Murmur3 hash per Appendix B, also for boolean, float and double (int32 result)."""
    src = it.parse_type(source_type) if isinstance(source_type, str) else source_type
    if src.name not in _HASHABLE | {"boolean", "float", "double"}:
        raise UnsupportedTransform(f"no 32-bit hash is defined for source type {src}")
    return _apply_column(_Hash(), src, values, backend)


@dataclass(frozen=True)
class _Hash(Transform):
    """The raw hash as a transform-shaped object, so hashing shares the dispatch of bucket[N]."""

    name: ClassVar[str] = "hash"

    def can_transform(self, source: it.PrimitiveType) -> bool:
        return True

    def result_type(self, source: it.PrimitiveType) -> it.PrimitiveType:
        return it.INT

    def compute(self, source: it.PrimitiveType, column: Column) -> Column:
        return murmur3(source, column, 0)


__all__ = [
    "Bucket",
    "Day",
    "Hour",
    "Identity",
    "Month",
    "Temporal",
    "Transform",
    "Truncate",
    "Void",
    "Year",
    "apply",
    "hash32",
    "murmur3",
    "parse_transform",
]
