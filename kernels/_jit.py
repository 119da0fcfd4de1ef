"""Typed wrappers over numba's decorators: the one place the scalar compile options live."""

from collections.abc import Callable
from typing import Any, TypeVar, cast

import numpy as np
from numba import njit

F = TypeVar("F", bound=Callable[..., Any])
# What scalar functions see: Python ints when called from Python, int64 when compiled.
Int = int | np.integer[Any]


def scalar(fn: F) -> F:
    """Compile a per-element function for the CPU; CUDA kernels call the same object as a device function."""
    return cast(F, njit(cache=True)(fn))
