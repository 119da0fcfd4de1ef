"""Iceberg partition transforms: :mod:`.spec` (parse, applicability, result types: pure metadata logic),
:mod:`.compute` (each transform's kernel dispatch) and :mod:`.api` (``apply`` and ``hash32``).

``apply("bucket[16]", "long", values, backend="auto")`` computes a transform on a pyarrow Array or
ChunkedArray (returns the same kind), a cudf.Series, a CuPy array or a device
:class:`~gpu_engine.backend.Column` (results stay on the device).
"""

from .api import apply, hash32
from .compute import compute, murmur3
from .spec import (
    Bucket,
    Day,
    Hour,
    Identity,
    Month,
    Temporal,
    Transform,
    Truncate,
    UnknownTransform,
    Void,
    Year,
    parse_transform,
)

__all__ = [
    "Bucket",
    "Day",
    "Hour",
    "Identity",
    "Month",
    "Temporal",
    "Transform",
    "Truncate",
    "UnknownTransform",
    "Void",
    "Year",
    "apply",
    "compute",
    "hash32",
    "murmur3",
    "parse_transform",
]
