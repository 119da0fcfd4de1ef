"""Equality deletes on a column dropped from the table since they were written still apply: the scan reads
the dropped column of each data file by its field id, found in an older schema, under a name no current
column takes (:func:`gpu_engine.execute.projection.read_schema`, ``equality_schema``). A column added later
under the dropped one's name is another field: it is neither read in place of the old one nor matched by the
old column's deletes. Compaction (a scan of each group) applies them the same way. Expected rows come from
a plain-Python model of the table's history."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pytest

from gpu_engine.table import Table

from ..commit._support import sql_catalog

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("v", pa.string())])
FAST_RETRIES = {"commit.retry.min-wait-ms": "1", "commit.retry.max-wait-ms": "5"}
Row = dict[str, int | str | None]


@dataclass
class History:
    """A table and the model of its live rows: ``k_old`` is the first column ``k``, ``k_new`` the one added
    under that name after it was dropped; ``columns`` the model's columns the table has now."""

    tbl: Table
    backend: str
    live: list[Row] = field(default_factory=list)
    columns: dict[str, str] = field(default_factory=dict)  # the table's name -> the model's column

    def append(self, ids: range, k: list[int | None] | None = None) -> None:
        """Rows ``ids`` with ``v`` = "v<id>" and, while the table has a column ``k``, its values ``k``."""
        rows: list[Row] = [{"id": i, "v": f"v{i}", "k_old": None, "k_new": None} for i in ids]
        data: dict[str, pa.Array] = {
            "id": pa.array(list(ids), pa.int64()),
            "v": pa.array([r["v"] for r in rows], pa.string()),
        }
        if k is not None:
            assert len(k) == len(ids)
            data["k"] = pa.array(k, pa.int64())
            for r, value in zip(rows, k, strict=True):
                r[self.columns["k"]] = value
        self.tbl.append(pa.table(data), backend=self.backend)
        self.live += rows

    def delete_keys(self, keys: list[int | None]) -> None:
        """An equality delete on the current ``k``: the live rows whose value is a key go (NULL matches
        NULL); rows appended later stay, as the model's later appends do."""
        self.tbl.delete_rows(pa.table({"k": pa.array(keys, pa.int64())}), on=["k"], backend=self.backend)
        model = self.columns["k"]
        self.live = [r for r in self.live if r[model] not in keys]

    def add_k(self, model: str, default: int | None = None) -> None:
        """``k`` added, older rows reading ``default`` (v3's initial-default) for it."""
        with self.tbl.update_schema() as update:
            update.add_column("k", "long", default=default)
        self.columns["k"] = model
        for r in self.live:
            r[model] = default

    def drop_k(self) -> None:
        self.tbl.update_schema().delete_column("k").commit()
        del self.columns["k"]

    def expected(self, columns: list[str]) -> list[tuple[object, ...]]:
        names = {"id": "id", "v": "v", **self.columns}
        return sorted(tuple(r[names[c]] for c in columns) for r in self.live)

    def check(self) -> None:
        """The scan (all columns, and the id alone: a projection without the key) returns the model."""
        every = ["id", "v", *self.columns]
        got = self.tbl.scan(backend=self.backend).to_arrow()
        assert got.column_names == every
        assert sorted(zip(*(got.column(c).to_pylist() for c in every), strict=True)) == self.expected(every)
        ids = self.tbl.scan(columns=["id"], backend=self.backend).to_arrow()
        assert sorted(ids.column("id").to_pylist()) == [i for (i,) in self.expected(["id"])]


def history(tmp_path: Path, version: int, backend: str) -> History:
    """A table whose first rows predate ``k`` (null there), then rows with ``k`` (nulls too), then an
    equality delete on ``k`` of 1 and NULL, then rows with those keys again (a later sequence number: kept),
    and ``k`` dropped."""
    props = {"format-version": str(version), **FAST_RETRIES}
    h = History(sql_catalog(tmp_path).create_table("db.t", SCHEMA, properties=props), backend)
    h.append(range(0, 4))
    h.add_k("k_old")
    h.append(range(4, 24), [None if i % 7 == 0 else i % 4 for i in range(4, 24)])
    h.delete_keys([1, None])
    h.append(range(24, 28), [1, None, 2, 3])
    assert 0 < len(h.live) < 28
    h.drop_k()
    return h


@pytest.mark.parametrize("version", [2, 3])
def test_equality_deletes_on_a_dropped_column_still_delete(
    tmp_path: Path, version: int, backend: str
) -> None:
    """Reading the data files without the dropped column (or the deletes as matching nothing) would bring
    the deleted rows back: those with k = 1 and with k null, the rows before k existed among them."""
    h = history(tmp_path, version, backend)
    h.check()
    gone = {0, 1, 2, 3, 5, 7, 9, 13, 14, 17, 21}  # no k yet (null), k null (multiples of 7), k = 1
    assert sorted(r["id"] for r in h.live) == sorted(set(range(28)) - gone)  # type: ignore[type-var]


@pytest.mark.parametrize("version", [2, 3])
def test_a_column_re_added_under_the_dropped_name_is_another_column(
    tmp_path: Path, version: int, backend: str
) -> None:
    """The new ``k`` is null in every older row (the old ``k``'s values are not read for it); the old
    deletes (1 and NULL) match the old column only (matched against the new one by name, they would delete
    every older row, all null there); a delete on the new ``k`` matches its values only (2 is the old ``k``
    of rows that stay)."""
    h = history(tmp_path, version, backend)
    h.add_k("k_new")
    h.check()
    h.append(range(28, 36), [2, 1, None, 2, 5, 1, None, 7])
    h.check()
    assert any(r["k_old"] == 2 for r in h.live)
    h.delete_keys([2])
    h.check()
    assert any(r["k_old"] == 2 for r in h.live) and not any(r["k_new"] == 2 for r in h.live)


@pytest.mark.parametrize("version", [2, 3])
def test_compaction_applies_deletes_on_a_dropped_column(tmp_path: Path, version: int, backend: str) -> None:
    """A group is read as a scan: compacted after the drop, and again after ``k`` was re-added and deleted
    from, the table keeps the model's rows, in files holding no deleted row."""
    h = history(tmp_path, version, backend)
    result = h.tbl.compact(options={"rewrite-all": "true"}, backend=backend)
    assert result.rewritten_data_files > 0 and sum(g.rows for g in result.groups) == len(h.live)
    h.check()
    h.add_k("k_new")
    h.append(range(28, 36), [2, 1, None, 2, 5, 1, None, 7])
    h.delete_keys([2])
    result = h.tbl.compact(options={"rewrite-all": "true"}, backend=backend)
    assert sum(g.rows for g in result.groups) == len(h.live)
    h.check()


@pytest.mark.parametrize("keys", [[1], [None]], ids=["default", "null"])
def test_deletes_on_a_dropped_column_see_its_initial_default(
    tmp_path: Path, keys: list[int | None], backend: str
) -> None:
    """v3: rows written before ``k`` was added read its initial-default (1): a delete of k = 1 removes
    them and a delete of null keeps them, before and after ``k`` is dropped, and in the compacted files."""
    props = {"format-version": "3", **FAST_RETRIES}
    h = History(sql_catalog(tmp_path).create_table("db.t", SCHEMA, properties=props), backend)
    h.append(range(0, 4))
    h.add_k("k_old", default=1)
    h.append(range(4, 10), [1, None, 2, None, 1, 3])
    h.delete_keys(keys)
    h.check()
    assert {0, 1, 2, 3} & {r["id"] for r in h.live} == (set() if keys == [1] else {0, 1, 2, 3})
    h.drop_k()
    h.check()
    h.tbl.compact(options={"rewrite-all": "true"}, backend=backend)
    h.check()
