"""Loop shapes: a scalar function becomes a parallel CPU loop (njit/prange) and a CUDA grid-stride kernel.

Each shape is one way of walking Arrow-layout buffers. ``Shape.build(scalar)`` returns an
:class:`ElementwiseKernel` holding both targets built from the same scalar function; calling it
dispatches on where the output buffer lives (NumPy array -> CPU, device array -> CUDA). Nothing moves
between host and device here: callers put the buffers where they want the work done.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numba
import numpy as np
from numba import config, cuda, njit, prange

THREADS_PER_BLOCK = 256
PARALLEL_FROM = 1 << 15  # fewer elements run serially on the CPU
_SIM_THREADS = 32  # the simulator runs a Python thread per CUDA thread: keep launches tiny


_SIMULATED_ARRAY: Any = cuda.devicearray.FakeCUDAArray if config.ENABLE_CUDASIM else ()


class _KernelLaunch:
    """Held around every kernel launch (``with KERNEL_LAUNCH:``).

    On a device: numba-cuda warns (``NumbaPerformanceWarning``) at each launch of fewer than 128 blocks.
    Small launches are this engine's normal case (a ten-row column, a file's few deletes), not a beginner's
    mistake, so the warning is off while any of our launches is in flight and the caller's setting is
    restored after the last one (counted, so threads launching at once do not lose it), as cuDF's
    ``_CUDFNumbaConfig`` does around its launches.

    Under numba's CUDA simulator: the simulator swaps the kernel module's ``cuda`` global while a kernel
    runs, so two launches from different threads at once break each other ("'Thread' object has no
    attribute 'blockIdx'"): launches take turns. For the same reason host code in kernel modules calls the
    functions bound below, never ``cuda.<name>`` at run time (the simulator may have swapped ``cuda`` for
    its kernel-side stand-in while another thread's kernel runs)."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._in_flight = 0
        self._saved: Any = None

    def __enter__(self) -> None:
        if config.ENABLE_CUDASIM:
            self._lock.acquire()
            return
        with self._lock:
            if self._in_flight == 0:
                self._saved = config.CUDA_LOW_OCCUPANCY_WARNINGS
                config.CUDA_LOW_OCCUPANCY_WARNINGS = 0
            self._in_flight += 1

    def __exit__(self, *exc: object) -> None:
        if config.ENABLE_CUDASIM:
            self._lock.release()
            return
        with self._lock:
            self._in_flight -= 1
            if self._in_flight == 0:
                config.CUDA_LOW_OCCUPANCY_WARNINGS = self._saved


KERNEL_LAUNCH = _KernelLaunch()
device_array = cuda.device_array
_as_cuda_array: Any = getattr(cuda, "as_cuda_array", None)  # the simulator has none (its arrays are fakes)


def is_device_array(obj: object) -> bool:
    """True for arrays in device memory (``__cuda_array_interface__``), numba's simulator fakes included."""
    return hasattr(obj, "__cuda_array_interface__") or isinstance(obj, _SIMULATED_ARRAY)


def as_device_array(obj: Any) -> Any:
    """A numba device array viewing ``obj`` (CuPy, cuDF, any ``__cuda_array_interface__``), no copy."""
    if isinstance(obj, _SIMULATED_ARRAY):
        return obj
    if not hasattr(obj, "__cuda_array_interface__"):
        raise TypeError(f"{type(obj).__name__} is not in device memory (no __cuda_array_interface__)")
    return _as_cuda_array(obj)


def _simulator_view(arg: Any) -> Any:
    """The NumPy array behind a simulator device array (kernels see it wrapped twice)."""
    while hasattr(arg, "_item"):
        arg = arg._item
    return getattr(arg, "_ary", arg)


def device_fn(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` as a CUDA kernel calls it. On a GPU it is the njit function itself (a device function);
    under the simulator the kernel body is Python, so array arguments are handed to the CPU-compiled
    ``fn`` as the NumPy arrays behind the simulated device memory."""
    if not config.ENABLE_CUDASIM:
        return fn

    def call(*args: Any) -> Any:
        return fn(*(_simulator_view(a) for a in args))

    return call


def launch_config(n: int) -> tuple[int, int]:
    """(blocks, threads) for a grid-stride loop over ``n`` elements."""
    if config.ENABLE_CUDASIM:
        return 1, _SIM_THREADS
    blocks = max(1, min((n + THREADS_PER_BLOCK - 1) // THREADS_PER_BLOCK, 65_535))
    return blocks, THREADS_PER_BLOCK


@dataclass(frozen=True)
class ElementwiseKernel:
    """The compiled targets of one scalar function in one loop shape: a parallel CPU loop, the same loop
    serial (small inputs: waking the thread pool costs milliseconds), and a CUDA kernel."""

    name: str
    cpu_py: Callable[..., None]  # the undecorated CPU loop (prange)
    cuda_py: Callable[..., None]  # the undecorated CUDA kernel body (for PTX compile checks)
    ptx_signatures: tuple[str, ...] = field(default=())

    @staticmethod
    def build(
        name: str, cpu_py: Callable[..., None], cuda_py: Callable[..., None], sigs: tuple[str, ...] = ()
    ) -> ElementwiseKernel:
        return ElementwiseKernel(name, cpu_py, cuda_py, sigs)

    # The loops are compiled in each process, not cached on disk: numba keys a cached closure by its
    # pickled cells, and a captured dispatcher pickles with a per-process uuid, so `cache=True` never hit
    # and added a data file per loop per process (127 MB in one checkout). Keying them by name instead
    # (tried) let loops over factory-made scalars, or over code edited meanwhile, load each other's code.
    @cached_property
    def cpu(self) -> Any:
        return njit(parallel=True)(self.cpu_py)

    @cached_property
    def cpu_serial(self) -> Any:
        return njit(self.cpu_py)  # prange runs as range

    @cached_property
    def cuda(self) -> Any:
        return cuda.jit(self.cuda_py)

    def __call__(self, n: int, *args: Any) -> None:
        """Run over ``n`` elements; args are buffers then scalar parameters, output buffer(s) first."""
        if n == 0:
            return
        if is_device_array(args[0]):
            _check_on_device(self.name, args)
            blocks, threads = launch_config(n)
            with KERNEL_LAUNCH:
                self.cuda[blocks, threads](n, *args)
        elif n < PARALLEL_FROM:
            self.cpu_serial(n, *args)
        elif _PARALLEL_LOOPS.concurrent_ok():
            self.cpu(n, *args)
        else:
            with _PARALLEL_LOOPS.turn:
                self.cpu(n, *args)


_kernel = ElementwiseKernel.build


class _ParallelLoops:
    """Whether parallel CPU loops may run from several threads at once. numba's ``workqueue`` threading
    layer (the one left where neither TBB nor OpenMP loads: a slim image without libgomp) aborts the
    process when they do ("Concurrent access has been detected"); a scan's worker threads run them side
    by side. There, and until the first loop has told which layer runs, loops take turns."""

    def __init__(self) -> None:
        self.turn = threading.Lock()
        self._ok: bool | None = None

    def concurrent_ok(self) -> bool:
        if self._ok is None:
            try:
                layer = numba.threading_layer()
            except ValueError:  # no parallel loop has run yet
                return False
            self._ok = layer != "workqueue"
        return self._ok


_PARALLEL_LOOPS = _ParallelLoops()


def _check_on_device(name: str, args: tuple[Any, ...]) -> None:
    """Every buffer of a device launch is in device memory: numba would copy a host array there and back
    at each launch (slow, and a NumbaPerformanceWarning), so a host buffer here is a caller's bug."""
    for i, arg in enumerate(args):
        if isinstance(arg, np.ndarray) and arg.ndim > 0:
            raise TypeError(f"kernel {name}: argument {i} is a host array but the output is on the device")


def fixed(name: str, fn: Callable[..., Any], sigs: tuple[str, ...] = ()) -> ElementwiseKernel:
    """``out[i] = fn(values[i], param)`` over fixed-width values."""

    def cpu_loop(n, out, values, param):  # type: ignore[no-untyped-def]
        for i in prange(n):
            out[i] = fn(values[i], param)

    dfn = device_fn(fn)

    def cuda_loop(n, out, values, param):  # type: ignore[no-untyped-def]
        for i in range(cuda.grid(1), n, cuda.gridsize(1)):
            out[i] = dfn(values[i], param)

    return _kernel(name, cpu_loop, cuda_loop, sigs)


def pairs(name: str, fn: Callable[..., Any], sigs: tuple[str, ...] = ()) -> ElementwiseKernel:
    """``out[i] = fn(words[2i], words[2i+1], param)`` over 128-bit values stored as int64 word pairs."""

    def cpu_loop(n, out, words, param):  # type: ignore[no-untyped-def]
        for i in prange(n):
            out[i] = fn(words[2 * i], words[2 * i + 1], param)

    dfn = device_fn(fn)

    def cuda_loop(n, out, words, param):  # type: ignore[no-untyped-def]
        for i in range(cuda.grid(1), n, cuda.gridsize(1)):
            out[i] = dfn(words[2 * i], words[2 * i + 1], param)

    return _kernel(name, cpu_loop, cuda_loop, sigs)


def pairs_to_pairs(name: str, fn: Callable[..., Any], sigs: tuple[str, ...] = ()) -> ElementwiseKernel:
    """``out[2i], out[2i+1] = fn(words[2i], words[2i+1], param)``: 128-bit in, 128-bit out."""

    def cpu_loop(n, out, words, param):  # type: ignore[no-untyped-def]
        for i in prange(n):
            lo, hi = fn(words[2 * i], words[2 * i + 1], param)
            out[2 * i] = lo
            out[2 * i + 1] = hi

    dfn = device_fn(fn)

    def cuda_loop(n, out, words, param):  # type: ignore[no-untyped-def]
        for i in range(cuda.grid(1), n, cuda.gridsize(1)):
            lo, hi = dfn(words[2 * i], words[2 * i + 1], param)
            out[2 * i] = lo
            out[2 * i + 1] = hi

    return _kernel(name, cpu_loop, cuda_loop, sigs)


def ranges(name: str, fn: Callable[..., Any], sigs: tuple[str, ...] = ()) -> ElementwiseKernel:
    """``out[i] = fn(data, offsets[i], offsets[i+1], param)`` over variable-length values."""

    def cpu_loop(n, out, data, offsets, param):  # type: ignore[no-untyped-def]
        for i in prange(n):
            out[i] = fn(data, offsets[i], offsets[i + 1], param)

    dfn = device_fn(fn)

    def cuda_loop(n, out, data, offsets, param):  # type: ignore[no-untyped-def]
        for i in range(cuda.grid(1), n, cuda.gridsize(1)):
            out[i] = dfn(data, offsets[i], offsets[i + 1], param)

    return _kernel(name, cpu_loop, cuda_loop, sigs)


def strided(name: str, fn: Callable[..., Any], sigs: tuple[str, ...] = ()) -> ElementwiseKernel:
    """``out[i] = fn(data, i*width, (i+1)*width, param)`` over fixed-size binary values."""

    def cpu_loop(n, out, data, width, param):  # type: ignore[no-untyped-def]
        for i in prange(n):
            out[i] = fn(data, i * width, (i + 1) * width, param)

    dfn = device_fn(fn)

    def cuda_loop(n, out, data, width, param):  # type: ignore[no-untyped-def]
        for i in range(cuda.grid(1), n, cuda.gridsize(1)):
            out[i] = dfn(data, i * width, (i + 1) * width, param)

    return _kernel(name, cpu_loop, cuda_loop, sigs)


def bits(name: str, fn: Callable[..., Any], sigs: tuple[str, ...] = ()) -> ElementwiseKernel:
    """``out[i] = fn(bit(bitmap, bit_offset + i), param)`` over an LSB-first bitmap (Arrow booleans)."""

    def cpu_loop(n, out, bitmap, bit_offset, param):  # type: ignore[no-untyped-def]
        for i in prange(n):
            j = bit_offset + i
            out[i] = fn((bitmap[j >> 3] >> (j & 7)) & 1, param)

    dfn = device_fn(fn)

    def cuda_loop(n, out, bitmap, bit_offset, param):  # type: ignore[no-untyped-def]
        for i in range(cuda.grid(1), n, cuda.gridsize(1)):
            j = bit_offset + i
            out[i] = dfn((bitmap[j >> 3] >> (j & 7)) & 1, param)

    return _kernel(name, cpu_loop, cuda_loop, sigs)


def indexed(name: str, fn: Callable[..., Any], sigs: tuple[str, ...] = ()) -> ElementwiseKernel:
    """``out[i] = fn(source, p1, p2, i)``: per-output-element gathers (bitmap re-packing)."""

    def cpu_loop(n, out, source, p1, p2):  # type: ignore[no-untyped-def]
        for i in prange(n):
            out[i] = fn(source, p1, p2, i)

    dfn = device_fn(fn)

    def cuda_loop(n, out, source, p1, p2):  # type: ignore[no-untyped-def]
        for i in range(cuda.grid(1), n, cuda.gridsize(1)):
            out[i] = dfn(source, p1, p2, i)

    return _kernel(name, cpu_loop, cuda_loop, sigs)


def as_host(array: Any) -> np.ndarray[Any, Any]:
    """Copy a device array to the host (tests and host results only)."""
    if is_device_array(array):
        return np.asarray(as_device_array(array).copy_to_host())
    return np.asarray(array)


def empty(like: Any, n: int, dtype: Any) -> Any:
    """An uninitialised array of ``n`` elements on the same side (host or device) as ``like``."""
    if is_device_array(like):
        return device_array(n, dtype=dtype)
    return np.empty(n, dtype=dtype)
