"""The only CPU/GPU decision: probe once, choose with an explicit reason, never fall back silently."""

from __future__ import annotations

import functools
import importlib.metadata
import logging
from dataclasses import dataclass
from typing import Literal

from ..errors import BackendUnavailable, UnsupportedFeature

BackendName = Literal["auto", "cpu", "cuda"]
BACKENDS: tuple[str, ...] = ("auto", "cpu", "cuda")
_log = logging.getLogger("gpu_engine.backend")


@dataclass(frozen=True)
class BackendChoice:
    """Where work runs (``cpu`` or ``cuda``) and why."""

    name: Literal["cpu", "cuda"]
    reason: str


@dataclass(frozen=True)
class CudaProbe:
    available: bool
    simulated: bool
    detail: str


@functools.cache
def probe_cuda() -> CudaProbe:
    """Whether numba.cuda can run kernels here (a real device, or the simulator when enabled)."""
    from numba import config, cuda

    if config.ENABLE_CUDASIM:
        return CudaProbe(True, True, "numba's CUDA simulator (NUMBA_ENABLE_CUDASIM=1)")
    try:
        if not cuda.is_available():
            return CudaProbe(False, False, "numba.cuda found no CUDA driver or device")
        device = cuda.get_current_device()
        cc = ".".join(map(str, device.compute_capability))
        name = device.name.decode() if isinstance(device.name, bytes) else str(device.name)
    except Exception as exc:  # driver or bindings errors: report them, do not hide them
        return CudaProbe(False, False, f"numba.cuda failed to initialise: {exc}")
    failure = kernel_compile_failure(tuple(device.compute_capability))
    if failure is not None:
        return CudaProbe(False, False, f"CUDA device {name} found, but {failure}")
    return CudaProbe(True, False, f"CUDA device {name} (compute capability {cc})")


def _probe_kernel(out):  # type: ignore[no-untyped-def]
    out[0] = 1


def kernel_compile_failure(cc: tuple[int, ...]) -> str | None:
    """Why numba-cuda cannot compile a kernel here, or None. A device can be present while every
    compile fails: numba-cuda 0.30 with NumPy 2.5 (``np.row_stack`` is gone) did so on an H200."""
    import numpy as np
    from numba import cuda

    try:
        cuda.compile_ptx(_probe_kernel, "void(int32[::1])", cc=cc)
    except Exception as exc:
        versions = f"numba-cuda {_version('numba-cuda')}, NumPy {np.__version__}"
        return f"numba-cuda cannot compile kernels here ({versions}): {type(exc).__name__}: {exc}"
    return None


def _version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "(version unknown)"


def check_backend_name(requested: str) -> None:
    """Refuse a ``backend=`` other than "auto", "cpu" or "cuda" (before any work is planned or shipped)."""
    if requested not in BACKENDS:
        raise UnsupportedFeature(f"backend={requested!r}: expected one of {', '.join(map(repr, BACKENDS))}")


def choose(requested: str, *, data_on_device: bool = False) -> BackendChoice:
    """Resolve ``backend=`` ("auto", "cpu" or "cuda") for data that is on the host or the device."""
    check_backend_name(requested)
    probe = probe_cuda()
    if requested == "cpu":
        if data_on_device:
            raise UnsupportedFeature(
                "backend='cpu' was requested but the values are in device memory; "
                "copy them to the host first (Column.to_host()) or use backend='cuda'"
            )
        choice = BackendChoice("cpu", "backend='cpu' requested")
    elif requested == "cuda":
        if not probe.available:
            raise BackendUnavailable(f"backend='cuda' was requested but {probe.detail}")
        choice = BackendChoice("cuda", f"backend='cuda' requested: {probe.detail}")
    elif data_on_device:
        if not probe.available:
            raise BackendUnavailable(f"the values are in device memory but {probe.detail}")
        choice = BackendChoice("cuda", "auto: the values are in device memory")
    elif probe.available:
        choice = BackendChoice("cuda", f"auto: {probe.detail}")
    else:
        choice = BackendChoice("cpu", f"auto: {probe.detail}")
    _log.debug("backend %s (%s)", choice.name, choice.reason)
    return choice
