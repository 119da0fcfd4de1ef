"""Plan payloads as a Spark DataFrame of exactly one row per partition, in plan order.

Each row is one unit of work (a scan task, a snapshot's changes): Spark runs a partition per task slot,
so one row per partition spreads the units over every slot. Hash partitioning by the unit's number
(``repartition(n, col)``) does not: with ``n`` units in ``n`` partitions about a third of the partitions
stay empty and others get two or more units, which then run one after the other.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def one_per_partition(spark: Any, rows: Sequence[tuple[Any, ...]], ddl: str) -> Any:
    """``rows`` (of the DDL schema ``ddl``) as a DataFrame whose partition ``i`` holds row ``i`` alone."""
    rdd = spark.sparkContext.parallelize(list(rows), max(1, len(rows)))
    return spark.createDataFrame(rdd, ddl)
