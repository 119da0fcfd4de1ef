"""``gpu-engine alter``: evolve a table's properties, schema, partition spec and sort order from the
command line.

Property changes are committed first (``--set-property format-version=3`` upgrades the table, see
:mod:`gpu_engine.commit.properties_update`), then schema changes together as one new schema, then spec
changes as one new spec, then the sort order (see :mod:`gpu_engine.commit.schema_update`,
:mod:`.spec_update`, :mod:`.sort_update`); nested columns are dotted (``loc.lat``). Defaults for added
columns (v3) are set through the Python API.

``--union-schema-of FILE`` evolves the schema to hold the columns of a Parquet file (or of an Iceberg
schema JSON), before the other schema changes and in the same new schema: the usual step before appending
files that gained columns. ``--move`` reorders columns; ``--identifier-fields`` sets the row key."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from rich.console import Console

from ..errors import GpuEngineError
from .common import open_table, table_options
from .write import read_schema, report

if TYPE_CHECKING:
    from ..table import Table

_SCHEMA = ("add_column", "rename_column", "drop_column", "update_column", "make_optional", "move")
_MOVE = "NAME first | NAME before OTHER | NAME after OTHER"
_SPEC = ("add_partition_field", "drop_partition_field", "rename_partition_field")


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
    schema_changes = (
        any(getattr(args, name) for name in _SCHEMA)
        or args.identifier_fields is not None
        or args.union_schema_of is not None
    )
    spec_changes = any(getattr(args, name) for name in _SPEC)
    property_changes = bool(args.set_property or args.remove_property)
    if not (
        property_changes or schema_changes or spec_changes or args.sort_order is not None or args.unsorted
    ):
        raise GpuEngineError("alter: nothing to change (see gpu-engine alter --help)")
    table = open_table(args)
    done: list[str] = []  # the steps committed so far: each is its own commit
    try:
        _apply(args, table, property_changes, schema_changes, spec_changes, done)
    except GpuEngineError as exc:
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


def _apply(
    args: argparse.Namespace,
    table: Table,
    property_changes: bool,
    schema_changes: bool,
    spec_changes: bool,
    done: list[str],
) -> None:
    """Commit the changes in order: properties, schema, partition spec, sort order (``done`` records the
    steps committed)."""
    if property_changes:
        with table.update_properties() as props:
            for text in args.set_property:
                props.set(*_pair(text, "=", "--set-property", "KEY=VALUE"))
            for key in args.remove_property:
                props.remove(key)
        done.append("the properties")
    if schema_changes:
        with table.update_schema() as u:
            if args.union_schema_of is not None:
                u.union_by_name(read_schema(args.union_schema_of, "--union-schema-of"))
            for text in args.add_column:
                u.add_column(*_pair(text, ":", "--add-column", "NAME:TYPE"))
            for text in args.rename_column:
                u.rename_column(*_pair(text, "=", "--rename-column", "OLD=NEW"))
            for name in args.drop_column:
                u.delete_column(name)
            for text in args.update_column:
                u.update_column(*_pair(text, ":", "--update-column", "NAME:TYPE"))
            for name in args.make_optional:
                u.make_optional(name)
            for text in args.move:
                _move(u, text)
            if args.identifier_fields is not None:
                u.set_identifier_fields(*_columns(args.identifier_fields))
        done.append("the schema changes")
    if spec_changes:
        with table.update_spec() as s:
            for text in args.add_partition_field:
                s.add_field(text)
            for name in args.drop_partition_field:
                s.remove_field(name)
            for text in args.rename_partition_field:
                s.rename_field(*_pair(text, "=", "--rename-partition-field", "OLD=NEW"))
        done.append("the partition spec changes")
    if args.sort_order is not None or args.unsorted:
        table.replace_sort_order([] if args.unsorted else args.sort_order)


def _pair(text: str, sep: str, option: str, form: str) -> tuple[str, str]:
    left, found, right = text.partition(sep)
    if not found or not left.strip() or not right.strip():
        raise GpuEngineError(f"{option} {text!r}: expected {form}")
    return left.strip(), right.strip()


def _move(update: Any, text: str) -> None:
    words = text.split()
    if len(words) == 2 and words[1].lower() == "first":
        update.move_first(words[0])
    elif len(words) == 3 and words[1].lower() in ("before", "after"):
        (update.move_before if words[1].lower() == "before" else update.move_after)(words[0], words[2])
    else:
        raise GpuEngineError(f"--move {text!r}: expected {_MOVE}")


def _columns(text: str) -> list[str]:
    names = [c.strip() for c in text.split(",")]
    if names == [""]:
        return []
    if not all(names) or len(set(names)) != len(names):
        raise GpuEngineError(f"--identifier-fields {text!r}: expected distinct comma-separated columns")
    return names
