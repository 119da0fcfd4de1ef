"""Dangling delete files: an equality delete whose keys the column metrics rule out of every older data
file is dangling too, is removed in a ``replace`` snapshot, and no row changes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from gpu_engine.commit import compact as compact_module
from gpu_engine.commit.compact import CompactionResult
from gpu_engine.commit.dangling import dangling_deletes, remove_dangling_deletes
from gpu_engine.table import Table

from ._support import sql_catalog


def _ids(values: list[int | None]) -> pa.Table:
    return pa.table({"id": pa.array(values, pa.int64())})


def test_equality_deletes_whose_keys_miss_every_file_are_dangling(tmp_path: Path) -> None:
    schema = pa.schema([("id", pa.int64()), ("v", pa.string())])
    tbl = sql_catalog(tmp_path).create_table("db.t", schema, properties={"format-version": "2"})
    tbl.append(pa.table({"id": pa.array(range(100), pa.int64()), "v": ["x"] * 100}))
    tbl.delete_rows(_ids([5]), on=["id"])
    applies = {d.path for t in tbl.scan().plan().tasks for d in t.deletes}
    tbl.delete_rows(_ids([500, 501]), on=["id"])  # beyond every data file's id range
    tbl.delete_rows(_ids([None]), on=["id"])  # a null key, and no data file holds a null id
    live = {r["file_path"] for r in tbl.inspect.delete_files().to_pylist()}
    assert len(live) == 3
    dangling = {path for path, _ in dangling_deletes(tbl)}
    assert dangling == live - applies and len(dangling) == 2
    before = sorted(tbl.scan().to_arrow().column("id").to_pylist())
    removed, result = remove_dangling_deletes(tbl)
    assert removed == 2 and result is not None
    tbl.refresh()
    assert tbl.metadata.current_snapshot().operation == "replace"  # type: ignore[union-attr]
    assert {r["file_path"] for r in tbl.inspect.delete_files().to_pylist()} == applies
    assert (
        sorted(tbl.scan().to_arrow().column("id").to_pylist()) == before == [i for i in range(100) if i != 5]
    )


def _compact_racing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, race: str
) -> tuple[Table, CompactionResult]:
    """A compaction asked to remove dangling deletes; another writer commits ``race`` between its rewrite
    commit and its dangling-delete commit."""
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False)])
    tbl = sql_catalog(tmp_path).create_table("db.t", schema, properties={"format-version": "2"})
    tbl.append(_ids([1, 2, 3]))
    tbl.append(_ids([4, 5, 6]))
    tbl.delete_rows(_ids([2]), on=["id"])  # applies to the files read, dangling once they are rewritten
    other = sql_catalog(tmp_path).load_table("db.t")
    found = remove_dangling_deletes

    def racing(table: Table, **kw: Any) -> Any:
        other.refresh()
        if race == "delete":
            other.delete("id = 5", backend="cpu")
        else:
            other.compact(options={"rewrite-all": "true"}, backend="cpu")
        return found(table, **kw)

    monkeypatch.setattr(compact_module, "remove_dangling_deletes", racing)
    options = {
        "rewrite-all": "true",
        "use-starting-sequence-number": "false",
        "remove-dangling-deletes": "true",
    }
    return tbl, tbl.compact(options=options, backend="cpu")


def test_dangling_deletes_go_after_a_concurrent_delete(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A delete adds files of newer sequence numbers: the deletes found dangling stay dangling."""
    tbl, result = _compact_racing(tmp_path, monkeypatch, "delete")
    assert not result.failed and result.dangling_deletes_removed == 1 and len(result.commits) == 2
    assert sorted(tbl.refresh().scan(backend="cpu").to_arrow().column("id").to_pylist()) == [1, 3, 4, 6]
    assert all(r["content"] != 2 for r in tbl.inspect.delete_files().to_pylist())


def test_a_concurrent_rewrite_leaves_the_dangling_deletes_and_the_result_reports_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A replace may keep older sequence numbers, which the delete applies to: it stays, and the compaction
    that landed returns its result with the reason (it raised after its rewrite had committed)."""
    tbl, result = _compact_racing(tmp_path, monkeypatch, "replace")
    assert result.failed and not result.failures and len(result.commits) == 1
    assert (
        result.dangling_deletes_failure is not None and "ValidationError" in result.dangling_deletes_failure
    )
    assert result.to_json()["dangling-deletes-failure"] == result.dangling_deletes_failure
    assert sorted(tbl.refresh().scan(backend="cpu").to_arrow().column("id").to_pylist()) == [1, 3, 4, 5, 6]
