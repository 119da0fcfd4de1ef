"""``tbl.replace_sort_order``: the order committed (read as JSON), ids of equal orders reused, unsorted, the
order compaction's sort strategy then uses, errors naming the item, and a stale replacement."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from gpu_engine.errors import UnsupportedTransform, ValidationError
from gpu_engine.iceberg.sorting import SortField, SortOrder
from gpu_engine.table import Table

from ._support import assert_all_readers, raise_at, rows, sql_catalog, table_files


def make(tmp_path: Path) -> Table:
    return sql_catalog(tmp_path).create_table("db.t", rows(0, 0).schema, properties={"format-version": "2"})


def metadata(tbl: Table) -> dict[str, Any]:
    return dict(json.loads(Path(tbl.metadata_location).read_text()))


def test_orders_are_committed_and_reused(tmp_path: Path) -> None:
    tbl = make(tmp_path)
    order = tbl.replace_sort_order("id DESC NULLS LAST, bucket(4, region)")
    raw = metadata(tbl)
    assert raw["default-sort-order-id"] == order.order_id == 1
    (written,) = [o for o in raw["sort-orders"] if o["order-id"] == 1]
    assert [(f["source-id"], f["transform"], f["direction"], f["null-order"]) for f in written["fields"]] == [
        (1, "identity", "desc", "nulls-last"),
        (4, "bucket[4]", "asc", "nulls-first"),
    ]
    assert tbl.replace_sort_order(["region"]).order_id == 2
    assert tbl.replace_sort_order("id DESC NULLS LAST, bucket(4, region)").order_id == 1  # equal: reused
    assert tbl.replace_sort_order([]).order_id == 0 and metadata(tbl)["default-sort-order-id"] == 0
    assert len(metadata(tbl)["sort-orders"]) == 3


def test_compaction_sorts_by_the_tables_order(tmp_path: Path) -> None:
    tbl = make(tmp_path)
    data = pa.concat_tables([rows(i * 20, 20, seed=i) for i in range(3)])
    for i in range(3):
        tbl.append(data.slice(i * 20, 20))
    tbl.replace_sort_order("id DESC")
    result = tbl.compact("sort", options={"rewrite-all": "true"}, backend="cpu")
    assert result.added_data_files == 1
    (task,) = tbl.scan().plan().tasks
    ids = pq.read_table(task.file.path).column("id").to_pylist()
    assert ids == sorted(ids, reverse=True) and task.file.sort_order_id == 1
    assert_all_readers(tbl, data)


@pytest.mark.parametrize(
    ("order", "message"), [("nope", "no column 'nope'"), ("day(region)", "cannot apply")]
)
def test_bad_orders_name_the_item_and_commit_nothing(tmp_path: Path, order: str, message: str) -> None:
    tbl = make(tmp_path)
    location, files = tbl.metadata_location, table_files(tbl)
    with pytest.raises(UnsupportedTransform, match=message):
        tbl.replace_sort_order(order)
    _, fail = raise_at("swap", OSError("catalog down"))
    with pytest.raises(OSError, match="catalog down"):
        tbl.replace_sort_order("id", faults=fail)
    tbl.refresh()
    assert tbl.metadata_location == location and table_files(tbl) == files


def test_a_stale_replacement_fails(tmp_path: Path) -> None:
    tbl = make(tmp_path)
    stale = sql_catalog(tmp_path).load_table("db.t")
    tbl.replace_sort_order("id")
    with pytest.raises(ValidationError, match="sort order changed"):
        stale.replace_sort_order("region")


def test_create_table_takes_a_sort_order(tmp_path: Path) -> None:
    cat = sql_catalog(tmp_path)
    tbl = cat.create_table("db.s", rows(0, 0).schema, sort_order="region, id DESC")
    raw = metadata(tbl)
    assert raw["default-sort-order-id"] == 1 and [o["order-id"] for o in raw["sort-orders"]] == [0, 1]
    assert [(f["source-id"], f["direction"]) for f in raw["sort-orders"][1]["fields"]] == [
        (4, "asc"),
        (1, "desc"),
    ]
    assert metadata(cat.create_table("db.u", rows(0, 0).schema, sort_order=[]))["default-sort-order-id"] == 0
    with pytest.raises(UnsupportedTransform, match="no column 'nope'"):
        cat.create_table("db.v", rows(0, 0).schema, sort_order="nope")
    assert not cat.table_exists("db.v")
    from pyiceberg.table import StaticTable

    assert StaticTable.from_metadata(tbl.metadata_location).sort_order().order_id == 1  # PyIceberg reads it


def test_an_order_is_numbered_against_the_metadata_it_commits_on(tmp_path: Path) -> None:
    """Another writer set order 1 and went back to unsorted while this commit was under way: the retry used
    the id it chose before (1) and made the other writer's order the default. Java's TableMetadata.Builder
    numbers the order on the metadata it commits on."""
    cat = sql_catalog(tmp_path)
    cat.create_table("db.t", pa.schema([pa.field("id", pa.int64()), pa.field("name", pa.string())]))
    raced: list[str] = []

    def race(stage: str) -> None:
        if stage == "swap" and not raced:
            raced.append(stage)
            other = cat.load_table("db.t")
            other.replace_sort_order("id")
            other.replace_sort_order([])

    got = cat.load_table("db.t").replace_sort_order("name DESC", faults=race)
    order = cat.load_table("db.t").metadata.sort_order
    assert raced and got == order and order.order_id == 2
    assert [(f.source_ids, f.direction) for f in order.fields] == [((2,), "desc")]


@pytest.mark.parametrize(
    ("field", "message"),
    [
        (SortField((99,), "identity", "asc", "nulls-first"), "no column with field id 99"),
        (SortField((4,), "day", "asc", "nulls-first"), r"transform day cannot apply to column 'region'"),
        (SortField((1,), "identity", "descending", "nulls-last"), "direction 'descending'"),
        (SortField((1,), "identity", "asc", "first"), "null order 'first'"),
        (SortField((1, 4), "identity", "asc", "nulls-first"), "2 source columns"),
    ],
)
def test_orders_built_in_code_are_checked_as_parsed_ones(
    tmp_path: Path, field: SortField, message: str
) -> None:
    """A SortOrder object was committed as given: Java cannot load a default order on a missing column or
    with a transform its column cannot take, PyIceberg (and this engine) one spelled otherwise."""
    tbl = make(tmp_path)
    location = tbl.metadata_location
    with pytest.raises(UnsupportedTransform, match=message):
        tbl.replace_sort_order(SortOrder(1, (field,)))
    with pytest.raises(UnsupportedTransform, match=message):
        sql_catalog(tmp_path).create_table("db.o", rows(0, 0).schema, sort_order=SortOrder(1, (field,)))
    tbl.refresh()
    assert tbl.metadata_location == location and not sql_catalog(tmp_path).table_exists("db.o")
    order = tbl.replace_sort_order(SortOrder(7, (SortField((1,), "identity", "DESC", "NULLS-LAST"),)))
    assert [(f.direction, f.null_order) for f in order.fields] == [("desc", "nulls-last")]  # spec spelling


def test_an_order_on_a_column_another_writer_dropped_fails(tmp_path: Path) -> None:
    """Built on a handle that still had the column, the order was committed onto the schema without it (a
    default order Java cannot load, and compaction's sort failed)."""
    tbl = make(tmp_path)
    stale = sql_catalog(tmp_path).load_table("db.t")
    tbl.update_schema().delete_column("region").commit()
    with pytest.raises(ValidationError, match=r"schema changed since the order was built.*field id 4"):
        stale.replace_sort_order("region DESC")
    assert sql_catalog(tmp_path).load_table("db.t").metadata.sort_order.is_unsorted
