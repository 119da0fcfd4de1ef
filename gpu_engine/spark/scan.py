"""``gpu_engine.spark.scan``: a Spark DataFrame whose partitions are ScanTasks run by our engine.

The driver plans (:meth:`Table.scan`); each task becomes one row of pickled :class:`ScanPayload` in its
own partition, and ``mapInArrow`` runs it on an executor with every delete applied there
(:func:`gpu_engine.spark.executor.scan_batches`). The Spark schema is the scan's Arrow schema as Spark
reads it (large strings as strings, fixed binaries as binaries); nanosecond timestamps and times, which
Spark cannot hold exactly, are refused with the column named.
"""

from __future__ import annotations

import pickle
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from ..errors import UnsupportedFeature
from .executor import ScanPayload, scan_batches, stamp_of
from .payloads import one_per_partition

if TYPE_CHECKING:
    from ..table import Table


def scan(
    spark: Any,
    table: Table,
    *,
    filter: str = "true",
    columns: Sequence[str] | None = None,
    snapshot_id: int | None = None,
    ref: str | None = None,
    backend: str = "auto",
    from_snapshot_id: int | None = None,
    from_inclusive: bool = False,
) -> Any:
    """The rows of ``table`` matching ``filter`` as a Spark DataFrame (see the module doc). With
    ``from_snapshot_id``: only the rows appended after it up to ``snapshot_id`` / ``ref`` / the current
    snapshot (:meth:`Table.incremental_append_scan`, as Spark's ``start-snapshot-id`` read option)."""
    from pyspark.sql.pandas.types import from_arrow_schema

    if from_snapshot_id is not None:
        scan_ = table.incremental_append_scan(
            from_snapshot_id,
            from_inclusive=from_inclusive,
            to_snapshot_id=snapshot_id,
            branch=ref,
            filter=filter,
            columns=columns,
            backend=backend,
        )
    else:
        scan_ = table.scan(filter=filter, columns=columns, snapshot_id=snapshot_id, ref=ref, backend=backend)
    plan = scan_.plan()
    projection = scan_.projection(plan)
    target = spark_arrow_schema(projection.arrow_schema)
    counted = not len(target)  # Spark drops the row count of column-less Arrow batches: carry one column
    if counted:
        target = pa.schema([pa.field(_ROWS, pa.bool_())])
    spark_schema = from_arrow_schema(target)
    payloads = [
        (
            i,
            pickle.dumps(
                ScanPayload(
                    table.metadata_location,
                    stamp_of(table.metadata),
                    table.io,
                    plan.schema.schema_id,
                    t,
                    projection,
                    backend,
                )
            ),
        )
        for i, t in enumerate(plan.tasks)
    ]
    frame = one_per_partition(spark, payloads, "task bigint, payload binary")

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for out in scan_batches(batches):
            if counted:
                out = pa.RecordBatch.from_arrays([pa.nulls(out.num_rows, pa.bool_())], schema=target)
            yield out.cast(target)

    rows = frame.mapInArrow(run, spark_schema)
    return rows.drop(_ROWS) if counted else rows


_ROWS = "_gpu_engine_rows"


def spark_arrow_schema(schema: pa.Schema) -> pa.Schema:
    """``schema`` with the Arrow types Spark reads back exactly (see the module doc). A required field under
    a nullable struct, list element or map value is nullable there: its values are null where the parent
    is (legal Arrow, which a cast to a non-nullable child refuses)."""
    return pa.schema([pa.field(f.name, _spark_type(f.type, f.name, f.nullable), f.nullable) for f in schema])


def _spark_type(t: pa.DataType, name: str, nullable: bool) -> pa.DataType:
    """``t`` as Spark reads it; ``nullable``: the value may be null (its children's values are then null
    too)."""
    if pa.types.is_large_string(t):
        return pa.string()
    if pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t):
        return pa.binary()
    if pa.types.is_timestamp(t) and t.unit != "us":
        raise UnsupportedFeature(f"column {name!r}: Spark has no {t.unit} timestamps; scan it without Spark")
    if pa.types.is_time(t):
        raise UnsupportedFeature(
            f"column {name!r}: Spark DataFrames have no time type; scan it without Spark"
        )
    if pa.types.is_struct(t):
        return pa.struct([_child(f, f"{name}.{f.name}", nullable) for f in t])
    if pa.types.is_large_list(t) or pa.types.is_list(t):
        return pa.list_(_child(t.value_field.with_name("element"), f"{name}.element", nullable))
    if pa.types.is_map(t):
        return pa.map_(
            _spark_type(t.key_type, f"{name}.key", False),
            _child(t.item_field.with_name("value"), f"{name}.value", nullable),
        )
    return t


def _child(f: pa.Field, name: str, parent_nullable: bool) -> pa.Field:
    nullable = f.nullable or parent_nullable
    return pa.field(f.name, _spark_type(f.type, name, nullable), nullable)
