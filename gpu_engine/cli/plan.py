"""``gpu-engine plan``: the files a scan reads and what the planner pruned."""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict
from typing import Any

from rich.console import Console
from rich.table import Table as RichTable

from ..tasks import ScanPlan
from .common import open_table, snapshot_options, table_options


def add_parser(sub: Any) -> None:
    p = sub.add_parser("plan", help="plan a scan: files kept and pruned, deletes, bytes")
    table_options(p)
    snapshot_options(p)
    p.set_defaults(run=cmd_plan)


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
