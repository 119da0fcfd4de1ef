"""Shared fixtures: the ``backend`` parameter runs each suite on the CPU and, where usable, on CUDA.

``cuda`` variants carry the ``gpu`` marker. They run on a real device, or under numba's CUDA simulator
in the second pytest process (``NUMBA_ENABLE_CUDASIM=1 pytest -m gpu``), and are skipped with the
probe's reason otherwise.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, settings

from gpu_engine.backend import probe_cuda

from .catalog import postgres_server
from .catalog.postgres_server import PostgresServer

SIMULATED = os.environ.get("NUMBA_ENABLE_CUDASIM") == "1"

settings.register_profile(
    "default",
    deadline=None,
    max_examples=60,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
# the simulator runs a Python thread per CUDA thread: few, small examples
settings.register_profile(
    "cudasim",
    deadline=None,
    max_examples=8,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
settings.load_profile("cudasim" if SIMULATED else os.environ.get("HYPOTHESIS_PROFILE", "default"))

BACKENDS = [pytest.param("cpu", id="cpu"), pytest.param("cuda", id="cuda", marks=pytest.mark.gpu)]


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    probe = probe_cuda()
    if probe.available:
        return
    skip = pytest.mark.skip(reason=f"needs a CUDA device: {probe.detail}")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresServer]:
    """One throwaway PostgreSQL server for the whole run (skipped, with the reason, where none can start)."""
    server = postgres_server.start()
    if isinstance(server, str):
        pytest.skip(f"no PostgreSQL server: {server}")
    yield server
    server.stop()
