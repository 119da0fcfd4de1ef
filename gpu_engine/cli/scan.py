"""``gpu-engine scan``: read a table's rows (every delete applied) to a Parquet file, stdout, or the screen.

A progress bar counts files, rows and bytes while the scan streams; a summary follows. With
``-o -`` the Parquet bytes go to stdout and everything else to stderr.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import pyarrow as pa
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from ..errors import GpuEngineError, PlanningError
from ..execute.scan import ScanProgress
from .common import column_list, open_table, snapshot_options, table_options
from .output import PREVIEW_ROWS, discard, finish, open_sink, report


def add_parser(sub: Any) -> None:
    p = sub.add_parser("scan", help="read rows with every delete applied (to Parquet, stdout or the screen)")
    table_options(p)
    snapshot_options(p)
    p.add_argument(
        "--from-snapshot",
        type=int,
        help="only the rows appended after this snapshot, up to --snapshot, --ref or the current one "
        "(Iceberg's incremental append scan: other operations passed over, deletes not applied)",
    )
    p.add_argument("--from-inclusive", action="store_true", help="--from-snapshot's own appends count too")
    p.add_argument("--columns", help="comma-separated column names (dotted for nested; _file, _pos, ...)")
    p.add_argument("--limit", type=int, help="at most N rows")
    p.add_argument("--backend", default="auto", choices=["auto", "cpu", "cuda"], help="where kernels run")
    p.add_argument("-o", "--output", help="write Parquet to this file, or '-' for stdout")
    p.set_defaults(run=cmd_scan)


def cmd_scan(args: argparse.Namespace, console: Console) -> int:
    table = open_table(args)
    columns = column_list(args.columns, "--columns")
    if args.limit is not None and args.limit < 0:
        raise GpuEngineError(f"--limit {args.limit}: expected 0 or more")
    if args.from_snapshot is None and args.from_inclusive:
        raise PlanningError("--from-inclusive needs --from-snapshot")
    if args.from_snapshot is not None:
        if args.as_of is not None:
            raise PlanningError("--from-snapshot ends at --snapshot or --ref, not at --as-of")
        scan = table.incremental_append_scan(
            args.from_snapshot,
            from_inclusive=args.from_inclusive,
            to_snapshot_id=args.snapshot,
            branch=args.ref,
            filter=args.filter or "true",
            columns=columns,
            backend=args.backend,
            limit=args.limit,
        )
    else:
        scan = table.scan(
            filter=args.filter or "true",
            columns=columns,
            snapshot_id=args.snapshot,
            as_of=args.as_of,
            ref=args.ref,
            backend=args.backend,
            limit=args.limit,
        )
    err = Console(stderr=True)
    to_stdout = args.output == "-"
    shown = err if to_stdout or args.json else console
    plan = scan.plan()
    counts = ScanProgress()
    started = time.perf_counter()
    schema = scan.projection(plan).arrow_schema
    preview: list[pa.RecordBatch] = []
    sink = open_sink(args.output, schema)
    try:
        with Progress(
            TextColumn("[bold]scan"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn(
                "tasks · {task.fields[files]} files · {task.fields[rows]:,} rows · {task.fields[mb]:.1f} MB"
            ),
            TimeElapsedColumn(),
            console=err,
            transient=True,
            disable=not err.is_terminal,
        ) as bar:
            job = bar.add_task("scan", total=len(plan.tasks), files=0, rows=0, mb=0.0)
            for batch in scan.to_batches(progress=counts):
                if sink is not None:
                    sink.write_batch(batch)
                elif sum(b.num_rows for b in preview) < PREVIEW_ROWS:
                    preview.append(batch)
                bar.update(
                    job,
                    completed=counts.tasks_done,
                    files=len(counts.files),
                    rows=counts.rows,
                    mb=counts.bytes / 1e6,
                )
    except BaseException:
        if sink is not None:  # no partial output file that looks like a finished scan
            discard(sink, args.output)
        raise
    if sink is not None:
        finish(sink, args.output)
    run = scan.last_run
    assert run is not None
    summary = {
        "rows": counts.rows,
        "files": len(counts.files),
        "tasks": len(plan.tasks),
        "bytes_read": counts.bytes,
        "delete_files_applied": plan.summary.delete_files_applied,
        "seconds": round(time.perf_counter() - started, 3),
        "backend": run.backend.name,
        "backend_reason": run.backend.reason,
        "output": args.output,
    }
    report(shown, summary, title="scan summary", as_json=args.json, to_stdout=to_stdout,
           preview=preview if sink is None else None, schema=schema)  # fmt: skip
    return 0
