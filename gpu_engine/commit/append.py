"""Appends: Arrow data written as Parquet data files of the table, committed as an ``append`` snapshot.

Rows are written with the table's current schema, default partition spec and write properties
(:func:`gpu_engine.io.parquet_write.write_data_files`; a schema mismatch is a :class:`SchemaMismatch`
before anything is committed). If the commit finally fails the data files are deleted too; if its outcome
is unknown they are kept (the snapshot may reference them).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..iceberg.content_file import ContentFile
from ..io.parquet_write import Data, write_data_files
from .producer import check_committable, commit
from .update import CommitResult, Faults, SnapshotUpdate

if TYPE_CHECKING:
    from ..table import Table


@dataclass(frozen=True)
class AppendResult:
    """An append that landed: its snapshot, the data files written and the rows they hold."""

    snapshot_id: int
    files: tuple[ContentFile, ...]
    rows: int
    commit: CommitResult


def append(
    table: Table,
    data: Data,
    *,
    branch: str = "main",
    backend: str = "auto",
    faults: Faults | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> AppendResult:
    """Write ``data`` (an Arrow table, record batch, reader or iterable of batches) and commit an append."""
    check_committable(table)
    md = table.metadata
    if faults is not None:
        faults("data")
    files = write_data_files(
        table.io, md.location, md.schema, md.spec, data, properties=md.properties, backend=backend
    )
    update = SnapshotUpdate.append(files)
    result = commit(table, update, branch=branch, faults=faults, sleep=sleep, owned=[f.path for f in files])
    return AppendResult(result.snapshot_id, tuple(files), sum(f.record_count for f in files), result)
