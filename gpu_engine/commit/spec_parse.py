"""Partition specs from strings as users write them: ``["day(ts)", "bucket(16, id)", "region"]``.

Forms: a column name (identity), ``identity(c)``, ``year(c)``/``month(c)``/``day(c)``/``hour(c)`` (also
the plural names Spark uses), ``bucket(N, c)``, ``truncate(W, c)``, ``void(c)``, and Iceberg's own
``bucket[N](c)``/``truncate[W](c)``. Columns are schema names, dotted for struct fields (not inside lists
or maps). Fields are named as Iceberg names them (``ts_day``, ``id_bucket``, ``name_trunc``, ``c_null``,
the column name for identity) and numbered from 1000. A transform that cannot apply to its column's type
is an :class:`UnsupportedTransform` naming both.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ..errors import InvalidType, UnsupportedTransform
from ..iceberg import types as it
from ..iceberg.partitioning import V1_FIRST_PARTITION_FIELD_ID, PartitionField, PartitionSpec
from ..iceberg.schema import Schema
from ..transforms.spec import parse_transform

_CALL = re.compile(r"^\s*([A-Za-z_]+)\s*(?:\[\s*(\d+)\s*\])?\s*\((.*)\)\s*$")
_PLURAL = {"years": "year", "months": "month", "days": "day", "hours": "hour"}
_SUFFIX = {"year": "year", "month": "month", "day": "day", "hour": "hour", "bucket": "bucket"}
_SUFFIX |= {"truncate": "trunc", "void": "null"}


def parse_partition_spec(fields: Sequence[str], schema: Schema, *, spec_id: int = 0) -> PartitionSpec:
    """The spec of ``fields`` (see the module doc) over ``schema``."""
    if isinstance(fields, str):
        raise UnsupportedTransform(f"partition_spec must be a list of strings, not the string {fields!r}")
    out: list[PartitionField] = []
    for i, text in enumerate(fields):
        transform, column = _parse(text)
        source = _source(schema, column, text)
        parsed = parse_transform(transform)
        if not isinstance(source.type, it.PrimitiveType) or not parsed.can_transform(source.type):
            raise UnsupportedTransform(
                f"partition field {text!r}: transform {transform} cannot apply to column {column!r} of type "
                f"{source.type}"
            )
        name = column if transform == "identity" else f"{column}_{_SUFFIX[transform.split('[')[0]]}"
        if any(f.name == name for f in out):
            raise UnsupportedTransform(
                f"partition field {text!r}: the spec already has a field named {name!r}"
            )
        out.append(PartitionField((source.field_id,), V1_FIRST_PARTITION_FIELD_ID + i, name, transform))
    return PartitionSpec(spec_id, tuple(out))


def _parse(text: str) -> tuple[str, str]:
    """(Iceberg transform string, column name) of one field string."""
    m = _CALL.match(text)
    if m is None:
        if not text.strip() or "(" in text or ")" in text:
            raise UnsupportedTransform(f"partition field {text!r}: expected a column or transform(column)")
        return "identity", text.strip()
    name, bracket, args = m.group(1).lower(), m.group(2), [a.strip() for a in m.group(3).split(",")]
    name = _PLURAL.get(name, name)
    if name in ("bucket", "truncate"):
        if bracket is not None and len(args) == 1:
            return f"{name}[{bracket}]", args[0]
        if bracket is None and len(args) == 2 and args[0].isdigit():
            return f"{name}[{args[0]}]", args[1]
        raise UnsupportedTransform(f"partition field {text!r}: expected {name}(N, column)")
    if bracket is not None or len(args) != 1 or not args[0]:
        raise UnsupportedTransform(f"partition field {text!r}: expected {name}(column)")
    if name not in ("identity", "void", "year", "month", "day", "hour"):
        raise UnsupportedTransform(
            f"partition field {text!r}: unknown transform {m.group(1)!r} (identity, year, month, day, hour, "
            "bucket, truncate, void)"
        )
    return name, args[0]


def _source(schema: Schema, column: str, text: str) -> it.NestedField:
    try:
        found = schema.find_field(column)
    except InvalidType:
        raise UnsupportedTransform(f"partition field {text!r}: the schema has no column {column!r}") from None
    path = schema.paths_by_id[found.field_id]
    fields = schema.fields
    for step in path[:-1]:  # every ancestor must be a struct field
        parent = next((f for f in fields if f.name == step), None)
        if parent is None or not isinstance(parent.type, it.StructType):
            raise UnsupportedTransform(
                f"partition field {text!r}: column {column!r} is inside a list or map: "
                "it cannot be partitioned by"
            )
        fields = parent.type.fields
    return found
