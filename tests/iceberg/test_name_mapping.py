"""Name mapping parsing and lookup: the spec's example, aliases, nested lookups, errors, and the mappings the
fixture tables carry."""

from __future__ import annotations

import json
import pickle

import pytest

from gpu_engine.errors import MetadataError
from gpu_engine.iceberg import types as it
from gpu_engine.iceberg.name_mapping import (
    NAME_MAPPING_PROPERTY,
    MappedField,
    mapping_for_schema,
    mapping_for_schemas,
    name_mapping_of,
    name_mapping_to_json,
    parse_name_mapping,
)
from gpu_engine.iceberg.schema import Schema
from tests.planning._support import load

SPEC_EXAMPLE = """
[ { "field-id": 1, "names": ["id", "record_id"] },
  { "field-id": 2, "names": ["data"] },
  { "field-id": 3, "names": ["location"], "fields": [
      { "field-id": 4, "names": ["latitude", "lat"] },
      { "field-id": 5, "names": ["longitude", "long"] }
  ] } ]
"""


def test_spec_example() -> None:
    m = parse_name_mapping(SPEC_EXAMPLE)
    assert m.id_of("id") == m.id_of("record_id") == 1
    assert m.id_of("data") == 2
    assert m.id_of("location", "lat") == m.id_of("location", "latitude") == 4
    assert m.id_of("location", "long") == 5
    assert m.id_of("location", "x") is None and m.id_of("nope") is None and m.find() is None
    assert m.id_of("ID") is None  # names are case-sensitive
    assert [f.field_id for f in m] == [1, 2, 3]
    assert pickle.loads(pickle.dumps(m)) == m


def test_dotted_names_are_literal() -> None:
    m = parse_name_mapping('[{"field-id": 7, "names": ["a.b"]}, {"field-id": 8, "names": ["a"]}]')
    assert m.id_of("a.b") == 7 and m.id_of("a", "b") is None


def test_fields_without_ids_and_empty_names() -> None:
    m = parse_name_mapping('[{"names": ["extra"]}, {"field-id": 9, "names": []}]')
    found = m.find("extra")
    assert found == MappedField(("extra",), None) and found.field_id is None
    assert m.fields[1].names == () and m.fields[1].field_id == 9


def test_round_trip_json() -> None:
    m = parse_name_mapping(SPEC_EXAMPLE)
    assert name_mapping_to_json(m) == json.loads(SPEC_EXAMPLE)
    assert parse_name_mapping(name_mapping_to_json(m)) == m


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("not json", "not valid JSON"),
        ('{"field-id": 1}', "must be a JSON list"),
        ("[1]", "must be a JSON object"),
        ('[{"names": "a"}]', "'names' must be a list"),
        ('[{"field-id": "1", "names": ["a"]}]', "'field-id' must be an integer"),
        ('[{"field-id": true, "names": ["a"]}]', "'field-id' must be an integer"),
        ('[{"field-id": 1, "names": ["a"], "fields": {}}]', "'fields' must be a list"),
        ('[{"field-id": 1, "names": ["a"]}, {"field-id": 2, "names": ["a"]}]', "maps name 'a' twice"),
        (
            '[{"field-id": 1, "names": ["s"], "fields": [{"names": ["x"]}, {"names": ["x"]}]}]',
            "of s maps name 'x'",
        ),
    ],
)
def test_malformed_mappings(text: str, match: str) -> None:
    with pytest.raises(MetadataError, match=match) as info:
        parse_name_mapping(text)
    assert NAME_MAPPING_PROPERTY in str(info.value)


def test_mapping_for_schema() -> None:
    schema = Schema(
        (
            it.NestedField(1, "a", it.ListType(2, it.StructType((it.NestedField(3, "x", it.INT),)))),
            it.NestedField(4, "m", it.MapType(5, it.STRING, 6, it.LONG)),
        )
    )
    m = mapping_for_schema(schema)
    assert m.id_of("a") == 1 and m.id_of("a", "element") == 2 and m.id_of("a", "element", "x") == 3
    assert m.id_of("m", "key") == 5 and m.id_of("m", "value") == 6


def _schema(schema_id: int, *fields: it.NestedField) -> Schema:
    return Schema(fields, schema_id=schema_id)


def test_the_implicit_mapping_keeps_the_names_fields_had_in_older_schemas() -> None:
    """Without a mapping property, files without field ids are read by the mapping ``update_schema`` would
    have kept: a renamed field answers to its old names, unless another field of its struct took one since
    (a dropped one too: the latest holder keeps the name, as Java's MappingUtil.update)."""
    long, text = it.LONG, it.STRING
    renamed = [_schema(0, it.NestedField(1, "name", text)), _schema(1, it.NestedField(1, "label", text))]
    m = mapping_for_schemas(renamed[1], renamed)
    assert m.find("label") == m.find("name") and m.id_of("name") == 1
    assert m.find("label").names == ("label", "name")  # type: ignore[union-attr]
    taken = [
        _schema(0, it.NestedField(1, "a", text)),
        _schema(1, it.NestedField(1, "b", text), it.NestedField(2, "a", long)),
        _schema(2, it.NestedField(1, "b", text)),  # 2 dropped: "a" stays its, not 1's again
    ]
    m = mapping_for_schemas(taken[2], taken)
    assert m.id_of("b") == 1 and m.find("a") is None
    swapped = [
        _schema(0, it.NestedField(1, "a", text), it.NestedField(2, "b", text)),
        _schema(1, it.NestedField(1, "b", text), it.NestedField(2, "a", text)),
    ]
    m = mapping_for_schemas(swapped[1], swapped)
    assert (m.id_of("a"), m.id_of("b")) == (2, 1) and m.find("a").names == ("a",)  # type: ignore[union-attr]
    element = [  # list l of struct {x} renamed k of {y}
        _schema(0, it.NestedField(1, "l", it.ListType(2, it.StructType((it.NestedField(3, "x", long),))))),
        _schema(1, it.NestedField(1, "k", it.ListType(2, it.StructType((it.NestedField(3, "y", long),))))),
    ]
    m = mapping_for_schemas(element[1], element)
    assert m.id_of("l", "element", "x") == 3 == m.id_of("k", "element", "y")
    assert mapping_for_schemas(renamed[0], renamed[:1]) == mapping_for_schema(renamed[0])


def test_fixture_table_mappings() -> None:
    assert name_mapping_of({}) is None
    tbl = load("impala/iceberg_test/iceberg_migrated_complex_test")
    m = name_mapping_of(tbl.properties)
    assert m is not None and name_mapping_of(tbl.metadata) == m
    # as written by Hive: ids 1..21 in mapping order (not the table schema's ids)
    assert m.id_of("struct_1_col", "int_array_col", "element") == 3
    assert m.id_of("struct_2_col", "struct_3_col", "string_double_map_col", "value") == 16
    assert m.id_of("int_bigint_map_col", "key") == 9
    t1 = name_mapping_of(load("duckdb-iceberg/data/persistent/name_mapping/warehouse_1/mydb/t1").properties)
    assert t1 is not None and (t1.id_of("a"), t1.id_of("b")) == (1, 3)
