"""Snapshot producer: new snapshots (append, overwrite, delete, replace) committed with optimistic
concurrency, table creation, and appends of Arrow data."""

from .append import AppendResult, append
from .create import create_table, new_table_metadata
from .producer import commit
from .retry import RetryPolicy
from .update import CommitResult, Operation, SnapshotUpdate, ValidationError

__all__ = [
    "AppendResult",
    "CommitResult",
    "Operation",
    "RetryPolicy",
    "SnapshotUpdate",
    "ValidationError",
    "append",
    "commit",
    "create_table",
    "new_table_metadata",
]
