"""Compaction of one file group through frames (cuDF: read, deletes applied and written on the device).

The frame twin of :func:`.rewrite.rewrite_group` for a group of one partition of the output spec: the
group's rows are read by :func:`.frame_scan.frame_stream` (every delete applied, row lineage
materialised, as the host path) and written by :func:`.frame_write.write_frame`, cut into files as the
host path cuts them (:func:`.rewrite.rows_per_file` rows each, at most ``expected_output_files``, the last
taking the rest, a remainder of at most a tenth of a file joining the file before it). ``binpack`` holds
rows until a file's worth is known (a file and one decoder call at most). ``sort`` and ``zorder`` hold the
whole group (up to :data:`ORDER_BYTES` of input): the permutation is the host path's
(:func:`.rewrite_order.order_indices` on a host copy of the columns the order reads, its words and sort on
the group's backend) and the rows are gathered where the frame is; files record the table's sort order
when the rows follow it, as the host path's do. (The host path orders a group larger than its memory
budget through spill files; for ``zorder`` that clusters by ranges, where frames give the exact Morton
order of the whole group.)

Files are cut by rows: the input's bytes per row stand for the output's until files are written, then
the bytes per row written do. The last file's rest is split into equal files of at most the maximum
output size by that measure, and a file that still comes out past the maximum (rows that encode larger
than the input did: ordered rows compress worse) is written again, cut by its own bytes per row. (The host
writer rolls on the bytes it writes, row group by row group.)

What this path does not do is said by :func:`frame_unsupported` (the caller rewrites such groups on the
host and records why). Files written are deleted when the rewrite fails.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pyarrow as pa

from ..backend.select import choose
from ..iceberg.content_file import ContentFile
from ..iceberg.metadata import TableMetadata
from ..iceberg.schema import Schema
from ..io.fileio import FileIO
from ..tasks import FileGroup, RewriteResult, RewriteStrategy
from .delete_cache import DeleteCache
from .frame_scan import frame_stream
from .frame_sink import FrameSink
from .frame_write import write_frame
from .rewrite import Clock, group_read, rows_per_file, table_order, timed, without_lineage_metrics
from .rewrite_order import order_indices

ORDER_BYTES = 4 << 30  # input bytes of a group ordered through frames at most (held whole on the device)


def frame_unsupported(group: FileGroup, strategy: RewriteStrategy) -> str | None:
    """Why ``group`` is not rewritten through frames, or None."""
    if strategy.kind != "binpack" and group.input_bytes > ORDER_BYTES:
        return (
            f"a {strategy.kind} of more than {ORDER_BYTES >> 30} GiB of input ({group.input_bytes:,} bytes) "
            "is ordered on the host, through spill files"
        )
    if group.spec_id is None:
        return "files of other partition specs are repartitioned on the host"
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
    """Rewrite ``group`` through the frames of ``sink`` (see the module doc); ValueError for a group
    :func:`frame_unsupported` names, UnsupportedFeature (naming the column or property) for rows the
    library cannot hold or write as the table asks."""
    why = frame_unsupported(group, strategy)
    if why is not None:
        raise ValueError(f"group {group.index} is not rewritten through frames: {why}")
    choice = choose(backend)
    plan, projection, schema = group_read(md, group)
    _, stream = frame_stream(
        md, io, plan, projection, sink, backend=choice.name, workers=workers, host_decode=True,
        delete_cache=delete_cache,
    )  # fmt: skip
    spec = md.spec_by_id(group.output_spec_id)
    props = {**md.properties, "write.target-file-size-bytes": str(group.max_output_file_size)}
    clock = Clock()
    if strategy.kind == "binpack":
        source = timed(stream, clock, "read")
    else:  # read and ordered whole, each timed
        source = _ordered(sink, stream, strategy, md, projection.arrow_schema, choice.name, clock)
    order = table_order(md, strategy)
    per_file, files = rows_per_file(group), max(group.expected_output_files, 1)
    written: list[ContentFile] = []
    rows_read = 0

    largest = group.max_output_file_size
    per_row: list[float] = []  # bytes per row of the files written so far (none yet: unknown)

    def encode(frame: Any, rows: list[int]) -> list[ContentFile]:
        return write_frame(
            io, md.location, schema, spec, group.partition, frame, sink, rows, properties=props,
            spec_id=group.output_spec_id, sort_order=order, table_order=md.sort_order,
        )  # fmt: skip

    def write(frame: Any, rows: list[int]) -> None:
        """Write ``rows`` (row counts of consecutive files), each cut further where the bytes per row seen
        so far would take it past the maximum output size; files that still come out past it (the rows
        encode larger than the input did: ordered rows compress worse) are written again, cut by their
        own bytes per row."""
        start = time.perf_counter()
        new = encode(frame, _capped(rows, per_row[0] if per_row else None, largest))
        size = sum(f.file_size_in_bytes for f in new)
        per_row[:] = [size / max(1, sum(rows))]
        if any(f.file_size_in_bytes > largest and f.record_count > 1 for f in new):
            for f in new:
                io.delete(io.resolve(f.path), missing_ok=True)
            new = encode(frame, _capped(rows, per_row[0], largest))
        written.extend(new)
        clock.write += time.perf_counter() - start

    held: list[Any] = []
    held_rows = 0
    try:
        for frame, n in source:
            rows_read += n
            if not n:
                continue
            held.append(frame)
            held_rows += n
            # a file's worth is cut once more than a tenth of a file is known to follow it
            while len(written) < files - 1 and held_rows > per_file + per_file // 10:
                rows = sink.concat(held, projection.arrow_schema)
                write(sink.slice(rows, 0, per_file), [per_file])
                held_rows -= per_file
                held = [sink.slice(rows, per_file, held_rows)]
        if held_rows:  # the rest, in files of at most the maximum output size (at the input's bytes per row)
            rest = sink.concat(held, projection.arrow_schema)
            pieces = -(-held_rows // _max_rows(group, per_file))
            sizes = [held_rows // pieces + (1 if i < held_rows % pieces else 0) for i in range(pieces)]
            write(rest, sizes)
    except BaseException:
        for f in written:
            io.delete(io.resolve(f.path), missing_ok=True)
        raise
    return RewriteResult(
        group_index=group.index,
        added=tuple(without_lineage_metrics(f) for f in written),
        rows_read=rows_read,
        rows_written=sum(f.record_count for f in written),
        read_seconds=clock.read,
        order_seconds=clock.order,
        write_seconds=clock.write,
        backend=choice.name,
        parquet_io=sink.name,
    )


def _ordered(
    sink: FrameSink,
    stream: Iterator[tuple[Any, int]],
    strategy: RewriteStrategy,
    md: TableMetadata,
    arrow_schema: pa.Schema,
    backend: str,
    clock: Clock,
) -> Iterator[tuple[Any, int]]:
    """The group's rows as one frame in the strategy's order: the permutation computed from a host copy of
    the columns the order reads (:func:`.rewrite_order.order_indices`: the host path's order, its words
    and sort on ``backend``), the rows gathered where the frame is."""
    frames = [(frame, n) for frame, n in timed(stream, clock, "read") if n]
    rows = sum(n for _, n in frames)
    whole = sink.concat([frame for frame, _ in frames], arrow_schema)
    del frames
    start = time.perf_counter()
    if rows > 1:
        keys = _order_columns(strategy, md.schema)
        host = pa.table(
            [sink.to_arrow(sink.column(whole, name), arrow_schema.field(name).type) for name in keys],
            schema=pa.schema([arrow_schema.field(name) for name in keys]),
        )
        whole = sink.take(whole, order_indices(host, strategy, md.schema, backend))
    clock.order += time.perf_counter() - start
    yield whole, rows


def _order_columns(strategy: RewriteStrategy, schema: Schema) -> list[str]:
    """The table columns (top-level names) holding the fields ``strategy`` orders by."""
    if strategy.kind == "sort":
        assert strategy.sort_order is not None
        ids = [i for f in strategy.sort_order.fields for i in f.source_ids]
    else:
        ids = [schema.find_field(name).field_id for name in strategy.zorder_columns]
    return sorted({schema.paths_by_id[i][0] for i in ids}, key=[f.name for f in schema.fields].index)


def _capped(rows: list[int], per_row: float | None, largest: int) -> list[int]:
    """``rows`` with each count cut into equal parts of at most ``largest`` bytes at ``per_row`` bytes a
    row (unchanged while ``per_row`` is unknown)."""
    if per_row is None or per_row <= 0:
        return rows
    out: list[int] = []
    for n in rows:
        pieces = max(1, min(n, -(-int(n * per_row) // largest)))
        out += [n // pieces + (1 if i < n % pieces else 0) for i in range(pieces)]
    return out


def _max_rows(group: FileGroup, per_file: int) -> int:
    """Rows of a file of the group's maximum output size, at the rows per input byte of a file's worth."""
    per_byte = per_file / max(1, min(group.split_size, group.input_bytes))
    return max(per_file, int(group.max_output_file_size * per_byte))
