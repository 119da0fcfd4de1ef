"""``gpu-engine snapshots TABLE``: list a table's snapshots and refs, and manage branches and tags.

Without options it lists; with any of ``--create-branch NAME[=ID]``, ``--create-tag NAME[=ID]``,
``--remove-branch``, ``--remove-tag``, ``--rollback-to ID``, ``--set-current-snapshot ID``,
``--fast-forward BRANCH=REF`` it commits them together (see :mod:`gpu_engine.commit.refs_update`; order:
creations, moves, removals) and lists the result.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
from typing import Any

from rich.console import Console
from rich.table import Table as RichTable

from ..commit.refs_update import RefsUpdate
from ..errors import GpuEngineError
from ..iceberg.metadata import TableMetadata
from .common import open_table, table_options


def add_parser(sub: Any) -> None:
    p = sub.add_parser("snapshots", help="list snapshots and refs; create, move and remove branches and tags")
    table_options(p)
    many: dict[str, Any] = {"action": "append", "default": []}
    p.add_argument("--create-branch", **many, metavar="NAME[=ID]", help="at snapshot ID (default: current)")
    p.add_argument("--create-tag", **many, metavar="NAME[=ID]", help="at snapshot ID (default: current)")
    p.add_argument("--rollback-to", type=int, metavar="ID", help="move main back to one of its ancestors")
    p.add_argument("--set-current-snapshot", type=int, metavar="ID", help="move main to any snapshot")
    p.add_argument("--fast-forward", **many, metavar="BRANCH=REF", help="move a branch to a descendant ref")
    p.add_argument("--remove-branch", **many, metavar="NAME")
    p.add_argument("--remove-tag", **many, metavar="NAME")
    p.set_defaults(run=cmd_snapshots)


def cmd_snapshots(args: argparse.Namespace, console: Console) -> int:
    table = open_table(args)
    update = table.manage_snapshots()
    changes = _changes(args, update)
    if changes:
        update.commit()
    md = table.metadata
    listing = {"metadata_location": table.metadata_location, **_listing(md)}
    if args.json:
        print(json.dumps(listing, indent=2))
        return 0
    _print(console, md)
    return 0


def _changes(args: argparse.Namespace, update: RefsUpdate) -> int:
    count = 0
    for option, create in (("--create-branch", update.create_branch), ("--create-tag", update.create_tag)):
        for text in getattr(args, option[2:].replace("-", "_")):
            name, _, at = text.partition("=")
            create(name.strip(), _snapshot_id(at, option, text) if at.strip() else None)
            count += 1
    if args.rollback_to is not None:
        update.rollback_to(args.rollback_to)
        count += 1
    if args.set_current_snapshot is not None:
        update.set_current_snapshot(args.set_current_snapshot)
        count += 1
    for text in args.fast_forward:
        branch, sep, to = text.partition("=")
        if not sep or not branch.strip() or not to.strip():
            raise GpuEngineError(f"--fast-forward {text!r}: expected BRANCH=REF")
        update.fast_forward(branch.strip(), to.strip())
        count += 1
    for name in args.remove_branch:
        update.remove_branch(name)
        count += 1
    for name in args.remove_tag:
        update.remove_tag(name)
        count += 1
    return count


def _snapshot_id(text: str, option: str, whole: str) -> int:
    try:
        return int(text.strip())
    except ValueError:
        raise GpuEngineError(f"{option} {whole!r}: expected NAME or NAME=SNAPSHOT_ID") from None


def _listing(md: TableMetadata) -> dict[str, Any]:
    return {
        "current_snapshot_id": md.current_snapshot_id,
        "refs": {
            name: {"type": ref.type, "snapshot_id": ref.snapshot_id}
            | {
                k: v
                for k, v in (
                    ("min_snapshots_to_keep", ref.min_snapshots_to_keep),
                    ("max_snapshot_age_ms", ref.max_snapshot_age_ms),
                    ("max_ref_age_ms", ref.max_ref_age_ms),
                )
                if v is not None
            }
            for name, ref in sorted(md.refs.items())
        },
        "snapshots": [
            {
                "snapshot_id": s.snapshot_id,
                "parent_id": s.parent_snapshot_id,
                "timestamp_ms": s.timestamp_ms,
                "operation": (s.summary or {}).get("operation"),
                "sequence_number": s.sequence_number,
                "added_records": _count((s.summary or {}).get("added-records")),
                "deleted_records": _count((s.summary or {}).get("deleted-records")),
                "total_records": _count((s.summary or {}).get("total-records")),
            }
            for s in sorted(md.snapshots, key=lambda s: (s.timestamp_ms, s.sequence_number or 0))
        ],
    }


def _count(value: str | None) -> int | None:
    """A summary count as a JSON number (the summary holds strings); None when absent or not a count."""
    return int(value) if value is not None and value.strip().isascii() and value.strip().isdigit() else None


def _print(console: Console, md: TableMetadata) -> None:
    listing = _listing(md)
    by_snapshot: dict[int, list[str]] = {}
    for name, ref in listing["refs"].items():
        by_snapshot.setdefault(ref["snapshot_id"], []).append(f"{name} ({ref['type']})")
    out = RichTable(title=f"snapshots (current: {md.current_snapshot_id})")
    for column in ("snapshot id", "parent"):  # whole on any terminal width: --snapshot takes them
        out.add_column(column, no_wrap=True, min_width=19)
    for column in ("committed (UTC)", "operation", "records", "refs"):
        out.add_column(column)
    for s in listing["snapshots"]:
        when = dt.datetime.fromtimestamp(s["timestamp_ms"] / 1000, dt.UTC).strftime("%Y-%m-%d %H:%M:%S")
        out.add_row(
            str(s["snapshot_id"]),
            str(s["parent_id"] or ""),
            when,
            str(s["operation"] or ""),
            "" if s["total_records"] is None else str(s["total_records"]),
            ", ".join(by_snapshot.get(s["snapshot_id"], [])),
        )
    console.print(out)
