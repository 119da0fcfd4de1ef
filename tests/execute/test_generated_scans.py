"""Differential scans of generated tables: many small files with position deletes, deletion vectors and
equality deletes (written by tests/execute/gen_table.py, independently of the engine) scan to exactly the
rows the generator kept, at every snapshot, on every backend (CUDA runs on a GPU or in the simulator).
"""

from __future__ import annotations

from pathlib import Path

import pytest

import gpu_engine as ge

from ..conftest import SIMULATED
from .gen_table import GeneratedDeletesTable, generate
from .oracles import assert_same_rows

KINDS = {"position": 2, "dv": 3, "equality": 2, "upserts": 2, "mixed": 2}
_CACHE: dict[tuple[str, bool], GeneratedDeletesTable] = {}


@pytest.fixture(scope="module")
def tables(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, bool], GeneratedDeletesTable]:
    if not _CACHE:
        for kind, version in KINDS.items():
            for partitioned in (False, True):
                root = tmp_path_factory.mktemp(f"{kind}-{'part' if partitioned else 'flat'}")
                _CACHE[kind, partitioned] = generate(
                    root,
                    kind=kind,  # type: ignore[arg-type]
                    rows=240 if SIMULATED else 1200,  # the simulator runs a Python thread per CUDA thread
                    files=3 if SIMULATED else 6,
                    delete_fraction=0.1,
                    format_version=version,
                    seed=7 + len(_CACHE),
                    partitioned=partitioned,
                    row_group_rows=32 if SIMULATED else 64,
                )
    return _CACHE


@pytest.mark.parametrize("partitioned", [False, True], ids=["flat", "partitioned"])
@pytest.mark.parametrize("kind", list(KINDS))
def test_every_snapshot_scans_to_the_generated_rows(
    tables: dict[tuple[str, bool], GeneratedDeletesTable], kind: str, partitioned: bool, backend: str
) -> None:
    generated = tables[kind, partitioned]
    tbl = ge.load_table(Path(generated.metadata_location))
    for snapshot_id in generated.snapshots:
        scan = tbl.scan(
            snapshot_id=snapshot_id, backend=backend, columns=list(generated.expected.column_names)
        )
        actual = scan.to_arrow()
        expected = generated.expected_at[snapshot_id]
        assert_same_rows(
            actual, expected, context=f"{kind} partitioned={partitioned} @{snapshot_id} ({backend})"
        )
        run = scan.last_run
        assert run is not None and run.backend.name == backend
    current = tbl.scan(backend=backend, columns=list(generated.expected.column_names)).to_arrow()
    assert_same_rows(current, generated.expected, context=f"{kind} current ({backend})")


@pytest.mark.parametrize("kind", list(KINDS))
def test_filtered_and_limited_scans_agree_with_the_generated_rows(
    tables: dict[tuple[str, bool], GeneratedDeletesTable], kind: str
) -> None:
    generated = tables[kind, True]
    tbl = ge.load_table(Path(generated.metadata_location))
    expected = generated.expected
    ids = expected.column("id").to_pylist()
    pivot = sorted(i for i in ids if i is not None)[len(ids) // 3]
    actual = tbl.scan(filter=f"id < {pivot}", columns=list(expected.column_names)).to_arrow()
    assert_same_rows(actual, expected.filter(expected.column("id").to_numpy() < pivot), context=f"{kind} id<")
    limited = tbl.scan(limit=17).to_arrow()
    assert limited.num_rows == min(17, expected.num_rows)
