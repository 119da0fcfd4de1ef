"""Data files written aside and published: where a writer stages a file, how it is published (never over
another), and the manifest entry of a written Parquet data file (counts and sizes from its footer, metrics
as counted from its rows). Shared by the host writer (:mod:`.parquet_write`) and the frame writer
(:mod:`gpu_engine.execute.frame_write`).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import uuid
from collections.abc import Mapping
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from ..iceberg.content_file import ContentFile
from .arrow_schema import field_id_of
from .column_metrics import ColumnMetrics
from .fileio import FileIO, _fsync_dir, local_path, on_local_disk
from .metrics_config import MetricsConfig
from .parquet_read import _starting_offset
from .parquet_splice import leaf_paths


def staging_path(io: FileIO, target: str, name: str) -> str:
    """A new local path to write the file ``name`` (to be published at the resolved ``target``) into:
    beside the target on local disk (its directory made), else in the system temporary directory. Its
    name is one :func:`remove_orphan_files <gpu_engine.table.Table.remove_orphan_files>` knows as a
    writer's staging file (``.<name>.<32 hex>.tmp``)."""
    if on_local_disk(io, target):
        directory = os.path.dirname(local_path(target)) or "."
        os.makedirs(directory, exist_ok=True)
        return os.path.join(directory, f".{name}.{uuid.uuid4().hex}.tmp")
    return os.path.join(tempfile.gettempdir(), f".{name}.{uuid.uuid4().hex}.tmp")


def publish(io: FileIO, tmp: str, target: str, recorded: str) -> None:
    """Move the finished ``tmp`` to ``target`` without ever overwriting (FileExistsError); a failure after
    ``target`` was created removes it (the caller records only files that were published whole)."""
    try:
        if not on_local_disk(io, target):
            with open(tmp, "rb") as f:
                io.write_bytes(target, f.read())
            return
        path = local_path(target)
        created = False
        try:
            try:
                os.link(tmp, path)  # atomic, and fails when the target exists
                created = True
            except FileExistsError:
                raise FileExistsError(f"{recorded} already exists: new files are never overwritten") from None
            except OSError:  # no hard links here: copy into an exclusively created file
                with open(tmp, "rb") as src, open(path, "xb") as dst:
                    created = True
                    shutil.copyfileobj(src, dst, 1 << 20)
                    dst.flush()
                    os.fsync(dst.fileno())
            _fsync_dir(os.path.dirname(path) or ".")
        except BaseException:
            if created:
                with contextlib.suppress(OSError):
                    os.unlink(path)
            raise
    finally:
        os.unlink(tmp)


def data_file_entry(
    path: str,
    md: pq.FileMetaData,
    size: int,
    metrics: ColumnMetrics,
    column_ids: Mapping[str, int],
    config: MetricsConfig,
    *,
    spec_id: int,
    partition: tuple[Any, ...],
    sort_order_id: int | None,
) -> ContentFile:
    """The manifest entry of the data file written at ``path``: counts and sizes from its footer ``md``
    (column sizes by ``column_ids``, Parquet column path -> field id, where ``config`` keeps counts; split
    offsets), ``metrics`` as counted from its rows."""
    sizes: dict[int, int] = {}
    for g in range(md.num_row_groups):
        rg = md.row_group(g)
        for c in range(rg.num_columns):
            col = rg.column(c)
            fid = column_ids[col.path_in_schema]
            if config.mode(fid).counts:
                sizes[fid] = sizes.get(fid, 0) + int(col.total_compressed_size)
    offsets = sorted(
        o for g in range(md.num_row_groups) if (o := _starting_offset(md.row_group(g))) is not None
    )
    return ContentFile(
        path=path,
        file_format="PARQUET",
        spec_id=spec_id,
        partition=partition,
        record_count=int(md.num_rows),
        file_size_in_bytes=size,
        column_sizes=sizes,
        value_counts=metrics.value_counts,
        null_value_counts=metrics.null_value_counts,
        nan_value_counts=metrics.nan_value_counts,
        lower_bounds=metrics.lower_bounds,
        upper_bounds=metrics.upper_bounds,
        split_offsets=tuple(offsets),
        sort_order_id=sort_order_id,
    )


def leaf_field_ids(schema: pa.Schema) -> dict[str, int]:
    """Parquet column path (``path_in_schema``) -> field id of the leaf columns pyarrow writes."""
    out: dict[str, int] = {}
    for f in schema:
        for path, leaf in leaf_paths(f):
            fid = field_id_of(leaf)
            assert fid is not None
            out[path] = fid
    return out
