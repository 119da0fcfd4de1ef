"""Compaction execution: one :class:`~gpu_engine.tasks.FileGroup` -> :class:`~gpu_engine.tasks.RewriteResult`.

A pure function of the table metadata, the group and the strategy (the Spark issue runs it on executors):

1. read the group's tasks with the scan engine, every delete applied (the group's tasks carry no
   residual: all live rows are rewritten), as the current schema plus, on v3 tables, the row-lineage
   columns ``_row_id`` and ``_last_updated_sequence_number`` (inherited values materialised, so rows keep
   their ids and sequence numbers in the new files);
2. order the rows (:mod:`.rewrite_order`: as read for binpack; sorted or z-ordered, in memory or through
   spill files for groups larger than the memory budget; rows of other specs clustered by the output
   partitions first, :mod:`.clustering`);
3. write them into the output spec: files of the rows of ``split_size`` input bytes each, as Java's
   ``inputSplitSize`` splits a group (``expected_output_files`` of about equal row counts, or
   target-sized files and the remainder in one more; files are also rolled at ``max_output_file_size``),
   with full metrics, recording the sort order when it is one of the table's. Rows of other specs are
   split by partition in one writer, its buffered rows for all partitions within
   :func:`writer_buffer_bytes` (memory follows the file size, not the partitions).

Files are written but not committed; when the rewrite fails, every file it wrote is deleted.
"""

from __future__ import annotations

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
from ..io.write_options import WriteOptions
from ..tasks import FileGroup, PlanSummary, RewriteResult, RewriteStrategy, ScanPlan
from .clustering import clustered
from .delete_cache import DeleteCache
from .input_split import InputSplits, average_bytes_per_row, bytes_per_live_row, expected_live_rows
from .projection import Projection, project
from .rewrite_order import ordered
from .scan import execute_sourced
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
    order = table_order(md, strategy)  # the order asked for, recorded where it is the table's
    strategy = clustered(md, group, strategy, choice.name)
    _, sourced = execute_sourced(
        md, io, plan, projection, backend=choice.name, workers=workers, delete_cache=delete_cache
    )  # fmt: skip
    clock = Clock()
    counts = {"read": 0, "written": 0}
    budget = memory_budget_bytes or max(group.max_output_file_size, 64 << 20)
    # reads go on while the writer encodes: up to a share of the budget ahead of it
    ahead = prefetch(
        ((b, bytes_per_live_row(t)) for t, b in sourced),
        max_bytes=min(_READ_AHEAD, budget // 2),
        size=lambda item: item[0].nbytes,
    )
    source = timed(_counted(ahead, counts, "read"), clock, "read")
    weighted: Iterator[tuple[pa.RecordBatch, int]]
    if not strategy.orders_rows:  # rows as read: each weighs the input bytes it was read from
        weighted = source
    else:
        rows = ordered(
            (b for b, _ in source), strategy, schema, projection.arrow_schema, backend=choice.name,
            budget_bytes=budget, expected_rows=expected_live_rows(group), spill_dir=spill_dir,
        )  # fmt: skip
        average = average_bytes_per_row(group)
        weighted = ((b, average) for b in timed(rows, clock, "order", exclude=clock))
    spec = md.spec_by_id(group.output_spec_id)
    props = {**md.properties, "write.target-file-size-bytes": str(group.max_output_file_size)}
    buffered = writer_buffer_bytes(group, WriteOptions.from_properties(props))
    written: list[ContentFile] = []

    def write(chunk: Iterator[pa.RecordBatch]) -> None:
        files = write_data_files(
            io, md.location, write_schema, spec, _counted(chunk, counts, "written"), properties=props,
            spec_id=group.output_spec_id, backend=choice.name, sort_order=order, table_order=md.sort_order,
            buffer_bytes=buffered,  # rows of other specs go to any number of partitions
        )  # fmt: skip
        written.extend(files)

    try:
        start = time.perf_counter()
        if group.spec_id is None:  # rows of other specs: the writer splits them by partition and rolls
            write(b for b, _ in weighted)
        else:
            _write_split(weighted, InputSplits(group), write)
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


def writer_buffer_bytes(group: FileGroup, options: WriteOptions) -> int:
    """The Arrow bytes the writer may buffer for all the partitions a group's rows go to together: a
    quarter of the largest file (its groups being encoded add up to a file's worth), and no more than a
    row group, what a group written into one partition buffers. So a group rewritten into a new spec's
    partitions holds about what one rewritten in its own partition does, whatever the partitions (a
    partition buffering alone still fills its row groups)."""
    return max(1, min(options.row_group_size_bytes, group.max_output_file_size // 4))


def group_read(md: TableMetadata, group: FileGroup) -> tuple[ScanPlan, Projection, Schema]:
    """How a group's rows are read and written: the plan of its tasks, the projection (the current schema
    and, on v3 tables, the row-lineage columns) and the schema the new files are written with."""
    schema = md.schema
    extra = mc.rewritten_lineage(md)
    columns = [f.name for f in schema.fields] + [f.name for f in extra]
    plan = ScanPlan(schema, TRUE, group.tasks, PlanSummary(snapshot_id=None, tasks=len(group.tasks)))
    write_schema = Schema((*schema.fields, *extra), schema_id=schema.schema_id)
    return plan, project(md, schema, columns), write_schema


def _write_split(
    rows: Iterator[tuple[pa.RecordBatch, int]],
    splits: InputSplits,
    write: Callable[[Iterator[pa.RecordBatch]], None],
) -> None:
    """Write ``rows`` (batches with the input bytes each row weighs) as one file per input split
    (:class:`.input_split.InputSplits`; the writer still rolls a file at the maximum size). Rows are passed
    on as soon as they are known to be the current file's."""
    source = iter(rows)
    held: deque[pa.RecordBatch] = deque()  # rows fed but not written
    ends: deque[int] = deque()  # the files' ends confirmed and not reached yet
    done = False
    start = 0  # the position of the first row held

    def pull() -> bool:
        nonlocal done
        for batch, per_row in source:
            if batch.num_rows:
                held.append(batch)
                ends.extend(end for end, _ in splits.feed(batch.num_rows, per_row))
                return True
        if not done:
            splits.finish()
            done = True
        return False

    def chunk() -> Iterator[pa.RecordBatch]:
        nonlocal start
        while True:
            if ends and start == ends[0]:
                ends.popleft()
                return
            limit = ends[0] if ends else splits.safe()
            if held and start < limit:
                batch = held[0]
                n = min(batch.num_rows, limit - start)
                if n < batch.num_rows:
                    held[0], batch = batch.slice(n), batch.slice(0, n)
                else:
                    held.popleft()
                start += n
                yield batch
            elif not pull() and not held:
                return

    while held or pull():
        write(chunk())


def _counted(items: Iterator[T], counts: dict[str, int], key: str) -> Iterator[T]:
    """``items`` (batches, or pairs that start with one), counting their rows."""
    for item in items:
        batch = item[0] if isinstance(item, tuple) else item
        assert isinstance(batch, pa.RecordBatch)
        counts[key] += batch.num_rows
        yield item


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
