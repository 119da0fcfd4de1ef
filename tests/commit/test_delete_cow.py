"""Copy-on-write deletes (``write.delete.mode=copy-on-write``, and every delete of a v1 table): matched data
files rewritten without the matched rows as an ``overwrite`` snapshot; the rows left read the same by our
scan, PyIceberg and DuckDB; deletes of the rewritten files (DVs, position and equality deletes) applied
while rewriting and no longer attached; v3 rows keep their lineage; concurrent deletes fail validation."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from gpu_engine.commit.delete_cow import delete_mode
from gpu_engine.errors import InvalidProperty, UnsupportedFeature, ValidationError
from gpu_engine.table import Table

from ._support import (
    assert_all_readers,
    assert_same_rows,
    keyed_rows,
    once_at,
    raise_at,
    referenced_files,
    region_table,
    rows,
    table_files,
    without_matches,
)

COW = {"write.delete.mode": "copy-on-write"}


def lineage(tbl: Table) -> dict[int, tuple[int, int]]:
    got = tbl.scan(columns=["id", "_row_id", "_last_updated_sequence_number"]).to_arrow().to_pylist()
    return {r["id"]: (r["_row_id"], r["_last_updated_sequence_number"]) for r in got}


def test_the_mode_follows_the_property_and_the_format_version() -> None:
    assert delete_mode({}, 1) == "copy-on-write"
    assert delete_mode({}, 2) == delete_mode({}, 3) == "merge-on-read"
    assert delete_mode({"write.delete.mode": " Copy-On-Write "}, 3) == "copy-on-write"
    with pytest.raises(
        InvalidProperty, match=r"write\.delete\.mode='cow': expected copy-on-write or merge-on-read"
    ):
        delete_mode({"write.delete.mode": "cow"}, 2)
    with pytest.raises(UnsupportedFeature, match="format version 1 lacks"):
        delete_mode({"write.delete.mode": "merge-on-read"}, 1, "/t")


@pytest.mark.parametrize("version", [1, 2, 3])
def test_copy_on_write_rewrites_matched_files_without_the_rows(tmp_path: Path, version: int) -> None:
    tbl = region_table(tmp_path, version)
    data = pa.concat_tables([keyed_rows(0, 40), keyed_rows(40, 40, seed=1)])
    tbl.append(data.slice(0, 40))
    tbl.append(data.slice(40))
    if version >= 2:  # merge-on-read deletes first: a DV / position deletes and an equality delete
        tbl.delete("id < 3")
        keys = tbl.scan(filter="id in (50, 51)", columns=["id", "region"]).to_arrow()
        tbl.delete_rows(keys, on=["id", "region"])
        data = without_matches(data, pc.or_(pc.less(data["id"], 3), pc.is_in(data["id"], pa.array([50, 51]))))
        tbl.update_properties().set("write.delete.mode", "copy-on-write").commit()
    ids_before = lineage(tbl) if version == 3 else None
    parent = tbl.metadata.current_snapshot_id
    files_before = {t.file.path for t in tbl.scan().plan().tasks}

    result = tbl.delete("score > 0.5 or region = 'eu'")
    expected = without_matches(
        data, pc.or_kleene(pc.greater(data["score"], 0.5), pc.equal(data["region"], "eu"))
    )
    assert result.deleted_rows == data.num_rows - expected.num_rows > 0
    assert result.commit is not None and result.added
    head = tbl.metadata.current_snapshot()
    assert head is not None and (head.summary or {})["operation"] == "overwrite"
    assert int((head.summary or {})["added-data-files"]) == len(result.added)
    assert int((head.summary or {})["deleted-data-files"]) == len(result.removed_data_files)

    tasks = tbl.scan().plan().tasks
    new = {f.path for f in result.added}
    assert {t.file.path for t in tasks} == (files_before - set(result.removed_data_files)) | new
    assert not [d for t in tasks if t.file.path in new for d in t.deletes]  # nothing applies to new files
    if version >= 2:  # the DVs / position deletes of the removed files went with them
        assert result.removed_delete_files
    assert_all_readers(tbl, expected, pyiceberg=version == 1)  # PyIceberg cannot apply equality deletes
    if ids_before is not None:
        after = lineage(tbl)
        assert after == {i: ids_before[i] for i in after}  # copied rows keep row id and sequence number
    assert_same_rows(tbl.scan(snapshot_id=parent).to_arrow(), data, context="time travel before the delete")
    assert table_files(tbl) - referenced_files(tbl) == {
        str(p) for p in Path(tbl.location, "metadata").glob("*.metadata.json")
    }


def test_files_emptied_are_only_removed(tmp_path: Path) -> None:
    tbl = region_table(tmp_path, 2, **COW)
    data = rows(0, 30)
    tbl.append(data)
    result = tbl.delete("region = 'us'")
    assert result.added == () and result.removed_data_files
    head = tbl.metadata.current_snapshot()
    assert head is not None and (head.summary or {})["operation"] == "delete"
    assert_all_readers(tbl, without_matches(data, pc.equal(data["region"], "us")))


def test_rows_of_an_older_spec_are_rewritten_into_the_current_one(tmp_path: Path) -> None:
    tbl = region_table(tmp_path, 3, **COW)
    data = rows(0, 40)
    tbl.append(data)
    with tbl.update_spec() as u:
        u.add_field("bucket(4, id)")
    tbl.delete("id = 7")
    new = [t.file for t in tbl.scan().plan().tasks if t.file.spec_id == 1]
    assert new and all(len(f.partition) == 2 for f in new)
    assert_all_readers(tbl, without_matches(data, pc.equal(data["id"], 7)))


def test_a_concurrent_equality_delete_fails_the_delete_and_nothing_is_left(tmp_path: Path) -> None:
    tbl = region_table(tmp_path, 2, **COW)
    data = rows(0, 40)
    tbl.append(data)
    other = tbl.catalog.load_table(tbl.identifier)  # type: ignore[union-attr]
    keys = tbl.scan(filter="id = 20", columns=["id", "region"]).to_arrow()
    # the equality delete would not apply to the rewritten files
    meanwhile = once_at("manifest", lambda: other.delete_rows(keys, on=["id", "region"]))
    files = table_files(tbl)
    with pytest.raises(ValidationError, match="added deletes"):
        tbl.delete("id < 30", faults=meanwhile)
    tbl.refresh()
    assert tbl.metadata_location == other.refresh().metadata_location
    assert {p for p in table_files(tbl) - files if p.endswith(".parquet")} == {
        f for f in referenced_files(tbl) if f.endswith(".parquet") and f not in files
    }  # only the equality delete file is new: the rewritten data files were deleted
    assert_same_rows(
        tbl.scan().to_arrow(), without_matches(data, pc.equal(data["id"], 20)), context="unchanged"
    )


def test_a_concurrent_append_survives(tmp_path: Path) -> None:
    tbl = region_table(tmp_path, 3, **COW)
    data = rows(0, 40)
    tbl.append(data)
    other = tbl.catalog.load_table(tbl.identifier)  # type: ignore[union-attr]
    extra = rows(100, 10, seed=5)
    result = tbl.delete("id < 30", faults=once_at("manifest", lambda: other.append(extra)))
    assert result.commit is not None and result.commit.attempts == 2
    assert_all_readers(tbl, pa.concat_tables([without_matches(data, pc.less(data["id"], 30)), extra]))


@pytest.mark.parametrize("upgraded", ["meanwhile", "before"])
def test_a_first_v3_commit_under_the_delete_fails_it(tmp_path: Path, upgraded: str) -> None:
    """The survivors of the rewritten files were read without lineage (planned on v2, or on v3 before its
    first v3 snapshot): committed after another writer's first v3 snapshot (which gave every row an id),
    they would get new ids; refused, and run again the delete keeps them."""
    tbl = region_table(tmp_path, 2, **COW)
    data = rows(0, 40)
    tbl.append(data)
    if upgraded == "before":
        tbl.update_properties().set("format-version", "3").commit()
    other = tbl.catalog.load_table(tbl.identifier)  # type: ignore[union-attr]
    extra = rows(100, 10, seed=5)

    def upgrade_and_append() -> None:
        if upgraded == "meanwhile":
            other.update_properties().set("format-version", "3").commit()
        other.append(extra)

    with pytest.raises(ValidationError, match=r"gave every row an id .* after this delete was planned"):
        tbl.delete("id < 10", faults=once_at("manifest", upgrade_and_append))
    before = lineage(tbl.refresh())
    tbl.delete("id < 10")
    after = lineage(tbl)
    assert after == {k: v for k, v in before.items() if k >= 10}
    assert_all_readers(tbl, pa.concat_tables([without_matches(data, pc.less(data["id"], 10)), extra]))


@pytest.mark.parametrize("stage", ["manifest", "manifest-list", "metadata", "swap"])
def test_a_failed_commit_deletes_the_rewritten_files(tmp_path: Path, stage: str) -> None:
    tbl = region_table(tmp_path, 1)
    tbl.append(rows(0, 30))
    location, files = tbl.metadata_location, table_files(tbl)
    _, hook = raise_at(stage, OSError(f"injected at {stage}"))
    with pytest.raises(OSError, match=f"injected at {stage}"):
        tbl.delete("id < 5", faults=hook)
    assert tbl.refresh().metadata_location == location
    assert table_files(tbl) == files


def test_bad_modes_are_refused_naming_the_property(tmp_path: Path) -> None:
    tbl = region_table(tmp_path, 2)
    tbl.append(rows(0, 10))
    with pytest.raises(InvalidProperty, match=r"write\.delete\.mode"):
        tbl.update_properties().set("write.delete.mode", "cow").commit()
    v1 = region_table(tmp_path / "v1", 1)
    with pytest.raises(UnsupportedFeature, match="format version 1 lacks"):
        v1.update_properties().set("write.delete.mode", "merge-on-read").commit()
