"""Snapshot commits through a REST catalog (the test server of tests/catalog, which applies
``add-snapshot`` and ``set-snapshot-ref`` as Iceberg Java does): appends, deletes and a compaction land
and read back by every reader; a lost race retries; a 503 after the server applied the commit is an
unknown state that deletes nothing."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest

import gpu_engine as ge
from gpu_engine.catalog.rest import RestCatalog
from gpu_engine.errors import CommitStateUnknown

from ..catalog.rest_server import RestCatalogServer
from ._support import assert_all_readers, referenced_files, rows

PROPS = {"commit.retry.min-wait-ms": "1", "commit.retry.max-wait-ms": "5"}


@pytest.fixture
def server(tmp_path: Path) -> Iterator[RestCatalogServer]:
    srv = RestCatalogServer(tmp_path / "server").start()
    yield srv
    srv.stop()
    assert not srv.errors, srv.errors


def _catalog(server: RestCatalogServer, tmp_path: Path) -> RestCatalog:
    cat = ge.load_catalog("rest", uri=server.url, credential="client:secret", warehouse=str(tmp_path / "wh"))
    assert isinstance(cat, RestCatalog)
    return cat


@pytest.mark.parametrize("version", [2, 3])
def test_append_delete_compact_through_rest(server: RestCatalogServer, tmp_path: Path, version: int) -> None:
    cat = _catalog(server, tmp_path)
    cat.create_namespace("db")
    tbl = cat.create_table(
        "db.t",
        rows(0, 0).schema,
        partition_spec=["region"],
        properties={"format-version": str(version), **PROPS},
    )
    expected = pa.concat_tables([rows(0, 30), rows(30, 30, seed=1)])
    tbl.append(rows(0, 30))
    tbl.append(rows(30, 30, seed=1))
    tbl.delete("id < 5")
    expected = expected.filter(pa.compute.greater_equal(expected["id"], 5))
    result = tbl.compact(options={"rewrite-all": "true"}, backend="cpu")
    assert result.commits and not result.failures
    reloaded = cat.load_table("db.t")
    assert reloaded.metadata_location == tbl.metadata_location
    assert [s.summary["operation"] for s in reloaded.metadata.snapshots if s.summary] == [
        "append", "append", "delete", "replace",
    ]  # fmt: skip
    if version == 3:  # the server moved next-row-id past each snapshot's rows, as we assigned them
        for before, after in zip(reloaded.metadata.snapshots, reloaded.metadata.snapshots[1:], strict=False):
            assert before.first_row_id is not None and before.added_rows is not None
            assert after.first_row_id == before.first_row_id + before.added_rows
        last = reloaded.metadata.snapshots[-1]
        assert last.first_row_id is not None and last.added_rows is not None
        assert reloaded.metadata.next_row_id == last.first_row_id + last.added_rows
    assert_all_readers(reloaded, expected)


def test_a_lost_race_retries(server: RestCatalogServer, tmp_path: Path) -> None:
    cat = _catalog(server, tmp_path)
    cat.create_namespace("db")
    tbl = cat.create_table("db.t", rows(0, 0).schema, properties={"format-version": "2", **PROPS})
    other = cat.load_table("db.t")
    tbl.append(rows(0, 10))
    result = other.append(rows(10, 10, seed=1))  # planned on the old head: the server refuses, it retries
    assert result.commit.attempts == 2
    assert_all_readers(cat.load_table("db.t"), pa.concat_tables([rows(0, 10), rows(10, 10, seed=1)]))


def test_503_after_apply_is_unknown_and_keeps_files(server: RestCatalogServer, tmp_path: Path) -> None:
    cat = _catalog(server, tmp_path)
    cat.create_namespace("db")
    tbl = cat.create_table("db.t", rows(0, 0).schema, properties={"format-version": "2", **PROPS})
    tbl.append(rows(0, 10))
    server.faults.append("commit-503")
    with pytest.raises(CommitStateUnknown, match="503"):
        tbl.append(rows(10, 10, seed=1))
    landed = cat.load_table("db.t")  # the server applied it: every file it references is still there
    assert all(Path(p.removeprefix("file://")).exists() for p in referenced_files(landed))
    assert_all_readers(landed, pa.concat_tables([rows(0, 10), rows(10, 10, seed=1)]))
