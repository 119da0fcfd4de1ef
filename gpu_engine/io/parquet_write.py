"""The write half: Arrow data -> Parquet data files with field ids and metrics, one partition per file.

:func:`write_data_files` checks and casts each batch to the table schema (:func:`conform_batch`), splits
its rows by partition tuple (transforms on ``backend``) and buffers each partition's rows into row groups
of about ``write.parquet.row-group-size-bytes`` (Arrow bytes), no more than the room left in the
partition's open file under ``write.target-file-size-bytes`` at the partition's compression so far (a new
file's worth where that file is about full), the partitions' buffers holding no more than ``buffer_bytes``
together (past it the fullest is encoded early, as a smaller row group). Where the room decides, the
partition's groups being encoded are landed first, so the room and the compression are exact. Files are
rolled on the exact size of each encoded row group (:meth:`_Writer._place`): a file about full takes no more
groups but its partition's last rows, no file goes past 1.25 x the target (a group that would goes to a new
file, or its first rows top up a file less than three quarters full), and a group that comes out larger than
that on its own (its rows compress worse than the rows its size was judged by: one partition's rows change,
or a partition's first group) is encoded again as several. So files are about the target, from 0.75 to 1.25
times it but a partition's last, as Iceberg Java's rolling writer makes them. Files are written by pyarrow
to a temporary file and published create-exclusively (locally: a hard link in the target directory, as
:meth:`LocalFileIO.write_bytes`).

Each row group's columns of distinct values are encoded plainly, the others with a dictionary
(:mod:`.dictionary_choice`, parquet-mr's fallback decided up front from the data alone).

Threads (pyarrow encodes, compresses and computes without the GIL): row groups are encoded on a pool, each
as a Parquet file in memory, and spliced in order into their file (:mod:`.parquet_splice`: the bytes are
those pyarrow writes for the same row groups on one thread), up to ``_MAX_GROUPS`` at a time while their
Arrow bytes stay within the target file size; their metrics are counted beside them. A row group of
``_SLICE_BYTES`` or more is encoded as ranges of its columns side by side, one per thread, joined into one
row group. At the end the partitions' last rows are encoded side by side and the files closed side by side.
Every decision (row group cuts, rolling, file names) is taken in the calling thread in input order on
exact sizes (groups land in submission order; a group is sized without waiting only where a full one fits
the file however well the groups being encoded compress), so the files, their bytes and their order do
not depend on timing (data that grow when encoded, such as a few rows whose page headers outweigh them,
can make the no-wait shortcut answer differently from the exact path: then only row group cuts differ).

Parquet layout (Appendix A): field ids on every column, 3-level lists and maps, decimals as INT32 (P <= 9),
INT64 (P <= 18) or the minimal FIXED_LEN_BYTE_ARRAY (``store_decimal_as_integer``), uuid as
FIXED_LEN_BYTE_ARRAY(16) with the UUID logical type, times and timestamps in their unit (time with
``isAdjustedToUTC=false``), ``unknown`` columns omitted. Geometry, geography and variant columns are not
written (UnsupportedFeature). Files go where the table's location provider says (:mod:`.locations`).
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any, TypeAlias

import pyarrow as pa
import pyarrow.parquet as pq

from ..errors import InvalidType, UnsupportedFeature
from ..iceberg.content_file import ContentFile
from ..iceberg.metadata import TableMetadata
from ..iceberg.partitioning import PartitionSpec
from ..iceberg.schema import Schema
from ..iceberg.sorting import SortOrder
from .arrow_conform import conform_batch, write_schema
from .column_metrics import MetricsCollector
from .data_input import record_batches
from .dictionary_choice import dictionary_columns
from .file_publish import data_file_entry, leaf_field_ids, publish, staging_path
from .fileio import FileIO
from .locations import LocationProvider, location_provider
from .metrics_config import MetricsConfig, metrics_config
from .open_files import OpenFiles, SlotFile
from .parquet_splice import (
    EncodedPart,
    SpliceFile,
    column_ranges,
    encode_columns,
    encode_row_group,
    join_columns,
    leaf_paths,
    schema_footer,
)
from .partition_split import partition_key, partition_path, split_by_partition
from .thrift_compact import Struct
from .write_options import WriteOptions

NOTHING_STORED = (
    "the table schema has no column a data file stores (only unknown-typed ones, which are not written): "
    "its rows cannot be written"
)
Data: TypeAlias = pa.Table | pa.RecordBatch | pa.RecordBatchReader | Iterable[pa.RecordBatch]
_MAX_WORKERS = 32  # threads encoding
_MAX_GROUPS = 4  # row groups being encoded at once (their Arrow bytes held)
_SLICE_BYTES = 16 << 20  # Arrow bytes of a row group encoded as column ranges side by side
_SLACK_BYTES = 1 << 20  # buffers a batch may reference beyond twice its own bytes before it is copied
OVERSHOOT = 1.25  # a row group may take its file this far past the target (x target)
_MIN_FULL = 0.75  # a file this full is finished rather than topped up with part of a group (x target)
_FULL_ROOM = 0.02  # a file with less room than this is about full: its next group starts a new one
_ROLL_ROWS = 1000  # rows a group is cut into at least (Java's rolling writer checks its size this often)
BUFFER_BYTES = 512 << 20  # Arrow bytes buffered across partitions by default (at least two row groups)


def write_table_data(
    io: FileIO, md: TableMetadata, data: Data, *, backend: str = "auto"
) -> list[ContentFile]:
    """Rows in the table's current schema and default spec, as appends, overwrites and upserts write them
    (bounds kept for the table's sort order columns): :func:`write_data_files` for ``md``."""
    return write_data_files(
        io, md.location, md.schema, md.spec, data, properties=md.properties, backend=backend,
        table_order=md.sort_order,
    )  # fmt: skip


def write_data_files(
    io: FileIO,
    location: str | LocationProvider,
    schema: Schema,
    spec: PartitionSpec,
    data: Data,
    *,
    properties: Mapping[str, str] | None = None,
    spec_id: int | None = None,
    backend: str = "auto",
    sort_order: SortOrder | None = None,
    table_order: SortOrder | None = None,
    buffer_bytes: int | None = None,
) -> list[ContentFile]:
    """Write ``data`` (matched to ``schema`` by column name) as Parquet data files; see the module doc.

    ``location``: the table location (files go to ``<location>/data/<partition path>/``) or a
    :class:`LocationProvider`. ``sort_order``: the order the caller wrote the rows in (recorded as the
    files' ``sort_order_id``; its columns get bounds). ``table_order``: the table's sort order, whose
    columns get bounds too (as Iceberg Java's writers keep them). ``buffer_bytes``: the Arrow bytes the
    partitions' buffered rows may take together (default :data:`BUFFER_BYTES`, or two row groups): past
    it, the partition holding the most is written out as a row group early (smaller row groups; the
    files' sizes follow the same rules). A compaction ties it to its file size, so that its memory does
    not grow with the partitions its rows go to. Files already written are deleted when it fails.
    """
    batches = record_batches(data)  # its kind checked before anything is written
    props = dict(properties or {})
    provider = location_provider(location, props)
    config = metrics_config(schema, props, sort_order=sort_order, table_order=table_order)
    options = WriteOptions.from_properties(props)
    workers = _workers()
    with ThreadPoolExecutor(workers) if workers > 1 else contextlib.nullcontext() as pool:
        writer = _Writer(io, provider, schema, spec, options, config, pool, workers, buffer_bytes)
        writer.spec_id = spec.spec_id if spec_id is None else spec_id
        writer.sort_order_id = None if sort_order is None else sort_order.order_id
        target = writer.arrow_schema
        try:
            for batch in batches:
                if len(target) == 0 and batch.num_rows > 0:
                    raise UnsupportedFeature(NOTHING_STORED)
                conformed = conform_batch(batch, schema, target)
                for key, part in split_by_partition(conformed, schema, spec, backend):
                    writer.add(key, part)
            return writer.finish()
        except BaseException:
            writer.abort()
            raise


def _workers() -> int:
    """Threads writing files side by side (pyarrow encodes and compresses without the GIL)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    return max(1, min(cores, _MAX_WORKERS))


# -- files ----------------------------------------------------------------------------------------------


@dataclass
class _OpenFile:
    path: str  # as recorded
    target: str  # resolved
    tmp: str  # local temporary file
    handle: SlotFile
    out: SpliceFile
    metrics: MetricsCollector
    partition: tuple[Any, ...]


@dataclass
class _Partition:
    key: tuple[Any, ...]
    buffer: list[pa.RecordBatch] = field(default_factory=list)
    nbytes: float = 0.0
    rows: int = 0
    file: _OpenFile | None = None  # the file its row groups land in (opened when one lands)
    inflight_bytes: float = 0.0  # Arrow bytes of its row groups being encoded
    disk_bytes: int = 0  # bytes of its row groups landed, on disk and as Arrow: its compression
    arrow_bytes: float = 0.0

    def ratio(self) -> float:
        """Bytes on disk per Arrow byte of its row groups landed (1 before any has)."""
        return self.disk_bytes / self.arrow_bytes if self.arrow_bytes else 1.0


@dataclass(frozen=True)
class _Encoding:
    """A row group of ``part`` being encoded on the pool (one part per range of its columns), its
    metrics counted beside it."""

    part: _Partition
    table: pa.Table
    parts: tuple[Future[EncodedPart], ...]
    metrics: Future[MetricsCollector]
    nbytes: float
    last: bool  # the partition's tail


class _Writer:
    def __init__(
        self,
        io: FileIO,
        provider: LocationProvider,
        schema: Schema,
        spec: PartitionSpec,
        options: WriteOptions,
        config: MetricsConfig,
        pool: ThreadPoolExecutor | None = None,
        workers: int = 1,
        buffer_bytes: int | None = None,
    ) -> None:
        self.io, self.provider, self.schema, self.spec = io, provider, schema, spec
        self.options, self.config = options, config
        self.pool = pool  # None: everything in this thread
        self.workers = max(1, workers)
        self.max_inflight = min(self.workers, _MAX_GROUPS)  # row groups encoding at once
        self.inflight: deque[_Encoding] = deque()  # in submission order, landed in that order
        self.spec_id = spec.spec_id
        self.sort_order_id: int | None = None
        self.parts: dict[tuple[Any, ...], _Partition] = {}
        self.done: list[ContentFile] = []
        self.prefix = str(uuid.uuid4())
        self.count = 0
        # Arrow bytes buffered by all partitions together before the fullest is written out early
        default = max(2 * options.row_group_size_bytes, BUFFER_BYTES)
        self.buffer_limit = default if buffer_bytes is None else max(1, buffer_bytes)
        self.buffered = 0.0  # Arrow bytes buffered now, all partitions together
        self.arrow_schema = write_schema(schema)
        self.column_ids = leaf_field_ids(self.arrow_schema)
        self.leaf_paths = list(self.column_ids)
        self.leaves = {f.name: {path for path, _ in leaf_paths(f)} for f in self.arrow_schema}
        self.writer_options = options.parquet_writer_options()
        self.bloom_paths = _bloom_paths(schema, self.column_ids, options.bloom_filters)
        self.files = OpenFiles()  # one per partition being written: a bounded number open at once
        self.footer: Struct | None = None  # the whole schema's footer, for row groups encoded in ranges

    def _target(self) -> int:
        return self.options.target_file_size_bytes

    def _group_limit(self, part: _Partition) -> float:
        """Arrow bytes of ``part``'s next row group: the row group size, and no more than the room left in
        its file (a new file's worth where that is about full) at its compression so far. Where a full
        group fits whatever its groups being encoded take (they take at most their Arrow bytes: data
        compress), no group is waited for; otherwise they are landed first, so the room and the
        compression are exact and the answer is the one a single thread gives."""
        rg, target = self.options.row_group_size_bytes, self._target()
        used = part.file.out.tell() if part.file is not None else 0
        if used + part.inflight_bytes + rg <= target:
            return rg
        while any(e.part is part for e in self.inflight):
            self._land_next()
        room = target - (part.file.out.tell() if part.file is not None else 0)
        if room < target * _FULL_ROOM:  # about full: the next group starts a file
            room = target
        return max(1.0, min(rg, room / part.ratio()))

    def add(self, key: tuple[Any, ...], batch: pa.RecordBatch) -> None:
        if batch.get_total_buffer_size() > 2 * batch.nbytes + _SLACK_BYTES:
            # a few rows sliced from a large batch (a cold partition's) would keep all of it while
            # buffered, unseen by the byte counts: copied out
            batch = pa.concat_batches([batch])
        part = self.parts.setdefault(partition_key(key), _Partition(key))
        per_row = batch.nbytes / max(batch.num_rows, 1)
        start, n = 0, batch.num_rows
        least = self.options.row_group_min_rows  # rows a group holds at least (Java checks its size then)
        while start < n:
            limit = self._group_limit(part)
            room = limit - part.nbytes
            need = max(1, least - part.rows)
            fits = int(room / per_row) if per_row else n - start
            take = min(n - start, max(need, fits))
            part.buffer.append(batch.slice(start, take))
            part.nbytes += take * per_row
            self.buffered += take * per_row
            part.rows += take
            start += take
            if start < n or (part.nbytes >= limit and part.rows >= least):
                self._flush(part)
        while self.buffered > self.buffer_limit:  # the partitions together: the fullest goes first
            fullest = max(self.parts.values(), key=lambda p: p.nbytes)
            if not fullest.buffer:  # only rounding left
                self.buffered = 0.0
            if self.buffered - fullest.nbytes < 1.0:  # a partition buffering alone fills its row group
                break
            self._flush(fullest)

    def _flush(self, part: _Partition, *, last: bool = False, max_inflight: int | None = None) -> None:
        """Encode ``part``'s buffered rows as one row group, on the pool where there is one: up to
        ``max_inflight`` groups at once while their Arrow bytes stay within the target file size (so
        memory stays about one file's worth). Groups land in their files in submission order
        (:meth:`_place` chooses the file)."""
        if not part.buffer:
            return
        table = pa.Table.from_batches(part.buffer)
        nbytes = part.nbytes
        part.buffer, part.nbytes, part.rows = [], 0.0, 0
        self.buffered -= nbytes
        part.inflight_bytes += nbytes
        if self.pool is None:
            self._land(part, table, self._encode(table), self._count(table), nbytes, last=last)
            return
        ranges = column_ranges(table, self.workers if table.nbytes >= _SLICE_BYTES else 1)
        if len(ranges) > 1 and self.footer is None:
            self.footer = schema_footer(self.arrow_schema, self.writer_options)
        pool = self.pool
        parts = tuple(
            pool.submit(self._encode, table, names if len(ranges) > 1 else None) for names in ranges
        )
        self.inflight.append(_Encoding(part, table, parts, pool.submit(self._count, table), nbytes, last))
        limit = max_inflight or self.max_inflight
        while self.inflight and (
            len(self.inflight) > limit
            or sum(e.nbytes for e in self.inflight) > self._target()  # memory: a file's worth at most
        ):
            self._land_next()

    def _encode(self, table: pa.Table, names: Sequence[str] | None = None) -> EncodedPart:
        """``table`` (only its columns ``names`` when given) as one row group, columns of distinct values
        plainly (:mod:`.dictionary_choice`), bloom filters sized for its rows."""
        if names is not None:
            table = table.select(list(names))
        leaves = self.leaf_paths
        if names is not None:  # by top-level column: a name may hold dots
            wanted = set().union(*(self.leaves[name] for name in names))
            leaves = [p for p in self.leaf_paths if p in wanted]
        options = {**self.writer_options, "use_dictionary": dictionary_columns(table, leaves)}
        if self.bloom_paths:
            options["bloom_filter_options"] = {
                p: {"ndv": self.options.bloom_ndv(table.num_rows, f), "fpp": f}
                for p, f in self.bloom_paths.items()
            }
        if names is None:
            return encode_row_group(table, self.arrow_schema, options)
        return encode_columns(table, self.arrow_schema, options, names)

    def _count(self, table: pa.Table) -> MetricsCollector:
        metrics = MetricsCollector(self.schema, self.config)
        metrics.add(table)
        return metrics

    def _land_next(self) -> None:
        """Wait for the oldest group being encoded and append it to its partition's file."""
        e = self.inflight[0]
        parts, metrics = [p.result() for p in e.parts], e.metrics.result()
        if len(parts) == 1:
            encoded = parts[0]
        else:
            assert self.footer is not None
            encoded = join_columns(parts, self.footer)
        self.inflight.popleft()
        self._land(e.part, e.table, encoded, metrics, e.nbytes, last=e.last)

    def _land(
        self,
        part: _Partition,
        table: pa.Table,
        encoded: EncodedPart,
        metrics: MetricsCollector,
        nbytes: float,
        *,
        last: bool,
    ) -> None:
        part.inflight_bytes -= nbytes
        part.disk_bytes += self._place(part, table, encoded, metrics, last=last)
        part.arrow_bytes += nbytes

    def _place(
        self,
        part: _Partition,
        table: pa.Table,
        encoded: EncodedPart,
        metrics: MetricsCollector,
        *,
        last: bool,
    ) -> int:
        """Append the row group ``encoded`` (``table``'s rows, counted in ``metrics``) to ``part``'s file;
        the bytes written. On its exact size: a file about full (less than ``_FULL_ROOM`` of the target
        left) takes no more groups but the partition's ``last``, and no file is taken past ``OVERSHOOT`` x the
        target: a group that would is put in a new file, or where the open file is less than
        ``_MIN_FULL`` x the target, its first rows (encoded again) top that up. A group larger than that
        on its own (its rows compress worse than those its size was judged by) is encoded again as
        several. Groups are cut into parts of ``_ROLL_ROWS`` rows at least."""
        target, size, n = self._target(), encoded.body_size, table.num_rows
        f = part.file
        if f is not None:
            used = f.out.tell()
            if used + size > target * OVERSHOOT and used < target * _MIN_FULL:
                rows = n * (target - used) // size
                if _ROLL_ROWS <= rows < n:
                    return self._split(part, table, [rows, n - rows], last=last)
            if used + size > target * OVERSHOOT or (target - used < target * _FULL_ROOM and not last):
                self.done.append(self._close(part))
                f = None
        if f is None and size > target * OVERSHOOT and n >= 2 * _ROLL_ROWS:
            pieces = min(n // _ROLL_ROWS, -(-size // target))
            counts = [n // pieces + (i < n % pieces) for i in range(pieces)]
            return self._split(part, table, counts, last=last)
        if f is None:
            f = part.file = self._open(part.key)
        written = f.out.append(encoded)
        f.metrics.merge(metrics)
        return written

    def _split(self, part: _Partition, table: pa.Table, counts: Sequence[int], *, last: bool) -> int:
        """``table`` encoded again as row groups of ``counts`` rows, each placed in turn (in this thread);
        the bytes written."""
        written, start = 0, 0
        for n in counts:
            piece = table.slice(start, n)
            start += n
            written += self._place(part, piece, self._encode(piece), self._count(piece), last=last)
        return written

    def _open(self, key: tuple[Any, ...]) -> _OpenFile:
        name = f"{self.prefix}-{self.count:05d}.parquet"
        self.count += 1
        ppath = partition_path(self.spec, self.schema, key) if self.spec.fields else None
        path = self.provider.new_data_location(name, ppath)
        target = self.io.resolve(path)
        tmp = staging_path(self.io, target, name)
        handle = self.files.create(tmp, path)
        try:
            out = SpliceFile(handle)
        except BaseException:
            handle.close()
            os.unlink(tmp)
            raise
        return _OpenFile(path, target, tmp, handle, out, MetricsCollector(self.schema, self.config), key)

    def _close(self, part: _Partition) -> ContentFile:
        """Finish ``part``'s open file and publish it (the groups landed so far are its rows); the caller
        records the result in ``done``."""
        f = part.file
        assert f is not None
        part.file = None
        try:
            try:
                f.out.close()
            except BaseException:
                f.handle.close()
                raise
            f.handle.close_synced()
            md = pq.read_metadata(f.tmp)
            done = self._content_file(f, md, os.path.getsize(f.tmp))
        except BaseException:
            os.unlink(f.tmp)
            raise
        publish(self.io, f.tmp, f.target, f.path)
        return done

    def _content_file(self, f: _OpenFile, md: pq.FileMetaData, size: int) -> ContentFile:
        return data_file_entry(
            f.path, md, size, f.metrics.result(), self.column_ids, self.config,
            spec_id=self.spec_id, partition=f.partition, sort_order_id=self.sort_order_id,
        )  # fmt: skip

    def finish(self) -> list[ContentFile]:
        """Write every partition's tail (encoded side by side where there is a pool) and close the files
        left open, side by side where there are several (``done`` lists them in partition order, as
        without a pool)."""
        for part in list(self.parts.values()):
            self._flush(part, last=True, max_inflight=self.workers)  # the tails are in memory already
        while self.inflight:
            self._land_next()
        pending = [p for p in self.parts.values() if p.file is not None]
        if self.pool is None or len(pending) < 2:
            for part in pending:
                self.done.append(self._close(part))
            return self.done
        jobs = [lambda part=part: self._close(part) for part in pending]
        self.done.extend(_run_all(self.pool, jobs, self.done))
        return self.done

    def abort(self) -> None:
        running: list[Future[Any]] = [*(p for e in self.inflight for p in e.parts)]
        running += [e.metrics for e in self.inflight]
        for future in running:
            future.cancel()
        wait(running)
        self.inflight.clear()
        for part in self.parts.values():
            if (f := part.file) is not None:
                f.handle.close()
                with contextlib.suppress(OSError):
                    os.unlink(f.tmp)
        for done in self.done:
            with contextlib.suppress(Exception):
                self.io.delete(self.io.resolve(done.path), missing_ok=True)


def _run_all(
    pool: ThreadPoolExecutor, jobs: Sequence[Callable[[], ContentFile]], done: list[ContentFile]
) -> list[ContentFile]:
    """The results of ``jobs`` run on ``pool``, in order. On the first failure (or an interrupt) the jobs
    not started yet are cancelled; every job has ended when this returns or raises, and then the files the
    finished jobs published are added to ``done`` (so an abort deletes them) and the failure is raised."""
    futures: list[Future[ContentFile]] = [pool.submit(job) for job in jobs]
    completed = False
    try:
        wait(futures, return_when=FIRST_EXCEPTION)
        completed = True
    finally:
        for fut in futures:
            fut.cancel()  # only those not started
        wait(futures)
        ok = [fut.result() for fut in futures if not fut.cancelled() and fut.exception() is None]
        if not completed or len(ok) < len(futures):
            done.extend(ok)
    failed = [exc for fut in futures if not fut.cancelled() and (exc := fut.exception()) is not None]
    if failed:
        raise failed[0]
    return ok


def _bloom_paths(
    schema: Schema, column_ids: Mapping[str, int], columns: Sequence[tuple[str, float]]
) -> dict[str, float]:
    """Parquet column paths of the bloom filter columns (Iceberg names: ``a.b``, ``l.element``), with their
    fpp; a name that is no primitive column of ``schema`` is passed over, as parquet-mr does."""
    path_of = {fid: path for path, fid in column_ids.items()}
    out = {}
    for name, fpp in columns:
        try:
            fid = schema.find_field(name).field_id
        except InvalidType:  # not a column of this schema (dropped, misspelt): no filter, as Java
            continue
        if fid in path_of:
            out[path_of[fid]] = fpp
    return out
