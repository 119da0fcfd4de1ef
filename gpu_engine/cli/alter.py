"""``gpu-engine alter``: evolve a table's properties, schema, partition spec and sort order from the
command line.

Property changes are committed first (``--set-property format-version=3`` upgrades the table, see
:mod:`gpu_engine.commit.properties_update`), then schema changes together as one new schema, then spec
changes as one new spec, then the sort order (see :mod:`gpu_engine.commit.schema_update`,
:mod:`.spec_update`, :mod:`.sort_update`); nested columns are dotted (``loc.lat``). Each step is its own
commit, so before the first one every option is parsed and every step built and applied, uncommitted, on
the metadata the steps before it would make: a bad option (a misspelt type, a partition field on a missing
column) fails with the table unchanged. Only a failure at commit time (a concurrent change) can leave the
earlier steps committed; the error then says which. Defaults for added
columns (v3) are set through the Python API.

``--union-schema-of FILE`` evolves the schema to hold the columns of a Parquet file (or of an Iceberg
schema JSON), before the other schema changes and in the same new schema: the usual step before appending
files that gained columns. ``--move`` reorders columns; ``--identifier-fields`` sets the row key."""

from __future__ import annotations

import argparse
from dataclasses import dataclass, replace
from typing import Any

import pyarrow as pa
from rich.console import Console

from ..commit.properties_update import PropertiesUpdate
from ..commit.schema_changes import MoveKind
from ..commit.schema_update import SchemaUpdate
from ..commit.sort_update import SortOrderUpdate
from ..commit.spec_update import SpecUpdate
from ..errors import GpuEngineError, InvalidType
from ..iceberg import types as it
from ..iceberg.metadata import TableMetadata
from ..iceberg.schema import Schema, check_format_version, check_lineage_names
from ..table import Table
from .common import open_table, table_options
from .write import read_schema, report

_MOVE = "NAME first | NAME before OTHER | NAME after OTHER"


def add_parser(sub: Any) -> None:
    p = sub.add_parser("alter", help="evolve a table's schema, partition spec or sort order")
    table_options(p)
    many: dict[str, Any] = {"action": "append", "default": []}
    p.add_argument(
        "--set-property", **many, metavar="KEY=VALUE", help="e.g. write.target-file-size-bytes=..."
    )
    p.add_argument("--remove-property", **many, metavar="KEY", help="remove a table property")
    p.add_argument("--add-column", **many, metavar="NAME:TYPE", help='e.g. "price:decimal(10, 2)"')
    p.add_argument("--rename-column", **many, metavar="OLD=NEW", help="rename a column (its data stays)")
    p.add_argument("--drop-column", **many, metavar="NAME", help="delete a column")
    p.add_argument(
        "--update-column", **many, metavar="NAME:TYPE", help="promote: int->long, float->double, ..."
    )
    p.add_argument("--make-optional", **many, metavar="NAME", help="let a required column hold nulls")
    p.add_argument("--move", **many, metavar="MOVE", help=f"reorder a struct's columns: {_MOVE}")
    p.add_argument("--identifier-fields", metavar="COLS", help='the row key, comma-separated ("" for none)')
    p.add_argument(
        "--union-schema-of", metavar="FILE", help="add the columns a Parquet file (or schema .json) has"
    )
    p.add_argument("--add-partition-field", **many, metavar="FIELD", help='e.g. "bucket(16, id)", "day(ts)"')
    p.add_argument("--drop-partition-field", **many, metavar="NAME", help="a partition field by name")
    p.add_argument("--rename-partition-field", **many, metavar="OLD=NEW", help="rename a partition field")
    order = p.add_mutually_exclusive_group()
    order.add_argument("--sort-order", metavar="ORDER", help='the table\'s sort order, e.g. "id DESC, name"')
    order.add_argument("--unsorted", action="store_true", help="drop the table's sort order")
    p.set_defaults(run=cmd_alter)


def cmd_alter(args: argparse.Namespace, console: Console) -> int:
    changes = _parse(args)  # every option text, before the table is touched
    if not changes.any():
        raise GpuEngineError("alter: nothing to change (see gpu-engine alter --help)")
    table = open_table(args)
    _check(changes, table)  # every step, on the metadata the steps before it would make: nothing committed
    done: list[str] = []  # the steps committed so far: each is its own commit
    try:
        _commit(changes, table, done)
    except GpuEngineError as exc:  # at commit time: a concurrent change, the catalog, ...
        if not done:
            raise
        raise GpuEngineError(f"{exc} (already committed: {', '.join(done)}; nothing after that)") from exc
    md = table.metadata
    summary = {
        "format_version": md.format_version,
        "properties": dict(md.properties),
        "schema_id": md.current_schema_id,
        "columns": [md.schema.names_by_id[f.field_id] + f": {f.type}" for f in md.schema.fields],
        "identifier_fields": [md.schema.names_by_id[i] for i in md.schema.identifier_field_ids],
        "spec_id": md.default_spec_id,
        "partition_fields": [f"{f.name}: {f.transform}" for f in md.spec.fields],
        "sort_order_id": md.default_sort_order_id,
        "metadata_location": table.metadata_location,
    }
    return report(args, console, f"altered {args.table}", summary)


@dataclass(frozen=True)
class _Changes:
    """The options of one ``alter``, parsed: partition fields and sort orders are checked against the schema
    they apply to (:func:`_check`)."""

    set_properties: tuple[tuple[str, str], ...]
    remove_properties: tuple[str, ...]
    union: Schema | pa.Schema | None
    add_columns: tuple[tuple[str, it.IcebergType], ...]
    rename_columns: tuple[tuple[str, str], ...]
    drop_columns: tuple[str, ...]
    update_columns: tuple[tuple[str, it.IcebergType], ...]
    make_optional: tuple[str, ...]
    moves: tuple[tuple[str, MoveKind, str | None], ...]
    identifier_fields: tuple[str, ...] | None
    add_partition_fields: tuple[str, ...]
    drop_partition_fields: tuple[str, ...]
    rename_partition_fields: tuple[tuple[str, str], ...]
    sort_order: str | tuple[()] | None  # (): unsorted; None: unchanged

    @property
    def properties(self) -> bool:
        return bool(self.set_properties or self.remove_properties)

    @property
    def schema(self) -> bool:
        return bool(
            self.union is not None or self.add_columns or self.rename_columns or self.drop_columns
            or self.update_columns or self.make_optional or self.moves or self.identifier_fields is not None
        )  # fmt: skip

    @property
    def spec(self) -> bool:
        return bool(self.add_partition_fields or self.drop_partition_fields or self.rename_partition_fields)

    def any(self) -> bool:
        return self.properties or self.schema or self.spec or self.sort_order is not None


def _parse(args: argparse.Namespace) -> _Changes:
    def pairs(texts: list[str], sep: str, option: str, form: str) -> tuple[tuple[str, str], ...]:
        return tuple(_pair(text, sep, option, form) for text in texts)

    def typed(texts: list[str], option: str) -> tuple[tuple[str, it.IcebergType], ...]:
        out = []
        for text in texts:
            name, type_text = _pair(text, ":", option, "NAME:TYPE")
            try:
                out.append((name, it.parse_type(type_text)))
            except InvalidType as exc:
                raise GpuEngineError(f"{option} {text!r}: {exc}") from None
        return tuple(out)

    union = None if args.union_schema_of is None else read_schema(args.union_schema_of, "--union-schema-of")
    return _Changes(
        set_properties=pairs(args.set_property, "=", "--set-property", "KEY=VALUE"),
        remove_properties=tuple(args.remove_property),
        union=union,
        add_columns=typed(args.add_column, "--add-column"),
        rename_columns=pairs(args.rename_column, "=", "--rename-column", "OLD=NEW"),
        drop_columns=tuple(args.drop_column),
        update_columns=typed(args.update_column, "--update-column"),
        make_optional=tuple(args.make_optional),
        moves=tuple(_move(text) for text in args.move),
        identifier_fields=None if args.identifier_fields is None else _columns(args.identifier_fields),
        add_partition_fields=tuple(args.add_partition_field),
        drop_partition_fields=tuple(args.drop_partition_field),
        rename_partition_fields=pairs(
            args.rename_partition_field, "=", "--rename-partition-field", "OLD=NEW"
        ),
        sort_order=() if args.unsorted else args.sort_order,
    )


def _check(c: _Changes, table: Table) -> None:
    """Build every step as :func:`_commit` does, each on the metadata the steps before it would make (a
    partition field may use a column added in the same command), and apply it without committing: what
    would fail fails here, with nothing committed."""
    md = table.metadata

    def draft(md: TableMetadata) -> Table:  # a handle that is never committed to
        return Table(identifier=table.identifier, metadata=md, metadata_location=table.metadata_location,
                     io=table.io)  # fmt: skip

    if c.properties:
        md = _properties(c, draft(md)).apply()
    if c.schema:
        schema = _schema(c, draft(md)).apply()
        check_format_version(schema, md.format_version)
        check_lineage_names(schema, md.format_version, md.schema)
        known = schema.schema_id in md.schemas_by_id
        md = replace(
            md, schemas=md.schemas if known else (*md.schemas, schema), current_schema_id=schema.schema_id,
            last_column_id=max(md.last_column_id, schema.highest_field_id),
        )  # fmt: skip
    if c.spec:
        spec = _spec(c, draft(md)).apply()
        known = spec.spec_id in md.specs
        md = replace(
            md, partition_specs=md.partition_specs if known else (*md.partition_specs, spec),
            default_spec_id=spec.spec_id,
            last_partition_id=max([md.last_partition_id, *(f.field_id for f in spec.fields)]),
        )  # fmt: skip
    if c.sort_order is not None:
        SortOrderUpdate(draft(md), c.sort_order).apply()


def _commit(c: _Changes, table: Table, done: list[str]) -> None:
    """Commit the changes in order: properties, schema, partition spec, sort order (``done`` records the
    steps committed)."""
    if c.properties:
        _properties(c, table).commit()
        done.append("the properties")
    if c.schema:
        _schema(c, table).commit()
        done.append("the schema changes")
    if c.spec:
        _spec(c, table).commit()
        done.append("the partition spec changes")
    if c.sort_order is not None:
        table.replace_sort_order(c.sort_order)


def _properties(c: _Changes, table: Table) -> PropertiesUpdate:
    props = table.update_properties()
    for key, value in c.set_properties:
        props.set(key, value)
    for key in c.remove_properties:
        props.remove(key)
    return props


def _schema(c: _Changes, table: Table) -> SchemaUpdate:
    u = table.update_schema()
    if c.union is not None:
        u.union_by_name(c.union)
    for name, type_ in c.add_columns:
        u.add_column(name, type_)
    for old, new in c.rename_columns:
        u.rename_column(old, new)
    for name in c.drop_columns:
        u.delete_column(name)
    for name, type_ in c.update_columns:
        u.update_column(name, type_)
    for name in c.make_optional:
        u.make_optional(name)
    for name, kind, other in c.moves:
        if kind == "first":
            u.move_first(name)
        else:
            assert other is not None
            (u.move_before if kind == "before" else u.move_after)(name, other)
    if c.identifier_fields is not None:
        u.set_identifier_fields(*c.identifier_fields)
    return u


def _spec(c: _Changes, table: Table) -> SpecUpdate:
    s = table.update_spec()
    for text in c.add_partition_fields:
        s.add_field(text)
    for name in c.drop_partition_fields:
        s.remove_field(name)
    for old, new in c.rename_partition_fields:
        s.rename_field(old, new)
    return s


def _pair(text: str, sep: str, option: str, form: str) -> tuple[str, str]:
    left, found, right = text.partition(sep)
    if not found or not left.strip() or not right.strip():
        raise GpuEngineError(f"{option} {text!r}: expected {form}")
    return left.strip(), right.strip()


def _move(text: str) -> tuple[str, MoveKind, str | None]:
    words = text.split()
    if len(words) == 2 and words[1].lower() == "first":
        return words[0], "first", None
    if len(words) == 3 and words[1].lower() in ("before", "after"):
        return words[0], "before" if words[1].lower() == "before" else "after", words[2]
    raise GpuEngineError(f"--move {text!r}: expected {_MOVE}")


def _columns(text: str) -> tuple[str, ...]:
    names = [c.strip() for c in text.split(",")]
    if names == [""]:
        return ()
    if not all(names) or len(set(names)) != len(names):
        raise GpuEngineError(f"--identifier-fields {text!r}: expected distinct comma-separated columns")
    return tuple(names)
