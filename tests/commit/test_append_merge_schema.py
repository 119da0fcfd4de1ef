"""``Table.append(data, merge_schema=True)``: the table's schema first evolves to hold the data's (new
columns, wider types, nested too) while required columns stay required; rows read the same by our scan,
PyIceberg and DuckDB; incompatible data and data without a schema are refused before anything commits."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from gpu_engine.commit.schema_changes import InvalidSchemaChange
from gpu_engine.errors import InvalidOption, SchemaMismatch, ValidationError
from gpu_engine.table import Table

from ._support import assert_all_readers, sql_catalog

BASE = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("n", pa.int32()),
        pa.field("loc", pa.struct([pa.field("lat", pa.float32())])),
    ]
)


def make(tmp_path: Path) -> Table:
    tbl = sql_catalog(tmp_path).create_table("db.t", BASE, properties={"format-version": "2"})
    tbl.append(pa.table({"id": [1, 2], "n": [10, 20], "loc": [{"lat": 1.5}, None]}, schema=BASE))
    return tbl


def test_new_columns_and_wider_types_keep_required_columns_required(tmp_path: Path) -> None:
    tbl = make(tmp_path)
    newer = pa.schema(
        [
            pa.field("id", pa.int64()),  # nullable, as Arrow fields are by default
            pa.field("n", pa.int64()),  # wider
            pa.field("loc", pa.struct([pa.field("lat", pa.float64()), pa.field("alt", pa.int32())])),
            pa.field("note", pa.string()),
        ]
    )
    data = pa.table(
        {"id": [3], "n": [2**40], "loc": [{"lat": 0.25, "alt": 7}], "note": ["new"]}, schema=newer
    )
    tbl.append(data, merge_schema=True)
    schema = tbl.schema()
    assert schema.find_field("id").required  # not relaxed by the nullable Arrow field
    assert str(schema.find_field("n").type) == "long" and str(schema.find_field("loc.lat").type) == "double"
    assert [f.name for f in schema.fields] == ["id", "n", "loc", "note"]
    assert (tbl.metadata.current_schema_id, len(tbl.metadata.snapshots)) == (1, 2)
    expected = pa.table(
        {
            "id": [1, 2, 3],
            "n": [10, 20, 2**40],
            "loc": [{"lat": 1.5, "alt": None}, None, {"lat": 0.25, "alt": 7}],
            "note": [None, None, "new"],
        },
        schema=pa.schema([pa.field("id", pa.int64(), nullable=False), *list(newer)[1:]]),
    )
    assert_all_readers(tbl, expected)

    same = tbl.metadata.current_schema_id
    tbl.append(pa.table({"id": [4]}, schema=pa.schema([pa.field("id", pa.int64())])), merge_schema=True)
    assert tbl.metadata.current_schema_id == same and len(tbl.metadata.schemas) == 2  # nothing to merge


def test_refusals_commit_nothing(tmp_path: Path) -> None:
    tbl = make(tmp_path)
    location = tbl.metadata_location
    with pytest.raises(InvalidSchemaChange, match=r"column 'n'.*the table has int, the schema string"):
        tbl.append(pa.table({"id": [5], "n": ["x"]}), merge_schema=True)
    with pytest.raises(InvalidOption, match="merge_schema: the data needs a schema"):
        tbl.append(iter(pa.table({"id": [5]}).to_batches()), merge_schema=True)
    assert tbl.refresh().metadata_location == location
    # rows the evolved schema refuses: neither the rows nor the schema change are committed (Java checks
    # the write against the evolved schema before committing it), and no file is left
    data_files = sorted((tmp_path / "wh").rglob("*.parquet"))
    with pytest.raises(SchemaMismatch, match="'id' is required"):
        tbl.append(pa.table({"id": pa.array([None], pa.int64()), "extra": [1]}), merge_schema=True)
    with pytest.raises(SchemaMismatch, match="required column 'id' is missing"):
        wider = pa.table({"ID": [2], "n": pa.array([2**40], pa.int64()), "more": ["x"]})
        tbl.append(wider, merge_schema=True)
    assert tbl.refresh().metadata_location == location
    assert [f.name for f in tbl.schema().fields] == ["id", "n", "loc"] and len(tbl.metadata.snapshots) == 1
    assert sorted((tmp_path / "wh").rglob("*.parquet")) == data_files


@pytest.mark.parametrize(
    ("version", "column", "data"),
    [
        (2, pa.field("t", pa.timestamp("us")), pa.array([1_000], pa.timestamp("ns"))),  # pandas' default
        (2, pa.field("t", pa.int32()), pa.nulls(1)),  # pandas' all-None column
        (3, pa.field("t", pa.timestamp("ns")), pa.array([1], pa.timestamp("us"))),
        (2, pa.field("t", pa.uuid()), pa.array([b"\x01" * 16], pa.binary(16))),
        (2, pa.field("t", pa.int64()), pa.array([7], pa.uint64())),
    ],
    ids=["ns-into-us", "null-into-int", "us-into-ns", "binary16-into-uuid", "uint64-into-long"],
)
def test_merging_takes_what_a_plain_append_writes(
    tmp_path: Path, version: int, column: pa.Field, data: pa.Array
) -> None:
    """Data a plain append writes as it is (checked casts) needs no schema change: merging accepts it
    too (it was refused: no promotion leads from the data's type to the table's) and changes nothing."""
    schema = pa.schema([pa.field("id", pa.int64()), column])
    tbl = sql_catalog(tmp_path).create_table("db.t", schema, properties={"format-version": str(version)})
    batch = pa.table({"id": [1], "t": data})
    tbl.append(batch)
    schema_id = tbl.metadata.current_schema_id
    tbl.append(batch, merge_schema=True)
    assert tbl.metadata.current_schema_id == schema_id
    got = tbl.scan().to_arrow()
    assert got.num_rows == 2 and got.column("t")[0] == got.column("t")[1]


def test_a_schema_changed_meanwhile_refuses_the_merge_and_leaves_no_file(tmp_path: Path) -> None:
    tbl = make(tmp_path)
    data_files = sorted((tmp_path / "wh").rglob("*.parquet"))
    other = tbl.catalog.load_table(tbl.identifier)  # type: ignore[union-attr]

    def another_writer(stage: str) -> None:
        if stage == "data":  # after the merge was planned, before the files are written
            with other.update_schema() as update:
                update.add_column("theirs", "string")

    with pytest.raises(ValidationError, match="schema"):
        tbl.append(pa.table({"id": [3], "mine": ["x"]}), merge_schema=True, faults=another_writer)
    assert [f.name for f in tbl.refresh().schema().fields] == ["id", "n", "loc", "theirs"]
    assert len(tbl.metadata.snapshots) == 1
    assert sorted((tmp_path / "wh").rglob("*.parquet")) == data_files
