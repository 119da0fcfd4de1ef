"""A scan's equality sets follow its tasks, not the table: a task probes a set of its own equality delete
files (and at most older ones, which delete none of its rows), dropped after the last task using it; tasks
carrying the same files, or Flink-style nested ones (each data file deleted from by every later commit),
still share one set, and every delete file is still read once per scan (:mod:`.test_deletes`)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import gpu_engine.execute.deletes as dl
from gpu_engine.execute import equality
from gpu_engine.execute.deletes import DeleteLoader
from gpu_engine.execute.equality import EqualitySet
from gpu_engine.execute.scan import read_name_mapping
from gpu_engine.io import fileio
from gpu_engine.table import Table
from gpu_engine.tasks import DeleteFile

from ..commit._support import count_opens, sql_catalog

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("v", pa.int64())])
FILES, ROWS = 4, 1000


def _own_deletes_table(tmp_path: Path) -> tuple[Table, dict[str, set[int]]]:
    """Data files of disjoint id ranges, each deleted from by one equality delete file of its own range
    (the others' metrics rule it out): the deleted ids by delete file."""
    tbl = sql_catalog(tmp_path).create_table("db.t", SCHEMA, properties={"format-version": "2"})
    for k in range(FILES):
        ids = np.arange(k * ROWS, (k + 1) * ROWS)
        tbl.append(pa.table({"id": ids, "v": ids}, schema=SCHEMA))
    for k in range(FILES):
        keys = np.arange(k * ROWS, (k + 1) * ROWS, 3)
        tbl.delete_rows(pa.table({"id": keys}), on=["id"])
    deleted: dict[str, set[int]] = {}
    for task in tbl.scan().plan().tasks:
        (d,) = task.deletes  # one equality delete file per data file
        low = min(_ids(task.file.path))
        deleted[d.path] = set(range(low, low + ROWS, 3))
    assert len(deleted) == FILES
    return tbl, deleted


def _ids(path: str) -> list[int]:
    ids: list[int] = pq.read_table(fileio.local_path(path), columns=["id"]).column("id").to_pylist()
    return ids


def _spy_sets(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int]]:
    """(files, keys) of each equality set the scan builds."""
    built: list[tuple[int, int]] = []
    real = equality.load_equality_set

    def spy(io: Any, files: Sequence[DeleteFile], *args: Any, **kwargs: Any) -> EqualitySet:
        s = real(io, files, *args, **kwargs)
        built.append((len(files), len(s)))
        return s

    monkeypatch.setattr(dl, "load_equality_set", spy)
    return built


def test_each_task_probes_a_set_of_its_own_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tbl, deleted = _own_deletes_table(tmp_path)
    built = _spy_sets(monkeypatch)
    opened = count_opens(monkeypatch)
    got = sorted(tbl.scan(backend="cpu").to_arrow().column("id").to_pylist())
    gone = set().union(*deleted.values())
    assert got == [i for i in range(FILES * ROWS) if i not in gone]
    assert sorted(built) == sorted((1, len(keys)) for keys in deleted.values())  # not one set of all
    assert {p: opened[fileio.local_path(p)] for p in deleted} == dict.fromkeys(deleted, 1)


def test_a_set_is_dropped_after_its_last_task(tmp_path: Path) -> None:
    """Tasks run one after the other: each holds only its own deletes' keys, and nothing stays loaded
    once it is released (the keys alive at once are one task's)."""
    tbl, deleted = _own_deletes_table(tmp_path)
    md = tbl.metadata
    plan = tbl.scan().plan()
    loader = DeleteLoader(md, tbl.io, plan.schema, plan.tasks, "cpu", read_name_mapping(md))
    for task in plan.tasks:
        deletes = loader.for_task(task, task.file.record_count)
        (eq,) = deletes.equality
        (own,) = task.deletes
        assert eq.sources == (own.path,) and set(eq.keys[0].to_pylist()) == deleted[own.path]
        loader.release(task)
        assert len(loader.cache) == 0


def _upsert(tbl: Table, ids: np.ndarray, v: int) -> None:
    tbl.upsert(pa.table({"id": ids, "v": np.full(len(ids), v)}, schema=SCHEMA), on=["id"])


def test_flink_style_nested_deletes_share_one_set(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each commit deletes from every older data file: the data files carry nested sets of equality
    deletes, all served by the set of the oldest (the others it holds are older than their data)."""
    tbl = sql_catalog(tmp_path).create_table("db.t", SCHEMA, properties={"format-version": "2"})
    rng = np.random.default_rng(8)
    oracle: dict[int, int] = {}
    for v in range(6):
        ids = rng.choice(50, 15, replace=False)
        _upsert(tbl, ids, v)
        oracle.update(dict.fromkeys(ids.tolist(), v))
    carried = Counter(frozenset(d.path for d in t.deletes) for t in tbl.scan().plan().tasks)
    assert len(carried) >= 4
    built = _spy_sets(monkeypatch)
    got = tbl.scan(backend="cpu").to_arrow()
    assert sorted(zip(got.column("id").to_pylist(), got.column("v").to_pylist(), strict=True)) == sorted(
        oracle.items()
    )
    largest = max(len(files) for files in carried)
    assert built == [(largest, len(built) and built[0][1])]  # one set: the oldest data file's deletes


def test_a_task_not_known_up_front_gets_its_own_deletes(tmp_path: Path) -> None:
    tbl, deleted = _own_deletes_table(tmp_path)
    md = tbl.metadata
    first, *others = tbl.scan().plan().tasks
    loader = DeleteLoader(md, tbl.io, tbl.scan().plan().schema, (first,), "cpu", read_name_mapping(md))
    for task in others:
        (eq,) = loader.for_task(task, task.file.record_count).equality
        assert set(eq.keys[0].to_pylist()) == deleted[task.deletes[0].path]
