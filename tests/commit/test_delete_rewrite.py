"""tbl.rewrite_position_deletes and tbl.convert_equality_deletes: rows unchanged for every reader, delete
files rewritten as the module says, validation against concurrent deletes, failures leave the old state."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from gpu_engine.commit import table_update
from gpu_engine.errors import InvalidOption, ValidationError
from gpu_engine.io.paths import normalize
from gpu_engine.io.position_deletes import load_position_deletes
from gpu_engine.table import Table

from ._support import assert_all_readers, ours, referenced_files, sql_catalog

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("name", pa.string())])


def _table(tmp_path: Path, version: int, spec: tuple[str, ...] = ("bucket(2, id)",)) -> Table:
    cat = sql_catalog(tmp_path)
    tbl = cat.create_table(
        "db.t",
        schema=SCHEMA,
        partition_spec=list(spec),
        properties={"format-version": str(version)},
    )
    for i in range(4):
        ids = np.arange(i * 100, (i + 1) * 100, dtype=np.int64)
        tbl.append(pa.table({"id": ids, "name": [f"n{j % 7}" for j in range(100)]}, schema=SCHEMA))
    return tbl


def _deletes(tbl: Table) -> dict[tuple[str, int | None], str]:
    return {(d.path, d.content_offset): d.kind for t in tbl.scan().plan().tasks for d in t.deletes}


def _positional(tbl: Table) -> None:
    for f in (
        "id in (3, 150)",
        "id in (4, 250)",
        "id in (5, 350)",
        "id in (6, 7)",
        "id in (8, 9)",
        "id = 10",
    ):
        tbl.delete(f)


def _equality(tbl: Table) -> None:
    tbl.delete_rows(pa.table({"id": pa.array([20, 21, 300], pa.int64())}), on=["id"])
    tbl.delete_rows(pa.table({"id": pa.array([22, 399], pa.int64())}), on=["id"])


@pytest.mark.parametrize("version", [2, 3])
def test_rewrite_position_deletes_keeps_rows_and_merges_files(tmp_path: Path, version: int) -> None:
    tbl = _table(tmp_path, version)
    _positional(tbl)
    _equality(tbl)
    before = ours(tbl)
    deletes_before = _deletes(tbl)
    result = tbl.rewrite_position_deletes(options={"rewrite-all": "true"})
    assert result.commit is not None
    head = tbl.metadata.current_snapshot()
    assert head is not None and head.summary is not None
    assert head.summary["operation"] == "replace"
    after = _deletes(tbl)
    positional = [k for k, kind in after.items() if kind != "equality"]
    if version == 2:  # one position delete file per partition (2 buckets)
        assert sorted(after[k] for k in positional) == ["position", "position"]
    else:  # one DV per data file with deletes
        assert all(after[k] == "dv" for k in positional)
        per_file = [sum(d.kind == "dv" for d in t.deletes) for t in tbl.scan().plan().tasks]
        assert max(per_file) == 1
    fewer = len(positional) < sum(kind != "equality" for kind in deletes_before.values())
    assert fewer or version == 3  # v3 deletes already are one DV per data file: rewritten, not fewer
    assert [k for k, kind in after.items() if kind == "equality"] == [
        k for k, kind in deletes_before.items() if kind == "equality"
    ]
    assert_all_readers(tbl, before, pyiceberg=False)


def test_v3_position_delete_files_become_dvs(tmp_path: Path) -> None:
    """A v2 table with position delete files upgraded to v3 (metadata rewritten as an upgrade does)."""
    tbl = _table(tmp_path, 2)
    _positional(tbl)
    upgraded = replace(tbl.metadata, format_version=3, next_row_id=0)
    path = table_update.metadata_path(upgraded, tbl.metadata_location, file_system_table=False)
    table_update.write_metadata(tbl.io, path, upgraded)
    catalog = tbl.catalog
    assert catalog is not None
    catalog.commit_metadata(tbl.identifier, tbl.metadata_location, path)
    tbl.refresh()
    before = ours(tbl)
    legacy = {k for k, kind in _deletes(tbl).items() if kind == "position"}
    assert legacy
    result = tbl.rewrite_position_deletes()
    assert result.commit is not None
    assert set(_deletes(tbl).values()) == {"dv"}
    assert legacy <= set(result.removed_delete_files)
    assert_all_readers(tbl, before, pyiceberg=False)


def test_dvs_only_need_no_rewrite(tmp_path: Path) -> None:
    tbl = _table(tmp_path, 3)
    tbl.delete("id in (1, 2, 101)")
    snapshot = tbl.metadata.current_snapshot_id
    assert tbl.rewrite_position_deletes().commit is None
    assert tbl.metadata.current_snapshot_id == snapshot


def test_min_input_files_decides_v2_partitions(tmp_path: Path) -> None:
    tbl = _table(tmp_path, 2, spec=())
    tbl.delete("id in (1, 2)")
    tbl.delete("id in (3)")
    snapshot = tbl.metadata.current_snapshot_id
    assert tbl.rewrite_position_deletes().commit is None  # fewer than 5 files per partition
    assert tbl.metadata.current_snapshot_id == snapshot
    assert tbl.rewrite_position_deletes(options={"min-input-files": "2"}).commit is not None
    snapshot = tbl.metadata.current_snapshot_id
    for _ in range(2):  # one file is left as it is, whatever min-input-files (Java's group.size() > 1)
        assert tbl.rewrite_position_deletes(options={"min-input-files": "1"}).commit is None
    assert tbl.metadata.current_snapshot_id == snapshot


def test_positions_of_removed_data_files_are_dropped(tmp_path: Path) -> None:
    cat = sql_catalog(tmp_path)
    tbl = cat.create_table("db.u", schema=SCHEMA, properties={"format-version": "2"})
    for i in range(2):
        ids = np.arange(i * 10, (i + 1) * 10, dtype=np.int64)
        tbl.append(pa.table({"id": ids, "name": ["x"] * 10}, schema=SCHEMA))
    tbl.delete("id in (1, 11)")  # one position delete file naming both data files
    tbl.delete("id < 10")  # the first file loses every row: it is removed, its positions dangle
    before = ours(tbl)
    tbl.rewrite_position_deletes(options={"rewrite-all": "true"})
    (d,) = {d for t in tbl.scan().plan().tasks for d in t.deletes}
    (survivor,) = {t.file.path for t in tbl.scan().plan().tasks}
    loaded = load_position_deletes(tbl.io, d)
    assert loaded.targets == {normalize(survivor)}
    assert list(loaded.positions_for(survivor)) == [1]
    assert_all_readers(tbl, before)


@pytest.mark.parametrize("version", [2, 3])
def test_convert_equality_deletes(tmp_path: Path, version: int) -> None:
    tbl = _table(tmp_path, version)
    _positional(tbl)
    _equality(tbl)
    before = ours(tbl)
    result = tbl.convert_equality_deletes(backend="cpu")
    assert result.commit is not None
    kinds = set(_deletes(tbl).values())
    assert "equality" not in kinds
    assert kinds == ({"dv"} if version == 3 else {"position"})
    if version == 3:
        assert max(sum(d.kind == "dv" for d in t.deletes) for t in tbl.scan().plan().tasks) == 1
    assert_all_readers(tbl, before)  # PyIceberg reads it now: no equality deletes left
    assert tbl.convert_equality_deletes().commit is None  # nothing left to convert


def test_concurrent_dv_fails_validation_and_keeps_rows(tmp_path: Path) -> None:
    tbl = _table(tmp_path, 3)
    _equality(tbl)
    other = sql_catalog(tmp_path).load_table("db.t")
    files_before = referenced_files(tbl)

    def race(stage: str) -> None:
        if stage == "manifest-list" and not raced:
            raced.append(stage)
            other.delete("id in (20, 21, 22, 23)")  # a DV for a file the conversion targets

    raced: list[str] = []
    rows = ours(tbl)
    expected = rows.filter(pc.invert(pc.is_in(rows["id"], pa.array([23], pa.int64()))))
    with pytest.raises(ValidationError, match="this delete rewrite"):
        tbl.convert_equality_deletes(faults=race)
    tbl.refresh()
    assert_all_readers(tbl, expected, pyiceberg=False)
    assert files_before <= referenced_files(tbl)  # nothing the table referenced was deleted


def test_failed_commit_deletes_what_it_wrote(tmp_path: Path) -> None:
    tbl = _table(tmp_path, 3)
    _equality(tbl)
    before = ours(tbl)
    data_dir = Path(tbl.location.removeprefix("file://")) / "data"
    listing = set(data_dir.rglob("*"))

    def fail(stage: str) -> None:
        if stage == "metadata":
            raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        tbl.convert_equality_deletes(faults=fail)
    assert set(data_dir.rglob("*")) == listing
    tbl.refresh()
    assert_all_readers(tbl, before, pyiceberg=False)


def test_bad_options(tmp_path: Path) -> None:
    tbl = _table(tmp_path, 2)
    with pytest.raises(InvalidOption, match="max-file-size"):
        tbl.rewrite_position_deletes(options={"max-file-size": "1"})
    with pytest.raises(InvalidOption, match="min-input-files"):
        tbl.rewrite_position_deletes(options={"min-input-files": "0"})


def test_maintenance_on_a_branch_that_does_not_exist_is_refused(tmp_path: Path) -> None:
    """A misspelt branch must not be created by the job, nor read as 'nothing to do'."""
    from ._support import rows, sql_catalog

    tbl = sql_catalog(tmp_path).create_table("db.b", rows(0, 0).schema, properties={"format-version": "2"})
    tbl.append(rows(0, 10))
    tbl.manage_snapshots().create_tag("t").commit()
    before = tbl.metadata_location
    for job in (tbl.rewrite_manifests, tbl.rewrite_position_deletes, tbl.convert_equality_deletes):
        with pytest.raises(ValidationError, match="no branch named 'nosuch'"):
            job(branch="nosuch")
        with pytest.raises(ValidationError, match="is a tag"):
            job(branch="t")
    assert tbl.refresh().metadata_location == before and set(tbl.metadata.refs) == {"main", "t"}


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (5, r"options=5: expected a mapping"),
        ("rewrite-all", r"options='rewrite-all': expected a mapping"),
        ([("rewrite-all", "true")], r"expected a mapping \(a dict\), not list"),
        (
            {"min-input-files": str(2**31)},
            r"min-input-files='2147483648': expected .* in 1\.\.2147483647",
        ),
    ],
)
def test_bad_options_are_invalid_options_naming_them(tmp_path: Path, options: object, message: str) -> None:
    """Options must be a mapping (5 raised a bare TypeError, a string was iterated per character) of
    values Java parses (min-input-files is an int)."""
    tbl = _table(tmp_path, 2)
    _positional(tbl)
    location = tbl.metadata_location
    with pytest.raises(InvalidOption, match=message):
        tbl.rewrite_position_deletes(options=options)  # type: ignore[arg-type]
    assert tbl.refresh().metadata_location == location
