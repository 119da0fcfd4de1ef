"""Partition evolution (``tbl.update_spec()``): the specs it commits (read as JSON), files of old and new
specs read back by our scan, PyIceberg and DuckDB, compaction into the new spec, and what it refuses."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from gpu_engine.commit.spec_update import InvalidSpecChange
from gpu_engine.errors import UnsupportedFeature, ValidationError
from gpu_engine.table import Table

from ._support import assert_all_readers, assert_same_rows, duckdb_rows, raise_at, sql_catalog, table_files

FAST = {"commit.retry.min-wait-ms": "1", "commit.retry.max-wait-ms": "5"}
SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("name", pa.string()),
        pa.field("ts", pa.timestamp("us")),
    ]
)


def make(tmp_path: Path, version: int, partition: list[str]) -> Table:
    cat = sql_catalog(tmp_path)
    return cat.create_table(
        "db.t", SCHEMA, partition_spec=partition, properties={"format-version": str(version), **FAST}
    )


def batch(start: int, n: int) -> pa.Table:
    base = dt.datetime(2024, 5, 1)
    return pa.Table.from_pylist(
        [
            {"id": i, "name": "abc"[i % 3], "ts": base + dt.timedelta(hours=7 * i)}
            for i in range(start, start + n)
        ],
        schema=SCHEMA,
    )


def metadata(tbl: Table) -> dict[str, Any]:
    return dict(json.loads(Path(tbl.metadata_location).read_text()))


def spec_fields(raw: dict[str, Any], spec_id: int) -> list[tuple[str, int, str]]:
    (spec,) = [s for s in raw["partition-specs"] if s["spec-id"] == spec_id]
    return [(f["name"], f["field-id"], f["transform"]) for f in spec["fields"]]


@pytest.mark.parametrize("version", [1, 2, 3])
def test_new_writes_use_the_new_spec_and_every_reader_reads_both(tmp_path: Path, version: int) -> None:
    tbl = make(tmp_path, version, ["name"])
    tbl.append(batch(0, 12))
    with tbl.update_spec() as u:
        u.add_field("bucket(4, id)")
        u.add_field("day(ts)", name="day")
        u.remove_field("name")
    raw = metadata(tbl)
    assert raw["default-spec-id"] == 1 and raw["last-partition-id"] == 1002
    kept = [("name", 1000, "void")] if version == 1 else []  # v1 specs keep their fields, as void
    assert spec_fields(raw, 1) == [*kept, ("id_bucket_4", 1001, "bucket[4]"), ("day", 1002, "day")]
    tbl.append(batch(12, 12))
    specs = tbl.scan(columns=["id", "_spec_id"]).to_arrow()
    by_id = dict(zip(specs.column("id").to_pylist(), specs.column("_spec_id").to_pylist(), strict=True))
    assert {by_id[i] for i in range(12)} == {0} and {by_id[i] for i in range(12, 24)} == {1}
    files = tbl.scan(columns=["_file", "_partition"]).to_arrow().to_pylist()
    new_partitions = {r["_file"]: r["_partition"] for r in files if r["_file"] in _files_of_spec(tbl, 1)}
    assert all(set(p) >= {"id_bucket_4", "day"} for p in new_partitions.values())
    expected = pa.concat_tables([batch(0, 12), batch(12, 12)])
    assert_all_readers(tbl, expected)
    result = tbl.compact(options={"rewrite-all": "true"})
    assert result.added_data_files
    specs = tbl.scan(columns=["_spec_id"]).to_arrow().column("_spec_id").to_pylist()
    assert set(specs) == {1}  # compaction writes the default spec
    assert_all_readers(tbl, expected)


def _files_of_spec(tbl: Table, spec_id: int) -> set[str]:
    got = tbl.scan(columns=["_file", "_spec_id"]).to_arrow().to_pylist()
    return {r["_file"] for r in got if r["_spec_id"] == spec_id}


def test_field_ids_come_back_and_an_earlier_spec_is_reused(tmp_path: Path) -> None:
    tbl = make(tmp_path, 2, ["name", "bucket(4, id)"])
    with tbl.update_spec() as u:
        u.remove_field("name")
    with tbl.update_spec() as u:
        u.add_field("truncate(2, name)")
    raw = metadata(tbl)
    assert spec_fields(raw, 2) == [("id_bucket", 1001, "bucket[4]"), ("name_trunc_2", 1002, "truncate[2]")]
    with tbl.update_spec() as u:
        u.remove_field("name_trunc_2")
        u.add_field("name")  # the field spec 0 had: its id again
    raw = metadata(tbl)
    assert spec_fields(raw, 3) == [("id_bucket", 1001, "bucket[4]"), ("name", 1000, "identity")]
    assert raw["last-partition-id"] == 1002
    with tbl.update_spec() as u:
        u.rename_field("id_bucket", "b")
    assert spec_fields(metadata(tbl), 4) == [("b", 1001, "bucket[4]"), ("name", 1000, "identity")]
    with tbl.update_spec() as u:
        u.rename_field("b", "id_bucket")
    raw = metadata(tbl)
    assert raw["default-spec-id"] == 3 and len(raw["partition-specs"]) == 5  # equal to spec 3: reused


@pytest.mark.parametrize("version", [1, 2])
def test_a_field_removed_and_added_back_in_one_update_is_unchanged(tmp_path: Path, version: int) -> None:
    tbl = make(tmp_path, version, ["name", "day(ts)"])
    with tbl.update_spec() as u:
        u.remove_field("ts_day").add_field("day(ts)")
    assert metadata(tbl)["default-spec-id"] == 0 and len(metadata(tbl)["partition-specs"]) == 1
    with tbl.update_spec() as u:
        u.remove_field("ts_day").add_field("day(ts)", name="d")  # ... but for the name asked for
    assert spec_fields(metadata(tbl), 1) == [("name", 1000, "identity"), ("d", 1001, "day")]


def test_v1_void_fields_keep_their_name_until_a_new_field_takes_it(tmp_path: Path) -> None:
    """Java's rules: a removed v1 field stays, void, under its name; adding the column back renames the void
    field ``<name>_<id>``. After an upgrade to v2 the re-added field cannot take the void field's id (ids are
    unique within a spec): it gets a new one, and filters on it prune and read right."""
    tbl = make(tmp_path, 1, ["name", "bucket(4, id)"])
    tbl.append(batch(0, 6))
    with tbl.update_spec() as u:
        u.remove_field("name")
    assert spec_fields(metadata(tbl), 1) == [("name", 1000, "void"), ("id_bucket", 1001, "bucket[4]")]
    tbl.update_properties().set("format-version", "2").commit()
    with tbl.update_spec() as u:
        u.add_field("name")
    fields = spec_fields(metadata(tbl), 2)
    assert fields == [
        ("name_1000", 1000, "void"),
        ("id_bucket", 1001, "bucket[4]"),
        ("name", 1002, "identity"),
    ]
    tbl.append(batch(6, 6))
    expected = pa.concat_tables([batch(0, 12)])
    got = tbl.scan(filter="name = 'a'").to_arrow()
    assert_same_rows(
        got, expected.filter(pc.equal(expected["name"], "a")), context="filter on the re-added field"
    )


def test_a_time_transform_may_join_another_of_the_same_column(tmp_path: Path) -> None:
    tbl = make(tmp_path, 2, ["day(ts)"])
    with tbl.update_spec() as u:
        u.add_field("hour(ts)")  # Java allows it: only two time transforms added together are redundant
    assert spec_fields(metadata(tbl), 1) == [("ts_day", 1000, "day"), ("ts_hour", 1001, "hour")]


def test_an_earlier_id_comes_back_only_under_its_own_name_when_one_is_asked(tmp_path: Path) -> None:
    tbl = make(tmp_path, 2, ["bucket(4, id)"])
    with tbl.update_spec() as u:
        u.remove_field("id_bucket")
    with tbl.update_spec() as u:
        u.add_field("bucket(4, id)", name="b4")
    assert spec_fields(metadata(tbl), 2) == [("b4", 1001, "bucket[4]")]
    with tbl.update_spec() as u:
        u.remove_field("b4")
    with tbl.update_spec() as u:
        u.add_field("bucket(4, id)", name="id_bucket")
    assert metadata(tbl)["default-spec-id"] == 0  # the first spec again, its id and name


def test_a_field_added_back_without_a_name_takes_its_earlier_name(tmp_path: Path) -> None:
    """Java's recycleOrCreatePartitionField returns the earlier field itself: id and name, so the spec
    equals the earlier one and no new spec is made (PyIceberg agrees)."""
    tbl = make(tmp_path, 2, [])
    with tbl.update_spec() as u:
        u.add_field("day(ts)", name="dd")
    with tbl.update_spec() as u:
        u.remove_field("dd")
    with tbl.update_spec() as u:
        u.add_field("day(ts)")
    raw = metadata(tbl)
    assert raw["default-spec-id"] == 1 and len(raw["partition-specs"]) == 2
    assert spec_fields(raw, 1) == [("dd", 1000, "day")]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda u: u.add_field("name"), "has this field already"),
        (lambda u: u.add_field("hour(ts)").add_field("month(ts)"), "time transform of 'ts' is added already"),
        (lambda u: u.add_field("bucket(4, nope)"), "no column 'nope'"),
        (lambda u: u.add_field("day(name)"), "cannot apply to column 'name'"),
        (lambda u: u.add_field("bucket(4, id)", name="ts_day"), "field named 'ts_day' already"),
        (lambda u: u.add_field("bucket(4, id)", name="ts"), "'ts' is a column name"),
        (lambda u: u.remove_field("nope"), "has no such field"),
        (lambda u: u.remove_field("name").remove_field("name"), "has no such field"),
        (lambda u: u.rename_field("name", "ts_day"), "field named 'ts_day' already"),
        (lambda u: u.rename_field("ts_day", "id"), "'id' is a column name"),
    ],
)
def test_refused_changes_name_the_field_and_commit_nothing(tmp_path: Path, change: Any, message: str) -> None:
    tbl = make(tmp_path, 2, ["name", "day(ts)"])
    location, files = tbl.metadata_location, table_files(tbl)
    with pytest.raises(InvalidSpecChange, match=message), tbl.update_spec() as u:
        change(u)
    tbl.refresh()
    assert tbl.metadata_location == location and table_files(tbl) == files


def test_a_failed_swap_commits_nothing(tmp_path: Path) -> None:
    tbl = make(tmp_path, 2, ["name"])
    location, files = tbl.metadata_location, table_files(tbl)
    _, fail = raise_at("swap", OSError("catalog down"))
    with pytest.raises(OSError, match="catalog down"):
        tbl.update_spec().add_field("bucket(2, id)").commit(faults=fail)
    tbl.refresh()
    assert tbl.metadata_location == location and table_files(tbl) == files


def test_delete_rows_reaches_files_of_every_live_spec(tmp_path: Path) -> None:
    """An equality delete of a partitioned spec applies to files of that spec only: delete_rows writes one
    per spec holding live files, so rows written before the spec changed are deleted too."""
    tbl = make(tmp_path, 2, ["name"])
    tbl.append(batch(0, 12))
    with tbl.update_spec() as u:
        u.remove_field("name")
        u.add_field("bucket(4, id)")
    tbl.append(batch(12, 12))
    keys = pa.table({"id": pa.array([3, 15], pa.int64()), "name": pa.array(["a", "a"])})
    with pytest.raises(UnsupportedFeature, match="spec 0"):
        tbl.delete_rows(keys.select(["id"]), on=["id"])  # spec 0 partitions by name: the keys need it
    result = tbl.delete_rows(keys, on=["id", "name"])
    assert result.deleted_rows == 2
    assert {f.spec_id for f in result.added} == {0, 1}  # spec 1: a file per bucket of the keys
    expected = pa.concat_tables([batch(0, 12), batch(12, 12)])
    expected = expected.filter(pc.invert(pc.is_in(expected["id"], pa.array([3, 15], pa.int64()))))
    # PyIceberg reads no equality deletes; DuckDB 1.5.5 fails on them across specs (NULL comparison)
    assert_same_rows(tbl.scan().to_arrow(), expected, context="gpu_engine scan")
    with tbl.update_spec() as u:
        u.remove_field("id_bucket_4")  # unpartitioned now: one global delete reaches every file
    result = tbl.delete_rows(pa.table({"id": pa.array([4], pa.int64())}), on=["id"])
    assert [f.spec_id for f in result.added] == [tbl.metadata.default_spec_id]
    assert_same_rows(tbl.scan().to_arrow(), expected.filter(pc.not_equal(expected["id"], 4)), context="ours")


def test_delete_rows_without_partition_columns_goes_to_an_unpartitioned_spec(tmp_path: Path) -> None:
    """A table created unpartitioned and partitioned later: keys without the partition column become one
    global equality delete in the unpartitioned spec, which applies to the files of every spec."""
    tbl = make(tmp_path, 2, [])
    tbl.append(batch(0, 12))
    with tbl.update_spec() as u:
        u.add_field("name")
    tbl.append(batch(12, 12))
    result = tbl.delete_rows(pa.table({"id": pa.array([3, 15], pa.int64())}), on=["id"])
    assert [f.spec_id for f in result.added] == [0] and result.added[0].partition == ()
    keyed = tbl.delete_rows(pa.table({"id": pa.array([16], pa.int64()), "name": ["b"]}), on=["id", "name"])
    assert {f.spec_id for f in keyed.added} == {0}  # spec 0's files are live: a global delete reaches both
    expected = pa.concat_tables([batch(0, 12), batch(12, 12)])
    expected = expected.filter(pc.invert(pc.is_in(expected["id"], pa.array([3, 15, 16], pa.int64()))))
    assert_same_rows(tbl.scan().to_arrow(), expected, context="gpu_engine scan")
    assert_same_rows(duckdb_rows(tbl), expected, context="duckdb iceberg_scan")
    tbl.compact(options={"rewrite-all": "true"})  # every live file in spec 1 now
    keyed = tbl.delete_rows(pa.table({"id": pa.array([17], pa.int64()), "name": ["c"]}), on=["id", "name"])
    assert {f.spec_id for f in keyed.added} == {1}  # partition-scoped: the keys carry the column
    bare = tbl.delete_rows(pa.table({"id": pa.array([5], pa.int64())}), on=["id"])
    assert [f.spec_id for f in bare.added] == [0]  # no partition column: the table's unpartitioned spec
    expected = expected.filter(pc.invert(pc.is_in(expected["id"], pa.array([5, 17], pa.int64()))))
    assert_same_rows(tbl.scan().to_arrow(), expected, context="gpu_engine scan")
    assert_same_rows(duckdb_rows(tbl), expected, context="duckdb iceberg_scan")


def test_the_table_partition_struct_takes_the_newest_names(tmp_path: Path) -> None:
    """``_partition`` and the metadata tables' ``partition``: fields by id, named as the newest spec names
    them (Java's Partitioning.partitionType; PyIceberg's inspect agrees)."""
    tbl = make(tmp_path, 2, ["day(ts)"])
    tbl.append(batch(0, 4))
    with tbl.update_spec() as u:
        u.rename_field("ts_day", "day").add_field("bucket(4, id)")
    tbl.append(batch(4, 4))
    rows = tbl.scan(columns=["_partition"]).to_arrow()
    assert [f.name for f in rows.schema.field("_partition").type] == ["day", "id_bucket_4"]
    partitions = tbl.inspect.partitions()
    assert [f.name for f in partitions.schema.field("partition").type] == ["day", "id_bucket_4"]
    from pyiceberg.table import StaticTable

    theirs = StaticTable.from_metadata(tbl.metadata_location).inspect.partitions()
    assert [f.name for f in theirs.schema.field("partition").type] == ["day", "id_bucket_4"]


def test_an_update_built_before_another_writers_spec_is_refused(tmp_path: Path) -> None:
    """Partition field ids came from the stale base's last-partition-id; another writer's spec (added and
    replaced) took them: the commit made the other writer's spec the default. Java commits against its
    base."""
    cat = sql_catalog(tmp_path)
    cat.create_table("db.t", pa.schema([pa.field("id", pa.int64()), pa.field("name", pa.string())]))
    update = cat.load_table("db.t").update_spec().add_field("bucket(8, id)")
    other = cat.load_table("db.t")
    with other.update_spec() as s:
        s.add_field("truncate(3, name)")
    with other.update_spec() as s:
        s.remove_field("name_trunc_3")
    with pytest.raises(ValidationError, match="last partition id changed"):
        update.commit()


def test_new_field_ids_pass_every_specs_ids_whatever_last_partition_id_says(tmp_path: Path) -> None:
    """Metadata whose last-partition-id is below a spec's field id (another writer's slip): the new field
    took an id the spec held, committing a spec of two fields numbered 1000; filters on it then failed."""
    tbl = make(tmp_path, 2, ["bucket(4, id)"])
    tbl.append(batch(0, 6))
    raw = metadata(tbl)
    assert raw["last-partition-id"] == 1000
    raw["last-partition-id"] = 999
    stale = Path(tbl.metadata_location).parent / "00099-stale.metadata.json"
    stale.write_text(json.dumps(raw))
    cat = sql_catalog(tmp_path / "other")
    registered = cat.register_table("db.t", str(stale))
    with registered.update_spec() as u:
        u.add_field("truncate(3, name)")
    assert spec_fields(metadata(registered), 1) == [
        ("id_bucket", 1000, "bucket[4]"),
        ("name_trunc_3", 1001, "truncate[3]"),
    ]
    assert metadata(registered)["last-partition-id"] == 1001
    registered.append(batch(6, 3))
    assert sorted(registered.scan(filter="name = 'abc'").to_arrow()["id"].to_pylist()) == []
    assert sorted(registered.scan(filter="name = 'a'").to_arrow()["id"].to_pylist()) == [0, 3, 6]


def test_fields_added_later_are_named_as_java_names_them(tmp_path: Path) -> None:
    """UpdatePartitionSpec.addField names a field added without a name with Java's
    PartitionNameGenerator (``id_bucket_8``, ``name_trunc_3``), so a changed transform does not reuse
    the removed field's name: the table-wide ``_partition`` struct, which holds both, stays valid."""
    tbl = make(tmp_path, 2, ["bucket(4, id)"])
    tbl.append(batch(0, 6))
    with tbl.update_spec() as u:
        u.remove_field("id_bucket").add_field("bucket(8, id)").add_field("truncate(3, name)")
        u.add_field("year(ts)").add_field("void(id)")
    assert spec_fields(metadata(tbl), 1) == [
        ("id_bucket_8", 1001, "bucket[8]"),
        ("name_trunc_3", 1002, "truncate[3]"),
        ("ts_year", 1003, "year"),
        ("id_null", 1004, "void"),
    ]
    tbl.append(batch(6, 6))
    partition = tbl.scan(columns=["_partition"]).to_arrow().schema.field("_partition").type
    assert [f.name for f in partition] == ["id_bucket", "id_bucket_8", "name_trunc_3", "ts_year", "id_null"]
    assert tbl.inspect.files().num_rows > 2  # partitioned files of both specs, listed


def test_a_removed_fields_name_given_to_a_new_field_keeps_partition_names_unique(tmp_path: Path) -> None:
    """A v2 field removed and a different one added under its name: both are in the table-wide
    ``_partition`` struct, the older one as ``<name>_<id>`` (the struct had a name twice: invalid)."""
    tbl = make(tmp_path, 2, ["bucket(4, id)"])
    tbl.append(batch(0, 6))
    with tbl.update_spec() as u:
        u.remove_field("id_bucket").add_field("bucket(8, id)", name="id_bucket")
    tbl.append(batch(6, 6))
    got = tbl.scan(columns=["id", "_partition"]).to_arrow()
    assert [f.name for f in got.schema.field("_partition").type] == ["id_bucket_1000", "id_bucket"]
    rows = {r["id"]: r["_partition"] for r in got.to_pylist()}
    assert all(rows[i]["id_bucket"] is None and rows[i]["id_bucket_1000"] is not None for i in range(6))
    assert all(rows[i]["id_bucket_1000"] is None and rows[i]["id_bucket"] is not None for i in range(6, 12))
    assert tbl.inspect.partitions().num_rows > 2


@pytest.mark.parametrize(
    "change",
    [lambda u: u.add_field("id", name=5), lambda u: u.rename_field("name", 5)],
    ids=["add", "rename"],
)
def test_a_field_name_that_is_not_a_string_is_refused(tmp_path: Path, change: Any) -> None:
    """A name 5 was committed and the table could not be loaded again ("name must be a JSON string")."""
    tbl = make(tmp_path, 2, ["name"])
    with pytest.raises(InvalidSpecChange, match="must be a non-empty string"):
        change(tbl.update_spec())
    assert len(tbl.refresh().metadata.partition_specs) == 1


def test_an_identity_partition_of_an_unknown_column_takes_appends(tmp_path: Path) -> None:
    """v3: identity is allowed on ``unknown`` columns (always null, not stored): appends with and without
    the column write a null partition value and read back (every append failed before)."""
    cat = sql_catalog(tmp_path)
    tbl = cat.create_table(
        "db.u", pa.schema([pa.field("id", pa.int64())]), properties={"format-version": "3"}
    )
    with tbl.update_schema() as u:
        u.add_column("u", "unknown")
    with tbl.update_spec() as s:
        s.add_field("u")
    tbl.append(pa.table({"id": pa.array([1, 2], pa.int64())}))
    tbl.append(pa.table({"id": pa.array([3], pa.int64()), "u": pa.array([None], pa.null())}))
    assert sorted(tbl.scan().to_arrow().column("id").to_pylist()) == [1, 2, 3]
    assert sorted(tbl.scan(filter="u is null").to_arrow().column("id").to_pylist()) == [1, 2, 3]
    assert {t.file.partition for t in tbl.scan().plan().tasks} == {(None,)}


def test_a_field_on_a_column_another_writer_dropped_fails(tmp_path: Path) -> None:
    """Built on a handle that still had the column, the spec was committed with a field whose source the
    schema no longer has."""
    tbl = make(tmp_path, 2, [])
    stale = sql_catalog(tmp_path).load_table("db.t")
    tbl.update_schema().delete_column("name").commit()
    with pytest.raises(ValidationError, match=r"partition field 'name' \(identity\) has no source column"):
        stale.update_spec().add_field("name").commit()
    assert sql_catalog(tmp_path).load_table("db.t").metadata.spec.fields == ()
