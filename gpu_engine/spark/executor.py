"""What runs inside Spark tasks: nothing but calls into :mod:`gpu_engine.execute`, plus the device choice.

Payloads travel as pickled, frozen values in a binary column: a :class:`GroupPayload` (a compaction file
group), a :class:`ScanPayload` (a scan task) or a :class:`ChangesPayload` (one snapshot's changes).
Executors read the table metadata from its file once per Python worker (cached by location and the
``stamp`` the driver read there: a file-system table re-created at its path writes ``v1.metadata.json``
again, so a location alone can name another table) and run the
same pure functions a single process runs. Each Python worker keeps the delete files its tasks load for
the next tasks of the same table metadata (:mod:`gpu_engine.execute.delete_cache`, bounded as Iceberg
Java's executor cache): a Flink table's tasks share most of their equality deletes. On a GPU
cluster the task's GPU is the one Spark assigned to it (``TaskContext.resources()["gpu"]``): the task
binds numba and CuPy to that device before running.
"""

from __future__ import annotations

import importlib.util
import os
import pickle
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa

from ..errors import GpuEngineError
from ..execute.changelog import execute_changelog
from ..execute.delete_cache import DeleteCache
from ..execute.group_rewrite import rewrite_file_group
from ..execute.projection import Projection
from ..execute.scan import execute
from ..iceberg.metadata import TableMetadata
from ..io.fileio import FileIO
from ..planning.changelog import ChangelogPlan
from ..tasks import FileGroup, PlanSummary, RewriteStrategy, ScanPlan, ScanTask

Stamp = tuple[str | None, int]
"""What tells one metadata file from another written at the same location: table uuid, last-updated-ms."""


def stamp_of(md: TableMetadata) -> Stamp:
    return (md.table_uuid, md.last_updated_ms)


RESULT_SCHEMA = pa.schema([("group_index", pa.int64()), ("result", pa.binary())])
RESULT_DDL = "group_index bigint, result binary"


@dataclass(frozen=True)
class GroupPayload:
    metadata_location: str
    stamp: Stamp
    io: FileIO
    group: FileGroup
    strategy: RewriteStrategy
    backend: str
    parquet_io: str = "pyarrow"  # see gpu_engine.execute.group_rewrite ("auto" decided on the executor)
    fail_attempts: int = 0  # test hook: attempts (Spark's attemptNumber) below this fail, ...
    crash_after_write: bool = False  # ... by raising before writing, or by killing the worker after it


@dataclass(frozen=True)
class ScanPayload:
    metadata_location: str
    stamp: Stamp
    io: FileIO
    schema_id: int
    task: ScanTask
    projection: Projection
    backend: str


@dataclass(frozen=True)
class ChangesPayload:
    metadata_location: str
    stamp: Stamp
    io: FileIO
    plan: ChangelogPlan  # one snapshot's change tasks
    columns: tuple[str, ...] | None
    backend: str
    remove_carry_overs: bool
    update_keys: tuple[str, ...]


_METADATA: OrderedDict[tuple[str, Stamp], TableMetadata] = OrderedDict()
"""Per Python worker, the metadata files its latest tasks read, by location and stamp; a worker that lives
across many commits keeps the last :data:`_METADATA_KEPT` only."""
_METADATA_KEPT = 8


def _metadata(location: str, stamp: Stamp, io: FileIO) -> TableMetadata:
    from ..table import read_metadata

    key = (location, stamp)
    md = _METADATA.get(key)
    if md is None:
        md = read_metadata(io, location)
        if stamp_of(md) != stamp:
            raise GpuEngineError(
                f"table metadata {location} is no longer the file the driver planned with (table uuid and "
                f"last-updated-ms {stamp_of(md)}, planned {stamp}): the table was re-created; plan again"
            )
        _METADATA[key] = md
        while len(_METADATA) > _METADATA_KEPT:
            _METADATA.popitem(last=False)
    _METADATA.move_to_end(key)
    return md


_DELETES = DeleteCache()
"""Per Python worker, for all its tasks: delete files never change once written, and what is kept is
keyed by the file it was read from (equality keys also by table, schema, name mapping and backend), so
tables, commits and jobs the worker alternates between share one bounded cache."""


def task_gpu() -> int | None:
    """The GPU Spark assigned to the running task (its first address), None outside GPU scheduling.
    An address that is not a CUDA device ordinal (ASCII digits) is a :class:`GpuEngineError` naming it."""
    from pyspark import TaskContext

    ctx = TaskContext.get()
    if ctx is None:
        return None
    gpus = ctx.resources().get("gpu")
    if gpus is None or not gpus.addresses:
        return None
    address = gpus.addresses[0]
    if not (isinstance(address, str) and address.isascii() and address.isdigit()):
        raise GpuEngineError(
            f"Spark assigned this task GPU address {address!r} (of {list(gpus.addresses)}), not a CUDA "
            "device ordinal such as '0': the executors' GPU discovery script "
            "(spark.executor.resource.gpu.discoveryScript) must list device indexes"
        )
    return int(address)


def bind_device(backend: str) -> None:
    """Make the task's GPU current for numba and CuPy when the backend may use it (the CPU backend reads
    no GPU address)."""
    if backend == "cpu":
        return
    gpu = task_gpu()
    if gpu is None:
        return
    from numba import cuda

    cuda.select_device(gpu)
    if importlib.util.find_spec("cupy") is not None:  # CuPy is optional: the kernels need only numba
        import cupy

        cupy.cuda.Device(gpu).use()


def _attempt() -> int:
    from pyspark import TaskContext

    ctx = TaskContext.get()
    return 0 if ctx is None else ctx.attemptNumber()


def rewrite_batches(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """mapInArrow body: each row's :class:`GroupPayload` -> a row of (group index, pickled RewriteResult).
    A failure raises, so Spark retries the task (``spark.task.maxFailures``); a failed rewrite has deleted
    the files it wrote."""
    for batch in batches:
        for raw in batch.column("payload").to_pylist():
            payload: GroupPayload = pickle.loads(raw)
            failing = _attempt() < payload.fail_attempts
            if failing and not payload.crash_after_write:
                raise RuntimeError(f"injected failure of group {payload.group.index}, attempt {_attempt()}")
            bind_device(payload.backend)
            md = _metadata(payload.metadata_location, payload.stamp, payload.io)
            kept = _DELETES
            result = rewrite_file_group(
                md, payload.io, payload.group, payload.strategy, parquet_io=payload.parquet_io,
                backend=payload.backend, delete_cache=kept,
            )  # fmt: skip
            if failing:
                os._exit(17)  # a worker killed after writing: its files stay behind, unreferenced
            yield pa.RecordBatch.from_pydict(
                {"group_index": [payload.group.index], "result": [pickle.dumps(result)]}, schema=RESULT_SCHEMA
            )


def scan_batches(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """mapInArrow body of a distributed scan: each row's :class:`ScanPayload` -> the task's rows."""
    for batch in batches:
        for raw in batch.column("payload").to_pylist():
            payload: ScanPayload = pickle.loads(raw)
            bind_device(payload.backend)
            md = _metadata(payload.metadata_location, payload.stamp, payload.io)
            schema = md.schema_by_id(payload.schema_id)
            plan = ScanPlan(schema, payload.task.residual, (payload.task,), PlanSummary(None, tasks=1))
            kept = _DELETES
            _, out = execute(
                md,
                payload.io,
                plan,
                payload.projection,
                backend=payload.backend,
                workers=1,
                delete_cache=kept,
            )
            yield from out


def changes_batches(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """mapInArrow body of a distributed changelog: each row's :class:`ChangesPayload` -> its snapshot's
    change rows (carry-overs removed and updates paired there, as a single process does per snapshot)."""
    for batch in batches:
        for raw in batch.column("payload").to_pylist():
            payload: ChangesPayload = pickle.loads(raw)
            bind_device(payload.backend)
            md = _metadata(payload.metadata_location, payload.stamp, payload.io)
            _, out = execute_changelog(
                md,
                payload.io,
                payload.plan,
                payload.columns,
                backend=payload.backend,
                workers=1,
                remove_carry_overs=payload.remove_carry_overs,
                update_keys=payload.update_keys,
                delete_cache=_DELETES,
            )
            yield from out
