"""The public entry points: ``apply`` a transform (or ``hash32``) to Arrow, cuDF, CuPy or Column values.

Inputs are checked against the declared Iceberg source type, the backend is chosen once per call
(:func:`gpu_engine.backend.choose`), and the result comes back as the kind of object given.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, ClassVar

import pyarrow as pa
import pyarrow.compute as pc

from .._deps import require
from ..backend import columns as cols
from ..backend import cudf_interop
from ..backend.columns import Column, Layout
from ..backend.select import BackendChoice, choose
from ..errors import InvalidType, UnsupportedTransform
from ..iceberg import types as it
from ..kernels.elementwise import is_device_array
from . import spec as ts
from .compute import compute, murmur3

# -- Arrow input: which Arrow types each Iceberg source type accepts, and the canonical form ---------


def _canonical_arrow(source: it.PrimitiveType, arrow_type: pa.DataType) -> pa.DataType | None:
    """The Arrow type to compute on for ``arrow_type`` data declared as ``source`` (None: incompatible)."""
    name, is_ = source.name, pa.types
    if isinstance(arrow_type, pa.BaseExtensionType):
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
    if name in ts.TIMESTAMPS:
        unit = "ns" if name in ts.NANOS else "us"
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
    if isinstance(array.type, pa.BaseExtensionType):
        array = array.storage
    if array.type != target:
        array = pc.cast(array, target, safe=True)
    return cols.from_arrow(array)


def _result_arrow_type(transform: ts.Transform, source: it.PrimitiveType, column: Column) -> pa.DataType:
    result = transform.result_type(source)
    if result == source:
        return column.type
    return pa.date32() if result == it.DATE else it.to_arrow(result)


def _run(transform: ts.Transform, source: it.PrimitiveType, column: Column, choice: BackendChoice) -> Column:
    if choice.name == "cuda" and not column.on_device:
        column = column.to_device()
    out = murmur3(source, column) if isinstance(transform, _Hash) else compute(transform, source, column)
    return replace(out, type=_result_arrow_type(transform, source, column))


def _resolve(
    transform: str | ts.Transform, source_type: str | it.PrimitiveType
) -> tuple[ts.Transform, it.PrimitiveType]:
    if isinstance(transform, str):
        t = ts.parse_transform(transform)
    elif isinstance(transform, ts.Transform):
        t = transform
    else:
        raise UnsupportedTransform(
            f"transform={transform!r}: expected a transform string such as 'bucket[16]' or a Transform, "
            f"not {type(transform).__name__}"
        )
    src = _source_type(source_type)
    if not t.can_transform(src):
        raise UnsupportedTransform(f"transform {t} cannot be applied to source type {src}")
    return t, src


def _source_type(source_type: object) -> it.PrimitiveType:
    """``source_type`` as an Iceberg primitive type; InvalidType naming the argument otherwise."""
    src = it.parse_type(source_type) if isinstance(source_type, str) else source_type
    if not isinstance(src, it.PrimitiveType):
        raise InvalidType(
            f"source_type={source_type!r}: expected an Iceberg primitive type such as 'long' or "
            f"a PrimitiveType, not {type(source_type).__name__}"
        )
    return src


def _apply_column(t: ts.Transform, src: it.PrimitiveType, values: Any, backend: str) -> Any:
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


def _apply_device_array(t: ts.Transform, src: it.PrimitiveType, values: Any, backend: str) -> Any:
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
    transform: str | ts.Transform, source_type: str | it.PrimitiveType, values: Any, *, backend: str = "auto"
) -> Any:
    """Apply a partition transform (Iceberg string form) to values of an Iceberg source type.

    ``values``: a pyarrow Array or ChunkedArray (the result is the same kind, on the host) or a
    :class:`~gpu_engine.backend.Column` (the result is a Column on the same side). ``backend`` is
    "auto" (CUDA when a device is usable, else the CPU), "cpu" or "cuda" (an error without a device).
    """
    t, src = _resolve(transform, source_type)
    if isinstance(t, ts.Identity) and isinstance(values, (pa.Array, pa.ChunkedArray)):
        choose(backend)  # no kernel runs, but a bad name or 'cuda' without a device is still an error
        _check_arrow_type(values.type, src)
        return values
    return _apply_column(t, src, values, backend)


@dataclass(frozen=True)
class _Hash(ts.Transform):
    """The raw 32-bit hash, shaped as a transform so hashing shares bucket[N]'s input handling."""

    name: ClassVar[str] = "hash"

    def can_transform(self, source: it.PrimitiveType) -> bool:
        return True

    def result_type(self, source: it.PrimitiveType) -> it.PrimitiveType:
        return it.INT


_HASH = _Hash()


def hash32(source_type: str | it.PrimitiveType, values: Any, *, backend: str = "auto") -> Any:
    """Iceberg's 32-bit Murmur3 hash per Appendix B, also for boolean, float and double (int32 result)."""
    src = _source_type(source_type)
    if src.name not in ts.HASHABLE | ts.HASHABLE_NOT_BUCKETABLE:
        raise UnsupportedTransform(f"no 32-bit hash is defined for source type {src}")
    return _apply_column(_HASH, src, values, backend)
