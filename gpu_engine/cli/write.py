"""``gpu-engine create|append|overwrite|upsert|delete``: create a catalog table, append Parquet files to a
table as one commit, replace the rows matching ``--filter`` with Parquet files' rows, upsert rows by key
(``--on``), delete rows by ``--filter`` (the table's ``write.delete.mode``) or with equality deletes
(``--keys`` / ``--on``)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from rich.console import Console
from rich.table import Table as RichTable

from ..catalog import load_catalog
from ..catalog.base import table_identifier
from ..errors import GpuEngineError
from ..iceberg.content_file import DATA, ContentFile
from ..iceberg.schema import Schema, schema_from_json
from .common import column_list, key_values, open_table, table_options


def add_parsers(sub: Any) -> None:
    p = sub.add_parser("create", help="create a table in a catalog from a Parquet file's or a JSON schema")
    p.add_argument("table", help="table identifier, e.g. db.events")
    p.add_argument(
        "--catalog", required=True, help="catalog name from ~/.pyiceberg.yaml / PYICEBERG_CATALOG__*"
    )
    p.add_argument(
        "--schema", required=True, help="a Parquet file (its Arrow schema) or an Iceberg schema JSON"
    )
    p.add_argument("--partition-by", action="append", default=[], metavar="FIELD", help='e.g. "day(ts)"')
    p.add_argument("--property", action="append", default=[], metavar="K=V", help="a table property")
    p.add_argument("--format-version", type=int, choices=[1, 2, 3], help="Iceberg format version (default 2)")
    p.add_argument("--location", help="table location (default: under the catalog's warehouse)")
    p.add_argument("--create-namespace", action="store_true", help="create the table's namespace if missing")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(run=cmd_create)

    p = sub.add_parser("append", help="append Parquet files to a table as one commit")
    table_options(p)
    p.add_argument("files", nargs="+", metavar="FILE", help="Parquet files to append")
    p.add_argument(
        "--merge-schema", action="store_true",
        help="first add the files' new columns and widen types (required columns stay required)",
    )  # fmt: skip
    p.add_argument("--backend", default="auto", choices=["auto", "cpu", "cuda"], help="where kernels run")
    p.set_defaults(run=cmd_append)

    p = sub.add_parser("overwrite", help="replace the rows matching --filter with Parquet files' rows")
    table_options(p)
    p.add_argument("files", nargs="+", metavar="FILE", help="Parquet files with the new rows")
    p.add_argument("--filter", help="the rows to replace, e.g. \"day = '2026-11-01'\" (default: all)")
    p.add_argument(
        "--dynamic-partitions", action="store_true",
        help="replace the partitions the new rows land in (Iceberg's ReplacePartitions) instead of --filter",
    )  # fmt: skip
    p.add_argument(
        "--isolation", default="serializable", choices=["serializable", "snapshot"],
        help="serializable: fail if rows matching --filter were appended meanwhile",
    )  # fmt: skip
    p.add_argument("--backend", default="auto", choices=["auto", "cpu", "cuda"], help="where kernels run")
    p.set_defaults(run=cmd_overwrite)

    p = sub.add_parser("upsert", help="update rows by key and insert new ones (equality deletes + rows)")
    table_options(p)
    p.add_argument("files", nargs="+", metavar="FILE", help="Parquet files with the new rows")
    p.add_argument(
        "--on", metavar="COLS", help="comma-separated key columns (default: the identifier fields)"
    )
    p.add_argument("--backend", default="auto", choices=["auto", "cpu", "cuda"], help="where kernels run")
    p.set_defaults(run=cmd_upsert)

    p = sub.add_parser("delete", help="delete rows by --filter (merge-on-read) or --keys/--on (equality)")
    table_options(p)
    p.add_argument("--filter", help='delete the rows matching this expression, e.g. "id < 10"')
    p.add_argument(
        "--isolation", choices=["serializable", "snapshot"],
        help="with --filter (default: the table's write.delete.isolation-level, serializable)",
    )  # fmt: skip
    p.add_argument("--keys", metavar="FILE", help="a Parquet file of key rows to delete (with --on)")
    p.add_argument(
        "--on", metavar="COLS", help="comma-separated key columns for --keys (default: the identifier fields)"
    )
    p.add_argument("--backend", default="auto", choices=["auto", "cpu", "cuda"], help="where kernels run")
    p.set_defaults(run=cmd_delete)


def cmd_create(args: argparse.Namespace, console: Console) -> int:
    properties = key_values(args.property, "--property")
    if args.format_version is not None:
        if properties.get("format-version", str(args.format_version)) != str(args.format_version):
            raise GpuEngineError(
                f"--format-version {args.format_version} and --property format-version="
                f"{properties['format-version']} disagree"
            )
        properties["format-version"] = str(args.format_version)
    schema = read_schema(args.schema)
    catalog = load_catalog(args.catalog)
    namespace, _ = table_identifier(args.table)
    if args.create_namespace and namespace and not catalog.namespace_exists(namespace):
        catalog.create_namespace(namespace)
    table = catalog.create_table(
        args.table,
        schema,
        partition_spec=args.partition_by or None,
        properties=properties,
        location=args.location,
    )
    summary = {
        "table": ".".join(table.identifier),
        "metadata_location": table.metadata_location,
        "location": table.location,
        "format_version": table.format_version,
        "columns": len(table.schema().fields),
        "partition_fields": len(table.spec().fields),
    }
    return report(args, console, f"created {args.table}", summary)


def _read_files(files: list[str]) -> pa.Table:
    tables = [_read_parquet(f, "FILE") for f in files]
    try:
        return pa.concat_tables(tables, promote_options="default")
    except (pa.ArrowInvalid, pa.ArrowTypeError) as e:
        raise GpuEngineError(f"{', '.join(files)}: the files' schemas do not combine ({e})") from None


def cmd_append(args: argparse.Namespace, console: Console) -> int:
    data = _read_files(args.files)
    table = open_table(args)
    result = table.append(data, backend=args.backend, merge_schema=args.merge_schema)
    summary = {
        "snapshot_id": result.snapshot_id,
        "files_written": len(result.files),
        "rows_written": result.rows,
        "metadata_location": result.commit.metadata_location,
        "files": [f.path for f in result.files],
    }
    return report(args, console, f"appended to {args.table}", summary)


def cmd_overwrite(args: argparse.Namespace, console: Console) -> int:
    if args.dynamic_partitions and args.filter is not None:
        raise GpuEngineError("overwrite: give --filter EXPR or --dynamic-partitions, not both")
    data = _read_files(args.files)
    table = open_table(args)
    if args.dynamic_partitions:
        replaced = table.dynamic_partition_overwrite(data, backend=args.backend, isolation=args.isolation)
        if replaced is None:
            return report(args, console, f"replaced partitions of {args.table}", {"message": "no rows"})
        summary: dict[str, Any] = {
            "snapshot_id": replaced.snapshot_id,
            "partitions_replaced": replaced.partitions,
            "rows_written": replaced.added_rows,
            "files_written": len(replaced.files),
            "data_files_removed": len(replaced.removed_data_files),
            "delete_files_removed": len(replaced.removed_delete_files),
            "metadata_location": replaced.commit.metadata_location,
        }
        return report(args, console, f"replaced partitions of {args.table}", summary)
    if args.filter is not None and not args.filter.strip():  # an empty "$VAR" must not replace every row
        raise GpuEngineError("overwrite --filter: an empty filter; to replace every row, leave --filter out")
    result = table.overwrite(data, args.filter or "true", backend=args.backend, isolation=args.isolation)
    summary = {
        "snapshot_id": result.snapshot_id,
        "rows_deleted": result.deleted_rows,
        "rows_written": result.added_rows,
        "files_written": len(result.files),
        "data_files_removed": len(result.removed_data_files),
        **_delete_side(result.delete_side),
        "metadata_location": result.commit.metadata_location,
    }
    return report(args, console, f"overwrote rows of {args.table}", summary)


def cmd_upsert(args: argparse.Namespace, console: Console) -> int:
    data = _read_files(args.files)
    on = column_list(args.on, "--on")
    table = open_table(args)
    if on is None and not table.schema().identifier_field_ids:
        raise GpuEngineError(
            f"--on: table {args.table} has no identifier fields; name the key columns (or set them: "
            "gpu-engine alter --identifier-fields)"
        )
    result = table.upsert(data, on, backend=args.backend)
    if result is None:
        return report(args, console, f"upserted into {args.table}", {"message": "no rows to upsert"})
    summary = {
        "snapshot_id": result.snapshot_id,
        "rows_written": result.rows,
        "files_written": len(result.files),
        "delete_files_added": len(result.delete_files),
        "metadata_location": result.commit.metadata_location,
    }
    return report(args, console, f"upserted into {args.table}", summary)


def _delete_side(added: tuple[ContentFile, ...]) -> dict[str, int]:
    """What a delete wrote: delete files (merge-on-read) or data files rewritten (copy-on-write)."""
    return {
        "delete_files_added": sum(f.content != DATA for f in added),
        "data_files_rewritten": sum(f.content == DATA for f in added),
    }


def cmd_delete(args: argparse.Namespace, console: Console) -> int:
    if (args.filter is None) == (args.keys is None):
        raise GpuEngineError("delete: give exactly one of --filter EXPR or --keys FILE --on COLS")
    if args.keys is None and args.on is not None:
        raise GpuEngineError("--on goes with --keys, not with --filter")
    if args.keys is not None and args.isolation is not None:
        raise GpuEngineError("--isolation goes with --filter, not with --keys")
    if args.keys is not None:
        keys = _read_parquet(args.keys, "--keys")
        table = open_table(args)
        schema = table.schema()
        if args.on is None:  # the table's identifier fields
            on = [schema.names_by_id[i] for i in schema.identifier_field_ids]
            if not on:
                raise GpuEngineError(f"--keys: table {args.table} has no identifier fields; give --on COLS")
        else:
            on = column_list(args.on, "--on") or []
        unknown = [c for c in on if c not in keys.column_names or c not in schema.ids_by_name]
        if unknown:
            raise GpuEngineError(
                f"--on: column(s) {unknown} not in both the --keys file {args.keys} "
                f"(columns: {keys.column_names}) and the table"
            )
        result = table.delete_rows(keys, on, backend=args.backend)
    else:
        table = open_table(args)
        result = table.delete(args.filter, backend=args.backend, isolation=args.isolation)
    # equality deletes read no data: what they count is the keys written, not the rows they match
    count = "rows_deleted" if args.keys is None else "keys_written"
    summary: dict[str, Any] = {
        count: result.deleted_rows,
        "snapshot_id": result.snapshot_id,
        **_delete_side(result.added),
        "data_files_removed": len(result.removed_data_files),
    }
    if result.commit is None:
        summary["message"] = "nothing matched" if args.keys is None else "no keys"
    return report(args, console, f"deleted from {args.table}", summary)


def report(args: argparse.Namespace, console: Console, title: str, summary: dict[str, Any]) -> int:
    if args.json:
        print(json.dumps(summary, indent=2))
        return 0
    if summary.get("message"):
        console.print(summary["message"])
    out = RichTable(title=title)
    out.add_column("what")
    out.add_column("value", justify="right")
    for key, value in summary.items():
        if key == "message":
            continue
        shown = "\n".join(value) if isinstance(value, list) else value
        counted = isinstance(value, int) and not isinstance(value, bool) and not key.endswith("_id")
        out.add_row(key.replace("_", " "), f"{value:,}" if counted else str(shown))
    console.print(out)
    return 0


def read_schema(path: str, option: str = "--schema") -> Schema | pa.Schema:
    """The Arrow schema of a Parquet file, or the Iceberg schema in a JSON file (given as ``option``)."""
    if not Path(path).is_file():
        raise GpuEngineError(f"{option} {path}: no such file")
    if path.lower().endswith(".json"):
        try:
            obj = json.loads(Path(path).read_text())
            if not isinstance(obj, dict):
                raise ValueError("not a JSON object")
            return schema_from_json(obj)
        except (ValueError, KeyError, TypeError) as e:
            raise GpuEngineError(f"{option} {path}: not an Iceberg schema JSON ({e})") from None
    try:
        return pq.read_schema(path).remove_metadata()
    except (OSError, pa.ArrowException) as e:
        raise GpuEngineError(f"{option} {path}: not a Parquet file or .json schema ({e})") from None


def _read_parquet(path: str, what: str) -> pa.Table:
    if not Path(path).is_file():
        raise GpuEngineError(f"{what} {path}: no such file")
    try:
        return pq.read_table(path)
    except (OSError, pa.ArrowException) as e:
        raise GpuEngineError(f"{what} {path}: cannot read it as Parquet ({e})") from None
