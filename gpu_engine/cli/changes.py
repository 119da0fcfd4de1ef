"""``gpu-engine changes``: the rows each snapshot after ``--from-snapshot`` inserted and deleted
(:meth:`gpu_engine.table.Table.incremental_changelog_scan`), to Parquet, stdout or the screen, with a
summary of the changes per type."""

from __future__ import annotations

import argparse
import time
from typing import Any

import pyarrow as pa
from rich.console import Console

from ..errors import PlanningError
from ..planning.changelog import change_counts
from .common import column_list, open_table, table_options
from .output import PREVIEW_ROWS, discard, finish, open_sink, report


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "changes",
        help="rows inserted and deleted by each snapshot of a range (a changelog, deletes included)",
    )
    table_options(p)
    p.add_argument(
        "--from-snapshot",
        type=int,
        help="changes after this snapshot (default: from the oldest ancestor still in the table)",
    )
    p.add_argument("--from-inclusive", action="store_true", help="--from-snapshot's own changes too")
    end = p.add_mutually_exclusive_group()
    end.add_argument("--snapshot", type=int, help="last snapshot of the range (default: current)")
    end.add_argument("--ref", help="end at this branch's head (or tag)")
    p.add_argument("--filter", default=None, help="keep changed rows matching this filter")
    p.add_argument("--columns", help="comma-separated column names (the change columns always follow)")
    p.add_argument(
        "--keep-carry-overs",
        action="store_true",
        help="keep the rows a copy-on-write rewrite deleted and inserted unchanged (removed by default)",
    )
    p.add_argument(
        "--compute-updates",
        action="store_true",
        help="pair a key's DELETE and INSERT in one snapshot into UPDATE_BEFORE / UPDATE_AFTER rows",
    )
    p.add_argument(
        "--net-changes",
        action="store_true",
        help="only the range's net changes: a row inserted and later deleted (or the reverse) is left out",
    )
    p.add_argument(
        "--identifier-columns",
        help="comma-separated key columns for --compute-updates (default: the table's)",
    )
    p.add_argument("--backend", default="auto", choices=["auto", "cpu", "cuda"], help="where kernels run")
    p.add_argument("-o", "--output", help="write Parquet to this file, or '-' for stdout")
    p.set_defaults(run=cmd_changes)


def cmd_changes(args: argparse.Namespace, console: Console) -> int:
    if args.from_inclusive and args.from_snapshot is None:
        raise PlanningError("--from-inclusive needs --from-snapshot")
    table = open_table(args)
    if args.identifier_columns and not args.compute_updates:
        raise PlanningError("--identifier-columns needs --compute-updates")
    if args.net_changes and args.compute_updates:
        raise PlanningError("--net-changes cannot be combined with --compute-updates: choose one")
    if args.compute_updates and not args.identifier_columns and not table.schema().identifier_field_ids:
        raise PlanningError(
            f"--compute-updates needs --identifier-columns: table {args.table} has no identifier fields "
            "(or set them: gpu-engine alter --identifier-fields)"
        )
    columns = column_list(args.columns, "--columns")
    scan = table.incremental_changelog_scan(
        args.from_snapshot,
        from_inclusive=args.from_inclusive,
        to_snapshot_id=args.snapshot,
        branch=args.ref,
        filter=args.filter or "true",
        columns=columns,
        backend=args.backend,
        remove_carry_overs=not args.keep_carry_overs,
        compute_updates=args.compute_updates,
        identifier_columns=column_list(args.identifier_columns, "--identifier-columns"),
        net_changes=args.net_changes,
    )
    started = time.perf_counter()
    plan = scan.plan()
    schema = scan.schema()
    to_stdout = args.output == "-"
    shown = Console(stderr=True) if to_stdout or args.json else console
    sink = open_sink(args.output, schema)
    preview: list[pa.RecordBatch] = []
    try:
        for batch in scan.to_batches():
            if sink is not None:
                sink.write_batch(batch)
            elif sum(b.num_rows for b in preview) < PREVIEW_ROWS:
                preview.append(batch)
    except BaseException:
        if sink is not None:
            discard(sink, args.output)
        raise
    if sink is not None:
        finish(sink, args.output)
    run = scan.last_run
    summary: dict[str, Any] = {
        "snapshots": len(plan.snapshot_ids),
        "replace_snapshots_passed_over": len(plan.skipped),
        **{f"files_{k}": v for k, v in change_counts(plan.tasks).items()},
        "inserted_rows": run.rows["INSERT"] if run else 0,
        "deleted_rows": run.rows["DELETE"] if run else 0,
        "updated_rows": run.rows.get("UPDATE_AFTER", 0) if run else 0,
        "seconds": round(time.perf_counter() - started, 3),
        "backend": run.backend.name if run and run.backend else None,
        "output": args.output,
    }
    report(shown, summary, title="changes summary", as_json=args.json, to_stdout=to_stdout,
           preview=preview if sink is None else None, schema=schema)  # fmt: skip
    return 0
