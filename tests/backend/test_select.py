"""The backend decision: explicit, with a reason, never a silent fallback."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pyarrow as pa
import pytest
from numba import config

import gpu_engine as ge
from gpu_engine import transforms
from gpu_engine.backend import select
from gpu_engine.errors import BackendUnavailable, UnsupportedFeature
from gpu_engine.table import Table

NO_GPU = select.CudaProbe(
    available=False, simulated=False, detail="numba.cuda found no CUDA driver or device"
)
GPU = select.CudaProbe(available=True, simulated=False, detail="CUDA device H100 (compute capability 9.0)")


def use(monkeypatch: pytest.MonkeyPatch, probe: select.CudaProbe) -> None:
    monkeypatch.setattr(select, "probe_cuda", lambda: probe)


def test_auto_without_gpu_picks_cpu_and_says_why(monkeypatch: pytest.MonkeyPatch) -> None:
    use(monkeypatch, NO_GPU)
    choice = select.choose("auto")
    assert choice.name == "cpu"
    assert "no CUDA driver" in choice.reason


def test_auto_with_gpu_picks_cuda(monkeypatch: pytest.MonkeyPatch) -> None:
    use(monkeypatch, GPU)
    assert select.choose("auto") == select.BackendChoice("cuda", f"auto: {GPU.detail}")


def test_cuda_without_gpu_is_an_error_naming_the_cause(monkeypatch: pytest.MonkeyPatch) -> None:
    use(monkeypatch, NO_GPU)
    with pytest.raises(BackendUnavailable, match=r"'cuda' was requested but numba\.cuda found no CUDA"):
        select.choose("cuda")


def test_device_data_without_gpu_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    use(monkeypatch, NO_GPU)
    with pytest.raises(BackendUnavailable, match="device memory"):
        select.choose("auto", data_on_device=True)


def test_cpu_on_device_data_is_refused_not_copied(monkeypatch: pytest.MonkeyPatch) -> None:
    use(monkeypatch, GPU)
    with pytest.raises(UnsupportedFeature, match="to_host"):
        select.choose("cpu", data_on_device=True)


def test_unknown_backend_names_the_option() -> None:
    with pytest.raises(UnsupportedFeature, match="backend='tpu'"):
        select.choose("tpu")


def test_real_probe_reports_a_reason() -> None:
    probe = select.probe_cuda()
    assert probe.detail
    assert probe.available or not probe.simulated


class _FakeDevice:
    name = b"NVIDIA H200"
    compute_capability = (9, 0)


@pytest.fixture
def fresh_probe() -> Iterator[None]:
    select.probe_cuda.cache_clear()
    yield
    select.probe_cuda.cache_clear()


@pytest.mark.skipif(bool(config.ENABLE_CUDASIM), reason="the simulator answers before any device check")
def test_a_device_whose_kernels_cannot_compile_is_unavailable_with_the_reason(
    monkeypatch: pytest.MonkeyPatch, fresh_probe: None
) -> None:
    """numba-cuda 0.30.4 with NumPy 2.5 on an H200: the device was found, every kernel compile failed
    (``np.row_stack``), and backend='cuda' and 'auto' both went on to fail inside the first scan."""
    from numba import cuda

    def no_compile(*args: object, **kwargs: object) -> None:
        raise AttributeError("module 'numpy' has no attribute 'row_stack'")

    monkeypatch.setattr(cuda, "is_available", lambda: True)
    monkeypatch.setattr(cuda, "get_current_device", lambda: _FakeDevice())
    monkeypatch.setattr(cuda, "compile_ptx", no_compile)
    probe = select.probe_cuda()
    assert not probe.available
    assert "NVIDIA H200 found, but numba-cuda cannot compile kernels here (numba-cuda " in probe.detail
    assert "row_stack" in probe.detail
    with pytest.raises(BackendUnavailable, match="row_stack"):
        select.choose("cuda")
    assert select.choose("auto").name == "cpu"


@pytest.mark.skipif(bool(config.ENABLE_CUDASIM), reason="the simulator answers before any device check")
def test_a_device_that_compiles_is_available(monkeypatch: pytest.MonkeyPatch, fresh_probe: None) -> None:
    from numba import cuda

    monkeypatch.setattr(cuda, "is_available", lambda: True)
    monkeypatch.setattr(cuda, "get_current_device", lambda: _FakeDevice())
    probe = select.probe_cuda()  # the real compile_ptx: NVVM compiles without a device
    assert probe == select.CudaProbe(True, False, "CUDA device NVIDIA H200 (compute capability 9.0)")


# -- every entry point refuses backend='cuda' without a device, kernel or not -----------------------------


def _table(tmp_path: Path) -> Table:
    cat = ge.load_catalog("c", uri=f"sqlite:///{tmp_path}/c.db", warehouse=(tmp_path / "wh").as_uri())
    cat.create_namespace("db")
    tbl = cat.create_table("db.t", ROWS.schema, properties={"format-version": "2"})  # unpartitioned
    tbl.append(ROWS)
    return tbl


ROWS = pa.table({"id": pa.array([1, 2, 3], pa.int64())})
CALLS: dict[str, Callable[[Table, str], object]] = {
    "append": lambda t, b: t.append(ROWS, backend=b),
    "overwrite": lambda t, b: t.overwrite(ROWS, "id = 1", backend=b),
    "dynamic_partition_overwrite": lambda t, b: t.dynamic_partition_overwrite(ROWS, backend=b),
    "delete": lambda t, b: t.delete("id = 1", backend=b),
    "upsert": lambda t, b: t.upsert(ROWS, ["id"], backend=b),
    "delete_rows": lambda t, b: t.delete_rows(ROWS, ["id"], backend=b),
    "convert_equality_deletes": lambda t, b: t.convert_equality_deletes(backend=b),
    "compact": lambda t, b: t.compact(backend=b),  # one file: no group to rewrite
    "transforms.apply identity": lambda t, b: transforms.apply("identity", "long", ROWS["id"], backend=b),
}


@pytest.mark.parametrize("call", CALLS)
def test_cuda_without_a_device_fails_even_where_no_kernel_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, call: str
) -> None:
    """README: 'cuda' without a usable device raises BackendUnavailable, never a silent fallback; an
    unpartitioned append, a delete_rows or a compaction with nothing to rewrite ran no kernel and so
    accepted it (and any name: 'gpu'). Nothing is committed."""
    tbl = _table(tmp_path)
    location = tbl.metadata_location
    use(monkeypatch, NO_GPU)
    with pytest.raises(BackendUnavailable, match="'cuda' was requested"):
        CALLS[call](tbl, "cuda")
    with pytest.raises(UnsupportedFeature, match="backend='gpu'"):
        CALLS[call](tbl, "gpu")
    assert tbl.refresh().metadata_location == location


@pytest.mark.parametrize(("probe", "expected"), [(NO_GPU, "cpu"), (GPU, "cuda")])
def test_a_compaction_without_groups_reports_the_backend_chosen(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, probe: select.CudaProbe, expected: str
) -> None:
    tbl = _table(tmp_path)
    use(monkeypatch, probe)
    result = tbl.compact(backend="auto")
    assert not result.commits and result.backend == expected
