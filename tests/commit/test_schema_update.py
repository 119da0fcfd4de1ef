"""Schema evolution (``tbl.update_schema()``): the metadata it commits (read as JSON), rows read back after
every kind of change by our scan, PyIceberg and DuckDB, and the changes the spec or the table refuses."""

from __future__ import annotations

import datetime as dt
import json
import re
import uuid
from dataclasses import replace
from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd  # type: ignore[import-untyped]
import pyarrow as pa
import pytest
from pyiceberg.table import StaticTable

from gpu_engine.commit.schema_from_arrow import schema_from_arrow
from gpu_engine.commit.schema_update import InvalidSchemaChange
from gpu_engine.errors import DataFileError, UnsupportedFeature, ValidationError
from gpu_engine.table import Table

from ._support import (
    assert_all_readers,
    assert_same_rows,
    pyiceberg_static,
    raise_at,
    sql_catalog,
    table_files,
)

FAST = {"commit.retry.min-wait-ms": "1", "commit.retry.max-wait-ms": "5"}
SCHEMA = pa.schema(
    [
        pa.field("id", pa.int32(), nullable=False),
        pa.field("name", pa.string()),
        pa.field("score", pa.float32()),
        pa.field("price", pa.decimal128(7, 2)),
        pa.field("d", pa.date32()),
        pa.field("loc", pa.struct([pa.field("lat", pa.float64()), pa.field("lon", pa.float64())])),
    ]
)


def make(tmp_path: Path, version: int, partition: list[str] | None = None, **props: str) -> Table:
    cat = sql_catalog(tmp_path)
    properties = {"format-version": str(version), **FAST, **props}
    return cat.create_table("db.t", SCHEMA, partition_spec=partition or [], properties=properties)


def first_rows() -> pa.Table:
    return pa.Table.from_pylist(
        [
            {
                "id": 1,
                "name": "a",
                "score": 0.5,
                "price": 1,
                "d": dt.date(2024, 1, 2),
                "loc": {"lat": 1.0, "lon": 2.0},
            },
            {"id": 2, "name": None, "score": None, "price": None, "d": None, "loc": None},
        ],
        schema=SCHEMA,
    )


def metadata(tbl: Table) -> dict[str, Any]:
    return dict(json.loads(Path(tbl.metadata_location).read_text()))


def fields_of(schema_json: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {f["name"]: f for f in schema_json["fields"]}


@pytest.mark.parametrize("version", [1, 2, 3])
def test_evolved_schema_reads_old_and_new_files(tmp_path: Path, version: int) -> None:
    tbl = make(tmp_path, version, partition=["name"])
    tbl.append(first_rows())
    before = metadata(tbl)
    with tbl.update_schema() as u:
        u.add_column("note", "string", doc="free text")
        u.add_column(("loc", "alt"), pa.float64())
        u.add_column("tags", pa.list_(pa.string()))
        u.rename_column("name", "label")
        u.update_column("id", "long")
        u.update_column("score", "double")
        u.update_column("price", "decimal(9, 2)")
        u.delete_column("d")
    raw = metadata(tbl)
    assert raw["current-schema-id"] == 1 and [s["schema-id"] for s in raw["schemas"]] == [0, 1]
    assert raw["last-column-id"] == before["last-column-id"] + 4  # note, alt, tags, tags.element
    new = fields_of(raw["schemas"][1])
    old = fields_of(raw["schemas"][0])
    assert list(new) == ["id", "label", "score", "price", "loc", "note", "tags"]
    assert new["label"]["id"] == old["name"]["id"] and new["id"]["type"] == "long"
    assert (new["score"]["type"], new["price"]["type"]) == ("double", "decimal(9, 2)")
    assert new["note"]["id"] == before["last-column-id"] + 1 and new["note"]["doc"] == "free text"
    assert [f["name"] for f in new["loc"]["type"]["fields"]] == ["lat", "lon", "alt"]
    assert new["tags"]["type"]["element-id"] == before["last-column-id"] + 4
    assert raw["partition-specs"] == before["partition-specs"]  # the identity field keeps its source id
    second = pa.Table.from_pylist(
        [{"id": 3, "label": "c", "score": 2.5, "price": 1234567, "loc": {"lat": 3.0, "lon": 4.0, "alt": 5.0},
          "note": "n", "tags": ["x", "y"]}],
        schema=pa.schema([
            pa.field("id", pa.int64(), nullable=False), pa.field("label", pa.string()),
            pa.field("score", pa.float64()), pa.field("price", pa.decimal128(9, 2)),
            pa.field("loc", pa.struct([pa.field(n, pa.float64()) for n in ("lat", "lon", "alt")])),
            pa.field("note", pa.string()), pa.field("tags", pa.list_(pa.string())),
        ]),
    )  # fmt: skip
    tbl.append(second)
    expected = pa.concat_tables(
        [
            pa.Table.from_pylist(
                [
                    {
                        "id": 1,
                        "label": "a",
                        "score": 0.5,
                        "price": 1,
                        "loc": {"lat": 1.0, "lon": 2.0, "alt": None},
                        "note": None,
                        "tags": None,
                    },
                    {
                        "id": 2,
                        "label": None,
                        "score": None,
                        "price": None,
                        "loc": None,
                        "note": None,
                        "tags": None,
                    },
                ],
                schema=second.schema,
            ),
            second,
        ]
    )
    assert_all_readers(tbl, expected)


def test_v3_defaults_fill_rows_written_before(tmp_path: Path) -> None:
    tbl = make(tmp_path, 3)
    tbl.append(first_rows())
    with tbl.update_schema() as u:
        u.add_column("region", "string", default="eu")
        u.add_column("since", "date", required=True, default=dt.date(2020, 2, 29))
        u.update_column("d", "timestamp")  # v3: date -> timestamp
    f = fields_of(metadata(tbl)["schemas"][1])
    assert (f["region"]["initial-default"], f["region"]["write-default"]) == ("eu", "eu")
    assert f["since"]["required"] is True and f["since"]["initial-default"] == "2020-02-29"
    got = tbl.scan(columns=["id", "region", "since", "d"]).to_arrow().sort_by("id").to_pylist()
    assert got == [
        {"id": 1, "region": "eu", "since": dt.date(2020, 2, 29), "d": dt.datetime(2024, 1, 2)},
        {"id": 2, "region": "eu", "since": dt.date(2020, 2, 29), "d": None},
    ]
    # PyIceberg 0.12 cannot read a date promoted to timestamp (AttributeError on the date type): not asked
    scan = StaticTable.from_metadata(tbl.metadata_location).scan(selected_fields=("id", "region", "since"))
    theirs = scan.to_arrow().sort_by("id").to_pylist()
    assert theirs == [{k: r[k] for k in ("id", "region", "since")} for r in got]


def test_a_nested_default_under_a_null_struct_is_null_to_filters_and_deletes(tmp_path: Path) -> None:
    schema = pa.schema([pa.field("id", pa.int32()), pa.field("s", pa.struct([("a", pa.int32())]))])
    tbl = sql_catalog(tmp_path).create_table("db.n", schema, properties={"format-version": "3"})
    tbl.append(pa.table({"id": pa.array([1, 2], pa.int32()), "s": [{"a": 1}, None]}, schema=schema))
    with tbl.update_schema() as u:
        u.add_column(("s", "w"), "int", default=7)  # rows written before: 7, unless s itself is null

    def ids(text: str) -> list[int]:
        return sorted(tbl.scan(filter=text).to_arrow()["id"].to_pylist())

    assert (ids("s.w = 7"), ids("s.w is null"), ids("s.w > 6"), ids("s.w in (7, 8)")) == ([1], [2], [1], [1])
    assert tbl.delete("s.w = 7").deleted_rows == 1
    assert tbl.scan().to_arrow().to_pylist() == [{"id": 2, "s": None}]


def test_uuid_defaults_and_float_defaults_without_a_json_number(tmp_path: Path) -> None:
    tbl = make(tmp_path, 3)
    tbl.append(first_rows())
    value = uuid.UUID("f79c3e09-677c-4bbd-a479-3f349cb785e7")
    with tbl.update_schema() as u:
        u.add_column("u1", "uuid", default=value)
        u.add_column("u2", "uuid", default=str(value))
    f = fields_of(metadata(tbl)["schemas"][-1])
    assert f["u1"]["initial-default"] == f["u2"]["initial-default"] == str(value)
    got = tbl.scan(columns=["u1", "u2"]).to_arrow().to_pylist()
    assert {(r["u1"], r["u2"]) for r in got} == {(value.bytes, value.bytes)}
    before = tbl.metadata_location
    for bad in (float("nan"), float("inf")):  # the JSON form of a double is a number: none for these
        with pytest.raises(InvalidSchemaChange, match="NaN and infinities"), tbl.update_schema() as u:
            u.add_column("x", "double", default=bad)
    assert tbl.refresh().metadata_location == before


def test_a_renamed_column_keeps_its_metrics_mode(tmp_path: Path) -> None:
    schema = pa.schema([pa.field("id", pa.int64()), pa.field("ssn", pa.string())])
    props = {"format-version": "2", "write.metadata.metrics.column.ssn": "none"}
    tbl = sql_catalog(tmp_path).create_table("db.m", schema, properties=props)
    with tbl.update_schema() as u:
        u.rename_column("ssn", "tax_id")
    assert "write.metadata.metrics.column.tax_id" in tbl.metadata.properties
    tbl.append(pa.table({"id": pa.array([2], pa.int64()), "tax_id": ["987-65-4321"]}))
    (row,) = tbl.inspect.files().to_pylist()
    assert [fid for fid, _ in row["value_counts"]] == [1] and [fid for fid, _ in row["lower_bounds"]] == [1]


def test_column_settings_follow_nested_columns_through_their_parents_changes(tmp_path: Path) -> None:
    """Settings on a struct's field move with a rename of the struct, go with a delete of it (a later
    column of the same name does not inherit them); settings naming no column are kept as they are."""
    schema = pa.schema([pa.field("id", pa.int64()), pa.field("st", pa.struct([("x", pa.string())])),
                        pa.field("old", pa.struct([("y", pa.string())]))])  # fmt: skip
    prefix, bloom = "write.metadata.metrics.column.", "write.parquet.bloom-filter-enabled.column."
    props = {"format-version": "2", prefix + "st.x": "none", prefix + "old.y": "full", bloom + "st.x": "true"}
    tbl = sql_catalog(tmp_path).create_table("db.m", schema, properties=props)
    with tbl.update_properties() as p:
        p.set(prefix + "gone", "counts")  # set later: only create checks the names
    with tbl.update_schema() as u:
        u.rename_column("st", "renamed")
        u.delete_column("old")
    settings = {k: v for k, v in tbl.metadata.properties.items() if ".column." in k}
    assert settings == {prefix + "renamed.x": "none", bloom + "renamed.x": "true", prefix + "gone": "counts"}
    with tbl.update_schema() as u:
        u.add_column("old", pa.struct([("y", pa.string())]))
    tbl.append(pa.table({"id": pa.array([1], pa.int64()), "renamed": [{"x": "secret"}], "old": [{"y": "v"}]}))
    (row,) = tbl.inspect.files().to_pylist()
    ids = tbl.schema().ids_by_name
    assert {fid for fid, _ in row["lower_bounds"]} == {ids["id"], ids["old.y"]}


def test_going_back_to_an_earlier_schema_reuses_its_id(tmp_path: Path) -> None:
    tbl = make(tmp_path, 2)
    with tbl.update_schema() as u:
        u.add_column("extra", "long")
    with tbl.update_schema() as u:
        u.delete_column("extra")
    raw = metadata(tbl)
    assert raw["current-schema-id"] == 0 and len(raw["schemas"]) == 2
    assert raw["last-column-id"] == 9  # 8 columns, then extra: its id is never given again
    with tbl.update_schema() as u:
        u.add_column("extra", "long")
    assert fields_of(metadata(tbl)["schemas"][-1])["extra"]["id"] == 10


def test_name_mapping_gets_new_names_and_columns(tmp_path: Path) -> None:
    mapping = [{"field-id": 1, "names": ["id"]}, {"field-id": 2, "names": ["name"]}]
    tbl = make(tmp_path, 2, None, **{"schema.name-mapping.default": json.dumps(mapping)})
    with tbl.update_schema() as u:
        u.rename_column("name", "label")
        u.add_column("note", "string")
    got = json.loads(metadata(tbl)["properties"]["schema.name-mapping.default"])
    assert got == [
        {"field-id": 1, "names": ["id"]},
        {"field-id": 2, "names": ["name", "label"]},
        {"field-id": 9, "names": ["note"]},
    ]


def test_a_name_taken_by_another_column_leaves_its_old_mapping_entry(tmp_path: Path) -> None:
    """Java's MappingUtil.update: a name an added or renamed column takes is removed from its siblings'
    entries (their id stays, with the names left), so dropping a column and adding it back, moving a name
    to another column, or taking another column's alias commits (the mapping refused duplicate names)."""
    mapping = [{"field-id": 1, "names": ["id"]}, {"field-id": 2, "names": ["name", "legacy"]},
               {"field-id": 3, "names": ["score"]}]  # fmt: skip
    tbl = make(tmp_path, 2, None, **{"schema.name-mapping.default": json.dumps(mapping)})
    with tbl.update_schema() as u:
        u.delete_column("score")
    with tbl.update_schema() as u:
        u.add_column("score", "double")  # the dropped column's name
        u.rename_column("id", "legacy")  # another column's alias
    got = json.loads(metadata(tbl)["properties"]["schema.name-mapping.default"])
    assert got == [
        {"field-id": 1, "names": ["id", "legacy"]},
        {"field-id": 2, "names": ["name"]},
        {"field-id": 3, "names": []},
        {"field-id": 9, "names": ["score"]},
    ]


@pytest.mark.parametrize(
    ("version", "change", "message"),
    [
        (2, lambda u: u.add_column("name", "string"), "exists already"),
        (2, lambda u: u.add_column(("loc", "lat"), "string"), "exists already"),
        (2, lambda u: u.add_column(("name", "x"), "string"), "not a struct"),
        (2, lambda u: u.add_column(("nope", "x"), "string"), "no such column"),
        (2, lambda u: u.add_column("x", "strin"), "unknown Iceberg primitive type"),
        (2, lambda u: u.add_column("x", "long", required=True), "format version 3"),
        (2, lambda u: u.add_column("x", "long", default=1), "format version 3"),
        (3, lambda u: u.add_column("x", "long", required=True), "needs a default"),
        (3, lambda u: u.add_column("x", "date", default="not a date"), "default 'not a date' is not a date"),
        (2, lambda u: u.rename_column("nope", "x"), "no such column"),
        (2, lambda u: u.rename_column("name", "score"), "exists already"),
        (2, lambda u: u.delete_column("nope"), "no such column"),
        (2, lambda u: u.delete_column("d"), "partition field 'd_day' uses it"),
        (2, lambda u: u.delete_column("id").delete_column("id"), "deleted in this update"),
        (2, lambda u: u.rename_column("name", "n").delete_column("name"), "renamed or updated"),
        (2, lambda u: u.make_optional("id").delete_column("id"), "renamed or updated"),
        (2, lambda u: u.rename_column("name", "n").add_column("name", "string"), "renamed in this update"),
        (2, lambda u: u.update_column("name", doc="x").delete_column("name"), "renamed or updated"),
        (2, lambda u: u.update_column("id", "string"), "int cannot be promoted to string"),
        (2, lambda u: u.update_column("score", "long"), "float cannot be promoted to long"),
        (2, lambda u: u.update_column("price", "decimal(9, 3)"), "cannot be promoted"),
        (2, lambda u: u.update_column("price", "decimal(6, 2)"), "cannot be promoted"),
        (2, lambda u: u.update_column("d", "timestamp"), "format version 2"),
        (3, lambda u: u.update_column("d", "timestamptz"), "cannot be promoted"),
        (2, lambda u: u.add_column("x", "int").update_column("x", "string"), "int cannot be promoted to str"),
        (2, lambda u: u.update_column("x", "long"), "no such column"),
    ],
)
def test_refused_changes_name_the_column_and_commit_nothing(
    tmp_path: Path, version: int, change: Any, message: str
) -> None:
    tbl = make(tmp_path, version, partition=["day(d)"])
    location, files = tbl.metadata_location, table_files(tbl)
    with pytest.raises(InvalidSchemaChange, match=message), tbl.update_schema() as u:
        change(u)
    tbl.refresh()
    assert tbl.metadata_location == location and table_files(tbl) == files


@pytest.mark.parametrize(("partition", "refused"), [("d", "identity"), ("bucket(4, d)", "bucket[4]")])
def test_date_to_timestamp_is_refused_where_partition_values_would_change(
    tmp_path: Path, partition: str, refused: str
) -> None:
    tbl = make(tmp_path, 3, partition=[partition])
    with pytest.raises(
        InvalidSchemaChange, match=rf"\({re.escape(refused)}\) uses it, and timestamp changes"
    ):
        tbl.update_schema().update_column("d", "timestamp").commit()


def test_date_to_timestamp_under_day_keeps_partition_values(tmp_path: Path) -> None:
    """The spec allows it where the transform gives the same values: day of a date and of its midnight."""
    tbl = make(tmp_path, 3, partition=["day(d)"])
    tbl.append(first_rows())
    with tbl.update_schema() as u:
        u.update_column("d", "timestamp")
    schema = SCHEMA.set(SCHEMA.get_field_index("d"), pa.field("d", pa.timestamp("us")))
    later = pa.Table.from_pylist([{"id": 100, "d": dt.datetime(2024, 1, 2, 5)}], schema=schema)
    tbl.append(later)
    parts = tbl.scan(columns=["id", "_partition"]).to_arrow().to_pylist()
    assert {r["id"]: r["_partition"]["d_day"] for r in parts} == {
        1: dt.date(2024, 1, 2), 2: None, 100: dt.date(2024, 1, 2),
    }  # fmt: skip
    got = tbl.scan(
        filter="d >= '2024-01-02T00:00:00' and d < '2024-01-02T06:00:00'", columns=["id"]
    ).to_arrow()
    assert sorted(got["id"].to_pylist()) == [1, 100]


@pytest.mark.parametrize(
    "where", ["d < '1600-01-01T00:00:00'", "d <= '1500-01-01T00:00:00'", "d = '1500-01-01T00:00:00'"]
)
def test_a_date_beyond_timestamp_ns_fails_filtered_reads_as_plain_ones(tmp_path: Path, where: str) -> None:
    """The spec: a date the promoted type cannot hold is a runtime failure. A filter whose literal lies
    beyond the type's range was folded to 'false': no file read, no rows, no failure (a delete deleted
    nothing and reported success)."""
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), ("d", pa.date32())])
    rows = pa.table({"id": [1, 2], "d": [dt.date(1500, 1, 1), dt.date(2024, 5, 1)]}, schema=schema)
    tbl = sql_catalog(tmp_path).create_table("db.t", schema, properties={"format-version": "3"})
    tbl.append(rows)
    with tbl.update_schema() as u:
        u.update_column("d", "timestamp_ns")
    with pytest.raises(DataFileError, match="out of bounds timestamp"):
        tbl.scan().to_arrow()
    with pytest.raises(DataFileError, match="out of bounds timestamp"):
        tbl.scan(filter=where).to_arrow()
    before = tbl.metadata_location
    with pytest.raises(DataFileError, match="out of bounds timestamp"):
        tbl.delete(where)
    assert tbl.refresh().metadata_location == before


def test_deleting_an_identifier_field_is_refused(tmp_path: Path) -> None:
    schema = replace(schema_from_arrow(SCHEMA), identifier_field_ids=(1,))
    tbl = sql_catalog(tmp_path).create_table("db.t", schema, properties={"format-version": "2"})
    with pytest.raises(InvalidSchemaChange, match="'id': it is an identifier field"):
        tbl.update_schema().delete_column("id").commit()
    with tbl.update_schema() as u:
        u.update_column("id", "long")
    assert metadata(tbl)["schemas"][-1]["identifier-field-ids"] == [1]


def test_a_concurrent_append_is_retried_a_concurrent_schema_change_fails(tmp_path: Path) -> None:
    tbl = make(tmp_path, 2)
    other = sql_catalog(tmp_path).load_table("db.t")
    update = tbl.update_schema().add_column("x", "long")
    other.append(first_rows())  # tbl's handle is now stale: the swap loses, the update is re-applied
    update.commit()
    assert [f.name for f in tbl.metadata.schema.fields][-1] == "x"
    assert tbl.metadata.current_snapshot() is not None  # the append stayed
    stale = other.update_schema().add_column("y", "long")
    other.refresh()
    with tbl.update_schema() as u:
        u.add_column("z", "long")
    with pytest.raises(ValidationError, match="schema changed"):
        stale.commit()


@pytest.mark.parametrize("stage", ["metadata", "swap"])
def test_a_failed_commit_commits_nothing_and_leaves_nothing(tmp_path: Path, stage: str) -> None:
    tbl = make(tmp_path, 2)
    location, files = tbl.metadata_location, table_files(tbl)
    _, fail = raise_at(stage, OSError("catalog down"))
    with pytest.raises(OSError, match="catalog down"):
        tbl.update_schema().add_column("x", "long").commit(faults=fail)
    tbl.refresh()
    assert tbl.metadata_location == location and table_files(tbl) == files
    assert_all_readers(tbl, pa.Table.from_pylist([], schema=SCHEMA))


def test_structs_inside_lists_and_maps_evolve(tmp_path: Path) -> None:
    point = pa.struct([pa.field("x", pa.int32()), pa.field("y", pa.int32())])
    schema = pa.schema(
        [pa.field("id", pa.int64(), nullable=False), pa.field("pts", pa.list_(point)),
         pa.field("m", pa.map_(pa.string(), point))]
    )  # fmt: skip
    tbl = sql_catalog(tmp_path).create_table("db.n", schema, properties={"format-version": "2"})
    tbl.append(
        pa.table({"id": [1], "pts": [[{"x": 1, "y": 2}]], "m": [[("a", {"x": 3, "y": 4})]]}, schema=schema)
    )
    with tbl.update_schema(case_sensitive=False) as u:
        u.add_column(("pts", "element", "z"), "long")
        u.rename_column("PTS.element.X", "xx")
        u.add_column(("m", "value", "w"), "string")
        u.delete_column("m.value.y")
        u.update_column("pts.element.y", "long")
    pts = fields_of(metadata(tbl)["schemas"][1])["pts"]["type"]["element"]["fields"]
    assert [(f["id"], f["name"], f["type"]) for f in pts] == [
        (5, "xx", "int"),
        (6, "y", "long"),
        (11, "z", "long"),
    ]
    value = pa.struct([pa.field("x", pa.int32()), pa.field("w", pa.string())])
    expected = pa.table(
        {"id": [1], "pts": [[{"xx": 1, "y": 2, "z": None}]], "m": [[("a", {"x": 3, "w": None})]]},
        schema=pa.schema([
            pa.field("id", pa.int64(), nullable=False),
            pa.field("pts", pa.list_(pa.struct([pa.field("xx", pa.int32()), pa.field("y", pa.int64()),
                                                pa.field("z", pa.int64())]))),
            pa.field("m", pa.map_(pa.string(), value)),
        ]),
    )  # fmt: skip
    assert tbl.scan().to_arrow().to_pylist() == expected.to_pylist()
    assert (
        StaticTable.from_metadata(tbl.metadata_location).scan().to_arrow().to_pylist() == expected.to_pylist()
    )


@pytest.mark.parametrize("version", [1, 2, 3])
def test_a_column_only_an_old_spec_uses_can_be_dropped(tmp_path: Path, version: int) -> None:
    """The old spec's files' manifests are rewritten (deletes, compaction) after the column is dropped;
    ``_partition`` leaves the field out, as Java's Partitioning.partitionType (only partition fields whose
    source column the schema still has)."""
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("name", pa.string())])
    tbl = sql_catalog(tmp_path).create_table(
        "db.d", schema, partition_spec=["name"], properties={"format-version": str(version)}
    )
    tbl.append(pa.table({"id": [1, 2, 3], "name": ["a", "b", "a"]}, schema=schema))
    with tbl.update_spec() as s:
        s.remove_field("name")
    with tbl.update_schema() as u:
        u.delete_column("name")
    tbl.append(pa.table({"id": [4]}))
    expected = pa.table({"id": [1, 2, 3, 4]})
    if version >= 2:
        tbl.delete("id = 1 or id = 4")  # a position delete / DV in the old spec's partition name=a
        expected = pa.table({"id": [2, 3]})
    got = tbl.scan(columns=["id", "_spec_id", "_partition"]).to_arrow().sort_by("id").to_pylist()
    assert [r["id"] for r in got if r["_spec_id"] == 0] == [
        i for i in (1, 2, 3) if i in expected["id"].to_pylist()
    ]
    assert all(r["_partition"] == {} for r in got)
    # DuckDB 1.5.5 aborts the process on a table whose specs use a dropped column: not asked
    for _ in range(2):  # before and after a compaction into the new spec
        assert_same_rows(tbl.scan().to_arrow(), expected, context="gpu_engine scan")
        assert_same_rows(pyiceberg_static(tbl), expected, context="pyiceberg")
        tbl.compact(options={"rewrite-all": "true"})
    assert set(tbl.scan(columns=["_spec_id"]).to_arrow()["_spec_id"].to_pylist()) == {1}


def test_an_update_built_before_another_writers_columns_is_refused(tmp_path: Path) -> None:
    """Another writer added a column and dropped it again (schema 0 current again): this update's field id
    and schema id came from its stale base, and committing set the other writer's schema current (its column
    lost, the dropped one back). Java's SchemaUpdate commits against its base; refused here too."""
    cat = sql_catalog(tmp_path)
    schema = pa.schema([pa.field("id", pa.int64()), pa.field("a", pa.string())])
    cat.create_table("db.t", schema)
    update = cat.load_table("db.t").update_schema().add_column("mine", "string")
    other = cat.load_table("db.t")
    with other.update_schema() as u:
        u.add_column("theirs", "double")
    with other.update_schema() as u:
        u.delete_column("theirs")
    assert other.metadata.current_schema_id == 0
    with pytest.raises(ValidationError, match="last column id changed"):
        update.commit()
    assert [f.name for f in cat.load_table("db.t").schema().fields] == ["id", "a"]


def test_a_schema_is_numbered_against_the_metadata_it_commits_on(tmp_path: Path) -> None:
    """A rename and back by another writer leaves schema 1 (the rename) while 0 is current: an update built
    before numbered its schema 1 too and made the other writer's schema current."""
    cat = sql_catalog(tmp_path)
    schema = pa.schema([pa.field("id", pa.int64()), pa.field("a", pa.string())])
    cat.create_table("db.t", schema)
    update = cat.load_table("db.t").update_schema().update_column("a", doc="mine")
    other = cat.load_table("db.t")
    with other.update_schema() as u:
        u.rename_column("a", "b")
    with other.update_schema() as u:
        u.rename_column("b", "a")
    committed = update.commit()
    tbl = cat.load_table("db.t")
    assert committed.schema_id == tbl.metadata.current_schema_id == 2
    assert [(f.name, f.doc) for f in tbl.schema().fields] == [("id", None), ("a", "mine")]


def test_identifier_fields_set_in_another_order_are_the_same_schema(tmp_path: Path) -> None:
    """Java's Schema.sameSchema compares identifier field ids as a set."""
    schema = pa.schema(
        [pa.field("id", pa.int64(), nullable=False), pa.field("k", pa.string(), nullable=False)]
    )
    tbl = sql_catalog(tmp_path).create_table("db.i", schema)
    with tbl.update_schema() as u:
        u.set_identifier_fields("id", "k")
    with tbl.update_schema() as u:
        u.set_identifier_fields("k", "id")
    assert [s.schema_id for s in tbl.metadata.schemas] == [0, 1] and tbl.metadata.current_schema_id == 1


@pytest.mark.parametrize("version", [1, 2])
def test_types_of_a_later_format_version_are_refused(tmp_path: Path, version: int) -> None:
    """Spec Appendix E: timestamp_ns, unknown, variant, geometry... came with v3 (Java's
    Schema.checkCompatibility when a schema is added); create_table refused them, schema updates did not."""
    tbl = make(tmp_path, version)
    location = tbl.metadata_location
    for kind in ("timestamp_ns", "timestamptz_ns", "unknown", "variant"):
        with pytest.raises(UnsupportedFeature, match=rf"type {kind}, which needs format-version 3"):
            tbl.update_schema().add_column("x", kind).commit()
    nanos = pa.table({"id": pa.array([99], pa.int64()), "ts": pa.array([1], pa.timestamp("ns"))})
    with pytest.raises(UnsupportedFeature, match="'ts' has type timestamp_ns, which needs format-version 3"):
        tbl.append(nanos, merge_schema=True)
    tbl.refresh()
    assert tbl.metadata_location == location


@pytest.mark.parametrize("target", ["timestamp", "timestamp_ns"])
def test_promoting_a_date_with_defaults_makes_them_timestamps(tmp_path: Path, target: str) -> None:
    """Java's NestedField casts defaults to the new type: a date default left as "2017-11-16" on a
    timestamp column made every later scan and write fail."""
    schema = pa.schema([pa.field("id", pa.int64())])
    tbl = sql_catalog(tmp_path).create_table("db.p", schema, properties={"format-version": "3"})
    tbl.append(pa.table({"id": [1]}))
    with tbl.update_schema() as u:
        u.add_column("d", "date", default=dt.date(2017, 11, 16))
    with tbl.update_schema() as u:
        u.update_column("d", target)
    field = tbl.schema().find_field("d")
    assert field.initial_default == field.write_default
    assert str(field.initial_default).startswith("2017-11-16T00:00:00")
    tbl.append(pa.table({"id": [2]}))  # the write-default fills d
    got = tbl.scan().to_arrow().sort_by("id").column("d").cast(pa.timestamp("us")).to_pylist()
    assert got == [dt.datetime(2017, 11, 16)] * 2


def test_a_move_finds_the_column_added_in_the_update_first(tmp_path: Path) -> None:
    """Java's findForMove: a column deleted and added again under its name is the added one."""
    schema = pa.schema([pa.field("id", pa.int64()), pa.field("a", pa.string()), pa.field("b", pa.string())])
    tbl = sql_catalog(tmp_path).create_table("db.m", schema)
    with tbl.update_schema() as u:
        u.delete_column("a").add_column("a", "long").move_first("a")
    assert [(f.name, str(f.type)) for f in tbl.schema().fields] == [
        ("a", "long"),
        ("id", "long"),
        ("b", "string"),
    ]


def test_a_column_added_in_the_update_takes_its_updates(tmp_path: Path) -> None:
    """Java's findForUpdate: update_column (type, doc) and make_optional reach a column added in the same
    update; its default follows a promotion (a date's becomes a timestamp)."""
    tbl = make(tmp_path, 3)
    tbl.append(first_rows())
    with tbl.update_schema() as u:
        u.add_column("n", "int", required=True, default=3).update_column("n", "long", doc="count")
        u.make_optional("n")
        u.add_column(("loc", "alt"), "float").update_column(("loc", "alt"), "double")
        u.add_column("since", "date", default=dt.date(2024, 1, 2)).update_column("since", "timestamp")
    fields = fields_of(metadata(tbl)["schemas"][-1])
    assert (fields["n"]["type"], fields["n"]["doc"], fields["n"]["required"]) == ("long", "count", False)
    assert fields["n"]["initial-default"] == 3
    assert fields["since"]["type"] == "timestamp"
    assert fields["since"]["initial-default"] == "2024-01-02T00:00:00.000000"
    alt = {f["name"]: f for f in fields["loc"]["type"]["fields"]}["alt"]
    assert alt["type"] == "double"
    got = tbl.scan().to_arrow()
    assert got.column("n").to_pylist() == [3, 3] and got.schema.field("n").type == pa.int64()
    assert got.column("since").to_pylist() == [dt.datetime(2024, 1, 2)] * 2


def test_temporal_defaults_as_iso_strings_and_zones_where_they_belong(tmp_path: Path) -> None:
    """The spec's JSON forms are taken as defaults; a timestamp without zone refuses an aware datetime
    (pyarrow moved it to UTC: 12:00+05:30 became 06:30 in every row written before)."""
    tbl = make(tmp_path, 3)
    tbl.append(first_rows())
    aware = dt.datetime(2024, 1, 1, 12, 0, tzinfo=dt.timezone(dt.timedelta(hours=5, minutes=30)))
    with (
        pytest.raises(InvalidSchemaChange, match="has a time zone; a timestamp column"),
        tbl.update_schema() as u,
    ):
        u.add_column("t0", "timestamp", default=aware)
    with tbl.update_schema() as u:
        u.add_column("t1", "timestamp", default="2024-01-01T12:00:00")
        u.add_column("t2", "timestamptz", default="2024-01-01T12:00:00+05:30")
        u.add_column("t3", "timestamptz", default=aware)
        u.add_column("d1", "date", default="2024-02-29")
    row = tbl.scan().to_arrow().to_pylist()[0]
    assert row["t1"] == dt.datetime(2024, 1, 1, 12, 0)
    assert row["t2"] == row["t3"] == aware
    assert row["d1"] == dt.date(2024, 2, 29)
    with pytest.raises(InvalidSchemaChange, match="is not a date"), tbl.update_schema() as u:
        u.add_column("d2", "date", default="2024-02-30")


@pytest.mark.parametrize(
    ("type_", "value"),
    [
        ("timestamp", pd.Timestamp("2024-01-01 00:00:00.000000001")),
        ("date", dt.datetime(2024, 1, 1, 12, 30)),
        ("time", pd.Timestamp("2024-01-01 00:00:00.5")),
        ("time", 86_400_000_000),
        ("timestamp", np.datetime64("2024-01-01T00:00:00.000000001")),
        ("date", pa.scalar(1, pa.date64())),
    ],
    ids=[
        "nanoseconds-in-micros",
        "datetime-as-date",
        "timestamp-as-time",
        "past-midnight",
        "np-ns",
        "arrow-ms",
    ],
)
def test_temporal_defaults_are_exact_or_refused(tmp_path: Path, type_: str, value: object) -> None:
    """A default that is no value of the type is refused (pyarrow dropped a pandas Timestamp's
    nanoseconds and a datetime's clock without a word); exact ones are taken, nanoseconds included."""
    tbl = make(tmp_path, 3)
    with pytest.raises(InvalidSchemaChange, match=r"default: (.* falls between|.* outside the range|cannot)"):
        tbl.update_schema().add_column("c", type_, default=value).commit()
    assert "c" not in tbl.refresh().schema().names_by_id.values()
    exact = pd.Timestamp("2024-01-01 00:00:00.000000001")
    with tbl.update_schema() as u:
        u.add_column("ns", "timestamp_ns", default=exact)
        u.add_column("day", "date", default=dt.datetime(2024, 1, 1))
        u.add_column("np", "timestamp_ns", default=np.datetime64("2024-01-01T00:00:00.000000001"))
        u.add_column("arrow", "timestamptz", default=pa.scalar(1, pa.timestamp("us", tz="UTC")))
        u.add_column("clock", "time", default=pa.scalar(1000, pa.time64("ns")))
    defaults = {f.name: f.initial_default for f in tbl.schema().fields}
    assert (
        defaults["ns"] == defaults["np"] == "2024-01-01T00:00:00.000000001"
        and defaults["day"] == "2024-01-01"
    )
    assert defaults["arrow"] == "1970-01-01T00:00:00.000001+00:00"
    assert defaults["clock"] == "00:00:00.000001"


def test_a_foreign_v3_column_named_like_a_lineage_column_is_left_alone(tmp_path: Path) -> None:
    """Another engine's v3 table with a top-level ``_row_id`` column (Java checks no names): it loads,
    scans, appends and takes unrelated schema changes; a rewrite that would write two ``_row_id``
    columns (compaction) is refused naming the column; renaming it away makes everything work. Only
    bringing the name in (add, rename to it) is refused here."""
    cat = sql_catalog(tmp_path)
    tbl = cat.create_table(
        "db.t", pa.schema([("id", pa.int64()), ("rid", pa.int64())]), properties={"format-version": "3"}
    )
    path = Path(tbl.metadata_location.removeprefix("file://"))
    raw = json.loads(path.read_text())
    for schema in raw["schemas"]:
        for f in schema["fields"]:
            f["name"] = "_row_id" if f["name"] == "rid" else f["name"]
    path.write_text(json.dumps(raw))
    tbl = cat.load_table("db.t")
    for i in range(2):
        tbl.append(pa.table({"id": pa.array([i], pa.int64()), "_row_id": pa.array([7 + i], pa.int64())}))
    with tbl.update_schema() as u:
        u.add_column("note", "string")
    assert sorted(tbl.scan(columns=["id", "_row_id"]).to_arrow().to_pylist(), key=str) == [
        {"id": 0, "_row_id": 7},
        {"id": 1, "_row_id": 8},
    ]
    with pytest.raises(UnsupportedFeature, match="its column '_row_id' has the name of a row-lineage column"):
        tbl.compact(options={"rewrite-all": "true"})
    with pytest.raises(UnsupportedFeature, match="column '_last_updated_sequence_number'"):
        tbl.update_schema().rename_column("note", "_last_updated_sequence_number").commit()
    with tbl.update_schema() as u:
        u.rename_column("_row_id", "rid")
    tbl.compact(options={"rewrite-all": "true"})
    assert sorted(tbl.scan(columns=["id", "rid"]).to_arrow().to_pylist(), key=str) == [
        {"id": 0, "rid": 7},
        {"id": 1, "rid": 8},
    ]


@pytest.mark.parametrize(
    "change",
    [
        lambda u: u.add_column("x", 5),
        lambda u: u.add_column("x", None),
        lambda u: u.add_column("x", "long", doc=5),
        lambda u: u.add_column(("s", 5), "long"),
        lambda u: u.update_column("name", doc=b"x"),
        lambda u: u.rename_column("name", 5),
    ],
    ids=["type-int", "type-none", "doc-int", "path-int", "doc-bytes", "rename-int"],
)
def test_values_the_metadata_cannot_hold_are_refused_before_committing(tmp_path: Path, change: Any) -> None:
    """A type, name or doc of the wrong kind went into the committed metadata (a type 5, a doc 5): the
    table could not be loaded again (or PyIceberg refused it)."""
    tbl = sql_catalog(tmp_path).create_table("db.t", SCHEMA)
    location = tbl.metadata_location
    with pytest.raises(InvalidSchemaChange):
        change(tbl.update_schema())
    assert tbl.refresh().metadata_location == location


@pytest.mark.parametrize("width", [3, 10])
def test_int_rows_near_the_minimum_keep_their_partition_after_a_promotion_to_long(
    tmp_path: Path, width: int
) -> None:
    """truncate[W] of an int wraps the partition of the values nearest the minimum around (Java's int
    arithmetic: a value near the int maximum); once the column is a long, filters still find those rows and
    a delete by a filter they do not match keeps them (it read the wrapped value as a large partition:
    ``i > 100`` dropped the partition of -2147483648 from metadata alone)."""
    cat = sql_catalog(tmp_path)
    low = -(2**31)
    tbl = cat.create_table(
        "db.t", schema=pa.schema([pa.field("i", pa.int32())]), partition_spec=[f"truncate({width}, i)"],
        properties={"format-version": "2", "write.metadata.metrics.default": "none"},
    )  # fmt: skip
    tbl.append(pa.table({"i": pa.array([low, 5], pa.int32())}))
    with tbl.update_schema() as u:
        u.update_column("i", "long")
    tbl.append(pa.table({"i": pa.array([low - 1, low + 1], pa.int64())}))
    everything = [low - 1, low, low + 1, 5]
    for where, match in (
        ("i < 0", lambda v: v < 0),
        ("i > 100", lambda v: v > 100),
        (f"i = {low}", low.__eq__),
    ):
        got = sorted(tbl.scan(filter=where).to_arrow().column("i").to_pylist())
        assert got == [v for v in everything if match(v)], where
    tbl.delete("i > 100")
    tbl.delete(f"i >= {low} and i <= 0")
    assert sorted(tbl.scan().to_arrow().column("i").to_pylist()) == [low - 1, 5]


def test_filters_near_the_least_decimal_38_under_truncate(tmp_path: Path) -> None:
    """truncate[10] of the least decimal(38, 0) values is a 39-digit number no partition can hold (no
    such row can be written): filters whose bounds project there are resolved, not sent to the planner
    (it failed: "Decimal type with precision 39 does not fit"), on a column widened to decimal(38, 0)."""
    cat = sql_catalog(tmp_path)
    schema = pa.schema([pa.field("id", pa.int64()), pa.field("x", pa.decimal128(9, 0))])
    tbl = cat.create_table("db.t", schema=schema, partition_spec=["truncate(10, x)"])
    x = pa.array([Decimal(5), Decimal(-7)], pa.decimal128(9, 0))
    tbl.append(pa.table({"id": pa.array([1, 2], pa.int64()), "x": x}))
    with tbl.update_schema() as u:
        u.update_column("x", "decimal(38,0)")
    least = "-" + "9" * 38
    cases = {
        f"x >= {least[:-1]}8": [1, 2],
        f"x <= {least}": [],
        f"x in (5, {least})": [1],
        f"x != {least}": [1, 2],
    }
    for where, ids in cases.items():
        assert sorted(tbl.scan(filter=where).to_arrow().column("id").to_pylist()) == ids, where
    tbl.delete(f"x <= {least}")
    tbl.delete(f"x in (5, {least})")
    assert tbl.scan().to_arrow().column("id").to_pylist() == [2]


def test_filters_near_the_greatest_decimal_38_under_truncate(tmp_path: Path) -> None:
    """Partition values of 38 digits are inside the type: told apart exactly (Decimal arithmetic rounds at
    28 digits, which made 10^38 - 1 look outside it: ``x = 99...9`` found nothing and a delete of
    ``x <= 10^38 - 100`` removed the row of 10^38 - 1 with its partition, from metadata alone)."""
    cat = sql_catalog(tmp_path)
    schema = pa.schema([pa.field("id", pa.int64()), pa.field("x", pa.decimal128(38, 0))])
    props = {"write.metadata.metrics.default": "none"}  # no bounds to catch it: partitions alone
    tbl = cat.create_table("db.t", schema=schema, partition_spec=["truncate(10, x)"], properties=props)
    greatest = 10**38 - 1
    x = pa.array([Decimal(greatest), Decimal(5)], pa.decimal128(38, 0))
    tbl.append(pa.table({"id": pa.array([1, 2], pa.int64()), "x": x}))
    for where in (f"x = {greatest}", f"x >= {greatest - 5}", f"x in (7, {greatest})"):
        assert tbl.scan(filter=where).to_arrow().column("id").to_pylist() == [1], where
    assert tbl.scan(filter=f"x != {greatest}").to_arrow().column("id").to_pylist() == [2]
    tbl.delete(f"x <= {greatest - 100}")
    assert tbl.scan().to_arrow().column("id").to_pylist() == [1]


def test_deleting_a_column_another_writer_sorted_or_partitioned_by_fails(tmp_path: Path) -> None:
    """The uses of a deleted column were checked on the handle's metadata only: a column another writer had
    just made the sort order's (or a partition field's) was deleted, leaving an order Java cannot load."""
    for i, user in enumerate(("sort order 1", "partition field 'name'")):
        cat = sql_catalog(tmp_path / str(i))
        cat.create_table("db.t", SCHEMA, properties=FAST)
        stale = cat.load_table("db.t")
        other = cat.load_table("db.t")
        if i == 0:
            other.replace_sort_order("name")
        else:
            other.update_spec().add_field("name").commit()
        with pytest.raises(ValidationError, match=f"{user} uses a deleted column"):
            stale.update_schema().delete_column("name").commit()
        assert "name" in {f.name for f in cat.load_table("db.t").metadata.schema.fields}


@pytest.mark.parametrize("path", ["loc", "pts.element"])
def test_deleting_every_field_of_a_struct_is_refused(tmp_path: Path, path: str) -> None:
    """A struct left without fields (allowed by the spec) could not be written again (Parquet has no empty
    group): appends failed, and its reads lost rows."""
    schema = pa.schema([*SCHEMA, pa.field("pts", pa.list_(pa.struct([pa.field("px", pa.int32())])))])
    tbl = sql_catalog(tmp_path).create_table("db.e", schema, properties=FAST)
    fields = ["lat", "lon"] if path == "loc" else ["px"]
    update = tbl.update_schema()
    for name in fields:
        update.delete_column(f"{path}.{name}")
    with pytest.raises(InvalidSchemaChange, match=f"struct '{path}' would have no field"):
        update.commit()
    tbl.update_schema().delete_column("loc").add_column(
        "loc2", pa.struct([pa.field("a", pa.int64())])
    ).commit()
