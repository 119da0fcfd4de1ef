"""Compaction of one file group through frames (cuDF: read, deletes applied and written on the device).

The frame twin of :func:`.rewrite.rewrite_group`: the group's rows are read by
:func:`.frame_scan.frame_stream` (every delete applied, row lineage materialised, as the host path) and
written by :func:`.frame_write.write_frame`.

- ``binpack`` of one partition: rows are held until a file's worth is known (a file and one decoder call
  at most) and cut into files as the host path cuts them (:class:`.input_split.InputSplits`: by the input
  bytes of each row's task, at most ``expected_output_files``, the last taking the rest).
- ``sort`` and ``zorder``, and groups of files of other specs (repartitioned into the output spec), hold
  the whole group: up to :data:`WHOLE_BYTES` of decoded columns, estimated from the files' footers
  (:func:`.decoded_size.tasks_decoded_bytes`; stored bytes may decode to a hundred times as many) before
  anything is read; a larger group goes to the host path, the reason said. The order's permutation is
  the host path's (:func:`.rewrite_order.order_indices` on a host copy of the columns the order reads,
  its words and sort on the group's backend), the rows gathered where the frame is; files record the
  table's sort order when the rows follow it, as the host path's do. Rows of other specs are split by the
  output spec's partitions where the frame is (:func:`.frame_partition.split_frame`). (The host path
  orders a group larger than its memory budget through spill files; for ``zorder`` that clusters by
  ranges, where frames give the exact Morton order of the whole group.)

A frame is written without seeing its bytes first, so each file's rows are cut further where their input
bytes, at the output bytes per input byte of the files written so far, would take a file past the
host writer's limit (:data:`~gpu_engine.io.parquet_write.OVERSHOOT` x the maximum output size); a file
that still comes out past it (rows that encode larger than the rows before them: ordered rows compress
worse) is written again once, cut by its own column bytes per row (not its footer's, which each piece has
again). No file is cut into pieces of fewer rows than the host writer puts in a row group
(``write.parquet.row-group-check-min-record-count``): the host writer rolls on the bytes it writes, row
group by row group, so a target smaller than that many rows' bytes gives files of that many rows there
too.

What this path does not do is said by :func:`frame_unsupported` (the caller rewrites such groups on the
host and records why). Files written are deleted when the rewrite fails.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pyarrow as pa

from ..backend.select import choose
from ..errors import UnsupportedFeature
from ..iceberg.content_file import ContentFile
from ..iceberg.metadata import TableMetadata
from ..iceberg.schema import Schema
from ..iceberg.sorting import SortOrder
from ..io.arrow_conform import write_schema
from ..io.file_publish import leaf_field_ids
from ..io.fileio import FileIO
from ..io.parquet_write import OVERSHOOT
from ..io.write_options import WriteOptions
from ..tasks import FileGroup, RewriteResult, RewriteStrategy
from .decoded_size import tasks_decoded_bytes
from .delete_cache import DeleteCache
from .frame_partition import split_frame
from .frame_scan import frame_stream
from .frame_sink import FrameSink
from .frame_task import FrameRows
from .frame_write import write_frame
from .input_split import SCALE, InputSplits, average_bytes_per_row, bytes_per_live_row
from .rewrite import Clock, group_read, table_order, timed, without_lineage_metrics
from .rewrite_order import order_indices
from .scan import default_workers

# decoded bytes (the columns as the frame library holds them, not as stored) of a group held whole on the
# device at most (ordered or repartitioned); it takes a few times that while it is ordered and written
WHOLE_BYTES = 4 << 30


def held_whole(group: FileGroup, strategy: RewriteStrategy) -> bool:
    """Whether the frame path holds all of ``group``'s rows at once (ordered or repartitioned)."""
    return strategy.kind != "binpack" or group.spec_id is None


def frame_unsupported(
    group: FileGroup, strategy: RewriteStrategy, decoded_bytes: int | None = None
) -> str | None:
    """Why ``group`` is not rewritten through frames, or None. ``decoded_bytes``: what the group's rows
    decode to (:func:`.decoded_size.tasks_decoded_bytes`; its footers read); unknown, its stored bytes
    stand for them (they rarely decode to fewer), so that a group past the limit by those goes to the host
    before a footer is read."""
    size = group.input_bytes if decoded_bytes is None else decoded_bytes
    if held_whole(group, strategy) and size > WHOLE_BYTES:
        what = f"a {strategy.kind}" if strategy.kind != "binpack" else "a repartition (files of other specs)"
        how = "bytes as stored" if decoded_bytes is None else "bytes, estimated from the files' footers"
        return (
            f"{what} of more than {WHOLE_BYTES >> 30} GiB of input once decoded ({size:,} {how}) is done on "
            "the host, through spill files"
        )
    return None


def rewrite_group_frames(
    md: TableMetadata,
    io: FileIO,
    group: FileGroup,
    strategy: RewriteStrategy,
    sink: FrameSink,
    *,
    backend: str = "auto",
    workers: int | None = None,
    delete_cache: DeleteCache | None = None,
) -> RewriteResult:
    """Rewrite ``group`` through the frames of ``sink`` (see the module doc); UnsupportedFeature, before
    anything is read, for a group :func:`frame_unsupported` names (the reason; a group held whole is
    measured by its decoded bytes, its files' footers read on ``workers`` threads) and (naming the column
    or property) for rows the library cannot hold or write as the table asks."""
    why = frame_unsupported(group, strategy)
    if why is None and held_whole(group, strategy):
        decoded = tasks_decoded_bytes(io, group.tasks, workers or default_workers())
        why = frame_unsupported(group, strategy, decoded)
    if why is not None:
        raise UnsupportedFeature(why)
    choice = choose(backend)
    plan, projection, schema = group_read(md, group)
    arrow_schema = projection.arrow_schema
    _, stream = frame_stream(
        md, io, plan, projection, sink, backend=choice.name, workers=workers, host_decode=True,
        delete_cache=delete_cache,
    )  # fmt: skip
    clock = Clock()
    if strategy.kind == "binpack" and group.spec_id is not None:
        source = timed(stream, clock, "read")
    else:  # read whole (and ordered), each timed
        source = _whole(sink, stream, strategy, md, arrow_schema, choice.name, clock)
    out = _Files(md, io, group, schema, sink, table_order(md, strategy), clock)
    rows_read = 0
    try:
        if group.spec_id is not None:
            rows_read = _cut(source, out, sink, group, arrow_schema)
        else:  # rows of other specs: split by the output spec's partitions
            spec = md.spec_by_id(group.output_spec_id)
            for item in source:
                rows_read += item.rows
                for key, part in split_frame(sink, item.frame, md.schema, spec, arrow_schema, choice.name):
                    out.write(part, key, [sink.num_rows(part)], rolled=True)
    except BaseException:
        out.discard()
        raise
    return RewriteResult(
        group_index=group.index,
        added=tuple(without_lineage_metrics(f) for f in out.written),
        rows_read=rows_read,
        rows_written=sum(f.record_count for f in out.written),
        read_seconds=clock.read,
        order_seconds=clock.order,
        write_seconds=clock.write,
        backend=choice.name,
        parquet_io=sink.name,
    )


def _cut(
    source: Iterator[FrameRows], out: _Files, sink: FrameSink, group: FileGroup, arrow_schema: pa.Schema
) -> int:
    """Write the rows of ``source`` (one partition) cut into files as the host path cuts them
    (:class:`.input_split.InputSplits`: by the input bytes of each row's task; rows without their tasks,
    reordered ones, weigh the group's average); the rows read."""
    splits, average = InputSplits(group), average_bytes_per_row(group)
    held: list[Any] = []
    start = rows_read = 0  # the position of the first row held; the rows fed
    for item in source:
        if not item.rows:
            continue
        held.append(item.frame)
        ends = []
        for task, n in item.sources or ((None, item.rows),):
            ends += splits.feed(n, average if task is None else bytes_per_live_row(task))
        rows_read += item.rows
        for end, weight in ends:
            rows = sink.concat(held, arrow_schema)
            out.write(sink.slice(rows, 0, end - start), group.partition, [end - start], weight / SCALE)
            held = [sink.slice(rows, end - start, rows_read - end)]
            start = end
    weight = splits.finish()
    if rows_read > start:  # the rest: cut at the maximum output size by the bytes per row known (_Files)
        out.write(sink.concat(held, arrow_schema), group.partition, [rows_read - start], weight / SCALE)
    return rows_read


class _Files:
    """The files a group's rewrite writes: each call's rows cut further where their input bytes, at the
    output bytes per input byte seen so far (1 before any file is written), would take a file past the
    maximum output size; files that still come out past it (rows that encode larger than the rows before
    them did) are written again once, each cut by its own column bytes per row. No cut makes a file of
    fewer rows than the host writer's least a row group (see the module doc)."""

    def __init__(
        self,
        md: TableMetadata,
        io: FileIO,
        group: FileGroup,
        schema: Schema,
        sink: FrameSink,
        order: SortOrder | None,
        clock: Clock,
    ) -> None:
        self.md, self.io, self.group, self.schema, self.sink = md, io, group, schema, sink
        self.order, self.clock = order, clock
        self.spec = md.spec_by_id(group.output_spec_id)
        self.props = {**md.properties, "write.target-file-size-bytes": str(group.max_output_file_size)}
        self.largest = group.max_output_file_size
        self.least = WriteOptions.from_properties(self.props).row_group_min_rows  # rows a cut file holds
        self.average = average_bytes_per_row(group) / SCALE  # input bytes of a row without its task
        self.leaves = frozenset(leaf_field_ids(write_schema(schema)).values())  # the columns a file holds
        self.input_bytes = 0.0  # of the rows written so far, and the bytes of their files
        self.output_bytes = 0
        self.written: list[ContentFile] = []

    def _encode(self, frame: Any, partition: tuple[Any, ...], rows: list[int]) -> list[ContentFile]:
        return write_frame(
            self.io, self.md.location, self.schema, self.spec, partition, frame, self.sink, rows,
            properties=self.props, spec_id=self.group.output_spec_id, sort_order=self.order,
            table_order=self.md.sort_order,
        )  # fmt: skip

    def write(
        self,
        frame: Any,
        partition: tuple[Any, ...],
        rows: list[int],
        input_bytes: float | None = None,
        *,
        rolled: bool = False,
    ) -> None:
        """Write ``frame`` as files of ``rows`` rows each (cut further, see the class doc); ``input_bytes``:
        the input bytes its rows stand for (default: the group's average a row). ``rolled``: files rolled
        on the bytes written, as the host writer rolls a repartitioned group's: until files written measure
        a row's output bytes, the rows are written uncut and cut by their own bytes where past the maximum
        (the input bytes of many small files are mostly their footers: they cut 300 rows' 20 KB into three
        files where the host wrote one)."""
        start = time.perf_counter()
        total = sum(rows)
        weight = total * self.average if input_bytes is None else input_bytes
        # the column bytes of the files written so far per input byte, once they are a tenth of a file
        # (a few rows' files are mostly page headers and statistics: no measure of the rows)
        measured = self.input_bytes * 10 >= self.largest
        ratio = self.output_bytes / self.input_bytes if measured else 1.0
        per_row = None if rolled and not measured else weight * ratio / max(total, 1)
        cut = _capped(rows, per_row, self.largest, self.least)
        new = self._encode(frame, partition, cut)
        again = [
            _capped(
                [f.record_count], _column_bytes(f, self.leaves) / f.record_count, self.largest, self.least
            )
            for f in new
        ]
        if any(len(pieces) > 1 for pieces in again):  # past the limit by their own bytes: cut once more
            for f in new:
                self.io.delete(self.io.resolve(f.path), missing_ok=True)
            new = self._encode(frame, partition, [n for pieces in again for n in pieces])
        self.written.extend(new)
        self.input_bytes += weight
        self.output_bytes += sum(_column_bytes(f, self.leaves) for f in new)
        self.clock.write += time.perf_counter() - start

    def discard(self) -> None:
        for f in self.written:
            self.io.delete(self.io.resolve(f.path), missing_ok=True)


def _whole(
    sink: FrameSink,
    stream: Iterator[FrameRows],
    strategy: RewriteStrategy,
    md: TableMetadata,
    arrow_schema: pa.Schema,
    backend: str,
    clock: Clock,
) -> Iterator[FrameRows]:
    """The group's rows as one frame, in the strategy's order: the permutation computed from a host copy of
    the columns the order reads (:func:`.rewrite_order.order_indices`: the host path's order, its words
    and sort on ``backend``), the rows gathered where the frame is (``binpack``: as read)."""
    frames = [item.frame for item in timed(stream, clock, "read") if item.rows]
    rows = sum(sink.num_rows(frame) for frame in frames)
    whole = sink.concat(frames, arrow_schema)
    del frames
    start = time.perf_counter()
    if rows > 1 and strategy.kind != "binpack":
        keys = _order_columns(strategy, md.schema)
        host = pa.table(
            [sink.to_arrow(sink.column(whole, name), arrow_schema.field(name).type) for name in keys],
            schema=pa.schema([arrow_schema.field(name) for name in keys]),
        )
        whole = sink.take(whole, order_indices(host, strategy, md.schema, backend))
    clock.order += time.perf_counter() - start
    yield FrameRows(whole, rows, ())


def _order_columns(strategy: RewriteStrategy, schema: Schema) -> list[str]:
    """The table columns (top-level names) holding the fields ``strategy`` orders by."""
    if strategy.kind == "sort":
        assert strategy.sort_order is not None
        ids = [i for f in strategy.sort_order.fields for i in f.source_ids]
    else:
        ids = [schema.find_field(name).field_id for name in strategy.zorder_columns]
    return sorted({schema.paths_by_id[i][0] for i in ids}, key=[f.name for f in schema.fields].index)


def _column_bytes(f: ContentFile, leaves: frozenset[int]) -> int:
    """The bytes of ``f``'s column chunks (its footer left out: the rows' bytes), or its size where it
    records no size for some of its columns ``leaves`` (metrics mode ``none``: the column's bytes are in
    the file all the same)."""
    sizes = f.column_sizes or {}
    return sum(sizes.values()) if sizes and leaves <= sizes.keys() else f.file_size_in_bytes


def _capped(rows: list[int], per_row: float | None, largest: int, least: int = 1) -> list[int]:
    """``rows`` with each count that would take more than ``OVERSHOOT`` x ``largest`` bytes at ``per_row``
    bytes a row (the host writer's limit) cut into equal parts of at most ``largest`` bytes, but no part of
    fewer than ``least`` rows (unchanged while ``per_row`` is unknown)."""
    if per_row is None or per_row <= 0:
        return rows
    out: list[int] = []
    for n in rows:
        size = int(n * per_row)
        pieces = 1 if size <= largest * OVERSHOOT else max(1, min(n // max(least, 1), -(-size // largest)))
        out += [n // pieces + (1 if i < n % pieces else 0) for i in range(pieces)]
    return out
