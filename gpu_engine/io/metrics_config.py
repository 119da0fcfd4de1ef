"""Which column metrics a writer keeps, per field id, from the table properties (Iceberg's MetricsConfig).

Properties (names and defaults as Iceberg's):

- ``write.metadata.metrics.default``: the mode of every column without a column setting, default
  ``truncate(16)``;
- ``write.metadata.metrics.column.<full column name>``: the mode of one primitive column, named as
  :attr:`Schema.names_by_id` names it (``s.a``, ``l.element``, ``m.key``, ``m.value``);
- ``write.metadata.metrics.max-inferred-column-defaults`` (default 100): when no default is set and the
  schema has more primitive columns than this, the inferred ``truncate(16)`` applies only to the first
  that many (chosen as Iceberg Java 1.5+ does: a struct's primitive fields in order before the fields of
  its nested types, breadth-first) and every other column gets ``none``.

Modes: ``none`` (no metrics, no column size), ``counts`` (value, null and NaN counts), ``truncate(N)``
(counts and bounds, strings cut to N code points and binary to N bytes; other types keep full bounds)
and ``full``. Columns of an order-preserving sort key (of the rows written, and of the table's sort
order) get at least ``truncate(16)`` when the default is ``none`` or ``counts``. Unlike Iceberg Java,
which logs and ignores a malformed mode, a malformed value is an
:class:`~gpu_engine.errors.InvalidProperty` naming the property; a column setting naming no column of
the schema is ignored, as in Java, except when a table is created (:func:`check_metrics_columns`, Java's
validation of new tables) (schema updates carry the settings of the columns they rename and
drop those of the columns they delete: see
:func:`gpu_engine.commit.schema_changes.column_properties_after`).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Literal

from ..errors import InvalidProperty
from ..iceberg import metadata_columns as mc
from ..iceberg import types as it
from ..iceberg.schema import Schema
from ..iceberg.sorting import SortOrder
from ..properties import int_property
from ..transforms.spec import Day, Hour, Identity, Month, Truncate, Year

DEFAULT_MODE_PROPERTY = "write.metadata.metrics.default"
COLUMN_MODE_PREFIX = "write.metadata.metrics.column."
MAX_INFERRED_PROPERTY = "write.metadata.metrics.max-inferred-column-defaults"
MAX_INFERRED_DEFAULT = 100
DEFAULT_TRUNCATE_LENGTH = 16

Kind = Literal["none", "counts", "truncate", "full"]
_TRUNCATE = re.compile(r"truncate\((\d+)\)", re.IGNORECASE)
_ORDER_PRESERVING = (Identity, Truncate, Year, Month, Day, Hour)


@dataclass(frozen=True)
class MetricsMode:
    kind: Kind
    length: int | None = None  # truncate(N) only

    @property
    def counts(self) -> bool:
        """Whether value, null and NaN counts (and the column size) are kept."""
        return self.kind != "none"

    @property
    def bounds(self) -> bool:
        """Whether lower and upper bounds are kept."""
        return self.kind in ("truncate", "full")

    def __str__(self) -> str:
        return f"truncate({self.length})" if self.kind == "truncate" else self.kind


NONE = MetricsMode("none")
COUNTS = MetricsMode("counts")
FULL = MetricsMode("full")


def truncate(length: int) -> MetricsMode:
    if length <= 0:
        raise InvalidProperty(f"metrics mode truncate({length}): the length must be positive")
    return MetricsMode("truncate", length)


DEFAULT_MODE = truncate(DEFAULT_TRUNCATE_LENGTH)


def parse_mode(value: str, *, prop: str) -> MetricsMode:
    """A mode string (``none``, ``counts``, ``full``, ``truncate(N)``, any case); errors name ``prop``."""
    text = value.strip().lower()
    simple = {"none": NONE, "counts": COUNTS, "full": FULL}
    if text in simple:
        return simple[text]
    if (m := _TRUNCATE.fullmatch(text)) and int(m.group(1)) > 0:
        return truncate(int(m.group(1)))
    raise InvalidProperty(
        f"table property {prop}={value!r}: expected none, counts, full or truncate(N) with N > 0"
    )


@dataclass(frozen=True)
class MetricsConfig:
    """The metrics mode of every column: ``columns`` by field id, ``default`` for the others."""

    default: MetricsMode = DEFAULT_MODE
    columns: Mapping[int, MetricsMode] = field(default_factory=dict)

    def mode(self, field_id: int) -> MetricsMode:
        return self.columns.get(field_id, self.default)


def metrics_config(
    schema: Schema,
    properties: Mapping[str, str],
    *,
    sort_order: SortOrder | None = None,
    table_order: SortOrder | None = None,
) -> MetricsConfig:
    """The :class:`MetricsConfig` the table ``properties`` give for ``schema`` (see the module doc): the
    columns of ``sort_order`` (the rows' order) and of ``table_order`` (the table's, whether or not the
    rows follow it, as Java's ``MetricsConfig.forTable``) get bounds. The row-lineage columns a v3 rewrite
    writes are not table columns: they count neither toward the limit nor take a table column's place."""
    limit = _max_inferred(properties)
    lineage = {f.field_id for f in mc.LINEAGE}
    table_columns = it.StructType(tuple(f for f in schema.as_struct.fields if f.field_id not in lineage))
    columns: dict[int, MetricsMode] = {}
    configured = properties.get(DEFAULT_MODE_PROPERTY)
    if configured is not None:
        default = parse_mode(configured, prop=DEFAULT_MODE_PROPERTY)
    elif sum(1 for _ in _primitives(table_columns)) <= limit:
        default = DEFAULT_MODE
    else:
        columns.update(dict.fromkeys(_limited_ids(table_columns, limit), DEFAULT_MODE))
        default = NONE
    sorted_default = DEFAULT_MODE if default in (NONE, COUNTS) else default
    for order in (o for o in (sort_order, table_order) if o is not None):
        for sf in order.fields:
            if len(sf.source_ids) == 1 and isinstance(sf.parsed, _ORDER_PRESERVING):
                columns[sf.source_id] = sorted_default
    for key, value in properties.items():
        if key.startswith(COLUMN_MODE_PREFIX):
            mode = parse_mode(value, prop=key)
            fid = schema.ids_by_name.get(key[len(COLUMN_MODE_PREFIX) :])
            if fid is not None:
                columns[fid] = mode
    return MetricsConfig(default, columns)


def check_metrics_columns(schema: Schema, properties: Mapping[str, str]) -> None:
    """A new table's column metrics modes name columns it has (Java's
    ``MetricsConfig.validateReferencedColumns``, run at create only, so existing tables keep loading)."""
    for key in sorted(properties):
        name = key[len(COLUMN_MODE_PREFIX) :]
        if key.startswith(COLUMN_MODE_PREFIX) and name not in schema.ids_by_name:
            raise InvalidProperty(f"table property {key}: the schema has no column {name!r}")


def _max_inferred(properties: Mapping[str, str]) -> int:
    return int_property(properties, MAX_INFERRED_PROPERTY, MAX_INFERRED_DEFAULT, minimum=0)


def _primitives(t: it.IcebergType) -> Iterator[int]:
    """Field ids of the primitive fields (struct fields, list elements, map keys and values) under ``t``."""
    for fid, child in _children(t):
        if isinstance(child, it.PrimitiveType):
            yield fid
        else:
            yield from _primitives(child)


def _children(t: it.IcebergType) -> list[tuple[int, it.IcebergType]]:
    if isinstance(t, it.StructType):
        return [(f.field_id, f.type) for f in t.fields]
    if isinstance(t, it.ListType):
        return [(t.element_id, t.element)]
    if isinstance(t, it.MapType):
        return [(t.key_id, t.key), (t.value_id, t.value)]
    return []


def _limited_ids(root: it.StructType, limit: int) -> list[int]:
    """The first ``limit`` primitive field ids: a struct's own primitive fields first, then its nested
    types in field order, depth-first (Iceberg Java's MetricsConfig.limitFieldIds)."""
    chosen: list[int] = []

    def visit(t: it.IcebergType) -> None:
        kids = _children(t)
        if isinstance(t, it.StructType):
            chosen.extend(fid for fid, c in kids if isinstance(c, it.PrimitiveType))
            del chosen[limit:]
            for _, c in kids:
                if len(chosen) >= limit:
                    return
                if not isinstance(c, it.PrimitiveType):
                    visit(c)
            return
        for fid, c in kids:  # list element; map key, then value
            if len(chosen) >= limit:
                return
            if isinstance(c, it.PrimitiveType):
                chosen.append(fid)
            else:
                visit(c)

    visit(root)
    return chosen
