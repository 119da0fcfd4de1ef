"""catalog.create_table: metadata v1/v2/v3, fresh field ids for Arrow schemas, partition spec strings,
errors; SQL and file-system catalogs; PyIceberg reads the new (empty) tables."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
import sqlalchemy as sa
from pyiceberg.table import StaticTable
from sqlalchemy import exc as sa_exc

import gpu_engine as ge
from gpu_engine.catalog.sql import SqlCatalog
from gpu_engine.commit import new_table_metadata
from gpu_engine.commit.schema_from_arrow import schema_from_arrow
from gpu_engine.commit.spec_parse import parse_partition_spec
from gpu_engine.commit.spec_update import InvalidSpecChange
from gpu_engine.errors import (
    CatalogError,
    CommitStateUnknown,
    InvalidProperty,
    InvalidType,
    NoSuchNamespace,
    TableAlreadyExists,
    UnsupportedFeature,
    UnsupportedTransform,
)
from gpu_engine.iceberg import types as it

from ._support import SCHEMA, Interrupted, pyiceberg_catalog, rows, sql_catalog, swap_lands_then


@pytest.mark.parametrize("version", [1, 2, 3])
def test_create_writes_spec_metadata(tmp_path: Path, version: int) -> None:
    cat = sql_catalog(tmp_path)
    tbl = cat.create_table(
        "db.events", SCHEMA, partition_spec=["day(ts)", "bucket(16, id)"],
        properties={"format-version": str(version), "owner": "me"},
    )  # fmt: skip
    raw = json.loads(Path(tbl.metadata_location).read_text())
    assert Path(tbl.metadata_location).name.startswith("00000-")
    assert raw["format-version"] == version
    assert raw["location"] == str(tmp_path / "wh" / "db" / "events")
    assert raw["last-column-id"] == 8
    assert raw["last-partition-id"] == 1001
    assert raw["default-sort-order-id"] == 0 and raw["sort-orders"] == [{"order-id": 0, "fields": []}]
    assert raw["properties"] == {"owner": "me"}  # format-version is not a property
    assert len(raw["table-uuid"]) == 36
    assert raw["partition-specs"] == [
        {"spec-id": 0, "fields": [
            {"name": "ts_day", "transform": "day", "source-id": 2, "field-id": 1000},
            {"name": "id_bucket", "transform": "bucket[16]", "source-id": 1, "field-id": 1001},
        ]},
    ]  # fmt: skip
    assert [f["id"] for f in raw["schemas"][0]["fields"]] == list(range(1, 9))
    assert raw["schemas"][0]["fields"][0] == {"id": 1, "name": "id", "required": True, "type": "long"}
    assert raw["snapshots"] == []
    if version == 1:
        assert "last-sequence-number" not in raw and raw["current-snapshot-id"] == -1
        assert raw["schema"] == raw["schemas"][0] and "partition-spec" in raw
    else:
        assert raw["last-sequence-number"] == 0
    assert ("next-row-id" in raw) == (version == 3)
    if version == 3:
        assert raw["next-row-id"] == 0 and raw["current-snapshot-id"] is None
    # independent readers: an empty table with the schema
    assert StaticTable.from_metadata(tbl.metadata_location).scan().to_arrow().num_rows == 0
    assert pyiceberg_catalog(tmp_path, "db.events").num_rows == 0
    assert tbl.scan().to_arrow().num_rows == 0
    assert cat.load_table("db.events").metadata == tbl.metadata


def test_fresh_ids_for_nested_arrow_schema() -> None:
    schema = pa.schema(
        [
            pa.field("a", pa.int32(), nullable=False),
            pa.field("b", pa.struct([pa.field("x", pa.string()), pa.field("y", pa.list_(pa.int64()))])),
            pa.field("m", pa.map_(pa.string(), pa.float32())),
            pa.field("c", pa.large_string()),
        ]
    )
    s = schema_from_arrow(schema)
    assert [(f.field_id, f.name) for f in s.fields] == [(1, "a"), (2, "b"), (3, "m"), (4, "c")]
    assert s.fields[0].required and not s.fields[1].required
    b = s.fields[1].type
    assert isinstance(b, it.StructType) and [f.field_id for f in b.fields] == [5, 6]
    y = b.fields[1].type
    assert isinstance(y, it.ListType) and y.element_id == 7 and y.element == it.LONG
    m = s.fields[2].type
    assert isinstance(m, it.MapType) and (m.key_id, m.value_id) == (8, 9) and m.value == it.FLOAT
    assert s.highest_field_id == 9 and s.fields[3].type == it.STRING


def test_arrow_type_mapping() -> None:
    schema = pa.schema(
        [
            ("i8", pa.int8()), ("u32", pa.uint32()), ("tz", pa.timestamp("ms", tz="UTC")),
            ("ns", pa.timestamp("ns")), ("t", pa.time64("us")), ("dec", pa.decimal128(38, 10)),
            ("fx", pa.binary(4)), ("u", pa.uuid()), ("dict", pa.dictionary(pa.int8(), pa.string())),
        ]
    )  # fmt: skip
    types = [f.type for f in schema_from_arrow(schema).fields]
    assert types == [
        it.INT, it.LONG, it.TIMESTAMPTZ, it.TIMESTAMP_NS, it.TIME, it.decimal(38, 10), it.fixed(4), it.UUID,
        it.STRING,
    ]  # fmt: skip
    with pytest.raises(InvalidType, match=r"'big'.*uint64"):
        schema_from_arrow(pa.schema([("big", pa.uint64())]))


@pytest.mark.parametrize(
    ("text", "transform", "name"),
    [
        ("region", "identity", "region"), ("identity(region)", "identity", "region"),
        ("year(d)", "year", "d_year"), ("months(ts)", "month", "ts_month"), ("day(ts)", "day", "ts_day"),
        ("hour(ts)", "hour", "ts_hour"), ("bucket(8, id)", "bucket[8]", "id_bucket"),
        ("bucket[8](id)", "bucket[8]", "id_bucket"), ("truncate(3, s)", "truncate[3]", "s_trunc"),
        ("void(s)", "void", "s_null"),
    ],
)  # fmt: skip
def test_partition_strings(text: str, transform: str, name: str) -> None:
    spec = parse_partition_spec([text], schema_from_arrow(SCHEMA))
    (f,) = spec.fields
    assert (f.transform, f.name, f.field_id) == (transform, name, 1000)


@pytest.mark.parametrize(
    ("fields", "match"),
    [
        (["day(s)"], "transform day cannot apply to column 's' of type string"),
        (["bucket(4, flag)"], r"bucket\[4\] cannot apply to column 'flag' of type boolean"),
        (["truncate(2, score)"], r"truncate\[2\] cannot apply"),
        (["day(nope)"], "no column 'nope'"),
        (["frobnicate(id)"], "unknown transform 'frobnicate'"),
        (["bucket(id)"], r"expected bucket\(N, column\)"),
        (["id", "identity(id)"], "already has a field named 'id'"),
    ],
)
def test_bad_partition_specs(tmp_path: Path, fields: list[str], match: str) -> None:
    cat = sql_catalog(tmp_path)
    with pytest.raises(UnsupportedTransform, match=match):
        cat.create_table("db.bad", SCHEMA, partition_spec=fields)
    assert not cat.table_exists("db.bad")
    assert not (tmp_path / "wh" / "db" / "bad").exists()


def test_metrics_modes_of_missing_columns_are_refused_at_create(tmp_path: Path) -> None:
    """Java's MetricsConfig.validateReferencedColumns on new tables: a mode for a column the schema lacks
    (a typo) would silently never apply."""
    cat = sql_catalog(tmp_path)
    bad = {"write.metadata.metrics.column.regoin": "full"}
    with pytest.raises(InvalidProperty, match=r"metrics.column.regoin: the schema has no column 'regoin'"):
        cat.create_table("db.bad", SCHEMA, properties=bad)
    assert not cat.table_exists("db.bad")
    good = {"write.metadata.metrics.column.region": "full", "write.metadata.metrics.column.id": "none"}
    assert cat.create_table("db.good", SCHEMA, properties=good).properties == good


def test_create_errors(tmp_path: Path) -> None:
    cat = sql_catalog(tmp_path)
    cat.create_table("db.t", SCHEMA)
    with pytest.raises(TableAlreadyExists, match=r"db\.t already exists"):
        cat.create_table("db.t", SCHEMA)
    with pytest.raises(NoSuchNamespace, match="nope"):
        cat.create_table("nope.t", SCHEMA)
    with pytest.raises(UnsupportedFeature, match="format-version='4'"):
        cat.create_table("db.v4", SCHEMA, properties={"format-version": "4"})
    with pytest.raises(UnsupportedFeature, match=r"'ns'.*timestamp_ns.*format-version 3"):
        cat.create_table("db.ns", pa.schema([("ns", pa.timestamp("ns"))]), properties={"format-version": "2"})
    ambiguous = pa.schema([("a.b", pa.int64()), ("a", pa.struct([("b", pa.int64())]))])
    with pytest.raises(InvalidType, match=r"fields 1 and 3 both have the full name 'a\.b'"):
        cat.create_table("db.dots", ambiguous)  # Java and PyIceberg refuse it: 'a.b' would reach field 3
    assert [t[-1] for t in cat.list_tables("db")] == ["t"]
    v3 = cat.create_table(
        "db.ns3", pa.schema([("ns", pa.timestamp("ns"))]), properties={"format-version": "3"}
    )
    assert v3.schema().fields[0].type == it.TIMESTAMP_NS


def test_explicit_location_and_iceberg_schema(tmp_path: Path) -> None:
    cat = sql_catalog(tmp_path)
    schema = schema_from_arrow(SCHEMA)
    tbl = cat.create_table("db.t", schema, location=str(tmp_path / "elsewhere"))
    assert tbl.location == str(tmp_path / "elsewhere")
    assert tbl.schema() == schema
    md = new_table_metadata(schema, location="/x/", properties={"format-version": "1"})
    assert md.location == "/x" and md.last_partition_id == 999 and md.next_row_id is None


def test_file_system_catalog(tmp_path: Path) -> None:
    cat = ge.load_catalog("fs", type="filesystem", warehouse=str(tmp_path))
    cat.create_namespace("db")
    tbl = cat.create_table("db.t", SCHEMA, partition_spec=["region"], properties={"format-version": "2"})
    assert tbl.metadata_location == str(tmp_path / "db" / "t" / "metadata" / "v1.metadata.json")
    assert sorted(p.name for p in (tmp_path / "db" / "t" / "metadata").iterdir()) == [
        "v1.metadata.json",
        "version-hint.text",
    ]
    with pytest.raises(TableAlreadyExists):
        cat.create_table("db.t", SCHEMA)
    with pytest.raises(UnsupportedFeature, match="cannot be created at"):
        cat.create_table("db.u", SCHEMA, location=str(tmp_path / "other"))
    assert ge.load_table(tmp_path / "db" / "t").metadata == tbl.metadata


def test_rest_catalog_creates_through_the_server(tmp_path: Path) -> None:
    """CreateTableRequest (as Java and PyIceberg): the server picks the location unless one is given and
    writes the first metadata; a lost answer is an unknown state (the table exists: nothing to clean)."""
    from ..catalog.rest_server import RestCatalogServer

    server = RestCatalogServer(tmp_path / "server").start()
    try:
        cat = ge.load_catalog("rest", uri=server.url, credential="client:secret", warehouse="polaris_catalog")
        cat.create_namespace("db")
        tbl = cat.create_table(
            "db.t", SCHEMA, partition_spec=["region"], properties={"format-version": "3", "k": "v"},
            sort_order="id DESC",
        )  # fmt: skip
        assert tbl.location == str(tmp_path / "server" / "warehouse" / "db.t")  # the server's choice
        assert tbl.metadata.format_version == 3 and tbl.spec().fields[0].name == "region"
        assert tbl.metadata.properties["k"] == "v" and "format-version" not in tbl.metadata.properties
        assert [f.source_id for f in tbl.metadata.sort_order.fields] == [1]
        assert not list(Path.cwd().glob("polaris_catalog"))  # nothing written under the warehouse name
        tbl.append(rows(0, 3))
        assert cat.load_table("db.t").scan().to_arrow().num_rows == 3
        with pytest.raises(TableAlreadyExists):
            cat.create_table("db.t", SCHEMA)
        with pytest.raises(NoSuchNamespace):
            cat.create_table("nope.t", SCHEMA)
        there = cat.create_table("db.u", SCHEMA, location=str(tmp_path / "elsewhere"))
        assert there.location == str(tmp_path / "elsewhere")
        server.faults.append("create-504")
        with pytest.raises(CommitStateUnknown):
            cat.create_table("db.v", SCHEMA)
        assert cat.table_exists("db.v")
        bare = ge.load_catalog("rest2", uri=server.url, credential="client:secret")  # no warehouse at all
        assert bare.create_table("db.x", SCHEMA).location == str(tmp_path / "server" / "warehouse" / "db.x")
        server.faults.append("create-504")
        with pytest.raises(CommitStateUnknown):
            cat.register_table("db.w", cat.load_table("db.v").metadata_location)
        assert cat.table_exists("db.w")
    finally:
        server.stop()
    assert not server.errors, server.errors


def test_create_interrupted_after_the_catalog_registered_it_keeps_the_metadata(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The catalog's row landed, then the call was interrupted: the outcome is unknown to create_table,
    so the metadata file the row may name stays (it was deleted: the table could neither load nor be
    created again)."""
    cat = sql_catalog(tmp_path)
    swap_lands_then(monkeypatch, Interrupted())
    with pytest.raises(Interrupted):
        cat.create_table("db.t", SCHEMA)
    monkeypatch.undo()
    assert cat.load_table("db.t").scan().to_arrow().num_rows == 0


def test_create_whose_sql_commit_fails_is_unknown_and_keeps_the_metadata(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The INSERT's transaction committed but the driver reported a failure (a connection lost during
    COMMIT): CommitStateUnknown, not a definite error, and the metadata file stays."""
    cat = sql_catalog(tmp_path)
    real = sa.engine.Connection.commit

    def committed_then_lost(self: sa.engine.Connection) -> None:
        real(self)
        raise sa_exc.OperationalError("COMMIT", {}, Exception("server closed the connection"))

    monkeypatch.setattr(sa.engine.Connection, "commit", committed_then_lost)
    with pytest.raises(CommitStateUnknown, match="whether it exists is unknown"):
        cat.create_table("db.t", SCHEMA)
    monkeypatch.undo()
    assert cat.load_table("db.t").scan().to_arrow().num_rows == 0


def test_create_refused_by_the_catalog_removes_its_metadata(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cat = sql_catalog(tmp_path)

    def refused(self: SqlCatalog, identifier: object, expected: str | None, new: str) -> str:
        raise CatalogError("refused")

    monkeypatch.setattr(SqlCatalog, "commit_metadata", refused)
    with pytest.raises(CatalogError, match="refused"):
        cat.create_table("db.t", SCHEMA)
    assert not list(tmp_path.rglob("*.metadata.json"))


@pytest.mark.parametrize("name", ["_row_id", "_last_updated_sequence_number"])
def test_v3_refuses_a_column_named_like_a_row_lineage_column(tmp_path: Path, name: str) -> None:
    """v3 data files keep row lineage in columns of these names: a table column of the same name would
    make them ambiguous, so creating, adding and upgrading to v3 refuse it (v2 tables may have it)."""
    cat = sql_catalog(tmp_path)
    clash = pa.schema([("id", pa.int64()), (name, pa.int64())])
    with pytest.raises(UnsupportedFeature, match=f"column '{name}'.*row lineage"):
        cat.create_table("db.t", clash, properties={"format-version": "3"})
    v3 = cat.create_table("db.t", pa.schema([("id", pa.int64())]), properties={"format-version": "3"})
    with pytest.raises(UnsupportedFeature, match=f"column '{name}'"):
        v3.update_schema().add_column(name, it.LONG).commit()
    v2 = cat.create_table("db.v2", clash, properties={"format-version": "2"})
    with pytest.raises(UnsupportedFeature, match=f"column '{name}'"):
        v2.update_properties().set("format-version", "3").commit()
    assert v2.refresh().format_version == 2


def test_an_unexpected_catalog_error_is_settled_by_asking_the_catalog(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An error that is not the catalog's own (Java: checkCommitStatus): the table is there under the
    new metadata file, so create_table returns it; not there, the error is raised and the file deleted;
    the catalog cannot answer, CommitStateUnknown and the file kept."""
    cat = sql_catalog(tmp_path)
    swap_lands_then(monkeypatch, RuntimeError("answer lost"))
    assert cat.create_table("db.landed", SCHEMA).scan().to_arrow().num_rows == 0
    monkeypatch.undo()

    def fails(self: SqlCatalog, identifier: object, expected: str | None, new: str) -> str:
        raise RuntimeError("driver bug")

    monkeypatch.setattr(SqlCatalog, "commit_metadata", fails)
    with pytest.raises(RuntimeError, match="driver bug"):
        cat.create_table("db.not_landed", SCHEMA)
    assert not any("not_landed" in str(p) for p in tmp_path.rglob("*.metadata.json"))

    def cannot_tell(self: SqlCatalog, identifier: object) -> str:
        raise RuntimeError("catalog down")

    monkeypatch.setattr(SqlCatalog, "current_metadata_location", cannot_tell)
    with pytest.raises(CommitStateUnknown, match="whether the table exists is unknown"):
        cat.create_table("db.unknown", SCHEMA)
    assert any("unknown" in str(p) for p in tmp_path.rglob("*.metadata.json"))


def test_a_file_system_create_failing_to_write_is_a_plain_error_leaving_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A full disk while the file-system catalog puts v1.metadata.json in place: nothing was created, so
    the OSError is raised (not CommitStateUnknown) and no file is left for list_tables to find."""
    import errno

    from gpu_engine.io.fileio import LocalFileIO

    cat = ge.load_catalog("fs", type="filesystem", warehouse=str(tmp_path / "wh"))
    cat.create_namespace("db")
    real = LocalFileIO.write_bytes

    def full(self: LocalFileIO, path: str, data: bytes) -> None:
        if Path(path).name.startswith("v1"):
            raise OSError(errno.ENOSPC, "No space left on device")
        real(self, path, data)

    monkeypatch.setattr(LocalFileIO, "write_bytes", full)
    with pytest.raises(OSError, match="No space left"):
        cat.create_table("db.t", SCHEMA)
    monkeypatch.undo()
    assert cat.list_tables("db") == [] and not list(tmp_path.rglob("*.metadata.json"))


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"properties": {5: "x"}}, InvalidProperty),
        ({"properties": {"k": 5}}, InvalidProperty),
        ({"partition_spec": [5]}, UnsupportedTransform),
        ({"location": 5}, UnsupportedFeature),
    ],
)
def test_arguments_the_metadata_cannot_hold_are_refused(
    tmp_path: Path, kwargs: dict[str, Any], error: type
) -> None:
    """A property 5 or a location 5 went into the metadata JSON (the table could not be loaded again),
    a partition field 5 raised a bare TypeError."""
    cat = sql_catalog(tmp_path)
    with pytest.raises(error):
        cat.create_table("db.t", SCHEMA, **kwargs)
    assert not cat.table_exists("db.t")
    with pytest.raises(InvalidSpecChange, match="expected a string"):
        cat.create_table("db.u", SCHEMA).update_spec().add_field(5)  # type: ignore[arg-type]


def test_a_struct_with_no_stored_field_is_refused(tmp_path: Path) -> None:
    """Parquet has no group without fields: a table made with one could never be written."""
    from gpu_engine.iceberg.schema import Schema

    cat = sql_catalog(tmp_path)
    f = it.NestedField
    unknown_only = Schema((f(1, "id", it.LONG), f(2, "s", it.StructType((f(3, "u", it.UNKNOWN),)))))
    with pytest.raises(UnsupportedFeature, match=r"struct column 's' has no field a data file can store"):
        cat.create_table("db.e", unknown_only, properties={"format-version": "3"})
    assert not cat.table_exists("db.e")


def _schema_json(**extra: Any) -> dict[str, Any]:
    fields = [
        {"id": 1, "name": "k", "required": True, "type": "long"},
        {"id": 2, "name": "v", "required": True, "type": "double"},
        {"id": 3, "name": "o", "required": False, "type": "string"},
        {"id": 4, "name": "n", "required": False, "type": "int", **extra},
    ]
    return {"type": "struct", "schema-id": 0, "fields": fields}


@pytest.mark.parametrize(
    ("identifiers", "extra", "version", "match"),
    [
        ([9], {}, 2, "identifier field 'field id 9' cannot identify a row: the schema has no such column"),
        ([2], {}, 2, "identifier field 'v' cannot identify a row: a double column cannot identify a row"),
        ([3], {}, 2, "identifier field 'o' cannot identify a row: it is optional"),
        ([1], {"write-default": "abc"}, 3, "column 'n': write-default 'abc' is not a int value"),
        ([1], {"initial-default": 1.5}, 3, "column 'n': initial-default 1.5 is not a int value"),
        ([1], {"initial-default": 7, "write-default": 7}, 2, "default values need format-version 3"),
    ],
)
def test_a_schema_other_readers_refuse_is_refused_at_create(
    tmp_path: Path, identifiers: list[int], extra: dict[str, Any], version: int, match: str
) -> None:
    """Identifier fields that cannot identify a row and defaults of another type were written as given: a
    table PyIceberg (and Java) refuse to load, or one that refused every write."""
    from gpu_engine.iceberg.schema import schema_from_json

    schema = schema_from_json({**_schema_json(**extra), "identifier-field-ids": identifiers})
    cat = sql_catalog(tmp_path)
    with pytest.raises(UnsupportedFeature, match=re.escape(match)):
        cat.create_table("db.t", schema, properties={"format-version": str(version)})
    assert not cat.table_exists("db.t")


def test_a_schema_with_identifier_fields_and_defaults_is_created_and_loads_in_pyiceberg(
    tmp_path: Path,
) -> None:
    from gpu_engine.iceberg.schema import schema_from_json

    obj = {**_schema_json(**{"initial-default": 7, "write-default": 8}), "identifier-field-ids": [1]}
    cat = sql_catalog(tmp_path)
    tbl = cat.create_table("db.t", schema_from_json(obj), properties={"format-version": "3"})
    assert tbl.schema().identifier_field_ids == (1,)
    loaded = StaticTable.from_metadata(tbl.metadata_location)
    assert loaded.schema().identifier_field_ids == [1]


@pytest.mark.parametrize("location", ["tables/t", "./t", "t", "file:rel/t"])
def test_a_relative_location_is_refused(tmp_path: Path, location: str) -> None:
    """Stored as given, it named another place from every other directory: the table could not be loaded
    there, its files went under the current directory."""
    cat = sql_catalog(tmp_path)
    with pytest.raises(UnsupportedFeature, match=f"location '{re.escape(location)}' is a relative path"):
        cat.create_table("db.t", SCHEMA, location=location)
    assert not cat.table_exists("db.t")


def test_a_relative_warehouse_is_made_absolute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """From the directory the catalog is loaded in: a table's location stored relative named another place
    from every other directory (and refusing it left a file-system catalog unable to create any table)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    for cat, expected in (
        (ge.load_catalog("rel", uri=f"sqlite:///{tmp_path / 'c.db'}", warehouse="wh"), tmp_path / "wh"),
        (ge.load_catalog("fsrel", type="filesystem", warehouse="fswh"), tmp_path / "fswh"),
        (
            ge.load_catalog("urirel", uri=f"sqlite:///{tmp_path / 'd.db'}", warehouse="file:uwh"),
            tmp_path / "uwh",
        ),
        (
            ge.load_catalog("home", uri=f"sqlite:///{tmp_path / 'e.db'}", warehouse="~/hwh"),
            tmp_path / "home" / "hwh",
        ),
    ):
        cat.create_namespace("db")
        tbl = cat.create_table("db.t", SCHEMA)
        assert tbl.location.removeprefix("file://") == str(expected / "db" / "t")
        tbl.append(rows(0, 3))
        monkeypatch.chdir("/")
        assert cat.load_table("db.t").scan().to_arrow().num_rows == 3
        monkeypatch.chdir(tmp_path)


def test_a_relative_namespace_location_is_refused_naming_the_catalog(tmp_path: Path) -> None:
    cat = sql_catalog(tmp_path)
    cat.create_namespace("rel", {"location": "some/dir"})
    with pytest.raises(UnsupportedFeature, match="its default location 'some/dir/t' is a relative path"):
        cat.create_table("rel.t", SCHEMA)
    assert not cat.table_exists("rel.t")
