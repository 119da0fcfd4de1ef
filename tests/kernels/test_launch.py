"""Kernel launches: the numba-cuda low-occupancy warning is off while our launches run and the caller's
setting comes back after the last one (a warning per small launch failed 60% of the gpu tests on an H200
under ``-W error`` and would flood users' logs: small launches are this engine's normal case)."""

from __future__ import annotations

import threading
import warnings

import pyarrow as pa
import pytest
from numba import config

from gpu_engine import transforms
from gpu_engine.backend import probe_cuda
from gpu_engine.kernels.elementwise import KERNEL_LAUNCH

DEVICE_ONLY = pytest.mark.skipif(
    bool(config.ENABLE_CUDASIM) or not probe_cuda().available,
    reason="needs a real CUDA device (the simulator never warns about occupancy)",
)


@pytest.mark.skipif(bool(config.ENABLE_CUDASIM), reason="the simulator's launches take turns instead")
@pytest.mark.parametrize("setting", [0, 1, 7])
def test_the_warning_is_off_during_launches_and_the_callers_setting_returns(
    monkeypatch: pytest.MonkeyPatch, setting: int
) -> None:
    monkeypatch.setattr(config, "CUDA_LOW_OCCUPANCY_WARNINGS", setting)
    from numba.cuda import dispatcher  # the module whose launches read the setting

    with KERNEL_LAUNCH:
        assert dispatcher.config.CUDA_LOW_OCCUPANCY_WARNINGS == 0
        with KERNEL_LAUNCH:
            assert dispatcher.config.CUDA_LOW_OCCUPANCY_WARNINGS == 0
        assert dispatcher.config.CUDA_LOW_OCCUPANCY_WARNINGS == 0
    assert setting == config.CUDA_LOW_OCCUPANCY_WARNINGS


@pytest.mark.skipif(bool(config.ENABLE_CUDASIM), reason="the simulator's launches take turns instead")
def test_overlapping_launches_from_threads_restore_the_setting_once_all_end(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(config, "CUDA_LOW_OCCUPANCY_WARNINGS", 1)
    first_in, second_in, first_out = threading.Event(), threading.Event(), threading.Event()
    seen: list[int] = []

    def first() -> None:
        with KERNEL_LAUNCH:
            first_in.set()
            second_in.wait(5)
        first_out.set()

    def second() -> None:
        first_in.wait(5)
        with KERNEL_LAUNCH:
            second_in.set()
            first_out.wait(5)
            seen.append(config.CUDA_LOW_OCCUPANCY_WARNINGS)  # the first ended: still off for this one

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert seen == [0]
    assert config.CUDA_LOW_OCCUPANCY_WARNINGS == 1


@pytest.mark.gpu
@DEVICE_ONLY
def test_a_ten_row_transform_on_a_device_warns_nothing() -> None:
    values = pa.array(range(10), pa.int64())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = transforms.apply("bucket[16]", "long", values, backend="cuda")
    assert out == transforms.apply("bucket[16]", "long", values, backend="cpu")


@pytest.mark.gpu
def test_a_host_buffer_in_a_device_launch_is_refused_naming_the_kernel() -> None:
    if not probe_cuda().available:
        pytest.skip(probe_cuda().detail)
    import numpy as np
    from numba import cuda

    from gpu_engine.kernels import temporal

    out = cuda.device_array(4, dtype=np.int32)
    host = np.arange(4, dtype=np.int64)
    with pytest.raises(TypeError, match=r"kernel hour: argument 1 is a host array"):
        temporal.HOUR(4, out, host, 1)
    temporal.HOUR(4, out, cuda.to_device(host), 1)  # all on the device: runs
