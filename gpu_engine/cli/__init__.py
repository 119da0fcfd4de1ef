"""The ``gpu-engine`` command (also ``python -m gpu_engine.cli``): plan, scan, changes, create, append,
overwrite, upsert, delete, alter, compact, snapshots, inspect, and maintenance (expire-snapshots,
remove-orphan-files, rewrite-position-deletes, convert-equality-deletes, rewrite-manifests)."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Sequence

from rich.console import Console
from rich.markup import escape

from ..errors import GpuEngineError
from . import alter, changes, compact, inspect, maintain, plan, scan, snapshots, write


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gpu-engine", description="GPU-accelerated Iceberg scans and compaction"
    )
    sub = parser.add_subparsers(dest="command", required=True)
    plan.add_parser(sub)
    scan.add_parser(sub)
    changes.add_parser(sub)
    write.add_parsers(sub)
    alter.add_parser(sub)
    compact.add_parser(sub)
    maintain.add_parsers(sub)
    snapshots.add_parser(sub)
    inspect.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    console = Console(stderr=False)
    try:
        code: int = args.run(args, console)
    except GpuEngineError as exc:
        message = f"[red]error:[/red] {escape(str(exc))}"
        Console(stderr=True, soft_wrap=True).print(message, highlight=False)
        return 2
    except BrokenPipeError:  # the reader of stdout went away (`| head`): no traceback, as a shell tool
        with contextlib.suppress(OSError, ValueError):  # the flush at exit must not fail again
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except KeyboardInterrupt:  # Ctrl-C: the command's own clean-up has run; no traceback, as a shell tool
        Console(stderr=True, soft_wrap=True).print(f"interrupted: {escape(args.command)}", highlight=False)
        return 130
    except OSError as exc:  # a full disk, a permission denied: the operation and the file, no traceback
        message = f"[red]error:[/red] {escape(args.command)}: {escape(str(exc))}"
        Console(stderr=True, soft_wrap=True).print(message, highlight=False)
        return 2
    return code
