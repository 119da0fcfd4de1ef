"""Sort orders: JSON both ways (single and multi-argument transforms), validation, table defaults."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from gpu_engine.errors import MetadataError
from gpu_engine.iceberg.sorting import (
    UNSORTED,
    SortField,
    SortOrder,
    sort_field_from_json,
    sort_field_to_json,
    sort_order_from_json,
    sort_order_to_json,
    table_sort_orders_from_json,
)
from gpu_engine.transforms import Bucket, Identity, UnknownTransform

FIXTURES = Path(__file__).resolve().parents[2].parent / "shared" / "fixtures"
SORTED_MULTI = FIXTURES / "pg_lake/sample_tables_v3/public/v3_sorted_multi/metadata/v3.metadata.json"


def test_fixture_sort_order() -> None:
    assert SORTED_MULTI.is_file(), f"fixture {SORTED_MULTI} missing: check out shared/ beside the repository"
    raw = json.loads(SORTED_MULTI.read_text())
    orders, default_id = table_sort_orders_from_json(raw)
    assert default_id == 1 and orders[0] == UNSORTED and orders[0].is_unsorted
    (by_name, by_id) = orders[1].fields
    assert (by_name.source_id, by_name.transform, by_name.ascending, by_name.nulls_first) == (
        2,
        "identity",
        True,
        True,
    )
    assert (by_id.source_id, by_id.direction, by_id.null_order) == (1, "desc", "nulls-last")
    assert isinstance(by_name.parsed, Identity) and not by_id.ascending and not by_id.nulls_first
    assert [sort_order_to_json(o) for o in orders] == raw["sort-orders"]


def test_sort_order_round_trip() -> None:
    obj = {
        "order-id": 3,
        "fields": [
            {"transform": "bucket[4]", "source-id": 3, "direction": "desc", "null-order": "nulls-last"},
            {"transform": "zorder", "source-ids": [1, 2], "direction": "asc", "null-order": "nulls-first"},
        ],
    }
    order = sort_order_from_json(copy.deepcopy(obj))
    bucket, multi = order.fields
    assert bucket.parsed == Bucket(4) and bucket.source_ids == (3,)
    assert multi.source_ids == (1, 2) and multi.source_id == 1 and isinstance(multi.parsed, UnknownTransform)
    assert sort_order_to_json(order) == obj


@pytest.mark.parametrize(
    "obj",
    [
        {"transform": "identity", "source-ids": [4], "direction": "asc", "null-order": "nulls-first"},
        {
            "transform": "identity",
            "source-id": 4,
            "source-ids": [4],
            "direction": "asc",
            "null-order": "nulls-first",
        },
        {
            "transform": "f",
            "source-id": 1,
            "source-ids": [1, 2],
            "direction": "asc",
            "null-order": "nulls-last",
        },
        {
            "transform": "identity",
            "source-id": 4,
            "direction": "asc",
            "null-order": "nulls-first",
            "x-k": [None],
        },
    ],
)
def test_sort_field_written_forms_are_kept(obj: dict[str, Any]) -> None:
    f = sort_field_from_json(copy.deepcopy(obj))
    assert sort_field_to_json(f) == obj
    assert f == SortField(f.source_ids, f.transform, f.direction, f.null_order)  # the form is not compared


def test_sort_field_built_in_code_writes_the_spec_form() -> None:
    one = SortField((4,), "identity", "asc", "nulls-first")
    many = SortField((1, 2), "f", "desc", "nulls-last")
    assert "source-ids" not in sort_field_to_json(one) and sort_field_to_json(one)["source-id"] == 4
    assert "source-id" not in sort_field_to_json(many) and sort_field_to_json(many)["source-ids"] == [1, 2]


@pytest.mark.parametrize(
    ("obj", "message"),
    [
        (
            {"transform": "identity", "source-id": 1, "direction": "up", "null-order": "nulls-first"},
            r"'f.direction' must be one of asc, desc; got 'up'",
        ),
        (
            {"transform": "identity", "source-id": 1, "direction": "asc", "null-order": "first"},
            r"'f.null-order' must be one of nulls-first, nulls-last",
        ),
        (
            {"transform": "identity", "direction": "asc", "null-order": "nulls-first"},
            r"missing required field 'source-id'",
        ),
        (
            {"transform": "identity", "source-ids": [], "direction": "asc", "null-order": "nulls-first"},
            r"'f.source-ids' must not be empty",
        ),
        (
            {
                "transform": "identity",
                "source-id": 2,
                "source-ids": [1, 2],
                "direction": "asc",
                "null-order": "nulls-first",
            },
            r"source-id 2 disagrees with source-ids \[1, 2\]",
        ),
        (
            {"transform": 7, "source-id": 1, "direction": "asc", "null-order": "nulls-first"},
            r"'f.transform' must be a JSON string, got integer",
        ),
        (
            {"source-id": 1, "direction": "asc", "null-order": "nulls-first"},
            r"missing required field 'f.transf",
        ),
        (
            {"transform": "identity", "source-id": "1", "direction": "asc", "null-order": "nulls-first"},
            r"'f.source-id' must be a JSON integer",
        ),
    ],
)
def test_bad_sort_fields(obj: dict[str, Any], message: str) -> None:
    with pytest.raises(MetadataError, match=message):
        sort_field_from_json(obj, where="f")


def test_bad_sort_orders() -> None:
    field = {"transform": "identity", "source-id": 1, "direction": "asc", "null-order": "nulls-first"}
    with pytest.raises(MetadataError, match=r"order-id 0 is reserved for the unsorted order"):
        sort_order_from_json({"order-id": 0, "fields": [field]})
    with pytest.raises(MetadataError, match=r"missing required field 'o.order-id'"):
        sort_order_from_json({"fields": []}, where="o")
    with pytest.raises(MetadataError, match=r"'o.fields' must be a JSON array, got object"):
        sort_order_from_json({"order-id": 1, "fields": {}}, where="o")
    with pytest.raises(MetadataError, match=r"'o.fields\[0\]' must be a JSON object"):
        sort_order_from_json({"order-id": 1, "fields": ["identity"]}, where="o")


def test_table_sort_orders() -> None:
    assert table_sort_orders_from_json({}) == ((UNSORTED,), 0)  # v1 written before sort orders existed
    orders = [{"order-id": 0, "fields": []}, {"order-id": 2, "fields": []}]
    assert table_sort_orders_from_json({"sort-orders": orders, "default-sort-order-id": 2})[1] == 2
    assert table_sort_orders_from_json({"sort-orders": orders, "default-sort-order-id": 2})[0][
        1
    ] == SortOrder(2)
    with pytest.raises(MetadataError, match=r"missing required field 'default-sort-order-id'"):
        table_sort_orders_from_json({"sort-orders": orders})
    with pytest.raises(
        MetadataError, match=r"default-sort-order-id 5 is not among the sort-orders \(\[0, 2\]\)"
    ):
        table_sort_orders_from_json({"sort-orders": orders, "default-sort-order-id": 5})
    with pytest.raises(MetadataError, match=r"'sort-orders' repeats order-id \[0\]"):
        table_sort_orders_from_json({"sort-orders": orders[:1] * 2, "default-sort-order-id": 0})
    # without sort-orders (v1) Java reads the table unsorted whatever default-sort-order-id says
    assert table_sort_orders_from_json({"default-sort-order-id": 1}) == ((UNSORTED,), 0)


def test_direction_and_null_order_are_read_in_any_case() -> None:
    """Java's SortDirection/NullOrder.fromString ignore case (and write lower case): a table whose
    order said "ASC" was refused whole."""
    f = sort_field_from_json(
        {"transform": "identity", "source-id": 1, "direction": "DESC", "null-order": "NULLS-Last"}
    )
    assert (f.direction, f.null_order) == ("desc", "nulls-last")
