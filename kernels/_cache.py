"""numba's on-disk cache for the kernels, keyed so that one process finds what another compiled.

numba keys a cached closure by its pickled cells. Our loops (``elementwise``) are closures over a scalar
dispatcher, and a dispatcher pickles with a uuid drawn per process: no process ever loaded a loop another
had compiled, each compiled them again (seconds at every start: the scan bench's cold first call took 10 to
17 s on 16 cores) and added a data file per loop (127 MB of them in one checkout's ``__pycache__``). numba
also checks only the source file of the function it caches, not the files of the functions compiled into
it, and leaves compile options out of the key (a parallel and a serial loop over one function collide).

Here the key names a captured dispatcher by its module and qualified name, carries the compile options,
and a digest of every kernel source file: editing any kernel recompiles them all; nothing stale loads.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from numba import njit
from numba.core.caching import FunctionCache
from numba.core.dispatcher import Dispatcher
from numba.core.serialize import dumps

KERNEL_SOURCES = Path(__file__).resolve().parent


@functools.cache
def sources_digest(root: Path = KERNEL_SOURCES) -> str:
    """sha256 over the relative paths and contents of the ``*.py`` files under ``root``."""
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()


def _cell_key(value: Any) -> str:
    if isinstance(value, Dispatcher):
        fn = value.py_func
        return f"dispatcher {fn.__module__}.{fn.__qualname__}"
    if value is None or isinstance(value, bool | int | float | str | bytes):
        return f"{type(value).__name__} {value!r}"
    return "pickled " + hashlib.sha256(dumps(value)).hexdigest()  # numba's own rule for anything else


def closure_key(fn: Callable[..., Any]) -> tuple[str, ...]:
    """What a function's closure cells stand for, stable across processes."""
    cells = getattr(fn, "__closure__", None) or ()
    return tuple(_cell_key(cell.cell_contents) for cell in cells)


class KernelCache(FunctionCache):  # type: ignore[misc]  # numba is untyped (Any)
    """numba's FunctionCache (same files, same index) with the key described above."""

    def __init__(self, py_func: Callable[..., Any], options: str) -> None:
        super().__init__(py_func)
        self._options = options

    def _index_key(self, sig: Any, codegen: Any) -> tuple[Any, ...]:
        code = hashlib.sha256(self._py_func.__code__.co_code).hexdigest()
        stable = (code, closure_key(self._py_func), self._options, sources_digest())
        return (sig, codegen.magic_tuple(), stable)


def cached_njit(fn: Callable[..., Any], **options: Any) -> Any:
    """``njit(**options)(fn)`` with its compiled code kept on disk under the key above."""
    dispatcher = njit(**options)(fn)
    dispatcher._cache = KernelCache(dispatcher.py_func, repr(sorted(options.items())))
    return dispatcher
