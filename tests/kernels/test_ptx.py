"""Every CUDA kernel compiles to PTX for sm_80 and sm_90, without a GPU (NVVM from numba-cuda[cu13])."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from types import SimpleNamespace
from typing import Any

import pytest
from numba import config

from gpu_engine.kernels import bucket, deletes, scan, temporal, truncate, validity

pytestmark = pytest.mark.skipif(config.ENABLE_CUDASIM, reason="the simulator has no PTX compiler")


def kernels() -> Iterator[tuple[str, Callable[..., Any], str]]:
    for module in (bucket, deletes, truncate, temporal, validity):
        for k in module.KERNELS:
            assert k.ptx_signatures, f"{k.name} declares no PTX signature"
            for sig in k.ptx_signatures:
                yield k.name, k.cuda_py, sig
    for fn, sig in scan.PTX_KERNELS:
        yield fn.__name__, fn, sig


CASES = list(kernels())


@pytest.fixture(autouse=True)
def fake_device(monkeypatch: pytest.MonkeyPatch) -> None:
    # kernels calling device functions ask for the current device's compute capability
    import numba.cuda.dispatcher as dispatcher

    monkeypatch.setattr(dispatcher, "get_current_device", lambda: SimpleNamespace(compute_capability=(9, 0)))


@pytest.mark.parametrize("cc", [(8, 0), (9, 0)], ids=["sm_80", "sm_90"])
@pytest.mark.parametrize(("name", "fn", "sig"), CASES, ids=[f"{n}:{s}" for n, _, s in CASES])
def test_compiles_to_ptx(name: str, fn: Callable[..., Any], sig: str, cc: tuple[int, int]) -> None:
    from numba import cuda

    ptx, _ = cuda.compile_ptx(fn, sig, cc=cc)
    assert f".target sm_{cc[0]}{cc[1]}" in ptx
    assert ".entry" in ptx
