"""``gpu-engine compact TABLE``: plan and run a compaction (Iceberg's rewrite_data_files), with a progress
bar per file group and a report; ``--dry-run`` explains the plan and writes nothing."""

from __future__ import annotations

import argparse
import json
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn
from rich.table import Table as RichTable

from ..commit.compact import CompactionResult
from ..errors import InvalidOption
from ..execute.group_rewrite import PARQUET_IO
from ..tasks import FileGroup, RewriteResult
from .common import key_values, open_table, table_options


def add_parser(sub: Any) -> None:
    p = sub.add_parser("compact", help="rewrite small files and deletes into target-sized files")
    table_options(p)
    p.add_argument("--strategy", default="binpack", choices=["binpack", "sort", "zorder"])
    p.add_argument(
        "--sort-order",
        help='sort: "id DESC NULLS LAST, bucket(16, name)" (default: the table\'s); zorder: "a, b"',
    )
    p.add_argument(
        "--option", action="append", default=[], metavar="K=V",
        help="an Iceberg rewrite option, e.g. min-input-files=2 or target-file-size-bytes=134217728",
    )  # fmt: skip
    p.add_argument("--where", help="rewrite only files that may hold rows matching this filter")
    p.add_argument("--branch", default="main", help="the branch to compact (default main)")
    p.add_argument("--backend", default="auto", choices=["auto", "cpu", "cuda"], help="where kernels run")
    p.add_argument(
        "--parquet-io", default="auto", choices=list(PARQUET_IO),
        help="who decodes and encodes Parquet: auto (cuDF on the cuda backend where installed), cudf, "
        "pyarrow, arrow-frames (the cuDF path's steps with pyarrow)",
    )  # fmt: skip
    p.add_argument("--dry-run", action="store_true", help="explain the plan; write nothing")
    p.add_argument("--spark", action="store_true", help="rewrite the file groups on Spark executors")
    p.add_argument(
        "--master", help="Spark master URL with --spark (default: the session's, e.g. from spark-submit)"
    )
    p.set_defaults(run=cmd_compact)


def options(pairs: list[str]) -> dict[str, str]:
    """``--option K=V`` values as Iceberg options."""
    return key_values(pairs, "--option", "K=V, e.g. min-input-files=2", error=InvalidOption)


class _Bars:
    """A rich progress bar per file group (bytes of input), advanced as groups finish."""

    def __init__(self, progress: Progress):
        self.progress = progress
        self.ids: dict[int, TaskID] = {}

    def group_started(self, group: FileGroup) -> None:
        self.ids[group.index] = self.progress.add_task(
            f"group {group.index}", total=len(group.files), files=len(group.files), status="rewriting"
        )

    def group_finished(self, group: FileGroup, result: RewriteResult | None, error: str | None) -> None:
        status = f"failed: {error}" if error is not None else f"{len(result.added) if result else 0} file(s)"
        self.progress.update(self.ids[group.index], completed=len(group.files), status=status)


def cmd_compact(args: argparse.Namespace, console: Console) -> int:
    if args.master is not None and not args.spark:
        raise InvalidOption("--master goes with --spark")
    table = open_table(args)
    err = Console(stderr=True)
    with Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("input files · {task.fields[status]}"),
        TimeElapsedColumn(),
        console=err,
        transient=True,
        disable=not err.is_terminal or args.dry_run,
    ) as bar:
        if args.spark:
            result = _spark_compact(args, table, _Bars(bar))
        else:
            result = table.compact(
                args.strategy, sort_order=args.sort_order, options=options(args.option), where=args.where,
                branch=args.branch, backend=args.backend, dry_run=args.dry_run, progress=_Bars(bar),
                parquet_io=args.parquet_io,
            )  # fmt: skip
    if args.json:
        print(json.dumps({**result.to_json(), "plan": result.plan.explain().splitlines()}, indent=2))
        return 1 if result.failed else 0  # a scheduled job must see its failed groups
    console.print(result.plan.explain(), highlight=False)
    if not args.dry_run:
        _report(console, result)
    return 1 if result.failed else 0


def _spark_compact(args: argparse.Namespace, table: Any, bars: _Bars) -> CompactionResult:
    from ..spark import compact, session

    spark = session(args.master)
    return compact(
        spark, table, strategy=args.strategy, sort_order=args.sort_order, options=options(args.option),
        where=args.where, branch=args.branch, backend=args.backend, dry_run=args.dry_run, progress=bars,
        parquet_io=args.parquet_io,
    )  # fmt: skip


def _report(console: Console, result: CompactionResult) -> None:
    out = RichTable(title="compaction")
    out.add_column("what")
    out.add_column("value", justify="right")
    rows = [
        ("data files rewritten", f"{result.rewritten_data_files:,}"),
        ("bytes rewritten", f"{result.rewritten_bytes:,}"),
        ("data files added", f"{result.added_data_files:,}"),
        ("bytes added", f"{result.added_bytes:,}"),
        ("delete files removed", f"{result.removed_delete_files:,}"),
        ("commits", ", ".join(str(c.snapshot_id) for c in result.commits) or "none"),
        ("failed groups", "\n".join(str(f) for f in result.failures) or "none"),
        *([("dangling deletes left", left)] if (left := result.dangling_deletes_failure) else []),
        ("backend", result.backend),
        ("parquet io", _parquet_io(result)),
        ("seconds", f"{result.seconds:.2f}"),
    ]
    for what, value in rows:
        out.add_row(what, value)
    console.print(out)


def _parquet_io(result: CompactionResult) -> str:
    """Who decoded and encoded the groups' files: each reader/writer with its group count, and why
    pyarrow stood in where it did."""
    counts: dict[str, int] = {}
    for g in result.groups:
        counts[g.parquet_io] = counts.get(g.parquet_io, 0) + 1
    lines = [f"{name}: {n} group(s)" for name, n in sorted(counts.items())]
    reasons = sorted({g.parquet_io_reason for g in result.groups if g.parquet_io_reason})
    return "\n".join(lines + [f"pyarrow because {why}" for why in reasons]) or "none"
