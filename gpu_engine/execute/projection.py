"""What a scan returns and what each task must read to produce it.

The output is the requested columns of the scan schema (all of them by default) plus any metadata
columns asked for by name. A task reads more than it returns: the columns its residual filter and its
equality deletes need, including equality columns dropped from the table since the delete was written
(found in older schemas by field id, and read under an internal name so they cannot collide with a
current column that reuses the name; files written before such a column was added read its initial-default).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import cached_property

import pyarrow as pa

from ..errors import InvalidType, UnsupportedFeature
from ..expressions import BoundPredicate, Expression
from ..expressions.tree import predicates
from ..iceberg import metadata_columns as mc
from ..iceberg import types as it
from ..iceberg.metadata import TableMetadata
from ..iceberg.schema import Schema, prune
from ..io.arrow_schema import to_arrow_schema


@dataclass(frozen=True)
class Projection:
    """The scan's output: ``data`` (the selected fields of the scan schema) and ``metadata`` columns,
    in the order ``names`` gives."""

    scan_schema: Schema
    data: Schema
    metadata: tuple[it.NestedField, ...]
    names: tuple[str, ...]
    format_version: int

    @cached_property
    def arrow_schema(self) -> pa.Schema:
        data = to_arrow_schema(self.data)
        meta = to_arrow_schema(Schema(self.metadata))
        fields = {f.name: f for f in (*data, *meta)}
        return pa.schema([fields[n] for n in self.names])

    @property
    def metadata_names(self) -> frozenset[str]:
        return frozenset(f.name for f in self.metadata)

    @property
    def wants_lineage(self) -> bool:
        return any(f.field_id in _LINEAGE_IDS for f in self.metadata)


_LINEAGE_IDS = {f.field_id for f in mc.LINEAGE}


def project(
    md: TableMetadata, schema: Schema, columns: Sequence[str] | None, *, case_sensitive: bool = True
) -> Projection:
    """The output of a scan of ``schema`` returning ``columns`` (None: every column of ``schema``)."""
    if columns is None:
        return Projection(schema, schema, (), tuple(f.name for f in schema.fields), md.format_version)
    ids: set[int] = set()
    metadata: list[it.NestedField] = []
    names: list[str] = []
    if len(set(columns)) != len(columns):
        raise InvalidType(f"scan columns {list(columns)} name a column twice")
    for name in columns:
        f = _data_field(schema, name, case_sensitive)
        if f is None:  # a metadata column: a table column of the same name wins (as in Spark)
            name = _metadata_name(name, case_sensitive)
            if name in (mc.ROW_ID.name, mc.LAST_UPDATED_SEQUENCE_NUMBER.name) and md.format_version < 3:
                raise UnsupportedFeature(f"column {name!r}: row lineage needs a format-version 3 table")
            metadata.append(mc.field(md, name))
            names.append(name)
            continue
        if f.field_id in ids:  # e.g. 'id' and 'ID' without case_sensitive
            raise InvalidType(f"scan columns {list(columns)} name a column twice ({name!r})")
        ids.add(f.field_id)
        top = schema.paths_by_id[f.field_id][0]
        if top not in names:
            names.append(top)
    data = prune(schema, ids)
    if len(set(names)) != len(names):
        raise InvalidType(f"scan columns {list(columns)} name a column twice")
    return Projection(schema, data, tuple(metadata), tuple(names), md.format_version)


def _data_field(schema: Schema, name: str, case_sensitive: bool) -> it.NestedField | None:
    """The table column ``name`` selects; None for a metadata column (by name, or by its hidden name
    whatever the table's columns are called)."""
    if mc.is_hidden(name):
        return None
    try:
        return schema.find_field(name, case_sensitive=case_sensitive)
    except InvalidType as e:
        if _metadata_name(name, case_sensitive) in mc.NAMES:
            return None
        raise InvalidType(f"scan column {name!r}: {e}") from None


def _metadata_name(name: str, case_sensitive: bool) -> str:
    """The metadata column ``name`` names (``_FILE``: ``_file`` unless ``case_sensitive``), else ``name``."""
    if case_sensitive or name in mc.NAMES:
        return name
    return next((m for m in mc.NAMES if m.casefold() == name.casefold()), name)


def residual_ids(residual: Expression) -> frozenset[int]:
    """The field ids a residual filter reads."""
    return frozenset(p.ref.field_id for p in predicates(residual) if isinstance(p, BoundPredicate))


def read_schema(
    md: TableMetadata, projection: Projection, residual: frozenset[int], eq_ids: frozenset[int], source: str
) -> Schema:
    """The fields a task reads: output columns, the columns of its residual (``residual``: their field
    ids) and of its equality deletes (``eq_ids``), and, when asked for, the stored row-lineage columns.
    ``source``: the task's data file, for errors. A function of its arguments' values: callers cache it."""
    scan = projection.scan_schema
    wanted = {f.field_id for _, f in _fields(projection.data)} | residual
    fields = list(prune(scan, (wanted | eq_ids) & scan.by_id.keys()).fields)
    missing = eq_ids - scan.by_id.keys()
    if missing:
        fields.extend(_historical(md, set(missing), {f.field_id for f in fields}, source))
    if projection.wants_lineage:
        fields.extend(mc.LINEAGE)
    return Schema(tuple(fields), scan.schema_id)


def equality_schema(md: TableMetadata, scan: Schema, ids: tuple[int, ...], source: str) -> Schema:
    """The fields an equality delete file with ``ids`` is read with: as in the scan schema, or as in the
    latest older schema for columns dropped since (with the internal names :func:`read_schema` uses)."""
    fields = list(prune(scan, set(ids) & scan.by_id.keys()).fields)
    missing = set(ids) - scan.by_id.keys()
    if missing:
        fields.extend(_historical(md, missing, {f.field_id for f in fields}, source))
    return Schema(tuple(fields), scan.schema_id)


def residual_names(schema: Schema, residual: Expression) -> dict[int, tuple[str, ...]]:
    """Name paths of the residual's columns in a task's read schema (for the row evaluator)."""
    ids = {p.ref.field_id for p in predicates(residual) if isinstance(p, BoundPredicate)}
    return {i: schema.paths_by_id[i] for i in ids}


def _fields(schema: Schema) -> list[tuple[tuple[str, ...], it.NestedField]]:
    return [(schema.paths_by_id[i], f) for i, f in schema.by_id.items()]


def _historical(md: TableMetadata, ids: set[int], present: set[int], source: str) -> list[it.NestedField]:
    """Top-level fields of older schemas holding the equality columns ``ids`` that were dropped since,
    renamed ``__field_<id>`` so they never collide with current names; files without them read their
    initial-default, as they did before the drop (the spec: projected as any column)."""
    out: list[it.NestedField] = []
    remaining = set(ids)
    for schema in sorted(md.schemas, key=lambda s: -s.schema_id):
        found = remaining & schema.by_id.keys()
        if not found:
            continue
        for f in prune(schema, found).fields:
            if f.field_id in present:
                raise UnsupportedFeature(
                    f"{source}: equality delete columns {sorted(found)} were dropped from struct "
                    f"field {f.field_id}, which is still in the table: not supported"
                )
            out.append(replace(f, name=f"__field_{f.field_id}", required=False))  # its defaults kept
            present.add(f.field_id)
        remaining -= found
    if remaining:
        raise UnsupportedFeature(
            f"{source}: equality delete columns {sorted(remaining)} are in no schema of the table"
        )
    return out
