"""``Table.overwrite``: rows matching a filter replaced in one ``overwrite`` snapshot (merge-on-read or
copy-on-write by ``write.delete.mode``), read the same by our scan, PyIceberg and DuckDB; the isolation
levels of overwrites and deletes (``write.delete.isolation-level``) against concurrent appends; failures
leave nothing behind."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from gpu_engine.errors import ExpressionError, InvalidOption, InvalidProperty, SchemaMismatch, ValidationError

from ._support import (
    appending,
    assert_all_readers,
    raise_at,
    referenced_files,
    region_table,
    rows,
    table_files,
    without_matches,
)


@pytest.mark.parametrize(
    ("version", "mode"), [(1, None), (2, "merge-on-read"), (3, "merge-on-read"), (3, "copy-on-write")]
)
def test_overwrite_replaces_matching_rows_in_one_snapshot(
    tmp_path: Path, version: int, mode: str | None
) -> None:
    tbl = region_table(tmp_path, version, **({"write.delete.mode": mode} if mode else {}))
    data = pa.concat_tables([rows(0, 40), rows(40, 40, seed=1)])
    tbl.append(data.slice(0, 40))
    tbl.append(data.slice(40))
    parent = tbl.metadata.current_snapshot_id
    new = rows(1000, 15, seed=7)

    result = tbl.overwrite(new, "region = 'eu' or id < 10")
    replaced = pc.or_kleene(pc.equal(data["region"], "eu"), pc.less(data["id"], 10))
    expected = pa.concat_tables([without_matches(data, replaced), new])
    assert result.deleted_rows == data.num_rows - without_matches(data, replaced).num_rows > 0
    assert result.added_rows == 15 and result.files
    head = tbl.metadata.current_snapshot()
    assert head is not None and head.parent_snapshot_id == parent  # one snapshot
    assert (head.summary or {})["operation"] == "overwrite"
    assert int((head.summary or {})["total-records"]) >= expected.num_rows
    if mode == "merge-on-read":  # the partially matched files got delete files
        assert any(f.content != 0 for f in result.delete_side)
    else:
        assert all(f.content == 0 for f in result.delete_side)
    assert_all_readers(tbl, expected)
    assert table_files(tbl) - referenced_files(tbl) == {
        str(p) for p in Path(tbl.location, "metadata").glob("*.metadata.json")
    }


def test_overwrite_without_a_filter_replaces_everything(tmp_path: Path) -> None:
    tbl = region_table(tmp_path, 2)
    tbl.append(rows(0, 30))
    tbl.delete("id < 3")
    new = rows(500, 10, seed=3)
    result = tbl.overwrite(new)
    assert result.deleted_rows == 27
    tasks = tbl.scan().plan().tasks
    assert {t.file.path for t in tasks} == {f.path for f in result.files}  # old files all removed
    assert not [d for t in tasks for d in t.deletes]
    assert_all_readers(tbl, new)


def test_overwrite_with_no_rows_of_the_tables_columns_empties_it(tmp_path: Path) -> None:
    tbl = region_table(tmp_path, 2)
    tbl.append(rows(0, 30))
    result = tbl.overwrite(rows(0, 0))
    assert result.deleted_rows == 30 and tbl.scan().to_arrow().num_rows == 0


def test_overwrite_of_an_empty_table_is_an_append_in_an_overwrite_snapshot(tmp_path: Path) -> None:
    tbl = region_table(tmp_path, 3)
    new = rows(0, 10)
    result = tbl.overwrite(new, "id > 5")
    assert result.deleted_rows == 0 and result.added_rows == 10
    assert_all_readers(tbl, new)


@pytest.mark.parametrize("mode", ["merge-on-read", "copy-on-write"])
def test_serializable_overwrite_fails_on_matching_rows_appended_meanwhile(tmp_path: Path, mode: str) -> None:
    tbl = region_table(tmp_path, 3, **{"write.delete.mode": mode})
    data = rows(0, 40)
    tbl.append(data)
    other = tbl.catalog.load_table(tbl.identifier)  # type: ignore[union-attr]
    extra = rows(100, 10, seed=9)  # every region: may match "region = 'us'"
    files = table_files(tbl)
    with pytest.raises(
        ValidationError, match=r"may hold rows matching this overwrite's filter.*serializable"
    ):
        tbl.overwrite(rows(900, 5), "region = 'us'", faults=appending(other, extra))
    tbl.refresh()
    assert_all_readers(tbl, pa.concat_tables([data, extra]))  # the overwrite left nothing
    written = {p for p in table_files(tbl) - files if p.endswith(".parquet")}
    assert written <= referenced_files(tbl)  # only the concurrent append's files are new

    # snapshot isolation keeps the rows appended meanwhile
    more = rows(200, 10, seed=11)
    result = tbl.overwrite(
        rows(900, 5),
        "region = 'us'",
        isolation="snapshot",
        faults=appending(other, more),
    )
    assert result.commit.attempts == 2
    before = pa.concat_tables([data, extra])
    expected = pa.concat_tables(
        [without_matches(before, pc.equal(before["region"], "us")), more, rows(900, 5)]
    )
    assert_all_readers(tbl, expected, pyiceberg=True)


def test_rows_appended_meanwhile_that_cannot_match_do_not_conflict(tmp_path: Path) -> None:
    tbl = region_table(tmp_path, 2)
    data = rows(0, 40)
    tbl.append(data)
    other = tbl.catalog.load_table(tbl.identifier)  # type: ignore[union-attr]
    extra = rows(1000, 10, seed=2)  # ids >= 1000: the metrics rule out "id < 20"
    result = tbl.overwrite(rows(500, 5), "id < 20", faults=appending(other, extra))
    assert result.commit.attempts == 2
    expected = pa.concat_tables([without_matches(data, pc.less(data["id"], 20)), extra, rows(500, 5)])
    assert_all_readers(tbl, expected)


@pytest.mark.parametrize(("level", "fails"), [(None, True), ("serializable", True), ("snapshot", False)])
def test_delete_isolation_level_property(tmp_path: Path, level: str | None, fails: bool) -> None:
    tbl = region_table(tmp_path, 3, **({"write.delete.isolation-level": level} if level else {}))
    data = rows(0, 40)
    tbl.append(data)
    other = tbl.catalog.load_table(tbl.identifier)  # type: ignore[union-attr]
    extra = rows(100, 10, seed=9)
    if fails:
        with pytest.raises(ValidationError, match="may hold rows matching this delete's filter"):
            tbl.delete("region = 'us'", faults=appending(other, extra))
        assert_all_readers(tbl.refresh(), pa.concat_tables([data, extra]))
    else:
        tbl.delete("region = 'us'", faults=appending(other, extra))
        expected = pa.concat_tables([without_matches(data, pc.equal(data["region"], "us")), extra])
        assert_all_readers(tbl.refresh(), expected)
    # the argument overrides the property, both ways
    before = tbl.refresh().scan().to_arrow()
    more = rows(300, 10, seed=12).cast(before.schema)
    hook = appending(other.refresh(), more)
    if fails:  # the property is serializable: the argument relaxes it, the appended "eu" rows stay
        tbl.delete("region = 'eu'", isolation="snapshot", faults=hook)
        expected = pa.concat_tables([without_matches(before, pc.equal(before["region"], "eu")), more])
    else:  # the property is snapshot: the argument tightens it
        with pytest.raises(ValidationError, match="may hold rows matching this delete's filter"):
            tbl.delete("region = 'eu'", isolation="serializable", faults=hook)
        expected = pa.concat_tables([before, more])
    assert_all_readers(tbl.refresh(), expected)


@pytest.mark.parametrize("stage", ["data", "manifest", "manifest-list", "metadata", "swap"])
def test_a_failed_overwrite_commits_nothing_and_leaves_nothing(tmp_path: Path, stage: str) -> None:
    tbl = region_table(tmp_path, 3, **{"write.delete.mode": "copy-on-write"})
    tbl.append(rows(0, 30))
    location, files = tbl.metadata_location, table_files(tbl)
    _, hook = raise_at(stage, OSError(f"injected at {stage}"))
    with pytest.raises(OSError, match=f"injected at {stage}"):
        tbl.overwrite(rows(100, 5), "id < 10", faults=hook)
    assert tbl.refresh().metadata_location == location
    assert table_files(tbl) == files


def test_bad_input_is_refused_before_anything_is_committed(tmp_path: Path) -> None:
    tbl = region_table(tmp_path, 3, **{"write.delete.mode": "copy-on-write"})
    tbl.append(rows(0, 30))
    location, files = tbl.metadata_location, table_files(tbl)
    with pytest.raises(ExpressionError, match="nope"):
        tbl.overwrite(rows(100, 5), "nope = 1")
    with pytest.raises(SchemaMismatch):
        tbl.overwrite(pa.table({"other": [1, 2]}), "id < 10")
    for empty in (
        pa.table({"other": pa.array([], pa.int64())}),
        rows(0, 0).set_column(0, "id", pa.array([], pa.string())),  # a wrong type
    ):
        with pytest.raises(SchemaMismatch):  # no rows, but not the table's columns: it deleted every row
            tbl.overwrite(empty)
        with pytest.raises(SchemaMismatch):
            tbl.append(empty)
    with pytest.raises(InvalidOption, match="isolation 'strict'"):
        tbl.overwrite(rows(100, 5), "id < 10", isolation="strict")
    with pytest.raises(InvalidProperty, match=r"write\.delete\.isolation-level"):
        tbl.update_properties().set("write.delete.isolation-level", "strict").commit()
    assert tbl.refresh().metadata_location == location
    assert table_files(tbl) == files  # the copy-on-write rewrite of the refused overwrite was deleted
