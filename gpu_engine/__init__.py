"""gpu-engine: GPU-accelerated scan and compaction for Apache Iceberg and Lance tables."""

from . import transforms
from .backend import BackendChoice, Column, choose
from .errors import (
    BackendUnavailable,
    GpuEngineError,
    InvalidType,
    UnsupportedFeature,
    UnsupportedTransform,
)

__version__ = "0.1.0"

__all__ = [
    "BackendChoice",
    "BackendUnavailable",
    "Column",
    "GpuEngineError",
    "InvalidType",
    "UnsupportedFeature",
    "UnsupportedTransform",
    "__version__",
    "choose",
    "transforms",
]
