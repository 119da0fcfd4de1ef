"""Residual filters per data file: the part of the row filter its partition does not already decide.

As Iceberg Java's ResidualEvaluator: a predicate whose strict projection holds for the file's partition is
true for every row of the file (dropped); one whose inclusive projection fails is false; others remain.
"""

from __future__ import annotations

from collections.abc import Callable

import pyarrow as pa

from ..expressions import (
    FALSE,
    TRUE,
    AlwaysTrue,
    BoundPredicate,
    Expression,
    evaluate,
    map_predicates,
    project_inclusive,
    project_strict,
    rewrite_not,
)
from ..expressions.tree import Predicate, predicates
from ..iceberg.metadata import TableMetadata
from .pruning import partition_field_names


def residuals(md: TableMetadata, row_filter: Expression, entries: pa.Table) -> list[Expression]:
    """One residual per row of a manifest entries table (all rows share the manifest's spec)."""
    n = entries.num_rows
    if isinstance(row_filter, AlwaysTrue) or n == 0:
        return [row_filter] * n
    spec = md.spec_by_id(entries.column("spec_id")[0].as_py())
    if spec.is_unpartitioned:
        return [row_filter] * n
    partition = entries.column("partition").combine_chunks()
    names = partition_field_names(partition.type)
    expr = rewrite_not(row_filter)
    outcomes: Outcomes = {}
    for pred in predicates(expr):
        assert isinstance(pred, BoundPredicate)
        strict = project_strict(pred, spec)
        inclusive = project_inclusive(pred, spec)
        all_rows = evaluate(strict, partition, names).to_pylist()
        some_rows = evaluate(inclusive, partition, names).to_pylist()
        outcomes[pred] = ([bool(v) for v in all_rows], [bool(v) for v in some_rows])
    cache: dict[tuple[tuple[bool, bool], ...], Expression] = {}
    out = []
    for i in range(n):
        key = tuple((all_rows[i], some_rows[i]) for all_rows, some_rows in outcomes.values())
        if key not in cache:
            cache[key] = map_predicates(expr, _decider(outcomes, i))
        out.append(cache[key])
    return out


Outcomes = dict[BoundPredicate, tuple[list[bool], list[bool]]]


def _decider(outcomes: Outcomes, i: int) -> Callable[[Predicate], Expression]:
    def decide(pred: Predicate) -> Expression:
        assert isinstance(pred, BoundPredicate)
        all_rows, some_rows = outcomes[pred]
        if all_rows[i]:
            return TRUE
        if not some_rows[i]:
            return FALSE
        return pred

    return decide
