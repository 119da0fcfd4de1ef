"""``update_schema().union_by_name(...)``: the table's schema grows to hold another schema's columns (an Arrow
schema or an Iceberg one), nested too; data written with that schema then reads back everywhere."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from gpu_engine.commit.schema_from_arrow import schema_from_arrow
from gpu_engine.commit.schema_update import InvalidSchemaChange
from gpu_engine.table import Table

from ._support import assert_all_readers, sql_catalog

POINT = pa.struct([pa.field("x", pa.int32()), pa.field("y", pa.int32())])
SCHEMA = pa.schema(
    [
        pa.field("id", pa.int32(), nullable=False),
        pa.field("amount", pa.int64()),
        pa.field("loc", pa.struct([pa.field("lat", pa.float32())])),
        pa.field("pts", pa.list_(POINT)),
        pa.field("m", pa.map_(pa.string(), POINT)),
        pa.field("mk", pa.map_(pa.int32(), pa.string())),
    ]
)
FIRST = [{"id": 1, "amount": 10, "loc": {"lat": 1.5}, "pts": [{"x": 1, "y": 2}],
          "m": [("a", {"x": 3, "y": 4})], "mk": [(1, "one")]}]  # fmt: skip


def make(tmp_path: Path) -> Table:
    tbl = sql_catalog(tmp_path).create_table("db.t", SCHEMA, properties={"format-version": "2"})
    tbl.append(pa.Table.from_pylist(FIRST, schema=SCHEMA))
    return tbl


def schema_json(tbl: Table) -> dict[str, Any]:
    raw = json.loads(Path(tbl.metadata_location).read_text())
    return next(s for s in raw["schemas"] if s["schema-id"] == raw["current-schema-id"])


def test_union_adds_promotes_relaxes_and_keeps_narrower_types(tmp_path: Path) -> None:
    tbl = make(tmp_path)
    wide_point = pa.struct([pa.field("x", pa.int64()), pa.field("z", pa.string())])
    incoming = pa.schema(
        [
            pa.field("id", pa.int64()),  # wider and optional: promoted, made optional
            pa.field("amount", pa.int32()),  # narrower: long stays
            pa.field("note", pa.string(), metadata=None),  # new
            pa.field("loc", pa.struct([pa.field("lat", pa.float64()), pa.field("alt", pa.int32())])),
            pa.field("pts", pa.list_(wide_point)),  # new field in the element struct, x promoted
            pa.field("m", pa.map_(pa.large_string(), wide_point)),  # the same key, the value widened
            pa.field("mk", pa.map_(pa.int16(), pa.string())),  # a narrower key fits
        ]
    )
    with tbl.update_schema() as u:
        u.union_by_name(incoming)
    fields = {f["name"]: f for f in schema_json(tbl)["fields"]}
    assert list(fields) == ["id", "amount", "loc", "pts", "m", "mk", "note"]
    assert (fields["id"]["type"], fields["id"]["required"]) == ("long", False)
    assert fields["amount"]["type"] == "long" and fields["note"]["type"] == "string"
    assert [(f["name"], f["type"]) for f in fields["loc"]["type"]["fields"]] == [
        ("lat", "double"),
        ("alt", "int"),
    ]
    element = fields["pts"]["type"]["element"]["fields"]
    assert [(f["name"], f["type"]) for f in element] == [("x", "long"), ("y", "int"), ("z", "string")]
    value = fields["m"]["type"]["value"]["fields"]
    assert [(f["name"], f["type"]) for f in value] == [("x", "long"), ("y", "int"), ("z", "string")]
    assert fields["mk"]["type"]["key"] == "int"
    second = {"id": 1 << 40, "amount": 5, "note": "n", "loc": {"lat": 2.5, "alt": 3},
              "pts": [{"x": 1 << 41, "z": "p"}], "m": [("b", {"x": 7, "z": "q"})],
              "mk": [(2, "two")]}  # fmt: skip
    tbl.append(pa.Table.from_pylist([second], schema=incoming))
    written = tbl.scan().to_arrow().schema
    full = [
        {**FIRST[0], "note": None, "loc": {"lat": 1.5, "alt": None},
         "pts": [{"x": 1, "y": 2, "z": None}], "m": [("a", {"x": 3, "y": 4, "z": None})]},
        {**second, "pts": [{"x": 1 << 41, "y": None, "z": "p"}], "m": [("b", {"x": 7, "y": None, "z": "q"})]},
    ]  # fmt: skip
    assert_all_readers(tbl, pa.Table.from_pylist(full, schema=written))


def test_union_with_the_tables_own_schema_changes_nothing(tmp_path: Path) -> None:
    tbl = make(tmp_path)
    location = tbl.metadata_location
    committed = tbl.update_schema().union_by_name(tbl.metadata.schema).commit()
    assert committed.schema_id == tbl.metadata.current_schema_id == 0
    tbl.refresh()
    assert tbl.metadata_location == location


def test_union_with_an_iceberg_schema_keeps_docs(tmp_path: Path) -> None:
    tbl = make(tmp_path)
    other = schema_from_arrow(pa.schema([pa.field("amount", pa.int64()), pa.field("extra", pa.date32())]))
    documented = replace(other, fields=(replace(other.fields[0], doc="in cents"), other.fields[1]))
    with tbl.update_schema() as u:
        u.union_by_name(documented)
    fields = {f["name"]: f for f in schema_json(tbl)["fields"]}
    assert fields["amount"]["doc"] == "in cents" and fields["extra"]["type"] == "date"


@pytest.mark.parametrize(
    ("incoming", "message"),
    [
        (pa.schema([pa.field("amount", pa.string())]), "'amount': the table has long, the schema string"),
        (pa.schema([pa.field("loc", pa.int32())]), "'loc': the table has struct"),
        (pa.schema([pa.field("pts", pa.list_(pa.int32()))]), "'pts.element': the table has struct"),
        (pa.schema([pa.field("mk", pa.map_(pa.int64(), pa.string()))]), "'mk.key'.*a map key cannot change"),
        (
            pa.schema([pa.field("loc", pa.struct([pa.field("lat", pa.int32())]))]),
            "'loc.lat'.*float, the schema int",
        ),
    ],
)
def test_union_refuses_what_cannot_be_unified(tmp_path: Path, incoming: pa.Schema, message: str) -> None:
    tbl = make(tmp_path)
    location = tbl.metadata_location
    with pytest.raises(InvalidSchemaChange, match=message), tbl.update_schema() as u:
        u.union_by_name(incoming)
    tbl.refresh()
    assert tbl.metadata_location == location
