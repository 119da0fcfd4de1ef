"""Compaction execution: one :class:`~gpu_engine.tasks.FileGroup` -> :class:`~gpu_engine.tasks.RewriteResult`.

A pure function of the table metadata, the group and the strategy (the Spark issue runs it on executors):

1. read the group's tasks with the scan engine, every delete applied (the group's tasks carry no
   residual: all live rows are rewritten), as the current schema plus, on v3 tables, the row-lineage
   columns ``_row_id`` and ``_last_updated_sequence_number`` (inherited values materialised, so rows keep
   their ids and sequence numbers in the new files);
2. order the rows (:mod:`.rewrite_order`: as read for binpack; sorted or z-ordered, in memory or through
   spill files for groups larger than the memory budget);
3. write them into the output spec: files of the rows of ``split_size`` input bytes each, as Java's
   ``inputSplitSize`` splits a group (``expected_output_files`` of about equal row counts, or
   target-sized files and the remainder in one more; files are also rolled at ``max_output_file_size``),
   with full metrics, recording the sort order when it is one of the table's.

Files are written but not committed; when the rewrite fails, every file it wrote is deleted.
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TypeVar

import pyarrow as pa

from ..backend.select import choose
from ..expressions import TRUE
from ..iceberg import metadata_columns as mc
from ..iceberg.content_file import ContentFile
from ..iceberg.metadata import TableMetadata
from ..iceberg.schema import Schema
from ..iceberg.sorting import SortOrder
from ..io.fileio import FileIO
from ..io.parquet_write import write_data_files
from ..tasks import FileGroup, PlanSummary, RewriteResult, RewriteStrategy, ScanPlan
from .delete_cache import DeleteCache
from .projection import Projection, project
from .rewrite_order import ordered
from .scan import execute
from .stream import prefetch

T = TypeVar("T")
_READ_AHEAD = 64 << 20  # Arrow bytes read ahead of the writer


@dataclass
class Clock:
    """Seconds a rewrite spent reading, ordering and writing."""

    read: float = 0.0
    order: float = 0.0
    write: float = 0.0


def rewrite_group(
    md: TableMetadata,
    io: FileIO,
    group: FileGroup,
    strategy: RewriteStrategy,
    *,
    backend: str = "auto",
    workers: int | None = None,
    memory_budget_bytes: int | None = None,
    spill_dir: str | None = None,
    delete_cache: DeleteCache | None = None,
) -> RewriteResult:
    """Rewrite ``group`` (see the module doc). ``memory_budget_bytes``: the Arrow bytes a sort may hold
    in memory (default: the output file size); larger groups are range-partitioned through ``spill_dir``
    (default: the system temporary directory). ``delete_cache``: delete files kept for the compaction's
    other groups (:mod:`.delete_cache`)."""
    choice = choose(backend)
    schema = md.schema
    plan, projection, write_schema = group_read(md, group)
    _, batches = execute(
        md, io, plan, projection, backend=choice.name, workers=workers, delete_cache=delete_cache
    )
    clock = Clock()
    counts = {"read": 0, "written": 0}
    budget = memory_budget_bytes or max(group.max_output_file_size, 64 << 20)
    # reads go on while the writer encodes: up to a share of the budget ahead of it
    ahead = prefetch(batches, max_bytes=min(_READ_AHEAD, budget // 2), size=lambda b: b.nbytes)
    source = timed(_counted(ahead, counts, "read"), clock, "read")
    rows = ordered(
        source, strategy, schema, projection.arrow_schema, backend=choice.name,
        budget_bytes=budget, expected_rows=_expected_rows(group), spill_dir=spill_dir,
    )  # fmt: skip
    rows = timed(rows, clock, "order", exclude=clock)
    spec = md.spec_by_id(group.output_spec_id)
    props = {**md.properties, "write.target-file-size-bytes": str(group.max_output_file_size)}
    order = table_order(md, strategy)
    written: list[ContentFile] = []

    def write(chunk: Iterator[pa.RecordBatch]) -> None:
        files = write_data_files(
            io, md.location, write_schema, spec, _counted(chunk, counts, "written"), properties=props,
            spec_id=group.output_spec_id, backend=choice.name, sort_order=order, table_order=md.sort_order,
        )  # fmt: skip
        written.extend(files)

    try:
        start = time.perf_counter()
        if group.spec_id is None:  # rows of other specs: the writer splits them by partition and rolls
            write(rows)
        else:
            _chunks(rows, rows_per_file(group), group.expected_output_files, write)
        clock.write = time.perf_counter() - start - clock.read - clock.order
    except BaseException:
        for f in written:
            io.delete(io.resolve(f.path), missing_ok=True)
        raise
    return RewriteResult(
        group_index=group.index,
        added=tuple(without_lineage_metrics(f) for f in written),
        rows_read=counts["read"],
        rows_written=counts["written"],
        read_seconds=clock.read,
        order_seconds=clock.order,
        write_seconds=max(clock.write, 0.0),
        backend=choice.name,
    )


def group_read(md: TableMetadata, group: FileGroup) -> tuple[ScanPlan, Projection, Schema]:
    """How a group's rows are read and written: the plan of its tasks, the projection (the current schema
    and, on v3 tables, the row-lineage columns) and the schema the new files are written with."""
    schema = md.schema
    extra = mc.rewritten_lineage(md)
    columns = [f.name for f in schema.fields] + [f.name for f in extra]
    plan = ScanPlan(schema, TRUE, group.tasks, PlanSummary(snapshot_id=None, tasks=len(group.tasks)))
    write_schema = Schema((*schema.fields, *extra), schema_id=schema.schema_id)
    return plan, project(md, schema, columns), write_schema


def _expected_rows(group: FileGroup) -> int:
    """The group's rows less those its file-scoped deletes (DVs, position deletes of one file) remove. Where
    a file's deletes add up to more rows than it has (stacked position delete files may repeat positions),
    its deletes are not counted: the estimate errs high, so output files are never cut smaller than meant."""
    live = 0
    seen: set[str] = set()
    for task in group.tasks:
        if task.file.path in seen:
            continue
        seen.add(task.file.path)
        scoped = sum(
            d.record_count
            for d in task.deletes
            if d.is_deletion_vector or (d.content == 1 and d.referenced_data_file is not None)
        )
        live += task.file.record_count - (scoped if scoped <= task.file.record_count else 0)
    return live


def rows_per_file(group: FileGroup) -> int:
    """Rows of each output file but the last: the live rows of ``split_size`` input bytes."""
    rows, size = _expected_rows(group), group.input_bytes
    if size <= 0:
        return max(1, math.ceil(rows / max(group.expected_output_files, 1)))
    return max(1, math.ceil(rows * min(group.split_size, size) / size))


def _chunks(
    rows: Iterator[pa.RecordBatch],
    per_file: int,
    files: int,
    write: Callable[[Iterator[pa.RecordBatch]], None],
) -> None:
    """Write ``rows`` as chunks of ``per_file`` rows, at most ``files`` of them: the last takes the rest
    (the writer still rolls a file at the maximum size).

    The expected rows count no equality deletes nor position deletes of several files, so fewer rows may
    come: a remainder of at most a tenth of a chunk joins the chunk before it instead of making a tiny
    file of its own."""
    splitter = _Splitter(rows)
    for i in range(max(files, 1)):
        if splitter.exhausted():
            break
        write(_chunk(splitter, None if i >= files - 1 else per_file))


def _chunk(splitter: _Splitter, limit: int | None) -> Iterator[pa.RecordBatch]:
    yield from splitter.take(limit)
    if limit is not None and splitter.rows_left_at_most(limit // 10):
        yield from splitter.take(None)


class _Splitter:
    """Consecutive row-count chunks of a batch stream, slicing batches at chunk boundaries."""

    def __init__(self, batches: Iterator[pa.RecordBatch]):
        self._batches = batches
        self._queue: deque[pa.RecordBatch] = deque()
        self._done = False

    def _pull(self) -> bool:
        if self._done:
            return False
        try:
            self._queue.append(next(self._batches))
        except StopIteration:
            self._done = True
            return False
        return True

    def exhausted(self) -> bool:
        while not self._queue or self._queue[0].num_rows == 0:
            if self._queue:
                self._queue.popleft()
            elif not self._pull():
                return True
        return False

    def rows_left_at_most(self, n: int) -> bool:
        """Whether at most ``n`` rows are left (reading ahead at most ``n`` rows and one batch)."""
        while sum(b.num_rows for b in self._queue) <= n:
            if not self._pull():
                return True
        return False

    def take(self, limit: int | None) -> Iterator[pa.RecordBatch]:
        left = limit
        while left is None or left > 0:
            if self.exhausted():
                return
            batch = self._queue[0]
            if left is not None and batch.num_rows > left:
                self._queue[0] = batch.slice(left)
                yield batch.slice(0, left)
                return
            self._queue.popleft()
            if left is not None:
                left -= batch.num_rows
            yield batch


def _counted(batches: Iterator[pa.RecordBatch], counts: dict[str, int], key: str) -> Iterator[pa.RecordBatch]:
    for b in batches:
        counts[key] += b.num_rows
        yield b


def timed(items: Iterator[T], clock: Clock, attr: str, exclude: Clock | None = None) -> Iterator[T]:
    """``items``, adding the time spent producing each to ``clock.<attr>`` (less, with ``exclude``, the
    read time spent meanwhile: the ordering stage pulls from the timed read stage)."""
    it = iter(items)
    while True:
        start = time.perf_counter()
        before = exclude.read if exclude is not None else 0.0
        try:
            b = next(it)
        except StopIteration:
            setattr(clock, attr, getattr(clock, attr) + _spent(start, exclude, before))
            return
        setattr(clock, attr, getattr(clock, attr) + _spent(start, exclude, before))
        yield b


def _spent(start: float, exclude: Clock | None, before: float) -> float:
    spent = time.perf_counter() - start
    return spent - ((exclude.read - before) if exclude is not None else 0.0)


def table_order(md: TableMetadata, strategy: RewriteStrategy) -> SortOrder | None:
    """The table's sort order the rows are written in (recorded as the files' ``sort_order_id``), if any."""
    if strategy.kind != "sort" or strategy.sort_order is None:
        return None
    for o in md.sort_orders:
        if not o.is_unsorted and o.fields == strategy.sort_order.fields:
            return o
    return None


def without_lineage_metrics(f: ContentFile) -> ContentFile:
    """Metrics of the table's columns only: the lineage columns are metadata, not table fields."""
    ids = {mc.ROW_ID.field_id, mc.LAST_UPDATED_SEQUENCE_NUMBER.field_id}
    if not any(i in ids for i in f.value_counts) and not any(i in ids for i in f.column_sizes):
        return f
    from dataclasses import replace

    def strip(d: dict[int, object]) -> dict[int, object]:
        return {k: v for k, v in d.items() if k not in ids}

    return replace(
        f,
        column_sizes=strip(f.column_sizes),  # type: ignore[arg-type]
        value_counts=strip(f.value_counts),  # type: ignore[arg-type]
        null_value_counts=strip(f.null_value_counts),  # type: ignore[arg-type]
        nan_value_counts=strip(f.nan_value_counts),  # type: ignore[arg-type]
        lower_bounds=strip(f.lower_bounds),  # type: ignore[arg-type]
        upper_bounds=strip(f.upper_bounds),  # type: ignore[arg-type]
    )
