"""Put kernel inputs where the backend under test runs: NumPy arrays (CPU) or device arrays (CUDA)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from numba import cuda

from gpu_engine.kernels.elementwise import as_host

Place = Callable[[np.ndarray[Any, Any]], Any]


@pytest.fixture
def place(backend: str) -> Place:
    if backend == "cuda":
        return lambda a: cuda.to_device(np.ascontiguousarray(a))
    return lambda a: np.ascontiguousarray(a)


@pytest.fixture
def host() -> Callable[[Any], np.ndarray[Any, Any]]:
    return as_host
