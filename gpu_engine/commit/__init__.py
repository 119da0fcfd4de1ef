"""Snapshot producer: new snapshots (append, overwrite, delete, replace) committed with optimistic
concurrency, table creation, and appends of Arrow data."""

from ..errors import ValidationError
from .append import AppendResult, append
from .create import create_table, new_table_metadata
from .producer import commit
from .retry import RetryPolicy
from .update import CommitResult, FileKey, Operation, SnapshotUpdate

__all__ = [
    "AppendResult",
    "CommitResult",
    "FileKey",
    "Operation",
    "RetryPolicy",
    "SnapshotUpdate",
    "ValidationError",
    "append",
    "commit",
    "create_table",
    "new_table_metadata",
]
