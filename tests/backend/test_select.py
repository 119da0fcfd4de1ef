"""The backend decision: explicit, with a reason, never a silent fallback."""

from __future__ import annotations

import pytest

from gpu_engine.backend import select
from gpu_engine.errors import BackendUnavailable, UnsupportedFeature

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
