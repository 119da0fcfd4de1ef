"""``parse_sort_order``: Spark's ``WRITE ORDERED BY`` items as Iceberg sort fields (the partition-spec
strings of the same module are tested with table creation in ``test_create.py``)."""

from __future__ import annotations

import pyarrow as pa
import pytest

from gpu_engine.commit.schema_from_arrow import schema_from_arrow
from gpu_engine.commit.spec_parse import parse_partition_spec, parse_sort_order
from gpu_engine.errors import UnsupportedTransform
from gpu_engine.iceberg.sorting import SortField, SortOrder, sort_order_from_json, sort_order_to_json

from ._support import SCHEMA

NESTED = pa.schema(
    [
        pa.field("id", pa.int64()),
        pa.field("st", pa.struct([("x", pa.int32()), ("name", pa.string())])),
        pa.field("tags", pa.list_(pa.string())),
    ]
)


def _ids(text: str) -> int:
    return schema_from_arrow(SCHEMA).ids_by_name[text]


@pytest.mark.parametrize(
    ("text", "column", "transform", "direction", "nulls"),
    [
        ("id", "id", "identity", "asc", "nulls-first"),
        ("id ASC", "id", "identity", "asc", "nulls-first"),
        ("id DESC", "id", "identity", "desc", "nulls-last"),
        ("id desc nulls first", "id", "identity", "desc", "nulls-first"),
        ("id NULLS LAST", "id", "identity", "asc", "nulls-last"),
        ("  id   DeSc   NuLLs   FiRsT  ", "id", "identity", "desc", "nulls-first"),
        ("identity(id) asc nulls last", "id", "identity", "asc", "nulls-last"),
        ("bucket(16, s)", "s", "bucket[16]", "asc", "nulls-first"),
        ("bucket[16](s) DESC", "s", "bucket[16]", "desc", "nulls-last"),
        ("truncate(4, s) desc", "s", "truncate[4]", "desc", "nulls-last"),
        ("BUCKET(8, id)", "id", "bucket[8]", "asc", "nulls-first"),
        ("day(ts) ASC NULLS FIRST", "ts", "day", "asc", "nulls-first"),
        ("days(ts)", "ts", "day", "asc", "nulls-first"),
        ("year(d) desc", "d", "year", "desc", "nulls-last"),
        ("month(ts)", "ts", "month", "asc", "nulls-first"),
        ("hour(ts) nulls last", "ts", "hour", "asc", "nulls-last"),
        ("void(region)", "region", "void", "asc", "nulls-first"),
    ],
)
def test_sort_items(text: str, column: str, transform: str, direction: str, nulls: str) -> None:
    order = parse_sort_order(text, schema_from_arrow(SCHEMA))
    (f,) = order.fields
    assert f == SortField((_ids(column),), transform, direction, nulls)


def test_commas_inside_calls_and_lists() -> None:
    schema = schema_from_arrow(SCHEMA)
    text = "id DESC NULLS LAST, bucket(16, s), day(ts) ASC NULLS FIRST, truncate[2](region)"
    want = SortOrder(
        1,
        (
            SortField((_ids("id"),), "identity", "desc", "nulls-last"),
            SortField((_ids("s"),), "bucket[16]", "asc", "nulls-first"),
            SortField((_ids("ts"),), "day", "asc", "nulls-first"),
            SortField((_ids("region"),), "truncate[2]", "asc", "nulls-first"),
        ),
    )
    assert parse_sort_order(text, schema) == want
    as_list = ["id DESC NULLS LAST", "bucket(16, s)", "day(ts) ASC NULLS FIRST", "truncate[2](region)"]
    assert parse_sort_order(as_list, schema) == want
    assert (
        parse_sort_order(["id DESC NULLS LAST, bucket(16, s)", "day(ts), truncate[2](region)"], schema)
        == want
    )
    assert parse_sort_order(text, schema, order_id=7).order_id == 7
    # the result is valid sort-order metadata, and round-trips through JSON
    assert sort_order_from_json(sort_order_to_json(want)) == want


def test_struct_fields() -> None:
    schema = schema_from_arrow(NESTED)
    order = parse_sort_order("st.x desc, bucket(4, st.name)", schema)
    assert [f.source_id for f in order.fields] == [schema.ids_by_name["st.x"], schema.ids_by_name["st.name"]]
    with pytest.raises(UnsupportedTransform, match=r"sort field 'tags\.element': .*inside a list or map"):
        parse_sort_order("tags.element", schema)


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("id, nope DESC", r"sort field 'nope DESC': the schema has no column 'nope'"),
        (
            "id, day(s) desc",
            r"sort field 'day\(s\) desc': transform day cannot apply to column 's' of type string",
        ),
        ("bucket(4, flag)", r"sort field 'bucket\(4, flag\)': transform bucket\[4\] cannot apply"),
        (
            "truncate(2, score) nulls last",
            r"sort field 'truncate\(2, score\) nulls last': transform truncate",
        ),
        ("frobnicate(id) asc", r"sort field 'frobnicate\(id\) asc': unknown transform 'frobnicate'"),
        ("bucket(id) desc", r"sort field 'bucket\(id\) desc': expected bucket\(N, column\)"),
        ("bucket(0, id)", r"sort field 'bucket\(0, id\)': bucket\[0\]: N must be"),
        ("id ascending", r"sort field 'id ascending': the schema has no column 'id ascending'"),
        ("id desc desc", r"sort field 'id desc desc': the schema has no column 'id desc'"),
        ("NULLS LAST", r"sort field 'NULLS LAST': the schema has no column"),
        ("id,, s", r"sort field '': expected a column"),
        ("", r"sort order '': expected at least one column"),
        ([], r"sort order \[\]: expected at least one column"),
        ("day(ts", r"sort field 'day\(ts': expected a column or transform\(column\)"),
    ],
)
def test_bad_sort_items_name_the_item(text: str | list[str], match: str) -> None:
    with pytest.raises(UnsupportedTransform, match=match):
        parse_sort_order(text, schema_from_arrow(SCHEMA))


def test_partition_spec_errors_still_name_the_partition_field() -> None:
    schema = schema_from_arrow(SCHEMA)
    with pytest.raises(UnsupportedTransform, match=r"partition field 'day\(s\)': transform day cannot apply"):
        parse_partition_spec(["day(s)"], schema)
    with pytest.raises(UnsupportedTransform, match=r"partition field 'bucket\(0, id\)': bucket\[0\]"):
        parse_partition_spec(["bucket(0, id)"], schema)


def test_redundant_partition_fields_are_refused_as_java_does() -> None:
    """Java's PartitionSpec.Builder.checkForRedundantPartitions: year/month/day/hour of one column are one
    kind (PyIceberg then could not append to a day(ts) + hour(ts) table)."""
    schema = schema_from_arrow(SCHEMA)
    for first, second in (("day(ts)", "hour(ts)"), ("year(ts)", "month(ts)")):
        with pytest.raises(UnsupportedTransform, match=r"redundant, the spec partitions 'ts' by time"):
            parse_partition_spec([first, second], schema)
    spec = parse_partition_spec(["bucket(4, id)", "truncate(8, id)", "day(ts)", "id"], schema)
    assert [f.transform for f in spec.fields] == ["bucket[4]", "truncate[8]", "day", "identity"]


ODD = pa.schema(
    [
        pa.field("id", pa.int64()),
        pa.field("a, b", pa.int32()),  # a comma: would split the items
        pa.field("n desc", pa.string()),  # ends in a keyword
        pa.field("f(x)", pa.int64()),  # parentheses: would read as a call
        pa.field("tick`name", pa.int32()),  # a backtick, doubled inside quotes
        pa.field("st", pa.struct([("x.y", pa.int32())])),  # a dot inside a struct field's name
    ]
)


def test_quoted_names_as_filters_quote_them() -> None:
    schema = schema_from_arrow(ODD)
    ids = schema.ids_by_name
    order = parse_sort_order(
        '`a, b` DESC, "n desc", bucket(4, `f(x)`) nulls last, `tick``name`, st."x.y" desc, "id"', schema
    )
    assert [(f.source_id, f.transform, f.direction, f.null_order) for f in order.fields] == [
        (ids["a, b"], "identity", "desc", "nulls-last"),
        (ids["n desc"], "identity", "asc", "nulls-first"),
        (ids["f(x)"], "bucket[4]", "asc", "nulls-last"),
        (ids["tick`name"], "identity", "asc", "nulls-first"),
        (ids["st.x.y"], "identity", "desc", "nulls-last"),
        (ids["id"], "identity", "asc", "nulls-first"),
    ]
    spec = parse_partition_spec(["`a, b`", 'truncate(2, "n desc")', "bucket[8](`f(x)`)"], schema)
    assert [(f.source_id, f.transform, f.name) for f in spec.fields] == [
        (ids["a, b"], "identity", "a, b"),
        (ids["n desc"], "truncate[2]", "n desc_trunc"),
        (ids["f(x)"], "bucket[8]", "f(x)_bucket"),
    ]


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("`id", r"sort field '`id': unclosed backtick"),
        ("`id`x", r"sort field '`id`x': expected a dot or the end after the quoted name `id`"),
        ("bucket(4, `id)", r"sort field 'bucket\(4, `id\)': unclosed backtick"),
        ('"id desc', r"sort field '\"id desc': unclosed double quote"),
        ('"a, b"x', r"expected a dot or the end after the quoted name \"a, b\""),
        ("`a`(x)", r"sort field '`a`\(x\)': expected a column or transform\(column\)"),
        ('"', r"unclosed double quote"),
        ("`a`.", r"sort field '`a`\.': expected a name after the dot"),
        ("`a`. DESC", r"expected a name after the dot"),
        ("bucket(4, `a`.)", r"sort field 'bucket\(4, `a`\.\)': expected a name after the dot"),
        ('st."x".', r"expected a name after the dot"),
    ],
)
def test_bad_quoting_is_named(text: str, match: str) -> None:
    with pytest.raises(UnsupportedTransform, match=match):
        parse_sort_order(text, schema_from_arrow(ODD))
