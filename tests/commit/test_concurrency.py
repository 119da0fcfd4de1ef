"""Writer processes appending concurrently to one table in a SQL catalog (SQLite, and PostgreSQL where a
throwaway server can start): every commit lands exactly once, as its own snapshot, and every row is
present once."""

from __future__ import annotations

import multiprocessing
import os
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pytest

import gpu_engine as ge

from ..catalog.postgres_server import PostgresServer
from . import _writer
from ._support import CATALOG_NAME, duckdb_rows, pyiceberg_static, referenced_files, table_files

# many writers on two cores: short waits, many retries (the defaults are for real clusters)
PROPS = {
    "format-version": "3",
    "commit.retry.num-retries": "1000",
    "commit.retry.min-wait-ms": "20",
    "commit.retry.max-wait-ms": "400",
}
WRITERS = int(os.environ.get("COMMIT_TEST_WRITERS", "8"))
COMMITS = int(os.environ.get("COMMIT_TEST_COMMITS", "50"))
PER_COMMIT = 3


@pytest.fixture(params=["sqlite", "postgresql"])
def catalog_uri(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'catalog.db'}"
    server: PostgresServer = request.getfixturevalue("postgres")
    return server.new_database()


@pytest.mark.parametrize(("writers", "commits"), [(WRITERS, COMMITS)])
def test_writer_processes(
    request: pytest.FixtureRequest, tmp_path: Path, catalog_uri: str, writers: int, commits: int
) -> None:
    uri, warehouse = catalog_uri, str(tmp_path / "wh")
    cat = ge.load_catalog(CATALOG_NAME, uri=uri, warehouse=warehouse)
    request.addfinalizer(cat.close)
    cat.create_namespace("db")
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("writer", pa.int32())])
    tbl = cat.create_table("db.t", schema, partition_spec=["writer"], properties=PROPS)
    assert CATALOG_NAME == "writes"
    started = time.monotonic()
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(writers) as pool:
        jobs = [
            pool.apply_async(_writer.write, (uri, warehouse, w, commits, PER_COMMIT)) for w in range(writers)
        ]
        results = [j.get(timeout=600) for j in jobs]
    elapsed = time.monotonic() - started
    assert [r[0] for r in results] == [commits] * writers
    attempts = sum(r[1] for r in results)
    print(f"\n{writers} writers x {commits} commits: {elapsed:.1f} s, {attempts} attempts")

    tbl.refresh()
    md = tbl.metadata
    snaps = md.snapshots
    assert len(snaps) == writers * commits
    assert [s.sequence_number for s in snaps] == list(range(1, writers * commits + 1))
    chain = {s.snapshot_id: s.parent_snapshot_id for s in snaps}
    assert [s.parent_snapshot_id for s in snaps[1:]] == [s.snapshot_id for s in snaps[:-1]]
    assert len(chain) == len(snaps)
    # row id ranges follow each other; a commit that merges manifests also assigns a range to the existing
    # rows of its merged manifest (the spec's "simple and valid approach", as Java), which they do not use
    assert [s.first_row_id for s in snaps] == [
        sum(p.added_rows or 0 for p in snaps[:i]) for i in range(len(snaps))
    ]
    assert md.next_row_id == sum(s.added_rows or 0 for s in snaps) >= writers * commits * PER_COMMIT
    merges = [
        s
        for s in snaps
        if s.summary and s.summary["manifests-created"] == "1" and s.summary["manifests-replaced"] != "0"
    ]
    assert merges  # 400 commits of one manifest each: merged every 100 (commit.manifest.min-count-to-merge)
    assert [s.summary["total-records"] for s in snaps if s.summary][-1] == str(writers * commits * PER_COMMIT)
    expected = Counter(
        int(i)
        for w in range(writers)
        for c in range(commits)
        for i in _writer.rows_for(w, c, PER_COMMIT)["id"].to_pylist()
    )
    readers: dict[str, Callable[[], pa.Table]] = {
        "ours": lambda: tbl.scan().to_arrow(),
        "pyiceberg": lambda: pyiceberg_static(tbl),
        "duckdb": lambda: duckdb_rows(tbl),
    }
    for name, read in readers.items():
        got = Counter(int(i) for i in read().column("id").to_pylist())
        assert got == expected, (
            f"{name}: {sum((got - expected).values())} extra, {sum((expected - got).values())} missing"
        )
    row_ids = tbl.scan(columns=["_row_id"]).to_arrow().column("_row_id").to_pylist()
    assert len(set(row_ids)) == len(row_ids) == writers * commits * PER_COMMIT
    assert min(row_ids) == 0 and max(row_ids) < md.next_row_id
    # the losers' attempts were cleaned: only the snapshots' files and metadata files remain
    leftovers = table_files(tbl) - referenced_files(tbl)
    assert all(p.endswith(".metadata.json") for p in leftovers)
    assert len(leftovers) == writers * commits + 1
