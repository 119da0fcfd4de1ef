"""Column selection: prune a schema to selected field ids."""

from __future__ import annotations

from gpu_engine.iceberg import types as it
from gpu_engine.iceberg.schema import Schema, prune

POINT = it.StructType((it.NestedField(4, "x", it.DOUBLE), it.NestedField(5, "y", it.DOUBLE)))
SCHEMA = Schema(
    (
        it.NestedField(1, "id", it.LONG, True),
        it.NestedField(2, "name", it.STRING),
        it.NestedField(3, "point", POINT),
        it.NestedField(6, "tags", it.ListType(7, it.StructType((it.NestedField(8, "k", it.STRING),)))),
    ),
    schema_id=3,
)


def test_top_level_and_whole_structs() -> None:
    assert [f.name for f in prune(SCHEMA, {2, 1}).fields] == ["id", "name"]
    assert prune(SCHEMA, {3}).fields == (SCHEMA.fields[2],)
    assert prune(SCHEMA, set()).fields == ()
    assert prune(SCHEMA, {1}).schema_id == 3


def test_struct_children_are_pruned_lists_kept_whole() -> None:
    point = prune(SCHEMA, {5}).fields[0]
    assert point.name == "point"
    assert isinstance(point.type, it.StructType)
    assert [f.field_id for f in point.type.fields] == [5]
    assert prune(SCHEMA, {8}).fields == (SCHEMA.fields[3],)


def test_paths_by_id_keeps_dotted_names_apart() -> None:
    s = Schema((it.NestedField(1, "a.b", it.INT), it.NestedField(2, "a", POINT)))
    assert s.paths_by_id[1] == ("a.b",)
    assert s.paths_by_id[5] == ("a", "y")
