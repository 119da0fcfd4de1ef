"""What a Python worker of Spark keeps between tasks: the table metadata and the delete files its tasks
load. The mapInArrow bodies run here without Spark, as a worker runs them: one payload after another.
And the GPU a task runs on: the address Spark's resource scheduling assigned it
(``TaskContext.get().resources()["gpu"]``), read through a fake TaskContext, the device selection of numba
and CuPy mocked (no GPU needed)."""

from __future__ import annotations

import importlib.machinery
import pickle
import sys
import types
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import numba.cuda
import numpy as np
import pyarrow as pa
import pyspark
import pytest
from pyspark.resource import ResourceInformation

import gpu_engine.table
from gpu_engine.errors import GpuEngineError
from gpu_engine.execute.delete_cache import DeleteCache
from gpu_engine.execute.projection import project
from gpu_engine.io import fileio
from gpu_engine.spark import executor
from gpu_engine.table import Table

from ..commit._support import count_opens, sql_catalog

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("v", pa.int64())])


def _upserted(tmp_path: Path, rounds: int) -> Table:
    """An unpartitioned v2 table whose every commit upserts: every data file gains equality deletes."""
    tbl = sql_catalog(tmp_path).create_table("db.t", SCHEMA, properties={"format-version": "2"})
    rng = np.random.default_rng(7)
    for v in range(rounds):
        ids = rng.choice(50, 15, replace=False)
        tbl.upsert(
            pa.table({"id": pa.array(ids, pa.int64()), "v": pa.array([v] * 15, pa.int64())}), on=["id"]
        )
    return tbl


def _payloads(tbl: Table) -> Iterator[pa.RecordBatch]:
    plan = tbl.scan().plan()
    projection = project(tbl.metadata, plan.schema, None)
    for task in plan.tasks:
        payload = executor.ScanPayload(
            tbl.metadata_location,
            executor.stamp_of(tbl.metadata),
            tbl.io,
            plan.schema.schema_id,
            task,
            projection,
            "cpu",
        )
        yield pa.RecordBatch.from_pydict({"payload": [pickle.dumps(payload)]})


def test_a_worker_reads_each_delete_file_once_across_scan_tasks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tbl = _upserted(tmp_path, 6)
    plan = tbl.scan().plan()
    equality = {fileio.local_path(d.path) for t in plan.tasks for d in t.deletes}
    assert len(plan.tasks) >= 5 and len(equality) >= 5
    opened = count_opens(monkeypatch)
    monkeypatch.setattr(executor, "_DELETES", DeleteCache())
    rows = pa.Table.from_batches(list(executor.scan_batches(_payloads(tbl))))
    assert {p: opened[p] for p in equality} == dict.fromkeys(equality, 1)
    assert sorted(rows.to_pylist(), key=lambda r: r["id"]) == sorted(
        tbl.scan().to_arrow().to_pylist(), key=lambda r: r["id"]
    )


def test_a_worker_keeps_delete_files_across_commits_and_refreshes_what_depends_on_metadata(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tbl = _upserted(tmp_path, 5)
    monkeypatch.setattr(executor, "_DELETES", DeleteCache())
    list(executor.scan_batches(_payloads(tbl)))
    before = {fileio.local_path(d.path) for t in tbl.scan().plan().tasks for d in t.deletes}
    for v in (10, 11):
        tbl.upsert(
            pa.table({"id": pa.array([1, 2], pa.int64()), "v": pa.array([v, v], pa.int64())}), on=["id"]
        )
    now = {fileio.local_path(d.path) for t in tbl.scan().plan().tasks for d in t.deletes}
    assert before & now and now - before
    opened = count_opens(monkeypatch)
    rows = pa.Table.from_batches(list(executor.scan_batches(_payloads(tbl))))  # a new metadata location
    assert {p: opened[p] for p in now} == {p: int(p not in before) for p in now}
    assert sorted(rows.to_pylist(), key=lambda r: r["id"]) == sorted(
        tbl.scan().to_arrow().to_pylist(), key=lambda r: r["id"]
    )
    # equality keys are read per name mapping (files without field ids): another mapping reads them again
    mapping = '[{"field-id": 1, "names": ["id", "key"]}, {"field-id": 2, "names": ["v"]}]'
    tbl.update_properties().set("schema.name-mapping.default", mapping).commit()
    opened = count_opens(monkeypatch)
    list(executor.scan_batches(_payloads(tbl)))
    assert {p: opened[p] for p in now} == dict.fromkeys(now, 1)


def test_a_worker_keeps_the_latest_metadata_files_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tbl = _upserted(tmp_path, 1)
    monkeypatch.setattr(executor, "_METADATA", OrderedDict())
    keys = []
    for v in range(executor._METADATA_KEPT + 2):
        tbl.append(pa.table({"id": pa.array([v], pa.int64()), "v": pa.array([v], pa.int64())}))
        keys.append((tbl.metadata_location, executor.stamp_of(tbl.metadata)))
        assert executor._metadata(*keys[-1], tbl.io).location == tbl.metadata.location
    assert executor._metadata(*keys[2], tbl.io) is executor._metadata(*keys[2], tbl.io)
    assert list(executor._METADATA) == [*keys[3:], keys[2]]


def test_a_table_recreated_at_its_location_is_read_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file-system table writes v1.metadata.json again when re-created at its path: the worker must not
    take its cached metadata of the old table for the new one (their partition specs may differ)."""
    monkeypatch.setattr(executor, "_METADATA", OrderedDict())
    tbl = _upserted(tmp_path, 1)
    old = executor._metadata(tbl.metadata_location, executor.stamp_of(tbl.metadata), tbl.io)
    fresh = replace(
        tbl.metadata, table_uuid="another-table", last_updated_ms=tbl.metadata.last_updated_ms + 1
    )
    monkeypatch.setattr(
        gpu_engine.table, "read_metadata", lambda io, location: fresh
    )  # what the path holds now
    assert executor._metadata(tbl.metadata_location, executor.stamp_of(fresh), tbl.io) is fresh
    assert executor._metadata(tbl.metadata_location, executor.stamp_of(old), tbl.io) is old  # still cached
    with pytest.raises(GpuEngineError, match="no longer the file the driver planned with"):
        executor._metadata(tbl.metadata_location, ("yet-another", 1), tbl.io)


# -- the task's GPU: Spark's resource scheduling, seen through a fake TaskContext -------------------------


class _TaskContext:
    """What ``pyspark.TaskContext.get()`` returns inside a task, reduced to what the executor reads:
    ``resources()`` maps a resource name to Spark's ``ResourceInformation`` (its ``addresses`` are the
    strings the executor's GPU discovery script listed)."""

    def __init__(self, resources: dict[str, ResourceInformation]):
        self._resources = resources

    def resources(self) -> dict[str, ResourceInformation]:
        return self._resources

    def attemptNumber(self) -> int:  # noqa: N802 (PySpark's name)
        return 0


def _in_task(monkeypatch: pytest.MonkeyPatch, ctx: _TaskContext | None) -> None:
    """Run the rest of the test as if inside a Spark task with ``ctx`` (None: on the driver, no task)."""

    class _FakeTaskContext:
        @staticmethod
        def get() -> _TaskContext | None:
            return ctx

    monkeypatch.setattr(pyspark, "TaskContext", _FakeTaskContext)  # the executor imports it per call


def _gpus(*addresses: str) -> _TaskContext:
    return _TaskContext({"gpu": ResourceInformation("gpu", list(addresses))})


class _Bound:
    """Records the devices numba (``cuda.select_device``) and CuPy (``cupy.cuda.Device(i).use()``) are
    bound to; CuPy is a fake module installed in ``sys.modules`` (or marked absent with None)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, *, cupy: bool) -> None:
        self.numba: list[int] = []
        self.cupy: list[int] = []
        monkeypatch.setattr(numba.cuda, "select_device", self.numba.append)
        if not cupy:
            monkeypatch.setitem(sys.modules, "cupy", None)  # find_spec says None, as when not installed
            return
        bound = self.cupy

        class _Device:
            def __init__(self, index: int) -> None:
                self.index = index

            def use(self) -> None:
                bound.append(self.index)

        fake = types.ModuleType("cupy")
        fake.__spec__ = importlib.machinery.ModuleSpec("cupy", None)
        fake.cuda = types.SimpleNamespace(Device=_Device)  # type: ignore[attr-defined]
        monkeypatch.setitem(sys.modules, "cupy", fake)


def test_the_task_gpu_is_the_address_spark_assigned(monkeypatch: pytest.MonkeyPatch) -> None:
    """Spark's addresses are strings ("3"): the task gets that device index, the first when it holds
    several (an executor sharing out whole GPUs); taking any other (device 0, the last) puts every task
    of a multi-GPU executor on one device."""
    _in_task(monkeypatch, _gpus("3"))
    assert executor.task_gpu() == 3
    _in_task(monkeypatch, _gpus("1", "2"))
    assert executor.task_gpu() == 1


@pytest.mark.parametrize(
    "ctx",
    [
        None,  # the driver, or a worker outside a task: no TaskContext
        _TaskContext({}),  # a CPU-only cluster: no resources scheduled
        _TaskContext({"fpga": ResourceInformation("fpga", ["0"])}),  # other resources, no "gpu"
        _gpus(),  # a "gpu" resource with no address
    ],
    ids=["no-task", "no-resources", "no-gpu-resource", "no-address"],
)
def test_no_assigned_gpu_is_none_and_binds_nothing(
    monkeypatch: pytest.MonkeyPatch, ctx: _TaskContext | None
) -> None:
    """Outside GPU scheduling there is no task GPU: nothing is bound (the backend's own device choice
    stands), whatever the backend; binding device 0 there would pin every task to one GPU."""
    _in_task(monkeypatch, ctx)
    bound = _Bound(monkeypatch, cupy=True)
    assert executor.task_gpu() is None
    for backend in ("auto", "cuda", "cpu"):
        executor.bind_device(backend)
    assert (bound.numba, bound.cupy) == ([], [])


@pytest.mark.parametrize("address", ["GPU-5f3a", "0x1", "1.0", "-1", "", "٣"])
def test_a_malformed_gpu_address_is_a_clear_error(monkeypatch: pytest.MonkeyPatch, address: str) -> None:
    """An address that is not a CUDA device ordinal (a discovery script listing UUIDs, a negative or
    non-ASCII number int() would take) is an error naming it and the discovery script, not a bare
    ValueError from int() nor a device picked from a number that names no ordinal."""
    _in_task(monkeypatch, _gpus(address))
    with pytest.raises(GpuEngineError, match=r"GPU address .*discoveryScript") as raised:
        executor.task_gpu()
    assert repr(address) in str(raised.value)
    bound = _Bound(monkeypatch, cupy=True)
    with pytest.raises(GpuEngineError, match="GPU address"):
        executor.bind_device("auto")
    executor.bind_device("cpu")  # the CPU backend uses no GPU: it has no address to read
    assert (bound.numba, bound.cupy) == ([], [])


@pytest.mark.parametrize("backend", ["auto", "cuda"])
def test_a_gpu_backend_binds_numba_and_cupy_to_the_task_gpu(
    monkeypatch: pytest.MonkeyPatch, backend: str
) -> None:
    """The task's device becomes current for numba's kernels and for CuPy; binding another index (or
    not binding) runs every task on the executor's device 0."""
    _in_task(monkeypatch, _gpus("2"))
    bound = _Bound(monkeypatch, cupy=True)
    executor.bind_device(backend)
    assert (bound.numba, bound.cupy) == ([2], [2])


def test_without_cupy_only_numba_is_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    """CuPy is optional (the kernels need only numba): its absence is no error."""
    _in_task(monkeypatch, _gpus("1"))
    bound = _Bound(monkeypatch, cupy=False)
    executor.bind_device("auto")
    assert (bound.numba, bound.cupy) == ([1], [])


def test_the_cpu_backend_binds_no_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    """A task on the CPU backend touches no device even when Spark assigned it one (selecting it would
    create a CUDA context on the GPU for nothing, or fail on a machine whose driver is broken)."""
    _in_task(monkeypatch, _gpus("0"))
    bound = _Bound(monkeypatch, cupy=True)
    executor.bind_device("cpu")
    assert (bound.numba, bound.cupy) == ([], [])
