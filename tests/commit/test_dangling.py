"""Dangling delete files: an equality delete whose keys the column metrics rule out of every older data
file is dangling too, is removed in a ``replace`` snapshot, and no row changes."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from gpu_engine.commit.dangling import dangling_deletes, remove_dangling_deletes

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
