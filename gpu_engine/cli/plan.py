"""The ``gpu-engine`` command: ``plan`` today (scan, compact, delete, append, inspect as they land)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from rich.console import Console
from rich.table import Table as RichTable

from .catalog import load_catalog
from .errors import GpuEngineError
from .table import Table, load_table
from .tasks import ScanPlan


def _path_map(pairs: Sequence[str]) -> dict[str, str]:
    out = {}
    for pair in pairs:
        old, sep, new = pair.partition("=")
        if not sep or not old or not new:
            raise GpuEngineError(f"--path-map {pair!r}: expected OLD=NEW")
        out[old] = new
    return out


def open_table(args: argparse.Namespace) -> Table:
    """TABLE is a catalog identifier with --catalog, else a table directory or metadata JSON file."""
    path_map = _path_map(args.path_map)
    if args.catalog:
        catalog = load_catalog(args.catalog, path_map=path_map or None)
        return catalog.load_table(args.table)
    return load_table(args.table, relocate=args.relocate, path_map=path_map)


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("table", help="table directory, metadata JSON file, or identifier with --catalog")
    p.add_argument("--catalog", help="catalog name from ~/.pyiceberg.yaml / PYICEBERG_CATALOG__* variables")
    p.add_argument("--relocate", action="store_true", help="map the table's recorded location to where it is")
    p.add_argument("--path-map", action="append", default=[], metavar="OLD=NEW", help="remap a path prefix")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")


def _snapshot_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--filter", default=None, help="row filter, e.g. \"ts >= '2024-01-01' and id in (1, 2)\"")
    group = p.add_mutually_exclusive_group()
    group.add_argument("--snapshot", type=int, help="snapshot id")
    group.add_argument("--as-of", type=int, help="timestamp in ms since the epoch")
    group.add_argument("--ref", help="branch or tag name")


def plan_summary(plan: ScanPlan) -> dict[str, Any]:
    summary = asdict(plan.summary)
    summary["data_files_kept"] = plan.summary.data_files_kept
    summary["filter"] = str(plan.filter)
    return summary


def cmd_plan(args: argparse.Namespace, console: Console) -> int:
    table = open_table(args)
    scan = table.scan(filter=args.filter or "true", snapshot_id=args.snapshot, as_of=args.as_of, ref=args.ref)
    plan = scan.plan()
    summary = plan_summary(plan)
    if args.json:
        tasks = [
            {
                "file": t.file.path,
                "start": t.start,
                "length": t.length,
                "rows": t.estimated_rows,
                "deletes": [d.path for d in t.deletes],
                "residual": str(t.residual),
            }
            for t in plan.tasks
        ]
        print(json.dumps({"summary": summary, "tasks": tasks}, indent=2))
        return 0
    out = RichTable(title=f"plan of {table.metadata_location}")
    out.add_column("what")
    out.add_column("value", justify="right")
    for key, value in summary.items():
        counted = isinstance(value, int) and key != "snapshot_id"
        out.add_row(key.replace("_", " "), f"{value:,}" if counted else str(value))
    console.print(out)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gpu-engine", description="GPU-accelerated Iceberg scans and compaction"
    )
    sub = parser.add_subparsers(dest="command", required=True)
    plan = sub.add_parser("plan", help="plan a scan: files kept and pruned, deletes, bytes")
    _common(plan)
    _snapshot_options(plan)
    plan.set_defaults(run=cmd_plan)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    console = Console(stderr=False)
    try:
        code: int = args.run(args, console)
    except GpuEngineError as exc:
        Console(stderr=True).print(f"[red]error:[/red] {exc}")
        return 2
    return code


if __name__ == "__main__":
    sys.exit(main())
