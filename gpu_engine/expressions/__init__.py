"""Filter expressions: the predicate tree, a parser for string filters, binding to a schema, inclusive
and strict projection onto partition specs, and Arrow evaluators.

``bind(parse("ts >= '2024-01-01' and id in (1, 2)"), schema)`` gives a bound filter;
``project_inclusive(bound, spec)`` its partition filter; ``evaluate(expr, partitions)`` a boolean mask.
"""

from ._literals import exact_value
from .binding import bind, bind_predicate, rename_by_id
from .builders import (
    equal_to,
    greater_than,
    greater_than_or_equal,
    is_in,
    is_nan,
    is_null,
    less_than,
    less_than_or_equal,
    not_equal_to,
    not_in,
    not_nan,
    not_null,
    not_starts_with,
    starts_with,
)
from .evaluator import evaluate, to_arrow_filter
from .parser import parse
from .projection import partition_reference, project_inclusive, project_strict
from .tree import (
    FALSE,
    TRUE,
    AlwaysFalse,
    AlwaysTrue,
    And,
    BoundPredicate,
    BoundReference,
    Expression,
    Not,
    Op,
    Or,
    UnboundPredicate,
    and_,
    map_predicates,
    not_,
    or_,
    rewrite_not,
)

__all__ = [
    "FALSE",
    "TRUE",
    "AlwaysFalse",
    "AlwaysTrue",
    "And",
    "BoundPredicate",
    "BoundReference",
    "Expression",
    "Not",
    "Op",
    "Or",
    "UnboundPredicate",
    "and_",
    "bind",
    "bind_predicate",
    "equal_to",
    "evaluate",
    "exact_value",
    "greater_than",
    "greater_than_or_equal",
    "is_in",
    "is_nan",
    "is_null",
    "less_than",
    "less_than_or_equal",
    "map_predicates",
    "not_",
    "not_equal_to",
    "not_in",
    "not_nan",
    "not_null",
    "not_starts_with",
    "or_",
    "parse",
    "partition_reference",
    "project_inclusive",
    "project_strict",
    "rename_by_id",
    "rewrite_not",
    "starts_with",
    "to_arrow_filter",
]
