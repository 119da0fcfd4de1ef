"""Compaction of one file group through frames (cuDF: read, deletes applied and written on the device).

The frame twin of :func:`.rewrite.rewrite_group` for the ``binpack`` strategy on a group of one partition
of the output spec: the group's rows are read by :func:`.frame_scan.frame_stream` (every delete applied,
row lineage materialised, as the host path) and written by :func:`.frame_write.write_frame`, cut into
files as the host path cuts them (:func:`.rewrite.rows_per_file` rows each, at most
``expected_output_files``, the last taking the rest, a remainder of at most a tenth of a file joining
the file before it). Rows are held until a file's worth is known (a file and one decoder call at most).
Files are cut by rows, the input's bytes per row standing for the output's: the last file's rest is
split into equal files of at most the maximum output size by that measure (the host writer rolls on the
bytes it wrote instead).

What this path does not do is said by :func:`frame_unsupported` (the caller rewrites such groups on the
host and records why). Files written are deleted when the rewrite fails.
"""

from __future__ import annotations

import time
from typing import Any

from ..backend.select import choose
from ..iceberg.content_file import ContentFile
from ..iceberg.metadata import TableMetadata
from ..io.fileio import FileIO
from ..tasks import FileGroup, RewriteResult, RewriteStrategy
from .delete_cache import DeleteCache
from .frame_scan import frame_stream
from .frame_sink import FrameSink
from .frame_write import write_frame
from .rewrite import Clock, group_read, rows_per_file, timed, without_lineage_metrics


def frame_unsupported(group: FileGroup, strategy: RewriteStrategy) -> str | None:
    """Why ``group`` is not rewritten through frames, or None."""
    if strategy.kind != "binpack":
        return f"the {strategy.kind} strategy orders the rows on the host"
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
    per_file, files = rows_per_file(group), max(group.expected_output_files, 1)
    written: list[ContentFile] = []
    clock = Clock()
    rows_read = 0

    def write(frame: Any, rows: list[int]) -> None:
        start = time.perf_counter()
        new = write_frame(
            io, md.location, schema, spec, group.partition, frame, sink, rows, properties=props,
            spec_id=group.output_spec_id, table_order=md.sort_order,
        )  # fmt: skip
        written.extend(new)
        clock.write += time.perf_counter() - start

    held: list[Any] = []
    held_rows = 0
    try:
        for frame, n in timed(stream, clock, "read"):
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
        write_seconds=clock.write,
        backend=choice.name,
        parquet_io=sink.name,
    )


def _max_rows(group: FileGroup, per_file: int) -> int:
    """Rows of a file of the group's maximum output size, at the rows per input byte of a file's worth."""
    per_byte = per_file / max(1, min(group.split_size, group.input_bytes))
    return max(per_file, int(group.max_output_file_size * per_byte))
