"""A scan executed into data frames of a frame library (cuDF: ``TableScan.to_cudf``, compaction).

Tasks are prepared in task order (footer, column resolution, row-group pruning, delete positions), a
few ahead of the decoder on worker threads where files are remote, on the calling thread where all are
local (:func:`_workers`); consecutive tasks whose files resolve to the same stored columns are decoded
together, up to :data:`BATCH_FILES` files and :data:`BATCH_BYTES` bytes of decoded columns per decoder
call (cuDF decodes them in one call, in parallel on the device; the bytes are
estimated from the footers, :mod:`.decoded_size`: stored bytes may decode to a hundred times as many). A
task larger than that on its own is decoded alone. A file the frame decoder cannot read as the host reader
does is decoded by the host reader and copied over, its path and the reason recorded in
:attr:`ScanRun.host_decoded`, or, with ``host_decode=False``, refused: never decoded differently.
"""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa

from ..backend.select import choose
from ..errors import UnsupportedFeature
from ..iceberg.metadata import TableMetadata
from ..io.fileio import FileIO, on_local_disk
from ..tasks import ScanPlan, ScanTask
from .delete_cache import DeleteCache
from .deletes import DeleteLoader
from .frame_task import FramePart, FrameRows, decode, prepare
from .frames import Frames
from .projection import Projection
from .scan import ScanRun, default_workers, read_name_mapping
from .stream import ordered
from .task import TaskContext, execute_task

# a decoder call reads at most this many files, and rows of at most this many bytes once decoded (their
# columns read, as :func:`.decoded_size.decoded_bytes` estimates them; not the bytes stored)
BATCH_FILES = 256
BATCH_BYTES = 1 << 30


_MAX_ROWS = 2**31 - 1  # cuDF's column size limit: a decoder call reads fewer rows


def _full(pending: list[FramePart], more: FramePart) -> bool:
    files = len(pending) + 1
    rows = sum(p.rows for p in pending) + more.rows
    size = sum(p.decoded for p in pending) + more.decoded
    return files > BATCH_FILES or size > BATCH_BYTES or rows >= _MAX_ROWS


def frame_stream(
    md: TableMetadata,
    io: FileIO,
    plan: ScanPlan,
    projection: Projection,
    frames: Frames,
    *,
    backend: str = "auto",
    case_sensitive: bool = True,
    limit: int | None = None,
    host_decode: bool = True,
    workers: int | None = None,
    delete_cache: DeleteCache | None = None,
) -> tuple[ScanRun, Iterator[FrameRows]]:
    """The scan's run record and its rows (at most ``limit``) as a stream of frames of ``frames`` with
    their row counts and tasks, one per decoder call (or host-decoded file), in task order (see the
    module doc);
    ``workers`` threads prepare the tasks ahead of the decoder (default: see :func:`_workers`).
    ``delete_cache``: delete files kept for the other executions of the same job (:mod:`.delete_cache`).
    Columns the library cannot hold are refused here, before the stream starts."""
    why = frames.unsupported(projection.arrow_schema)
    if why is not None:
        raise UnsupportedFeature(f"{frames.name}: {why}")
    choice = choose(backend)
    run = ScanRun(plan, projection, choice)
    mapping = read_name_mapping(md)
    loader = DeleteLoader(md, io, plan.schema, plan.tasks, choice.name, mapping, delete_cache)
    ctx = TaskContext(md, io, projection, loader, choice.name, mapping, case_sensitive)
    return run, _frames(run, ctx, plan, frames, limit, host_decode, workers)


def _frames(
    run: ScanRun,
    ctx: TaskContext,
    plan: ScanPlan,
    frames: Frames,
    limit: int | None,
    host_decode: bool,
    workers: int | None,
) -> Iterator[FrameRows]:
    def prepared(task: ScanTask) -> Iterator[tuple[ScanTask, FramePart | str]]:
        yield task, prepare(task, ctx)

    ahead = ordered(plan.tasks, prepared, workers=workers or _workers(ctx, plan), depth=1)
    try:
        yield from _Decoder(run, ctx, frames, limit, host_decode).decode_all(ahead)
    finally:
        close = getattr(ahead, "close", None)
        if close is not None:
            close()  # the workers preparing tasks ahead stop


def _workers(ctx: TaskContext, plan: ScanPlan) -> int:
    """Threads preparing tasks ahead of the decoder, unless the caller says: none beside the calling
    thread where every data and delete file is on the local disk, :func:`.scan.default_workers` otherwise
    (remote reads wait on the network). A local file's footer and deletes are read in well under a
    millisecond: the preparation is Python holding the GIL, and threads only contend for it (an H200 host,
    16 cores, a 100-file ``to_cudf``: 0.230 s on the calling thread, 0.277 s on 8 threads, 0.303 s on 16;
    200 files: 0.31 s, 0.38 s, 0.41 s; ``bench/frame_stages.py``)."""
    paths = (p for t in plan.tasks for p in (t.file.path, *(d.path for d in t.deletes)))
    return 1 if all(on_local_disk(ctx.io, p) for p in paths) else default_workers()


class _Decoder:
    """Decodes the prepared tasks in batches (see the module doc), counting rows against the limit."""

    def __init__(self, run: ScanRun, ctx: TaskContext, frames: Frames, limit: int | None, host_decode: bool):
        self.run, self.ctx, self.frames, self.host_decode = run, ctx, frames, host_decode
        self.remaining = limit
        self.pending: list[FramePart] = []

    def _done(self) -> bool:
        return self.remaining is not None and self.remaining <= 0

    def _out(self, rows: FrameRows) -> FrameRows:
        if self.remaining is not None:
            if rows.rows > self.remaining:
                rows = _head(self.frames, rows, self.remaining)
            self.remaining -= rows.rows
        return rows

    def _flush(self) -> Iterator[FrameRows]:
        if self.pending:
            decoded = self._out(decode(self.pending, self.ctx, self.frames))
            for part in self.pending:
                self.ctx.deletes.release(part.task)
            self.pending.clear()
            yield decoded

    def decode_all(self, ahead: Iterator[tuple[ScanTask, FramePart | str]]) -> Iterator[FrameRows]:
        """The frames of the tasks of ``ahead``. With a limit, a task is taken only while rows are still
        wanted: a limit met before a missing or corrupt file is no error, as for ``to_arrow``."""
        while not self._done():
            held = sum(p.rows for p in self.pending)
            if self.remaining is not None and self.pending and held >= self.remaining:
                yield from self._flush()  # the held rows may reach the limit: decoded before reading on
                continue
            try:
                task, got = next(ahead)
            except StopIteration:
                break
            if isinstance(got, str):
                yield from self._flush()
                if not self._done():
                    yield self._host_decoded(task, got)
                continue
            if self.pending and (got.key != self.pending[0].key or _full(self.pending, got)):
                yield from self._flush()
                if self._done():
                    break
            self.pending.append(got)
        yield from self._flush()

    def _host_decoded(self, task: ScanTask, why: str) -> FrameRows:
        """A file the frame library cannot decode as the host reader does, decoded by it (or refused)."""
        if not self.host_decode:
            raise UnsupportedFeature(
                f"{why}; {self.frames.name} cannot decode it as the host reader does "
                "(host_decode=True decodes such files on the host and copies them over)"
            )
        self.run.host_decoded.append((task.file.path, why))
        batches = list(execute_task(task, self.ctx))
        table = pa.Table.from_batches(batches, schema=self.run.projection.arrow_schema)
        self.ctx.deletes.release(task)
        return self._out(
            FrameRows(self.frames.from_arrow_table(table), table.num_rows, ((task, table.num_rows),))
        )


def _head(frames: Frames, rows: FrameRows, n: int) -> FrameRows:
    """The first ``n`` of ``rows``."""
    sources, left = [], n
    for task, k in rows.sources:
        if left <= 0:
            break
        sources.append((task, min(k, left)))
        left -= k
    return FrameRows(frames.head(rows.frame, n), n, tuple(sources))
