"""gpu-engine: GPU-accelerated scan and compaction for Apache Iceberg and Lance tables."""

from . import transforms
from .backend import BackendChoice, Column, choose
from .catalog import Catalog, load_catalog
from .commit import AppendResult, CommitResult, SnapshotUpdate, ValidationError
from .errors import (
    BackendUnavailable,
    CommitConflict,
    CommitStateUnknown,
    GpuEngineError,
    InvalidType,
    SchemaMismatch,
    TableAlreadyExists,
    UnsupportedFeature,
    UnsupportedTransform,
)
from .table import Table
from .table_load import load_table

__version__ = "0.1.0"

__all__ = [
    "AppendResult",
    "BackendChoice",
    "BackendUnavailable",
    "Catalog",
    "Column",
    "CommitConflict",
    "CommitResult",
    "CommitStateUnknown",
    "GpuEngineError",
    "InvalidType",
    "SchemaMismatch",
    "SnapshotUpdate",
    "Table",
    "TableAlreadyExists",
    "UnsupportedFeature",
    "UnsupportedTransform",
    "ValidationError",
    "__version__",
    "choose",
    "load_catalog",
    "load_table",
    "transforms",
]
