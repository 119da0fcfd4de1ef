"""Partition specs from strings as users write them: ``["day(ts)", "bucket(16, id)", "region"]``.

Forms: a column name (identity), ``identity(c)``, ``year(c)``/``month(c)``/``day(c)``/``hour(c)`` (also
the plural names Spark uses), ``bucket(N, c)``, ``truncate(W, c)``, ``void(c)``, and Iceberg's own
``bucket[N](c)``/``truncate[W](c)``. Columns are schema names, dotted for struct fields (not inside lists
or maps). Fields are named as Iceberg names them (``ts_day``, ``id_bucket``, ``name_trunc``, ``c_null``,
the column name for identity) and numbered from 1000. A transform that cannot apply to its column's type
is an :class:`UnsupportedTransform` naming both.

Sort orders (:func:`parse_sort_order`) are written as in Spark's ``WRITE ORDERED BY``: comma-separated
items ``<column or transform(column)> [ASC|DESC] [NULLS FIRST|NULLS LAST]`` with the same transform forms
(commas inside a call do not separate items); keywords are case-insensitive, the defaults are Iceberg's
(``ASC``; ``NULLS FIRST`` when ascending, ``NULLS LAST`` when descending).

A column name holding a comma, a parenthesis, a dot or a trailing keyword is quoted as filters quote it, in
backticks (Spark's) or double quotes (ANSI SQL's), the quote doubled inside: `` `a, b` DESC ``,
``bucket(4, "f(x)")``, ``st.`x.y` ``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace

from .. import _args
from ..errors import InvalidType, UnsupportedTransform
from ..iceberg import types as it
from ..iceberg.partitioning import V1_FIRST_PARTITION_FIELD_ID, PartitionField, PartitionSpec
from ..iceberg.schema import Schema
from ..iceberg.sorting import DIRECTIONS, NULL_ORDERS, SortField, SortOrder
from ..transforms.spec import parse_transform

_CALL = re.compile(r"^\s*([A-Za-z_]+)\s*(?:\[\s*(\d+)\s*\])?\s*\((.*)\)\s*$")
_PLURAL = {"years": "year", "months": "month", "days": "day", "hours": "hour"}
_SUFFIX = {"year": "year", "month": "month", "day": "day", "hour": "hour", "bucket": "bucket"}
_SUFFIX |= {"truncate": "trunc", "void": "null"}
TIME_TRANSFORMS = ("year", "month", "day", "hour")


def parse_partition_spec(fields: Sequence[str], schema: Schema, *, spec_id: int = 0) -> PartitionSpec:
    """The spec of ``fields`` (see the module doc) over ``schema``."""
    if isinstance(fields, str):
        raise UnsupportedTransform(f"partition_spec must be a list of strings, not the string {fields!r}")
    out: list[PartitionField] = []
    kinds: set[tuple[int, str]] = set()
    for i, text in enumerate(fields):
        transform, source, name = parse_partition_field(text, schema)
        if any(f.name == name for f in out):
            raise UnsupportedTransform(
                f"partition field {text!r}: the spec already has a field named {name!r}"
            )
        kind = (source.field_id, "time" if transform in TIME_TRANSFORMS else transform)
        if kind in kinds:  # Java's checkForRedundantPartitions: year/month/day/hour count as one
            raise UnsupportedTransform(
                f"partition field {text!r}: redundant, the spec partitions {source.name!r} by time already"
                if kind[1] == "time"
                else f"partition field {text!r}: redundant, the spec has {transform}({source.name}) already"
            )
        kinds.add(kind)
        out.append(PartitionField((source.field_id,), V1_FIRST_PARTITION_FIELD_ID + i, name, transform))
    return PartitionSpec(spec_id, tuple(out))


def parse_partition_field(text: str, schema: Schema) -> tuple[str, it.NestedField, str]:
    """(Iceberg transform, source field, Iceberg's default field name) of one field string over ``schema``."""
    transform, column = _parse(text)
    source = _checked_source(schema, transform, column, f"partition field {text!r}")
    return (
        transform,
        source,
        column if transform == "identity" else f"{column}_{_SUFFIX[transform.split('[')[0]]}",
    )


def added_field_name(transform: str, column: str) -> str:
    """The name Java's ``UpdatePartitionSpec.addField`` gives a field added without one (its
    ``PartitionNameGenerator``): ``x``, ``x_bucket_16``, ``x_trunc_4``, ``x_day``, ``x_null``. A spec
    created at once names them as :func:`parse_partition_field` does (``x_bucket``, ``x_trunc``)."""
    if transform == "identity":
        return column
    kind, _, arg = transform.partition("[")
    suffix = _SUFFIX[kind]
    return f"{column}_{suffix}_{arg.rstrip(']')}" if arg else f"{column}_{suffix}"


def parse_sort_order(text: str | Sequence[str], schema: Schema, *, order_id: int = 1) -> SortOrder:
    """The sort order of ``text`` (see the module doc): one string of comma-separated items or a list of
    them, over ``schema``; an :class:`UnsupportedTransform` names the item at fault."""
    parts = (text,) if isinstance(text, str) else _args.names(text, "sort order", UnsupportedTransform)
    items = [item for part in parts for item in _split_items(part)]
    if not items:
        raise UnsupportedTransform(f"sort order {text!r}: expected at least one column or transform(column)")
    return SortOrder(order_id, tuple(_sort_field(item, schema) for item in items))


_SORT_ITEM = re.compile(
    r"^(?P<expr>.*?)(?:\s+(?P<direction>asc|desc))?(?:\s+nulls\s+(?P<nulls>first|last))?\s*$",
    re.IGNORECASE | re.DOTALL,
)


def check_sort_fields(
    fields: Sequence[SortField], schema: Schema, *, where: str = "sort order"
) -> tuple[SortField, ...]:
    """``fields`` (a :class:`SortOrder` built in code, or one built before the schema changed) checked as
    :func:`parse_sort_order` checks what it parses: each source a column of ``schema`` (not in a list or
    map) its transform applies to, direction ``asc``/``desc`` and null order ``nulls-first``/``nulls-last``
    (spelled in lower case, as the spec writes them); an :class:`UnsupportedTransform` names the field."""
    out = []
    for i, f in enumerate(fields, 1):
        at = f"{where} field {i}"
        if not isinstance(f, SortField):
            raise UnsupportedTransform(f"{at}: expected a SortField, not {type(f).__name__}")
        direction, nulls = str(f.direction).lower(), str(f.null_order).lower()
        if direction not in DIRECTIONS:
            raise UnsupportedTransform(f"{at}: direction {f.direction!r}: expected one of {DIRECTIONS}")
        if nulls not in NULL_ORDERS:
            raise UnsupportedTransform(f"{at}: null order {f.null_order!r}: expected one of {NULL_ORDERS}")
        if len(f.source_ids) != 1:
            raise UnsupportedTransform(f"{at}: {len(f.source_ids)} source columns; its transform takes one")
        name = schema.names_by_id.get(f.source_id)
        if name is None:
            raise UnsupportedTransform(f"{at}: the schema has no column with field id {f.source_id}")
        _checked_source(schema, f.transform, name, f"{at} ({f.transform} of {name!r})")
        out.append(replace(f, direction=direction, null_order=nulls))
    return tuple(out)


def column_names(text: str, where: str) -> tuple[str, ...]:
    """The column names of a comma-separated list (``a, `b, c` ``), quoted names unquoted; errors start
    with ``where``."""
    return tuple(unquote(item, where) for item in _split_items(text) if item)


def unquote(text: str, where: str) -> str:
    """The column name ``text`` spells: as written (stripped) without quotes, else its dotted parts each
    bare or quoted (in backticks or double quotes, the quote doubled inside); an
    :class:`UnsupportedTransform` starting with ``where`` for an unclosed or misplaced quote."""
    text = text.strip()
    if not any(q in text for q in _QUOTES):
        return text
    parts, i = [], 0
    while True:
        if i < len(text) and text[i] in _QUOTES:
            q = text[i]
            part, i = _quoted(text, i + 1, q, where)
            if i < len(text) and text[i] != ".":
                raise UnsupportedTransform(
                    f"{where}: expected a dot or the end after the quoted name {q}{part.replace(q, q + q)}{q}"
                )
        else:
            end = text.find(".", i)
            end = len(text) if end < 0 else end
            part, i = text[i:end], end
            if any(q in part for q in _QUOTES):
                raise UnsupportedTransform(f"{where}: a quote inside the unquoted name {part!r}")
        parts.append(part)
        if i >= len(text):
            return ".".join(parts)
        i += 1  # the dot
        if i >= len(text):
            raise UnsupportedTransform(f"{where}: expected a name after the dot")


_QUOTES = '`"'


def _quoted(text: str, start: int, quote: str, where: str) -> tuple[str, int]:
    """The name quoted from ``start`` (after its opening ``quote``) and the index after its closing one."""
    out, i = [], start
    while True:
        close = text.find(quote, i)
        if close < 0:
            raise UnsupportedTransform(f"{where}: unclosed {'backtick' if quote == '`' else 'double quote'}")
        out.append(text[i:close])
        if not text.startswith(quote * 2, close):
            return "".join(out), close + 1
        out.append(quote)
        i = close + 2


def _split_items(text: str) -> list[str]:
    """``text`` split at the commas outside parentheses, brackets and quoted names, each item stripped."""
    items: list[str] = []
    depth = start = 0
    quote = ""
    for i, char in enumerate(text):
        if char in _QUOTES and char == (quote or char):
            quote = "" if quote else char  # a doubled quote inside a quoted name toggles twice
        elif quote:
            continue
        elif char in "([":
            depth += 1
        elif char in ")]":
            depth -= 1
        elif char == "," and depth == 0:
            items.append(text[start:i].strip())
            start = i + 1
    items.append(text[start:].strip())
    if len(items) == 1 and not items[0]:
        return []  # an empty list element or string: no items (an empty order is refused above)
    return items


def _sort_field(item: str, schema: Schema) -> SortField:
    where = f"sort field {item!r}"
    m = _SORT_ITEM.match(item)
    assert m is not None  # the pattern matches every string
    expr, direction, nulls = m.group("expr"), m.group("direction"), m.group("nulls")
    if not expr.strip():
        raise UnsupportedTransform(f"{where}: expected a column or transform(column) before ASC/DESC/NULLS")
    transform, column = _parse(expr, where)
    source = _checked_source(schema, transform, column, where)
    direction = (direction or "asc").lower()
    if nulls is None:
        null_order = "nulls-first" if direction == "asc" else "nulls-last"
    else:
        null_order = f"nulls-{nulls.lower()}"
    return SortField((source.field_id,), transform, direction, null_order)


def _checked_source(schema: Schema, transform: str, column: str, where: str) -> it.NestedField:
    """The source field of ``column``, checked to be a primitive that ``transform`` applies to."""
    source = _source(schema, column, where)
    try:
        parsed = parse_transform(transform)
    except UnsupportedTransform as exc:  # bucket[0], truncate[0]: name the item too
        raise UnsupportedTransform(f"{where}: {exc}") from None
    if not isinstance(source.type, it.PrimitiveType) or not parsed.can_transform(source.type):
        raise UnsupportedTransform(
            f"{where}: transform {transform} cannot apply to column {column!r} of type {source.type}"
        )
    return source


def _parse(text: str, where: str | None = None) -> tuple[str, str]:
    """(Iceberg transform string, column name) of one field string; errors start with ``where``."""
    where = f"partition field {text!r}" if where is None else where
    if not isinstance(text, str):
        raise UnsupportedTransform(f"{where}: expected a string, a column or transform(column)")
    m = _CALL.match(text)
    if m is None:
        if not text.strip() or any("(" in part or ")" in part for part in _unquoted_parts(text, where)):
            raise UnsupportedTransform(f"{where}: expected a column or transform(column)")
        return "identity", unquote(text, where)
    name, bracket = m.group(1).lower(), m.group(2)
    args = [unquote(a, where) for a in _split_items(m.group(3)) or [""]]
    name = _PLURAL.get(name, name)
    if name in ("bucket", "truncate"):
        if bracket is not None and len(args) == 1:
            return f"{name}[{bracket}]", args[0]
        if bracket is None and len(args) == 2 and args[0].isdigit():
            return f"{name}[{args[0]}]", args[1]
        raise UnsupportedTransform(f"{where}: expected {name}(N, column)")
    if bracket is not None or len(args) != 1 or not args[0]:
        raise UnsupportedTransform(f"{where}: expected {name}(column)")
    if name not in ("identity", "void", "year", "month", "day", "hour"):
        raise UnsupportedTransform(
            f"{where}: unknown transform {m.group(1)!r} (identity, year, month, day, hour, "
            "bucket, truncate, void)"
        )
    return name, args[0]


def _unquoted_parts(text: str, where: str) -> list[str]:
    """The parts of ``text`` outside quoted names."""
    out, start, i = [], 0, 0
    while i < len(text):
        if text[i] in _QUOTES:
            out.append(text[start:i])
            _, i = _quoted(text, i + 1, text[i], where)
            start = i
        else:
            i += 1
    return [*out, text[start:]]


def _source(schema: Schema, column: str, where: str) -> it.NestedField:
    try:
        found = schema.find_field(column)
    except InvalidType:
        raise UnsupportedTransform(f"{where}: the schema has no column {column!r}") from None
    path = schema.paths_by_id[found.field_id]
    fields = schema.fields
    for step in path[:-1]:  # every ancestor must be a struct field
        parent = next((f for f in fields if f.name == step), None)
        if parent is None or not isinstance(parent.type, it.StructType):
            raise UnsupportedTransform(
                f"{where}: column {column!r} is inside a list or map: only top-level and struct "
                "fields can be transform sources"
            )
        fields = parent.type.fields
    return found
