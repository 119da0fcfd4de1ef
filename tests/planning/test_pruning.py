"""Pruning on real partitioned fixtures: never drop a file holding a matching row, and do prune.

Each case is a filter string for the planner and the same predicate as a pyarrow compute expression. The
safety check reads every data file of the snapshot with pyarrow (columns matched by Parquet field id;
identity-partition columns that the writer left out of the file are filled from the partition tuple, as
the spec's column projection rules say) and asserts that every file with at least one matching row is
kept. Deletes are irrelevant here: a file whose rows match must be read whether or not they are deleted.
The effectiveness check asserts which counter of the plan summary shows the pruning, or that nothing
was pruned where nothing may be.
"""

from __future__ import annotations

import datetime as dt
import math
import random
from dataclasses import dataclass
from decimal import Decimal
from functools import cache
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from gpu_engine.expressions import AlwaysFalse, AlwaysTrue
from gpu_engine.iceberg import types as it
from gpu_engine.iceberg.metadata import TableMetadata
from gpu_engine.iceberg.schema import Schema
from gpu_engine.planning.scan import ScanOptions, plan_scan
from gpu_engine.tasks import DataFile, PlanSummary

from ._support import load

UTC = dt.UTC
F = pc.field

PG = "pg_lake/sample_tables_v3/public/"
IMPALA = "impala/iceberg_test/"
ICE = "impala/iceberg_test/hadoop_catalog/ice/"
DUCK = "duckdb-iceberg/data/persistent/"
SPARK1 = "duckdb-iceberg/data/iceberg/generated_spec1_0_001/pyspark_iceberg_table"
SPARK2 = "duckdb-iceberg/data/iceberg/generated_spec2_0_001/pyspark_iceberg_table"


def ts(year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0) -> pa.Scalar:
    return pa.scalar(dt.datetime(year, month, day, hour, minute, second), pa.timestamp("us"))


def tstz(year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0) -> pa.Scalar:
    value = dt.datetime(year, month, day, hour, minute, second, tzinfo=UTC)
    return pa.scalar(value, pa.timestamp("us", tz="UTC"))


@dataclass(frozen=True)
class Case:
    id: str
    table: str
    filter: str
    rows: pc.Expression  # the same predicate over the table's current column names
    expect: str = "safe"  # partition | metrics | manifests | pruned (any counter) | keep-all | safe
    exact: bool = False  # kept files are exactly the files with matching rows
    snapshot_id: int | None = None


CASES = [
    # bucket[8](id), 7 files
    Case("bucket-eq", PG + "v3_partitioned_bucket", "id = 5", F("id") == 5, "partition", exact=True),
    Case(
        "bucket-in", PG + "v3_partitioned_bucket", "id in (0, 15, 6)", F("id").isin([0, 15, 6]), "partition"
    ),
    Case(
        "bucket-range-metrics", PG + "v3_partitioned_bucket", "id > 100", F("id") > 100, "metrics", exact=True
    ),
    Case("bucket-not-eq", PG + "v3_partitioned_bucket", "not (id = 5)", ~(F("id") == 5), "keep-all"),
    Case(
        "bucket-name-metrics", PG + "v3_partitioned_bucket", "name = 'row-8'", F("name") == "row-8", "metrics"
    ),
    Case(
        "bucket-name-like",
        PG + "v3_partitioned_bucket",
        "name like 'row-1%'",
        pc.starts_with(F("name"), "row-1"),
        "metrics",
    ),
    Case(
        "bucket-is-null", PG + "v3_partitioned_bucket", "id is null", F("id").is_null(), "pruned", exact=True
    ),
    # truncate[3](name): partitions 'aar', 'ban', 'cat'
    Case(
        "truncate-eq", PG + "v3_partitioned_truncate", "name = 'banana'", F("name") == "banana", "partition"
    ),
    Case(
        "truncate-short-prefix",
        PG + "v3_partitioned_truncate",
        "name like 'ca%'",
        pc.starts_with(F("name"), "ca"),
        "partition",
        exact=True,
    ),
    Case(
        "truncate-long-prefix",
        PG + "v3_partitioned_truncate",
        "name like 'caterp%'",
        pc.starts_with(F("name"), "caterp"),
        "partition",
        exact=True,
    ),
    Case(
        "truncate-range",
        PG + "v3_partitioned_truncate",
        "name >= 'b' and name < 'bz'",
        (F("name") >= "b") & (F("name") < "bz"),
        "partition",
        exact=True,
    ),
    Case(
        "truncate-in",
        PG + "v3_partitioned_truncate",
        "name in ('aardvark', 'zebra')",
        F("name").isin(["aardvark", "zebra"]),
        "partition",
        exact=True,
    ),
    Case(
        "truncate-not-like",
        PG + "v3_partitioned_truncate",
        "name not like 'ba%'",
        ~pc.starts_with(F("name"), "ba"),
        "pruned",
        exact=True,
    ),
    # year -> month -> day -> hour evolution, one file and one manifest per spec
    Case(
        "temporal-ge",
        PG + "v3_partitioned_temporal",
        "ts >= '2023-06-21T00:00:00Z'",
        F("ts") >= tstz(2023, 6, 21),
        "pruned",
        exact=True,
    ),
    Case(
        "temporal-lt-manifests",
        PG + "v3_partitioned_temporal",
        "ts < '2023-02-01T00:00:00Z'",
        F("ts") < tstz(2023, 2, 1),
        "manifests",
        exact=True,
    ),
    Case(
        "temporal-hour-eq",
        PG + "v3_partitioned_temporal",
        "ts = '2023-06-21T12:00:00Z'",
        F("ts") == tstz(2023, 6, 21, 12),
        "metrics",  # the year, month and day manifests all contain that hour: their files go by metrics
        exact=True,
    ),
    Case(
        "temporal-between",
        PG + "v3_partitioned_temporal",
        "ts between '2023-06-15T00:00:00Z' and '2023-06-15T23:59:59Z'",
        (F("ts") >= tstz(2023, 6, 15)) & (F("ts") <= tstz(2023, 6, 15, 23, 59, 59)),
        "pruned",
        exact=True,
    ),
    Case(
        "temporal-offset-literal",
        PG + "v3_partitioned_temporal",
        "ts > '2023-06-21T13:30:00+02:00'",
        F("ts") > tstz(2023, 6, 21, 11, 30),
        "pruned",
        exact=True,
    ),
    # identity(region), day(ts), bucket[4](id)
    Case(
        "multi-and",
        PG + "v3_partitioned_multi",
        "region = 'eu-west' and id = 5",
        (F("region") == "eu-west") & (F("id") == 5),
        "partition",
        exact=True,
    ),
    Case(
        "multi-or",
        PG + "v3_partitioned_multi",
        "region = 'us-east' or region = 'ap-south'",
        (F("region") == "us-east") | (F("region") == "ap-south"),
        "partition",
        exact=True,
    ),
    Case(
        "multi-day",
        PG + "v3_partitioned_multi",
        "ts >= '2024-01-16T00:00:00Z'",
        F("ts") >= tstz(2024, 1, 16),
        "partition",
        exact=True,
    ),
    Case(
        "multi-not",
        PG + "v3_partitioned_multi",
        "region in ('eu-west') and not (ts >= '2024-01-16T00:00:00Z')",
        F("region").isin(["eu-west"]) & ~(F("ts") >= tstz(2024, 1, 16)),
        "partition",
        exact=True,
    ),
    # identity(region)
    Case(
        "identity-eq",
        PG + "v3_partitioned_identity",
        "region = 'eu-west'",
        F("region") == "eu-west",
        "partition",
        exact=True,
    ),
    Case(
        "identity-not-eq",
        PG + "v3_partitioned_identity",
        "region != 'eu-west'",
        F("region") != "eu-west",
        "partition",
        exact=True,
    ),
    Case(
        "identity-not-null",
        PG + "v3_partitioned_identity",
        "region is not null",
        F("region").is_valid(),
        "keep-all",
    ),
    Case(
        "identity-is-null",
        PG + "v3_partitioned_identity",
        "region is null",
        F("region").is_null(),
        "pruned",
        exact=True,
    ),
    # Impala v1 hour(ts) with pre-1970 rows (hour -8759 for 1969-01-01 01:xx)
    Case(
        "hour-pre-1970",
        ICE + "iceberg_timestamp_part",
        "ts < '1970-01-01 00:00:00'",
        F("ts") < ts(1970, 1, 1),
        "partition",
        exact=True,
    ),
    Case(
        "hour-pre-1970-inside",
        ICE + "iceberg_timestamp_part",
        "ts >= '1969-01-01 01:10:00' and ts < '1969-01-01 02:00:00'",
        (F("ts") >= ts(1969, 1, 1, 1, 10)) & (F("ts") < ts(1969, 1, 1, 2)),
        "partition",
        exact=True,
    ),
    Case(
        "hour-pre-1970-after-upper-bound",
        ICE + "iceberg_timestamp_part",
        "ts > '1969-01-01 01:15:00' and ts < '1970-01-01 00:00:00'",
        (F("ts") > ts(1969, 1, 1, 1, 15)) & (F("ts") < ts(1970, 1, 1)),
        "metrics",
        exact=True,
    ),
    Case(
        "hour-pre-1970-boundary-le",
        ICE + "iceberg_timestamp_part",
        "ts <= '1969-01-01 01:00:00'",
        F("ts") <= ts(1969, 1, 1, 1),
        "partition",
        exact=True,
    ),
    Case(
        "hour-pre-1970-boundary-lt",
        ICE + "iceberg_timestamp_part",
        "ts < '1969-01-01 01:00:00'",
        F("ts") < ts(1969, 1, 1, 1),
        "partition",
        exact=True,
    ),
    Case(
        "hour-pre-1970-eq",
        ICE + "iceberg_timestamp_part",
        "ts = '1969-01-01 01:00:00'",
        F("ts") == ts(1969, 1, 1, 1),
        "partition",
        exact=True,
    ),
    Case(
        "hourtz-pre-1970",
        ICE + "iceberg_timestamptz_part",
        "ts < '1969-01-01T00:10:00+00:00'",
        F("ts") < tstz(1969, 1, 1, 0, 10),
        "partition",
        exact=True,
    ),
    Case(
        "hourtz-offset",
        ICE + "iceberg_timestamptz_part",
        "ts >= '2022-04-11T00:00:00+02:00'",
        F("ts") >= tstz(2022, 4, 10, 22),
        "partition",
        exact=True,
    ),
    # Impala v1 hour(event_time), identity(action): 20 one-row files
    Case(
        "impala-action",
        IMPALA + "iceberg_partitioned",
        "action = 'click'",
        F("action") == "click",
        "partition",
    ),
    Case(
        "impala-action-in-and-id",
        IMPALA + "iceberg_partitioned",
        "action in ('view', 'download') and id < 5",
        F("action").isin(["view", "download"]) & (F("id") < 5),
        "metrics",
        exact=True,
    ),
    Case(
        "impala-hour",
        IMPALA + "iceberg_partitioned",
        "event_time < '2020-01-01T09:00:00Z'",
        F("event_time") < tstz(2020, 1, 1, 9),
        "partition",
        exact=True,
    ),
    Case(
        "impala-user",
        IMPALA + "iceberg_partitioned",
        "user = 'Lisa'",
        F("user") == "Lisa",
        "metrics",
        exact=True,
    ),
    Case(
        "impala-id-null",
        IMPALA + "iceberg_partitioned",
        "id is null",
        F("id").is_null(),
        "metrics",
        exact=True,
    ),
    Case(
        "impala-id-not-null", IMPALA + "iceberg_partitioned", "id is not null", F("id").is_valid(), "keep-all"
    ),
    # DuckDB identity partitions on many types (the column lives only in the partition tuple)
    Case(
        "bigint-max",
        DUCK + "partition_bigint",
        "partition_col = 9223372036854775807",
        F("partition_col") == 9223372036854775807,
        "partition",
        exact=True,
    ),
    Case(
        "bigint-neg",
        DUCK + "partition_bigint",
        "partition_col < 0",
        F("partition_col") < 0,
        "partition",
        exact=True,
    ),
    Case(
        "binary",
        DUCK + "partition_binary",
        "partition_col = X'010203'",
        F("partition_col") == pa.scalar(b"\x01\x02\x03"),
        "partition",
        exact=True,
    ),
    Case(
        "bool",
        DUCK + "partition_bool",
        "partition_col = true",
        F("partition_col") == pa.scalar(True),
        "partition",
        exact=True,
    ),
    Case(
        "decimal36",
        DUCK + "partition_decimal_hugeint",
        "partition_col > 1000000000000",
        F("partition_col") > pa.scalar(Decimal("1000000000000"), pa.decimal128(36, 23)),
        "partition",
        exact=True,
    ),
    Case(
        "decimal16-between",
        DUCK + "partition_decimal_bigint",
        "partition_col between -1 and 1",
        (F("partition_col") >= pa.scalar(Decimal(-1), pa.decimal128(16, 11)))
        & (F("partition_col") <= pa.scalar(Decimal(1), pa.decimal128(16, 11))),
        "partition",
        exact=True,
    ),
    Case(
        "decimal3-eq",
        DUCK + "partition_decimal_smallint",
        "partition_col = 4.56",
        F("partition_col") == pa.scalar(Decimal("4.56"), pa.decimal128(3, 2)),
        "partition",
        exact=True,
    ),
    Case(
        "decimal8-in",
        DUCK + "partition_decimal_integer",
        "partition_col in (1.23, 42.563)",
        F("partition_col").isin(pa.array([Decimal("1.2300"), Decimal("42.5630")], pa.decimal128(8, 4))),
        "partition",
        exact=True,
    ),
    Case(
        "float-lt",
        DUCK + "partition_float",
        "partition_col < 2.0",
        F("partition_col") < pa.scalar(2.0, pa.float32()),
        "partition",
        exact=True,
    ),
    Case(
        "float-gt",
        DUCK + "partition_double",
        "partition_col > 3",
        F("partition_col") > pa.scalar(3.0, pa.float32()),
        "partition",
        exact=True,
    ),
    Case(
        "fixed",
        DUCK + "partition_fixed_length_binary/default.db/partition_fixed_length_binary",
        "partition_col = X'68656c6c6f20776f726c64'",
        F("partition_col") == pa.scalar(b"hello world", pa.binary(11)),
        "partition",
        exact=True,
    ),
    Case(
        "integer-in",
        DUCK + "partition_integer",
        "partition_col in (42, 43)",
        F("partition_col").isin(pa.array([42, 43], pa.int32())),
        "partition",
        exact=True,
    ),
    Case(
        "time",
        DUCK + "partition_time/default.db/partition_time",
        "partition_col < '10:00:00'",
        F("partition_col") < pa.scalar(dt.time(10), pa.time64("us")),
        "partition",
        exact=True,
    ),
    Case(
        "timestamp",
        DUCK + "partition_timestamp/default.db/partition_timestamp",
        "partition_col >= '2023-08-01 00:00:00'",
        F("partition_col") >= ts(2023, 8, 1),
        "partition",
        exact=True,
    ),
    Case(
        "timestamptz",
        DUCK + "partition_timestamptz/default.db/partition_timestamptz",
        "partition_col < '2023-06-01T00:00:00Z'",
        F("partition_col") < tstz(2023, 6, 1),
        "partition",
        exact=True,
    ),
    # partition evolution identity(event_date) -> identity(event_date), identity(event_type)
    Case(
        "evolved-identity",
        DUCK + "hive_partitioned_table",
        "event_type = 'view'",
        F("event_type") == "view",
        "pruned",
        exact=True,
    ),
    Case(
        "evolved-date",
        DUCK + "hive_partitioned_table",
        "event_date >= '2024-01-03'",
        F("event_date") >= pa.scalar(dt.date(2024, 1, 3)),
        "manifests",  # the spec-0 manifest holds only earlier dates
        exact=True,
    ),
    # day(timestamp)
    Case(
        "day",
        DUCK + "map_stats/default.db/map_stats",
        "timestamp >= '2026-01-02T00:00:00Z'",
        F("timestamp") >= tstz(2026, 1, 2),
        "pruned",
        exact=True,
    ),
    # metrics only (unpartitioned): nulls, extreme values, pre-1970 timestamps (year 1), decimals, floats
    Case(
        "not-null-all-null-file",
        DUCK + "is_null_is_not_null",
        "value is not null",
        F("value").is_valid(),
        "metrics",
        exact=True,
    ),
    Case(
        "is-null-no-null-file",
        DUCK + "is_null_is_not_null",
        "value is null",
        F("value").is_null(),
        "metrics",
        exact=True,
    ),
    # this writer (pyarrow 20 via PyIceberg) recorded no value/null counts: an all-null file cannot be told
    Case(
        "flag-not-null",
        DUCK + "null_stats/default/test_nulls",
        "flag is not null",
        F("flag").is_valid(),
        "keep-all",
    ),
    Case(
        "flag-true",
        DUCK + "null_stats/default/test_nulls",
        "flag = true",
        F("flag") == pa.scalar(True),
        "keep-all",
    ),
    Case(
        "ids-not-null",
        DUCK + "null_stats/default/test_nulls",
        "id is not null",
        F("id").is_valid(),
        "keep-all",
    ),
    Case(
        "prims-year-1",
        PG + "v3_primitives",
        "c_ts_ntz < '1970-01-01 00:00:00'",
        F("c_ts_ntz") < ts(1970, 1, 1),
        "metrics",
        exact=True,
    ),
    Case(
        "prims-date",
        PG + "v3_primitives",
        "c_date < '1000-01-01'",
        F("c_date") < pa.scalar(dt.date(1000, 1, 1)),
        "metrics",
        exact=True,
    ),
    Case(
        "prims-tz-max",
        PG + "v3_primitives",
        "c_ts_tz >= '9999-01-01T00:00:00Z'",
        F("c_ts_tz") >= tstz(9999, 1, 1),
        "metrics",
        exact=True,
    ),
    Case(
        "prims-decimal",
        PG + "v3_primitives",
        "c_dec_l > 0",
        F("c_dec_l") > pa.scalar(Decimal(0), pa.decimal128(38, 10)),
        "metrics",
        exact=True,
    ),
    Case(
        "prims-double",
        PG + "v3_primitives",
        "c_double < -1e300",
        F("c_double") < -1e300,
        "metrics",
        exact=True,
    ),
    Case(
        "prims-long-min",
        PG + "v3_primitives",
        "c_long = -9223372036854775808",
        F("c_long") == -(2**63),
        "metrics",
    ),
    Case(
        "prims-str-null", PG + "v3_primitives", "c_str is null", F("c_str").is_null(), "metrics", exact=True
    ),
    Case(
        "prims-or",
        PG + "v3_primitives",
        "c_int = 2147483647 or c_str = 'a'",
        (F("c_int") == 2147483647) | (F("c_str") == "a"),
        "metrics",
        exact=True,
    ),
    Case(
        "prims-is-nan",
        PG + "v3_primitives",
        "c_double is nan",
        pc.is_nan(F("c_double")),
        "metrics",
        exact=True,
    ),
    Case(
        "prims-not-nan",  # nulls are not NaN: the all-null file matches too
        PG + "v3_primitives",
        "c_float is not nan",
        ~pc.is_nan(F("c_float")) | F("c_float").is_null(),
        "keep-all",
        exact=True,
    ),
    Case("prims-bool-ne", PG + "v3_primitives", "c_bool != true", F("c_bool") != pa.scalar(True), "safe"),
    # schema evolution: payload (int) renamed amount and promoted to long; decimal(20, 5) -> decimal(28, 5)
    Case(
        "promoted-int-bounds",
        PG + "v3_evolution_full",
        "amount >= 35 and amount < 60",
        (F("amount") >= 35) & (F("amount") < 60),
        "metrics",
        exact=True,
    ),
    Case(
        "widened-decimal",
        PG + "v3_evolution_full",
        "extra > 2",
        F("extra") > pa.scalar(Decimal(2), pa.decimal128(28, 5)),
        "metrics",
    ),
    Case("added-column-is-null", PG + "v3_evolution_full", "extra is null", F("extra").is_null(), "metrics"),
    Case(
        "time-travel-old-name",
        PG + "v3_evolution_full",
        "payload = 10",
        F("payload") == 10,
        "metrics",
        exact=True,
        snapshot_id=7693880621151237689,
    ),
    # Spark v2 table (generated_spec2): 6,592 rows in 5 files, one with all-null columns
    Case(
        "spark-not-null",
        SPARK2,
        "l_shipdate_date is not null",
        F("l_shipdate_date").is_valid(),
        "metrics",
        exact=True,
    ),
    Case(
        "spark-double",
        SPARK2,
        "l_extendedprice_double > 30000",
        F("l_extendedprice_double") > 30000.0,
        "metrics",
        exact=True,
    ),
    Case(
        "spark-string-prefix",
        SPARK2,
        "l_comment_string like 'zle%'",
        pc.starts_with(F("l_comment_string"), "zle"),
        "metrics",
    ),
    Case(
        "spark-promoted-added-column",
        SPARK2,
        "schema_evol_added_col_1 > 100",
        F("schema_evol_added_col_1") > 100,
    ),
    Case(
        "spark-v1-decimal",
        SPARK1,
        "l_extendedprice_dec38_10 < 1000",
        F("l_extendedprice_dec38_10") < pa.scalar(Decimal(1000), pa.decimal128(38, 10)),
    ),
]


# -- reading rows by field id ---------------------------------------------------------------------------


def _arrow_type(t: it.PrimitiveType) -> pa.DataType:
    if isinstance(t, it.DecimalType):
        return pa.decimal128(t.precision, t.scale)
    if isinstance(t, it.FixedType):
        return pa.binary(t.length)
    return {
        "boolean": pa.bool_(),
        "int": pa.int32(),
        "long": pa.int64(),
        "float": pa.float32(),
        "double": pa.float64(),
        "date": pa.date32(),
        "time": pa.time64("us"),
        "timestamp": pa.timestamp("us"),
        "timestamptz": pa.timestamp("us", tz="UTC"),
        "string": pa.string(),
        "binary": pa.binary(),
        "uuid": pa.binary(16),
    }[t.name]


def _partition_column(md: TableMetadata, data: DataFile, field_id: int, n: int) -> pa.Array | None:
    """An identity-partitioned column the writer left out of the file: its value is the partition's."""
    spec = md.spec_by_id(data.spec_id)
    for i, pf in enumerate(spec.fields):
        if pf.transform == "identity" and tuple(pf.source_ids) == (field_id,):
            t = md.schema.find_field(field_id).type
            assert isinstance(t, it.PrimitiveType)
            target = _arrow_type(t)
            value = data.partition[i]
            if pa.types.is_temporal(target) and isinstance(value, int):
                storage = pa.int32() if pa.types.is_date32(target) else pa.int64()
                return pa.array([value] * n, storage).cast(target)
            return pa.array([value] * n, target)
    return None


@cache
def _read(path: str) -> pa.Table:
    return pq.ParquetFile(path).read()


def rows_of(md: TableMetadata, data: DataFile, schema: Schema) -> pa.Table | None:
    """The file's rows with columns named as ``schema`` (the scan's) names them, matched by field id;
    columns added after the file was written read as nulls. None for files without field ids."""
    raw = _read(data.path)
    by_id = {
        int(f.metadata[b"PARQUET:field_id"]): i
        for i, f in enumerate(raw.schema)
        if f.metadata and b"PARQUET:field_id" in f.metadata
    }
    if not by_id:
        return None  # would need name mapping
    columns: dict[str, Any] = {}
    for nf in schema.fields:
        if nf.field_id in by_id:
            columns[nf.name] = raw.column(by_id[nf.field_id])
        else:
            filled = _partition_column(md, data, nf.field_id, raw.num_rows)
            if filled is None and isinstance(nf.type, it.PrimitiveType):
                filled = pa.nulls(raw.num_rows, _arrow_type(nf.type))
            if filled is not None:
                columns[nf.name] = filled
    return pa.table(columns)


def _counters(s: PlanSummary) -> dict[str, int]:
    return {
        "partition": s.data_files_pruned_by_partition,
        "metrics": s.data_files_pruned_by_metrics,
        "manifests": s.manifests_pruned,
    }


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_pruning_is_safe_and_effective(case: Case) -> None:
    tbl = load(case.table)
    md = tbl.metadata
    everything = plan_scan(md, tbl.io, ScanOptions(snapshot_id=case.snapshot_id))
    plan = plan_scan(md, tbl.io, ScanOptions(filter=case.filter, snapshot_id=case.snapshot_id))
    kept = {t.file.path for t in plan.tasks}
    residuals = {t.file.path: t.residual for t in plan.tasks}
    files = {t.file.path: t.file for t in everything.tasks}
    assert kept <= set(files)
    matching: set[str] = set()
    checked = 0
    for path, data in sorted(files.items()):
        rows = rows_of(md, data, plan.schema)
        if rows is None:
            continue
        checked += 1
        hits = rows.filter(case.rows).num_rows
        if hits:
            matching.add(path)
        residual = residuals.get(path)
        assert not isinstance(residual, AlwaysFalse), f"{path} kept with residual false"
        if isinstance(residual, AlwaysTrue):  # the partition decided every row: all must match
            assert hits == rows.num_rows, (
                f"{path}: residual true but {rows.num_rows - hits} rows do not match"
            )
    assert checked == len(files), "every data file of these fixtures carries field ids"
    dropped = sorted(matching - kept)
    assert not dropped, f"{case.filter!r} pruned files holding matching rows: {dropped}"

    s = plan.summary
    counters = _counters(s)
    assert s.data_files_kept == len(kept)
    if case.expect == "keep-all":
        assert kept == set(files) and not any(counters.values()), counters
    elif case.expect == "pruned":
        assert len(kept) < len(files), counters
    elif case.expect != "safe":
        assert counters[case.expect] > 0, f"expected pruning by {case.expect}: {counters}"
    if case.exact:
        assert kept == matching, f"kept {sorted(kept - matching)} without matching rows"


def test_enough_filters() -> None:
    assert len(CASES) >= 25
    assert len({c.id for c in CASES}) == len(CASES)
    assert {c.expect for c in CASES} >= {"partition", "metrics", "manifests", "keep-all", "pruned"}


def test_manifests_pruned_by_partition_summaries_per_spec() -> None:
    """v3_partitioned_temporal: one manifest per spec (year, month, day, hour); each is projected with its
    own spec, so a filter before February 2023 keeps only the year manifest (2023, January's file)."""
    tbl = load(PG + "v3_partitioned_temporal")
    plan = plan_scan(tbl.metadata, tbl.io, ScanOptions(filter="ts < '2023-02-01T00:00:00Z'"))
    assert plan.summary.manifests_total == 4
    assert plan.summary.manifests_pruned == 3
    assert [t.file.spec_id for t in plan.tasks] == [0]


# -- random filters -----------------------------------------------------------------------------------

FUZZ_TABLES = [
    PG + "v3_partitioned_bucket",
    PG + "v3_partitioned_truncate",
    PG + "v3_partitioned_temporal",
    PG + "v3_partitioned_multi",
    PG + "v3_primitives",
    PG + "v3_evolution_full",
    IMPALA + "iceberg_partitioned",
    ICE + "iceberg_timestamp_part",
    DUCK + "hive_partitioned_table",
    DUCK + "partition_decimal_hugeint",
    DUCK + "is_null_is_not_null",
]
FUZZ_FILTERS_PER_TABLE = 25
_FUZZ_TYPES = {"boolean", "int", "long", "float", "double", "decimal", "string", "binary", "fixed", "date"}
_FUZZ_TYPES |= {"timestamp", "timestamptz"}

Column = tuple[str, it.PrimitiveType, list[Any]]


def _literal(t: it.PrimitiveType, v: Any) -> str:
    if t.name == "boolean":
        return "true" if v else "false"
    if t.name in ("int", "long") or isinstance(t, it.DecimalType):
        return str(v)
    if t.name in ("float", "double"):
        return repr(float(v))
    if t.name == "binary" or isinstance(t, it.FixedType):
        return "X'" + bytes(v).hex() + "'"
    if t.name == "string":
        text = str(v)
    elif t.name == "timestamptz":
        text = v.astimezone(UTC).replace(tzinfo=None).isoformat() + "+00:00"
    else:
        text = v.isoformat(sep=" ") if t.name == "timestamp" else v.isoformat()
    return "'" + text.replace("'", "''") + "'"


def _nudge(t: it.PrimitiveType, v: Any, r: random.Random) -> Any:
    """``v`` or a neighbour of it (bound edges are where pruning goes wrong)."""
    try:
        return _neighbour(t, v, r.choice([-1, 0, 0, 1]), r)
    except OverflowError:  # next to the type's extreme values
        return v


def _neighbour(t: it.PrimitiveType, v: Any, k: int, r: random.Random) -> Any:
    if k == 0 or t.name in ("boolean", "binary", "fixed"):
        return v
    if t.name in ("int", "long"):
        w: Any = v + k
    elif t.name in ("float", "double"):
        w = v + k * (abs(v) * 1e-3 + 0.5)
    elif isinstance(t, it.DecimalType):
        w = v + k * Decimal(1).scaleb(-t.scale)
    elif t.name == "string":
        w = v + "a" if k > 0 else v[:-1]
    elif t.name == "date":
        w = v + dt.timedelta(days=k)
    else:
        w = v + r.choice([dt.timedelta(microseconds=k), dt.timedelta(hours=k), dt.timedelta(days=k)])
    return w


def _scalar(t: it.PrimitiveType, v: Any) -> pa.Scalar | None:
    try:
        s = pa.scalar(v, _arrow_type(t))
    except (pa.ArrowInvalid, OverflowError, ValueError, TypeError):
        return None
    if t.name in ("float", "double") and not math.isfinite(v):
        return None
    return s


def _random_predicate(r: random.Random, columns: list[Column]) -> tuple[str, pc.Expression]:
    name, t, values = r.choice(columns)
    f = F(name)
    present = [v for v in values if v is not None]
    ops = ["is null", "is not null"]
    if present:
        ops += ["=", "!="] if t.name == "boolean" else ["=", "!=", "<", "<=", ">", ">=", "in", "not in"]
        ops += ["like", "not like"] if t.name == "string" else []
    op = r.choice(ops)
    if op == "is null":
        return f"{name} is null", f.is_null()
    if op == "is not null":
        return f"{name} is not null", f.is_valid()
    if op in ("like", "not like"):
        value = r.choice(present)
        prefix = "".join(c for c in value[: r.randint(1, max(1, len(value)))] if c not in "%_\\'") or "x"
        hit = pc.starts_with(f, prefix)
        return f"{name} {op} '{prefix}%'", hit if op == "like" else ~hit
    if op in ("in", "not in"):
        chosen = {_nudge(t, r.choice(present), r) for _ in range(r.randint(1, 3))}
        items = [v for v in chosen if _scalar(t, v) is not None] or [present[0]]
        member = pc.if_else(
            f.is_valid(), f.isin(pa.array(items, _arrow_type(t))), pa.scalar(None, pa.bool_())
        )
        text = f"{name} {op} ({', '.join(_literal(t, v) for v in items)})"
        return text, member if op == "in" else ~member
    value = _nudge(t, r.choice(present), r)
    lit = _scalar(t, value)
    if lit is None:
        value = present[0]
        lit = pa.scalar(value, _arrow_type(t))
    compare = {"=": f == lit, "!=": f != lit, "<": f < lit, "<=": f <= lit, ">": f > lit, ">=": f >= lit}
    return f"{name} {op} {_literal(t, value)}", compare[op]


def _random_filter(r: random.Random, columns: list[Column], depth: int = 0) -> tuple[str, pc.Expression]:
    x = r.random()
    if depth < 2 and x < 0.45:
        (a, ea), (b, eb) = _random_filter(r, columns, depth + 1), _random_filter(r, columns, depth + 1)
        return (f"({a} and {b})", ea & eb) if x < 0.25 else (f"({a} or {b})", ea | eb)
    if depth < 2 and x < 0.55:
        a, ea = _random_filter(r, columns, depth + 1)
        return f"not ({a})", ~ea
    return _random_predicate(r, columns)


@pytest.mark.parametrize("table", FUZZ_TABLES)
def test_random_filters_never_prune_a_matching_file(table: str) -> None:
    """Random and/or/not filters over every column with literals taken from (and next to) the data."""
    tbl = load(table)
    md = tbl.metadata
    full = plan_scan(md, tbl.io, ScanOptions())
    rows = {t.file.path: rows_of(md, t.file, full.schema) for t in full.tasks}
    columns: list[Column] = []
    for nf in full.schema.fields:
        t = nf.type
        if not isinstance(t, it.PrimitiveType) or t.name not in _FUZZ_TYPES:
            continue
        values = [v for tb in rows.values() if tb is not None and nf.name in tb.column_names
                  for v in tb.column(nf.name).to_pylist()]  # fmt: skip
        columns.append((nf.name, t, list(dict.fromkeys(values))[:50]))
    assert columns
    r = random.Random(f"{table}-2026")
    pruned = 0
    for _ in range(FUZZ_FILTERS_PER_TABLE):
        text, expr = _random_filter(r, columns)
        plan = plan_scan(md, tbl.io, ScanOptions(filter=text))
        kept = {t.file.path: t.residual for t in plan.tasks}
        for path, tb in rows.items():
            assert tb is not None
            hits = tb.filter(expr).num_rows
            assert not hits or path in kept, f"{text!r} pruned {path} holding {hits} matching rows"
            if isinstance(kept.get(path), AlwaysTrue):
                assert hits == tb.num_rows, f"{text!r}: residual true for {path} but not every row matches"
            pruned += path not in kept
    assert pruned, "the random filters should prune some files"
