"""``Table.dynamic_partition_overwrite`` (Iceberg's ReplacePartitions): the partitions the new rows land in
are replaced, data and delete files, in one ``overwrite`` snapshot; other partitions and files of other
specs stay; concurrency by isolation level; failures leave nothing; readers agree."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from gpu_engine.errors import GpuEngineError, InvalidOption, ValidationError
from gpu_engine.table import Table

from ._support import (
    FAST,
    appending,
    assert_all_readers,
    keyed_rows,
    raise_at,
    referenced_files,
    sql_catalog,
    table_files,
)


def make(tmp_path: Path, version: int, partition_spec: list[str] | None = None) -> Table:
    cat = sql_catalog(tmp_path)
    properties = {"format-version": str(version), **FAST}
    spec = ["region"] if partition_spec is None else partition_spec
    return cat.create_table("db.t", keyed_rows(0, 0).schema, partition_spec=spec, properties=properties)


def in_regions(data: pa.Table, *regions: str) -> pa.Array:
    return pc.is_in(data["region"], pa.array(regions))


def only(data: pa.Table, region: str) -> pa.Table:
    return data.filter(pc.equal(data["region"], region))


@pytest.mark.parametrize("version", [1, 2, 3])
def test_partitions_of_the_new_rows_are_replaced_with_their_deletes(tmp_path: Path, version: int) -> None:
    tbl = make(tmp_path, version)
    data = pa.concat_tables([keyed_rows(0, 60), keyed_rows(60, 60, seed=1)])
    tbl.append(data.slice(0, 60))
    tbl.append(data.slice(60))
    if version >= 2:  # deletes in the replaced partition go with it; those elsewhere stay
        tbl.delete("id < 10")
        keys = tbl.scan(filter="id in (70, 71, 72)", columns=["id", "region"]).to_arrow()
        tbl.delete_rows(keys, on=["id", "region"])
    before = tbl.scan().to_arrow()
    parent = tbl.metadata.current_snapshot_id
    new = only(keyed_rows(1000, 30, seed=5), "eu")
    assert new.num_rows > 0

    result = tbl.dynamic_partition_overwrite(new)
    assert result is not None
    assert result.partitions == 1 and result.added_rows == new.num_rows
    head = tbl.metadata.current_snapshot()
    assert head is not None and head.parent_snapshot_id == parent
    summary = head.summary or {}
    assert summary["operation"] == "overwrite" and summary["replace-partitions"] == "true"
    expected = pa.concat_tables([before.filter(pc.invert(in_regions(before, "eu"))), new.cast(before.schema)])
    assert_all_readers(tbl, expected, pyiceberg=version == 1)  # PyIceberg cannot apply equality deletes
    tasks = tbl.scan().plan().tasks
    eu = [t for t in tasks if t.file.partition == ("eu",)]
    assert {t.file.path for t in eu} == {f.path for f in result.files}
    assert not [d for t in eu for d in t.deletes]  # the partition's deletes were removed
    if version >= 2:
        assert result.removed_delete_files
        assert {d.partition for d in result.removed_delete_files} == {("eu",)}
    assert table_files(tbl) - referenced_files(tbl) == {
        str(p) for p in Path(tbl.location, "metadata").glob("*.metadata.json")
    }


def test_any_transform_and_other_specs(tmp_path: Path) -> None:
    tbl = make(tmp_path, 2, ["bucket(4, id)"])
    tbl.append(keyed_rows(0, 80))
    with tbl.update_spec() as u:  # files of spec 0 are not replaced by writes of spec 1
        u.add_field("region")
    tbl.append(keyed_rows(100, 40, seed=2))
    names = [f.name for f in tbl.schema().fields]
    before = tbl.scan(columns=[*names, "_spec_id", "_partition"]).to_arrow()
    new = keyed_rows(200, 3, seed=3)
    result = tbl.dynamic_partition_overwrite(new)
    assert result is not None
    added = {(f.spec_id, f.partition) for f in result.files}
    assert {spec for spec, _ in added} == {1} and result.partitions == len(added)
    assert {t.file.spec_id for t in tbl.scan().plan().tasks} == {0, 1}

    def replaced(r: dict[str, Any]) -> bool:
        return (r["_spec_id"], tuple(r["_partition"].values())) in added

    kept = [{n: r[n] for n in names} for r in before.to_pylist() if not replaced(r)]
    assert len(kept) < before.num_rows
    assert_all_readers(tbl, pa.concat_tables([pa.Table.from_pylist(kept, schema=new.schema), new]))


def test_an_unpartitioned_table_is_replaced_whole(tmp_path: Path) -> None:
    tbl = make(tmp_path, 2, [])
    tbl.append(keyed_rows(0, 20))
    tbl.append(keyed_rows(20, 20, seed=1))
    location = tbl.metadata_location
    assert tbl.dynamic_partition_overwrite(keyed_rows(0, 0)) is None  # no rows: nothing replaced
    assert tbl.refresh().metadata_location == location
    new = keyed_rows(100, 5)
    result = tbl.dynamic_partition_overwrite(new)
    assert result is not None
    assert len(result.removed_data_files) == 2
    assert_all_readers(tbl, new)


@pytest.mark.parametrize(("isolation", "fails"), [(None, True), ("snapshot", False)])
def test_rows_appended_meanwhile_in_a_replaced_partition(
    tmp_path: Path, isolation: str | None, fails: bool
) -> None:
    tbl = make(tmp_path, 3)
    data = keyed_rows(0, 40)
    tbl.append(data)
    other = tbl.catalog.load_table(tbl.identifier)  # type: ignore[union-attr]
    extra = only(keyed_rows(500, 20, seed=4), "eu")
    new = only(keyed_rows(900, 20, seed=6), "eu")
    hook = appending(other, extra)
    if fails:
        with pytest.raises(ValidationError, match="in a partition this overwrite replaces"):
            tbl.dynamic_partition_overwrite(new, isolation=isolation, faults=hook)
        assert_all_readers(tbl.refresh(), pa.concat_tables([data, extra]))
    else:
        tbl.dynamic_partition_overwrite(new, isolation=isolation, faults=hook)
        expected = pa.concat_tables([data.filter(pc.invert(in_regions(data, "eu"))), extra, new])
        assert_all_readers(tbl.refresh(), expected)


def test_rows_appended_meanwhile_elsewhere_do_not_conflict(tmp_path: Path) -> None:
    tbl = make(tmp_path, 2)
    data = keyed_rows(0, 40)
    tbl.append(data)
    other = tbl.catalog.load_table(tbl.identifier)  # type: ignore[union-attr]
    extra = only(keyed_rows(500, 20, seed=4), "us")
    new = only(keyed_rows(900, 20, seed=6), "eu")
    result = tbl.dynamic_partition_overwrite(new, faults=appending(other, extra))
    assert result is not None
    assert result.commit.attempts == 2
    expected = pa.concat_tables([data.filter(pc.invert(in_regions(data, "eu"))), extra, new])
    assert_all_readers(tbl, expected)


@pytest.mark.parametrize("stage", ["data", "manifest", "manifest-list", "metadata", "swap"])
def test_a_failed_partition_overwrite_leaves_nothing(tmp_path: Path, stage: str) -> None:
    tbl = make(tmp_path, 2)
    tbl.append(keyed_rows(0, 30))
    location, files = tbl.metadata_location, table_files(tbl)
    _, hook = raise_at(stage, OSError(f"injected at {stage}"))
    with pytest.raises(OSError, match=f"injected at {stage}"):
        tbl.dynamic_partition_overwrite(keyed_rows(100, 5), faults=hook)
    assert tbl.refresh().metadata_location == location
    assert table_files(tbl) == files
    with pytest.raises(InvalidOption, match="isolation 'none'"):
        tbl.dynamic_partition_overwrite(keyed_rows(100, 5), isolation="none")
    assert table_files(tbl) == files


def test_a_ref_that_takes_no_commit_is_refused_before_files_are_written(tmp_path: Path) -> None:
    tbl = make(tmp_path, 2)
    tbl.append(keyed_rows(0, 30))
    tbl.manage_snapshots().create_tag("t").commit()
    files = table_files(tbl)
    for ref in ("t", ""):  # a tag, and no name
        with pytest.raises(GpuEngineError, match=r"tag|branch"):
            tbl.dynamic_partition_overwrite(keyed_rows(100, 5), branch=ref)
        assert table_files(tbl) == files


def test_files_written_before_a_planning_failure_are_deleted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gpu_engine.commit import partition_overwrite

    tbl = make(tmp_path, 2)
    tbl.append(keyed_rows(0, 30))
    files = table_files(tbl)

    def broken(*args: object) -> list[object]:
        raise OSError("manifest unreadable")

    monkeypatch.setattr(partition_overwrite, "_live_files", broken)
    with pytest.raises(OSError, match="manifest unreadable"):
        tbl.dynamic_partition_overwrite(keyed_rows(100, 5))
    assert table_files(tbl) == files


def test_only_manifests_that_may_hold_the_partitions_are_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One manifest per day (merging off): replacing one day reads that day's manifest only (partition
    summaries rule out the others, and the manifests of an older spec); the result is unchanged."""
    from gpu_engine.commit import partition_overwrite as po
    from gpu_engine.commit.entries import live_entries

    tbl = make(tmp_path, 2, ["region"])
    tbl.update_properties().set("commit.manifest-merge.enabled", "false").commit()
    tbl.append(keyed_rows(0, 20))  # spec 0 (region): never replaced by spec-1 rows
    with tbl.update_spec() as u:
        u.remove_field("region")
        u.add_field("day(ts)")
    days = [keyed_rows(100 * (i + 1), 10, seed=i) for i in range(5)]
    for i, day in enumerate(days):  # each append on its own day
        ts = pa.array([1_709_251_200_000_000 + i * 86_400_000_000] * day.num_rows, pa.timestamp("us"))
        days[i] = day.set_column(day.schema.get_field_index("ts"), "ts", ts)
        tbl.append(days[i])
    read: list[str] = []
    real = live_entries

    def counting(io: Any, manifest: Any, spec: Any) -> Any:
        read.append(manifest.manifest_path)
        return real(io, manifest, spec)

    monkeypatch.setattr(po, "live_entries", counting)
    new = days[2].slice(0, 3)
    result = tbl.dynamic_partition_overwrite(new)
    assert result is not None and len(read) == 1 and result.partitions == 1
    assert result is not None and len(result.removed_data_files) == 1
    expected = pa.concat_tables([keyed_rows(0, 20), days[0], days[1], new, days[3], days[4]])
    assert_all_readers(tbl, expected)


def test_uuid_partitions_are_replaced_and_counted_once(tmp_path: Path) -> None:
    """Written partition tuples hold uuid.UUID, manifests the 16 bytes: the partition of the new rows kept
    its old rows beside them, and a copy-on-write delete counted its one partition twice, the removed
    file's under a base64 name."""
    cat = sql_catalog(tmp_path)
    schema = pa.schema([pa.field("u", pa.uuid()), pa.field("v", pa.int64())])
    key, other = uuid.UUID(int=1), uuid.UUID(int=2)

    def data(keys: list[uuid.UUID], values: list[int]) -> pa.Table:
        return pa.table({"u": pa.array([k.bytes for k in keys], pa.uuid()), "v": values}, schema=schema)

    tbl = cat.create_table("db.u", schema, partition_spec=["u"], properties={"format-version": "2", **FAST})
    tbl.append(data([key, other], [1, 9]))
    result = tbl.dynamic_partition_overwrite(data([key], [2]))
    assert result is not None and len(result.removed_data_files) == 1
    assert sorted(tbl.scan().to_arrow().column("v").to_pylist()) == [2, 9]
    props = {
        "format-version": "2",
        "write.delete.mode": "copy-on-write",
        "write.summary.partition-limit": "9",
    }
    cow = cat.create_table("db.c", schema, partition_spec=["u"], properties={**props, **FAST})
    cow.append(data([key, key], [1, 2]))
    cow.delete("v = 1")
    head = cow.metadata.current_snapshot()
    assert head is not None and head.summary is not None
    summary = head.summary
    assert summary["changed-partition-count"] == "1"
    assert [k for k in summary if k.startswith("partitions.")] == [f"partitions.u={key}"]
