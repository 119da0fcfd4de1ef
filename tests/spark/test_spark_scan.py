"""gpu_engine.spark.scan: a DataFrame of the table's rows, deletes applied on the executors, equal to the
single-process scan (and on a fixture table with equality deletes); types Spark cannot hold refused."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

import gpu_engine as ge
from gpu_engine.errors import UnsupportedFeature
from gpu_engine.spark import scan
from gpu_engine.spark.payloads import one_per_partition
from gpu_engine.spark.scan import spark_arrow_schema

from ..execute.oracles import assert_same_rows
from ..planning._support import load


def _to_arrow(frame: Any) -> pa.Table:
    table = frame.toArrow()
    assert isinstance(table, pa.Table)
    return table


def test_scan_equals_the_local_scan(spark: Any, tmp_path: Path) -> None:
    cat = ge.load_catalog("s", uri=f"sqlite:///{tmp_path / 'c.db'}", warehouse=(tmp_path / "wh").as_uri())
    cat.create_namespace("db")
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), ("name", pa.string()),
                        ("ts", pa.timestamp("us", tz="UTC"))])  # fmt: skip
    tbl = cat.create_table(
        "db.t", schema=schema, partition_spec=["bucket(2, id)"], properties={"format-version": "3"}
    )
    for i in range(4):
        ids = np.arange(i * 25, (i + 1) * 25, dtype=np.int64)
        ts = pa.array(ids * 3_600_000_000, pa.timestamp("us", tz="UTC"))
        tbl.append(pa.table({"id": ids, "name": [f"n{j}" for j in ids], "ts": ts}, schema=schema))
    tbl.delete("id in (1, 30, 99)")
    tbl.delete_rows(pa.table({"id": pa.array([2, 3], pa.int64())}), on=["id"])
    columns = ["id", "name", "ts", "_file", "_pos"]
    local = tbl.scan(columns=columns).to_arrow()
    distributed = _to_arrow(scan(spark, tbl, columns=columns, backend="cpu"))
    assert distributed.num_rows == local.num_rows == 95
    assert_same_rows(distributed, local.cast(spark_arrow_schema(local.schema)), context="spark scan")
    filtered = _to_arrow(scan(spark, tbl, filter="id >= 50", columns=["id"], backend="cpu"))
    assert sorted(filtered["id"].to_pylist()) == [i for i in range(50, 100) if i != 99]
    second = list(reversed(tbl.metadata.ancestor_ids(tbl.metadata.current_snapshot_id or 0)))[1]
    appended = _to_arrow(scan(spark, tbl, columns=["id"], backend="cpu", from_snapshot_id=second))
    assert sorted(appended["id"].to_pylist()) == list(range(50, 100))  # as appended: deletes not applied
    nothing = scan(spark, tbl, columns=[], filter="id >= 50", backend="cpu")  # rows, no columns
    local_rows = tbl.scan(columns=[], filter="id >= 50").to_arrow().num_rows
    assert nothing.columns == [] and nothing.count() == 49 == local_rows


def test_fixture_with_equality_deletes(spark: Any) -> None:
    rel = "fixtures/impala/iceberg_test/hadoop_catalog/ice/iceberg_v2_delete_equality"
    tbl = load(rel)
    assert_same_rows(_to_arrow(scan(spark, tbl, backend="cpu")), tbl.scan().to_arrow(), context=rel)


def test_types_spark_cannot_hold_are_refused() -> None:
    with pytest.raises(UnsupportedFeature, match="column 't'"):
        spark_arrow_schema(pa.schema([("t", pa.timestamp("ns"))]))
    with pytest.raises(UnsupportedFeature, match=r"column 's\.c'"):
        spark_arrow_schema(pa.schema([("s", pa.struct([("c", pa.time64("us"))]))]))
    converted = spark_arrow_schema(pa.schema([("f", pa.large_string()), ("u", pa.binary(16))]))
    assert converted.types == [pa.string(), pa.binary()]


def test_required_fields_under_nullable_parents_cast_with_their_parent_null() -> None:
    """A required struct field is null where its optional struct is (as the Parquet reader gives it, also
    for list elements and map values): the Spark schema makes it nullable there, so the executor's cast
    takes such rows; under required parents it stays required."""
    fields = [pa.field("x", pa.int64(), nullable=False), pa.field("y", pa.string())]
    inner = pa.StructArray.from_arrays(
        [pa.array([None, 2], pa.int64()), pa.array([None, "b"])], fields=fields, mask=pa.array([True, False])
    )
    offsets = pa.array([0, 2, 2], pa.int32())
    arrays = [
        inner,
        pa.ListArray.from_arrays(offsets, inner),
        pa.MapArray.from_arrays(offsets, pa.array(["k", "j"]), inner),
        pa.StructArray.from_arrays([pa.array([1, 2], pa.int64())], fields=fields[:1]),
    ]
    names = ["s", "l", "m", "r"]
    schema = pa.schema([pa.field(n, a.type, nullable=n != "r") for n, a in zip(names, arrays, strict=True)])
    batch = pa.RecordBatch.from_arrays(arrays, schema=schema)
    target = spark_arrow_schema(batch.schema)
    assert batch.cast(target).to_pylist() == batch.to_pylist()
    assert not target.field("r").type.field("x").nullable


def test_each_task_gets_a_partition_of_its_own(spark: Any) -> None:
    """One row per partition, in order: every task slot gets work (hash partitioning left about a third of
    the partitions empty and queued two or more tasks on others)."""
    rows = [(i, bytes([i])) for i in range(23)]
    frame = one_per_partition(spark, rows, "task bigint, payload binary")
    parts = frame.rdd.glom().map(lambda p: [r["task"] for r in p]).collect()
    assert parts == [[i] for i in range(23)]
