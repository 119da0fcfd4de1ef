"""Serializable validation of deletes and overwrites: data files appended since the plan conflict when
they may hold matching rows, judged from the manifests those appends wrote, so a file appended and then
compacted away meanwhile still conflicts (its rows live on in the compaction's output)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from gpu_engine.errors import InvalidOption, ValidationError
from gpu_engine.table import Table

from ._support import assert_all_readers, keyed_rows, once_at, region_table, rows


def _in_region(t: pa.Table, region: str) -> pa.Table:
    return t.set_column(t.schema.get_field_index("region"), "region", pa.array([region] * t.num_rows))


@pytest.mark.parametrize("mode", ["merge-on-read", "copy-on-write"])
def test_rows_appended_then_compacted_meanwhile_still_conflict(tmp_path: Path, mode: str) -> None:
    tbl = region_table(tmp_path, 2, **{"write.delete.mode": mode})
    data = rows(0, 40)
    tbl.append(data)
    other = tbl.catalog.load_table(tbl.identifier)  # type: ignore[union-attr]
    late = _in_region(rows(100, 10, seed=9), "zz")

    def append_then_compact() -> None:
        other.append(late)
        other.compact(where="region = 'zz'", options={"rewrite-all": "true"})

    with pytest.raises(ValidationError, match="may hold rows matching this delete's filter"):
        tbl.delete("id < 5 or id >= 100", faults=once_at("manifest", append_then_compact))
    assert_all_readers(tbl.refresh(), pa.concat_tables([data, late]))


def test_appended_files_that_cannot_match_do_not_conflict(tmp_path: Path) -> None:
    tbl = region_table(tmp_path, 2)
    data = rows(0, 40)
    tbl.append(data)
    other = tbl.catalog.load_table(tbl.identifier)  # type: ignore[union-attr]
    late = _in_region(rows(100, 10, seed=9), "zz")
    result = tbl.delete("id < 5", faults=once_at("manifest", lambda: other.append(late)))
    assert result.commit is not None and result.commit.attempts == 2  # retried, validated, committed
    kept = data.filter(pc.invert(pc.less(data["id"], 5)))
    assert_all_readers(tbl.refresh(), pa.concat_tables([kept, late]))


@pytest.mark.parametrize("version", [2, 3])
def test_an_overwrite_conflicts_with_an_upsert_of_its_rows_at_any_isolation(
    tmp_path: Path, version: int
) -> None:
    """Replacing rows an upsert replaced meanwhile would keep both versions of the key (no serial order
    gives that): as Java's row deltas for UPDATE and MERGE, the equality delete added since fails it."""
    tbl = region_table(tmp_path, version)
    data = keyed_rows(0, 20)
    tbl.append(data)
    other = tbl.catalog.load_table(tbl.identifier)  # type: ignore[union-attr]
    row = data.filter(pc.equal(data["id"], 3))
    upserted = row.set_column(row.schema.get_field_index("score"), "score", pa.array([100.0]))
    replaced = row.set_column(row.schema.get_field_index("score"), "score", pa.array([200.0]))
    other.upsert(upserted, on=["id", "region"])
    with pytest.raises(ValidationError, match="added deletes"):
        tbl.overwrite(replaced, "id = 3", isolation="snapshot")
    rest = data.filter(pc.not_equal(data["id"], 3))
    assert_all_readers(tbl.refresh(), pa.concat_tables([rest, upserted]), pyiceberg=False)


def test_equality_deletes_of_another_partition_do_not_conflict_with_a_rewrite(tmp_path: Path) -> None:
    """A partitioned equality delete applies to its own partition only (Java's DeleteFileIndex): a
    copy-on-write delete or a compaction taking new sequence numbers elsewhere commits after it."""
    tbl = region_table(tmp_path, 2, **{"write.delete.mode": "copy-on-write"})
    data = pa.concat_tables([_in_region(keyed_rows(0, 10), "a"), _in_region(keyed_rows(10, 10), "b")])
    tbl.append(data)
    other = tbl.catalog.load_table(tbl.identifier)  # type: ignore[union-attr]
    same = tbl.catalog.load_table(tbl.identifier)  # type: ignore[union-attr]
    other.delete_rows(pa.table({"id": pa.array([1], pa.int64()), "region": ["a"]}), on=["id", "region"])
    tbl.delete("region = 'b' and id = 13")
    kept = data.filter(pc.invert(pc.is_in(data["id"], pa.array([1, 13], pa.int64()))))
    assert_all_readers(tbl.refresh(), kept, pyiceberg=False)
    stale = tbl.catalog.load_table(tbl.identifier)  # type: ignore[union-attr]
    other.delete_rows(pa.table({"id": pa.array([2], pa.int64()), "region": ["a"]}), on=["id", "region"])
    with pytest.raises(ValidationError, match="added deletes"):  # its own partition: still a conflict
        same.delete("region = 'a' and id = 5")
    options = {"rewrite-all": "true", "use-starting-sequence-number": "false"}
    result = stale.compact(where="region = 'b'", options=options)
    assert result.commits and not result.failures
    kept = kept.filter(pc.not_equal(kept["id"], 2))
    assert_all_readers(tbl.refresh(), kept, pyiceberg=False)


def test_a_delete_planned_on_v2_fails_once_the_table_is_v3(tmp_path: Path) -> None:
    """Position delete files must not be added to v3 tables (spec): an upgrade committed meanwhile fails
    the v2-planned delete, which removes what it wrote; run again, it writes a deletion vector."""
    tbl = region_table(tmp_path, 2)
    data = rows(0, 20)
    tbl.append(data)
    other = tbl.catalog.load_table(tbl.identifier)  # type: ignore[union-attr]
    upgrade = once_at("manifest", lambda: other.update_properties().set("format-version", "3").commit())
    with pytest.raises(ValidationError, match="takes deletion vectors, not position delete files"):
        tbl.delete("id < 3", faults=upgrade)
    assert_all_readers(tbl.refresh(), data, pyiceberg=False)
    tbl.delete("id < 3")
    assert_all_readers(tbl, data.filter(pc.greater_equal(data["id"], 3)), pyiceberg=False)


@pytest.mark.parametrize("isolation", [5, b"snapshot", ["snapshot"]])
def test_an_isolation_level_that_is_not_a_string_is_named(tmp_path: Path, isolation: object) -> None:
    """``isolation=5`` is an InvalidOption naming the argument, not ``'int' object has no attribute
    'strip'``; nothing is committed."""
    tbl = region_table(tmp_path, 2)
    tbl.append(rows(0, 5))
    before = tbl.metadata.current_snapshot_id
    with pytest.raises(InvalidOption, match=r"isolation=.*: expected 'serializable' or 'snapshot', not"):
        tbl.overwrite(rows(0, 5), isolation=isolation)  # type: ignore[arg-type]
    with pytest.raises(InvalidOption, match=r"isolation=.*: expected 'serializable' or 'snapshot', not"):
        tbl.delete("id < 2", isolation=isolation)  # type: ignore[arg-type]
    assert tbl.refresh().metadata.current_snapshot_id == before


def _evolve_then_append(other: Table, start: int, current: str, *, rename: str | None = None) -> None:
    """Another writer renames the column ``current`` (the rows' ``s``) to ``rename``, or drops it, then
    appends rows ``start..start+4``."""
    late = rows(start, 5, seed=start)
    with other.refresh().update_schema() as u:
        if rename is None:
            u.delete_column(current)
            late = late.drop_columns(["s"])
        else:
            u.rename_column(current, rename)
            late = late.rename_columns([rename if n == "s" else n for n in late.column_names])
    other.refresh().append(late)


@pytest.mark.parametrize("mode", ["merge-on-read", "copy-on-write"])
def test_the_filter_follows_its_columns_through_concurrent_schema_changes(tmp_path: Path, mode: str) -> None:
    """The filter names columns of the schema the delete was planned with: renamed meanwhile, the rows
    appended since are judged by field id (rows that cannot match commit, matching ones conflict); dropped
    meanwhile, the validation names the column (it failed binding the filter to the new schema)."""
    tbl = region_table(tmp_path, 2, **{"write.delete.mode": mode})
    tbl.append(rows(0, 40))
    other = tbl.catalog.load_table(tbl.identifier)  # type: ignore[union-attr]
    race = once_at("manifest", lambda: _evolve_then_append(other, 100, "s", rename="label"))
    result = tbl.delete("id < 5 and s is not null", faults=race)
    assert result.commit is not None and result.commit.attempts == 2
    race = once_at("manifest", lambda: _evolve_then_append(other, 200, "label", rename="tag"))
    with pytest.raises(ValidationError, match="may hold rows matching this delete's filter"):
        tbl.refresh().delete("id >= 100 or label = 'zz'", faults=race)
    race = once_at("manifest", lambda: _evolve_then_append(other, 300, "tag"))
    with pytest.raises(
        ValidationError, match=r"column 'tag' \(field id \d+\) of this delete's filter was dropped"
    ):
        tbl.refresh().delete("tag is not null", faults=race)
