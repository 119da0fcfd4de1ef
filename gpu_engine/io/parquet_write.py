"""The write half: Arrow data -> Parquet data files with field ids and metrics, one partition per file.

:func:`write_data_files` checks and casts each batch to the table schema (:func:`conform_batch`), splits
its rows by partition tuple (transforms on ``backend``), buffers each partition's rows into row groups of
about ``write.parquet.row-group-size-bytes`` (Arrow bytes) and rolls to a new file before a row group
would take the file past ``write.target-file-size-bytes`` (bytes on disk, the next group estimated from
the compression seen so far). The last rows of a partition (less than a row group) always go into its
open file, so a file is at most the target plus one row group and only a partition's only file is
smaller than a row group. Files are written by pyarrow to a temporary file and published
create-exclusively (locally: a hard link in the target directory, as :meth:`LocalFileIO.write_bytes`).

Each row group's columns of distinct values are encoded plainly, the others with a dictionary
(:mod:`.dictionary_choice`, parquet-mr's fallback decided up front from the data alone).

Threads (pyarrow encodes, compresses and computes without the GIL): row groups are encoded on a pool, each
as a Parquet file in memory, and spliced in order into their file (:mod:`.parquet_splice`: the bytes are
those pyarrow writes for the same row groups on one thread), up to ``_MAX_GROUPS`` at a time while their
Arrow bytes stay within the target file size; their metrics are counted beside them. A row group of
``_SLICE_BYTES`` or more is encoded as ranges of its columns side by side, one per thread, joined into one
row group (one output file per compaction group used to be encoded by a few threads however many cores). At
the end the partitions' tails are written and their files closed side by side. Every decision (row group
cuts, rolling, file names) is taken in the calling thread in input order, and groups land in their files at
fixed points of that order (never "whenever one is done"), so the files, their bytes and their order do not
depend on timing. A file is rolled on its exact size, as with one thread; row group cuts of small files
(target below a row group) use the compression of the groups landed so far, which with several threads may
leave out the last few.

Parquet layout (Appendix A): field ids on every column, 3-level lists and maps, decimals as INT32 (P <= 9),
INT64 (P <= 18) or the minimal FIXED_LEN_BYTE_ARRAY (``store_decimal_as_integer``), uuid as
FIXED_LEN_BYTE_ARRAY(16) with the UUID logical type, times and timestamps in their unit (time with
``isAdjustedToUTC=false``), ``unknown`` columns omitted. Geometry, geography and variant columns are not
written (UnsupportedFeature). Files go where the table's location provider says (:mod:`.locations`).
"""

from __future__ import annotations

import contextlib
import os
import threading
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
) -> list[ContentFile]:
    """Write ``data`` (matched to ``schema`` by column name) as Parquet data files; see the module doc.

    ``location``: the table location (files go to ``<location>/data/<partition path>/``) or a
    :class:`LocationProvider`. ``sort_order``: the order the caller wrote the rows in (recorded as the
    files' ``sort_order_id``; its columns get bounds). ``table_order``: the table's sort order, whose
    columns get bounds too (as Iceberg Java's writers keep them). Files already written are deleted when
    it fails.
    """
    batches = record_batches(data)  # its kind checked before anything is written
    props = dict(properties or {})
    provider = location_provider(location, props)
    config = metrics_config(schema, props, sort_order=sort_order, table_order=table_order)
    options = WriteOptions.from_properties(props)
    workers = _workers()
    with ThreadPoolExecutor(workers) if workers > 1 else contextlib.nullcontext() as pool:
        writer = _Writer(io, provider, schema, spec, options, config, pool, workers)
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
    inflight_bytes: float = 0.0  # Arrow bytes of its row groups still being encoded


@dataclass
class _Partition:
    key: tuple[Any, ...]
    buffer: list[pa.RecordBatch] = field(default_factory=list)
    nbytes: float = 0.0
    rows: int = 0
    file: _OpenFile | None = None


@dataclass(frozen=True)
class _Encoding:
    """A row group of ``file`` being encoded on the pool (one part per range of its columns), its
    metrics counted beside it."""

    file: _OpenFile
    parts: tuple[Future[EncodedPart], ...]
    metrics: Future[MetricsCollector]
    nbytes: float


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
    ) -> None:
        self.io, self.provider, self.schema, self.spec = io, provider, schema, spec
        self.options, self.config = options, config
        self.pool = pool  # None: everything in this thread
        self.workers = max(1, workers)
        self.max_inflight = min(self.workers, _MAX_GROUPS)  # row groups encoding at once
        self.inflight: deque[_Encoding] = deque()  # in submission order: each file's groups in order
        self.lock = threading.Lock()  # the byte counts, updated by the pool's threads in finish
        self.spec_id = spec.spec_id
        self.sort_order_id: int | None = None
        self.parts: dict[tuple[Any, ...], _Partition] = {}
        self.done: list[ContentFile] = []
        self.disk_bytes = 0  # bytes written so far, on disk and as Arrow: the compression estimate
        self.arrow_bytes = 0.0
        self.prefix = str(uuid.uuid4())
        self.count = 0
        self.buffer_limit = max(2 * options.row_group_size_bytes, 512 << 20)  # all partitions together
        self.arrow_schema = write_schema(schema)
        self.column_ids = leaf_field_ids(self.arrow_schema)
        self.leaf_paths = list(self.column_ids)
        self.leaves = {f.name: {path for path, _ in leaf_paths(f)} for f in self.arrow_schema}
        self.writer_options = options.parquet_writer_options()
        self.bloom_paths = _bloom_paths(schema, self.column_ids, options.bloom_filters)
        self.files = OpenFiles()  # one per partition being written: a bounded number open at once
        self.footer: Struct | None = None  # the whole schema's footer, for row groups encoded in ranges

    def _ratio(self) -> float:
        return self.disk_bytes / self.arrow_bytes if self.arrow_bytes else 1.0

    def _group_limit(self) -> float:
        """Arrow bytes of a full row group: the row group size, and no more than a file's worth (the
        target over the compression seen so far). The first group's compression is waited for only where
        it can change the answer: with a target of two row groups or more, a file's worth falls below a
        row group only for data that take twice their Arrow size on disk."""
        rg, target = self.options.row_group_size_bytes, self.options.target_file_size_bytes
        if not self.arrow_bytes and self.inflight and target < 2 * rg:
            self._land_next()
        return max(1.0, min(rg, target / self._ratio()))

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
            limit = self._group_limit()
            room = limit - part.nbytes
            need = max(1, least - part.rows)
            fits = int(room / per_row) if per_row else n - start
            take = min(n - start, max(need, fits))
            part.buffer.append(batch.slice(start, take))
            part.nbytes += take * per_row
            part.rows += take
            start += take
            if start < n or (part.nbytes >= limit and part.rows >= least):
                self._flush(part, last=False)
        if sum(p.nbytes for p in self.parts.values()) > self.buffer_limit:
            self._flush(max(self.parts.values(), key=lambda p: p.nbytes), last=False)

    def _flush(self, part: _Partition, *, last: bool, inline: bool = False) -> None:
        """Write ``part``'s buffered rows as one row group: into its open file, or (when a full group would
        take the file past the target) a new one; ``last``: the partition's tail, into the open file.
        ``inline``: encode in this thread, else on the pool: up to ``max_inflight`` groups at once while
        their Arrow bytes stay within the target file size (so memory stays about one file's worth)."""
        if not part.buffer:
            return
        table = pa.Table.from_batches(part.buffer)
        nbytes = part.nbytes
        part.buffer, part.nbytes, part.rows = [], 0.0, 0
        f = part.file
        if f is not None and not last and self._full(f, nbytes):
            self.done.append(self._close(part))
            f = None
        if f is None:
            f = part.file = self._open(part.key)
        if inline or self.pool is None:
            self._land(f, self._encode(table), self._count(table), nbytes)
            return
        f.inflight_bytes += nbytes
        ranges = column_ranges(table, self.workers if table.nbytes >= _SLICE_BYTES else 1)
        if len(ranges) > 1 and self.footer is None:
            self.footer = schema_footer(self.arrow_schema, self.writer_options)
        pool = self.pool
        parts = tuple(
            pool.submit(self._encode, table, names if len(ranges) > 1 else None) for names in ranges
        )
        self.inflight.append(_Encoding(f, parts, pool.submit(self._count, table), nbytes))
        while self.inflight and (
            len(self.inflight) > self.max_inflight
            or sum(e.nbytes for e in self.inflight) > self._target()  # memory: a file's worth at most
        ):
            self._land_next()

    def _target(self) -> int:
        return self.options.target_file_size_bytes

    def _full(self, f: _OpenFile, nbytes: float) -> bool:
        """Whether ``nbytes`` more Arrow bytes would take ``f`` past the target. Said yes only on ``f``'s
        exact size: its groups being encoded are landed first (and the compression seen so far updated),
        so the answer is the one a single thread gives."""
        if f.out.tell() + (f.inflight_bytes + nbytes) * self._ratio() <= self._target():
            return False
        while any(e.file is f for e in self.inflight):
            self._land_next()
        return f.out.tell() + nbytes * self._ratio() > self._target()

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
            ndv = max(table.num_rows, 1)
            options["bloom_filter_options"] = {p: {"ndv": ndv, "fpp": f} for p, f in self.bloom_paths.items()}
        if names is None:
            return encode_row_group(table, self.arrow_schema, options)
        return encode_columns(table, self.arrow_schema, options, names)

    def _count(self, table: pa.Table) -> MetricsCollector:
        metrics = MetricsCollector(self.schema, self.config)
        metrics.add(table)
        return metrics

    def _land_next(self) -> None:
        """Wait for the oldest group being encoded and append it to its file."""
        e = self.inflight[0]
        parts, metrics = [p.result() for p in e.parts], e.metrics.result()
        if len(parts) == 1:
            part = parts[0]
        else:
            assert self.footer is not None
            part = join_columns(parts, self.footer)
        self.inflight.popleft()
        e.file.inflight_bytes -= e.nbytes
        self._land(e.file, part, metrics, e.nbytes)

    def _land(self, f: _OpenFile, part: EncodedPart, metrics: MetricsCollector, nbytes: float) -> None:
        written = f.out.append(part)
        f.metrics.merge(metrics)
        with self.lock:
            self.disk_bytes += written
            self.arrow_bytes += nbytes

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
        """Finish ``part``'s open file (its groups being encoded first) and publish it; the caller
        records the result in ``done``."""
        f = part.file
        assert f is not None
        while any(e.file is f for e in self.inflight):
            self._land_next()
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
        """Write every partition's tail into its open file and close it; with a pool and more than one
        partition left, partitions side by side (files opened here first, so names follow partition order
        and ``done`` lists the files in the same order as without a pool)."""
        pending = [p for p in self.parts.values() if p.buffer or p.file is not None]
        if self.pool is None or len(pending) < 2:
            for part in pending:
                self.done.append(self._finish(part, inline=False))
            return self.done
        while self.inflight:  # the pool's threads below touch only their own partition
            self._land_next()
        for part in pending:
            if part.file is None:
                part.file = self._open(part.key)
        jobs = [lambda part=part: self._finish(part, inline=True) for part in pending]
        self.done.extend(_run_all(self.pool, jobs, self.done))
        return self.done

    def _finish(self, part: _Partition, *, inline: bool) -> ContentFile:
        self._flush(part, last=True, inline=inline)
        return self._close(part)

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
