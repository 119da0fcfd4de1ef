"""``python -m gpu_engine.spark compact|scan TABLE ...``: the Spark entry points; ``spark-submit`` runs
this file as its application (``spark-submit .../gpu_engine/spark/__main__.py compact TABLE ...``).

``compact`` takes the options of ``gpu-engine compact`` (it is ``gpu-engine compact --spark``);
``scan`` prints the row count and the first rows, or writes the rows as Parquet with ``-o DIR`` (by
Spark, one file per task).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from rich.console import Console
from rich.markup import escape

# absolute imports: spark-submit runs this file as a script (path/to/gpu_engine/spark/__main__.py)
from gpu_engine.cli import compact as compact_cli
from gpu_engine.cli.common import column_list, open_table, table_options
from gpu_engine.errors import GpuEngineError, InvalidOption
from gpu_engine.spark.runner import first_line

T = TypeVar("T")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m gpu_engine.spark", description="gpu-engine on Spark: compact and scan Iceberg tables"
    )
    sub = parser.add_subparsers(dest="command", required=True)
    compact_cli.add_parser(sub)
    sub.choices["compact"].set_defaults(spark=True)
    p = sub.add_parser("scan", help="scan a table into a Spark DataFrame (deletes applied on executors)")
    table_options(p)
    p.add_argument("--filter", default="true", help='row filter, e.g. "id < 10"')
    p.add_argument("--columns", help="comma-separated columns (metadata columns such as _file allowed)")
    p.add_argument("--backend", default="auto", choices=["auto", "cpu", "cuda"])
    p.add_argument("--from-snapshot", type=int, help="only the rows appended after this snapshot")
    p.add_argument("--master", help="Spark master URL (default: the session's, e.g. from spark-submit)")
    p.add_argument("-o", "--output", metavar="DIR", help="write the rows as Parquet files into DIR")
    p.set_defaults(run=cmd_scan)
    return parser


def cmd_scan(args: argparse.Namespace, console: Console) -> int:
    from gpu_engine.spark import scan, session

    table = open_table(args)
    columns = column_list(args.columns, "--columns")
    if args.output and os.path.exists(args.output):  # Spark's own error names a mode with no option here
        raise InvalidOption(f"-o {args.output}: already exists; name a new directory")
    frame: Any = scan(
        session(args.master),
        table,
        filter=args.filter,
        columns=columns,
        backend=args.backend,
        from_snapshot_id=args.from_snapshot,
    )
    if args.output:
        _spark_action(lambda: frame.write.mode("errorifexists").parquet(args.output), f"-o {args.output}")
        if args.json:
            print(json.dumps({"output": args.output}))
        else:
            console.print(f"wrote {args.output}")
        return 0
    rows: int = _spark_action(frame.count, "scan")
    if args.json:
        print(json.dumps({"rows": rows}))
        return 0
    console.print(f"{rows:,} rows")
    _spark_action(lambda: frame.show(20, truncate=False), "scan")
    return 0


def _spark_action(action: Callable[[], T], what: str) -> T:
    """``action``'s result; a Spark failure (analysis, an executor's exception) as a GpuEngineError naming
    ``what`` and the exception the task raised, not Spark's wrapped traceback."""
    try:
        return action()
    except GpuEngineError:
        raise
    except Exception as exc:  # pyspark's AnalysisException, Py4JJavaError, PythonException
        raise GpuEngineError(f"{what}: {first_line(exc)}") from None


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    console = Console()
    try:
        code: int = args.run(args, console)
    except GpuEngineError as exc:
        Console(stderr=True, soft_wrap=True).print(f"[red]error:[/red] {escape(str(exc))}", highlight=False)
        return 2
    return code


if __name__ == "__main__":
    sys.exit(main())
