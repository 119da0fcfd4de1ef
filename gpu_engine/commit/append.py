"""Appends: Arrow data written as Parquet data files of the table, committed as an ``append`` snapshot.

Rows are written with the table's current schema, default partition spec and write properties
(:func:`gpu_engine.io.parquet_write.write_table_data`; a schema mismatch is a :class:`SchemaMismatch`
before anything is committed). With ``merge_schema`` (Spark's ``mergeSchema``) the table's schema is
evolved to hold the data's, as ``update_schema().union_by_name`` does (new columns added as optional, wider
types promoted), except that nullable Arrow fields leave required columns required: Arrow fields are
nullable by default, and the rows decide (a null in a required column fails the write). The files are
written for the evolved schema first, and the schema change is committed (in a commit of its own) only
once they are: rows the evolved schema refuses commit nothing, as Java checks a write against
``update.apply()`` before committing it. If the append's commit finally fails the data files are deleted
too (not the schema change); if its outcome is unknown they are kept (the snapshot may reference them).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from ..errors import InvalidOption
from ..execute.frame_append import write_frame_data
from ..execute.frame_sink import FrameSink
from ..iceberg.content_file import ContentFile
from ..iceberg.metadata import TableMetadata
from ..iceberg.schema import Schema
from ..io.data_input import is_cudf_frame
from ..io.parquet_write import Data, write_table_data
from .merge_schema import merge_view
from .producer import check_committable, commit, delete_files
from .update import CommitResult, Faults, SnapshotUpdate

if TYPE_CHECKING:
    from ..table import Table
    from .schema_update import SchemaUpdate


@dataclass(frozen=True)
class AppendResult:
    """An append that landed: its snapshot, the data files written and the rows they hold."""

    snapshot_id: int
    files: tuple[ContentFile, ...]
    rows: int
    commit: CommitResult


def append(
    table: Table,
    data: Data | Any,
    *,
    branch: str = "main",
    backend: str = "auto",
    merge_schema: bool = False,
    faults: Faults | None = None,
    sleep: Callable[[float], None] = time.sleep,
    sink: FrameSink | None = None,
) -> AppendResult:
    """Write ``data`` (an Arrow table, record batch, reader or iterable of batches; or a cuDF DataFrame,
    written by cuDF's GPU Parquet writer: :mod:`gpu_engine.execute.frame_append`) and commit an append.
    ``merge_schema``: first evolve the table's schema to hold ``data``'s (see the module doc); Arrow data
    only. ``sink``: the frame library ``data`` is a frame of (default: cuDF's, for a cuDF DataFrame)."""
    check_committable(table)
    if sink is None and is_cudf_frame(data):
        from ..backend.cudf_sink import CudfSink

        sink = CudfSink()
    evolve = None
    if merge_schema:
        if sink is not None:
            raise InvalidOption("merge_schema: evolve the schema from Arrow data (a frame's rows are not)")
        evolve = _merge_schema(table, data)
    # written for the evolved schema before it is committed: rows it refuses commit nothing
    md = table.metadata if evolve is None else _with_schema(table.metadata, evolve.apply())
    if faults is not None:
        faults("data")
    if sink is not None:
        files = write_frame_data(table.io, md, data, sink, backend=backend)
    else:
        files = write_table_data(table.io, md, data, backend=backend)
    if evolve is not None:
        try:
            evolve.commit()  # refused if another writer changed the schema since (the files' field ids)
        except BaseException:
            delete_files(table.io, [f.path for f in files], fault=None)
            raise
    update = SnapshotUpdate.append(files)
    result = commit(table, update, branch=branch, faults=faults, sleep=sleep, owned=[f.path for f in files])
    return AppendResult(result.snapshot_id, tuple(files), sum(f.record_count for f in files), result)


def _merge_schema(table: Table, data: Data) -> SchemaUpdate | None:
    """The schema change that lets the table hold ``data``'s columns (None when it already does)."""
    if not isinstance(data, (pa.Table, pa.RecordBatch, pa.RecordBatchReader)):
        raise InvalidOption(
            "merge_schema: the data needs a schema before it is read (an Arrow table, record batch or "
            f"record batch reader, not {type(data).__name__})"
        )
    view = merge_view(data.schema, table.schema(), table.metadata.format_version)
    update = table.update_schema().union_by_name(view, relax_required=False)
    return update if update.apply().schema_id != table.metadata.current_schema_id else None


def _with_schema(md: TableMetadata, schema: Schema) -> TableMetadata:
    """``md`` with ``schema`` current (what committing it gives, for the files written before)."""
    known = schema.schema_id in md.schemas_by_id
    return replace(
        md,
        schemas=md.schemas if known else (*md.schemas, schema),
        current_schema_id=schema.schema_id,
        last_column_id=max(md.last_column_id, schema.highest_field_id),
    )
