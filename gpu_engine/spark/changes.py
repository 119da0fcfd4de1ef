"""``gpu_engine.spark.changes``: a table's changelog as a Spark DataFrame, one Spark task per snapshot.

The driver plans (:meth:`Table.incremental_changelog_scan`); each snapshot's change tasks become one row
of pickled :class:`ChangesPayload`, and ``mapInArrow`` runs them on an executor
(:func:`gpu_engine.spark.executor.changes_batches`), every delete applied and carry-overs removed or
updates paired there, per snapshot as in one process. Rows come in no particular order across snapshots:
sort by ``_change_ordinal``. Net changes span snapshots and are refused here.
"""

from __future__ import annotations

import itertools
import pickle
from collections.abc import Iterator, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from ..expressions import TRUE, Expression
from .executor import ChangesPayload, changes_batches, stamp_of
from .payloads import one_per_partition
from .scan import spark_arrow_schema

if TYPE_CHECKING:
    from ..table import Table


def changes(
    spark: Any,
    table: Table,
    from_snapshot_id: int | None = None,
    *,
    from_inclusive: bool = False,
    to_snapshot_id: int | None = None,
    branch: str | None = None,
    filter: str | Expression = TRUE,
    columns: Sequence[str] | None = None,
    backend: str = "auto",
    remove_carry_overs: bool = True,
    compute_updates: bool = False,
    identifier_columns: Sequence[str] | None = None,
) -> Any:
    """The changelog of ``table`` as a Spark DataFrame (arguments as
    :meth:`Table.incremental_changelog_scan`; see the module doc)."""
    from pyspark.sql.pandas.types import from_arrow_schema

    scan_ = table.incremental_changelog_scan(
        from_snapshot_id,
        from_inclusive=from_inclusive,
        to_snapshot_id=to_snapshot_id,
        branch=branch,
        filter=filter,
        columns=columns,
        backend=backend,
        remove_carry_overs=remove_carry_overs,
        compute_updates=compute_updates,
        identifier_columns=identifier_columns,
    )
    plan = scan_.plan()
    target = spark_arrow_schema(scan_.schema())
    payloads = [
        (
            ordinal,
            pickle.dumps(
                ChangesPayload(
                    table.metadata_location,
                    stamp_of(table.metadata),
                    table.io,
                    replace(plan, tasks=tuple(tasks)),
                    scan_.columns,
                    backend,
                    remove_carry_overs,
                    scan_.update_keys,
                )
            ),
        )
        for ordinal, tasks in itertools.groupby(plan.tasks, key=lambda t: t.ordinal)
    ]
    frame = one_per_partition(spark, payloads, "snapshot int, payload binary")

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for out in changes_batches(batches):
            yield out.cast(target)

    return frame.mapInArrow(run, from_arrow_schema(target))
