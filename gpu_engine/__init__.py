"""gpu-engine: GPU-accelerated scan and compaction for Apache Iceberg and Lance tables."""

from . import transforms
from .backend import BackendChoice, Column, choose
from .catalog import Catalog, load_catalog
from .errors import (
    BackendUnavailable,
    GpuEngineError,
    InvalidType,
    UnsupportedFeature,
    UnsupportedTransform,
)
from .table import Table, load_table

__version__ = "0.1.0"

__all__ = [
    "BackendChoice",
    "BackendUnavailable",
    "Catalog",
    "Column",
    "GpuEngineError",
    "InvalidType",
    "Table",
    "UnsupportedFeature",
    "UnsupportedTransform",
    "__version__",
    "choose",
    "load_catalog",
    "load_table",
    "transforms",
]
