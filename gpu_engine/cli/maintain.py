"""Table maintenance from the command line, as scheduled jobs run it (Iceberg's Spark procedures by name):

- ``gpu-engine expire-snapshots TABLE [--older-than WHEN] [--retain-last N] [--snapshot-id ID ...]``
- ``gpu-engine remove-orphan-files TABLE [--older-than WHEN] [--dry-run]``
- ``gpu-engine rewrite-position-deletes TABLE [--option K=V ...] [--branch B]``
- ``gpu-engine convert-equality-deletes TABLE [--branch B] [--backend ...]``
- ``gpu-engine rewrite-manifests TABLE [--spec-id N] [--target-size-bytes N] [--branch B]``

``WHEN`` is an ISO-8601 time (``2026-11-01``, ``2026-11-01T12:00:00+00:00``; UTC when no offset is given),
milliseconds since the epoch, or an age: ``7d``, ``12h``, ``30m`` before now. Each prints what it did
(``--json``: as JSON), see :mod:`gpu_engine.commit.expire`, :mod:`.orphans`, :mod:`.delete_rewrite` and
:mod:`.manifest_rewrite`.
"""

from __future__ import annotations

import argparse
import datetime as dt
import re
from typing import Any

from rich.console import Console

from ..commit.delete_rewrite import DeleteRewriteResult
from ..commit.expire import to_ms
from ..errors import GpuEngineError
from .common import open_table, table_options
from .compact import options
from .write import report

_AGE = re.compile(r"^\s*(\d+)\s*([dhm])\s*$")
_UNITS = {"d": "days", "h": "hours", "m": "minutes"}


def add_parsers(sub: Any) -> None:
    when = {"metavar": "WHEN", "help": "ISO time, ms since the epoch, or an age (7d, 12h, 30m)"}
    p = sub.add_parser("expire-snapshots", help="expire old snapshots and delete the files only they reached")
    table_options(p)
    p.add_argument("--older-than", **when)
    p.add_argument("--retain-last", type=int, metavar="N", help="keep at least N snapshots per branch")
    p.add_argument(
        "--snapshot-id", type=int, action="append", default=[], metavar="ID",
        help="also expire this snapshot, whatever its age (repeatable)",
    )  # fmt: skip
    p.set_defaults(run=cmd_expire)

    p = sub.add_parser("remove-orphan-files", help="delete files under the table no snapshot reaches")
    table_options(p)
    p.add_argument("--older-than", **{**when, "help": when["help"] + " (default: 3 days ago)"})
    p.add_argument("--dry-run", action="store_true", help="list the orphans, delete nothing")
    p.set_defaults(run=cmd_orphans)

    p = sub.add_parser("rewrite-position-deletes", help="compact position deletes (v3: into DVs)")
    table_options(p)
    p.add_argument(
        "--option", action="append", default=[], metavar="K=V", help="min-input-files, rewrite-all"
    )
    p.add_argument("--branch", default="main")
    p.set_defaults(run=cmd_rewrite_deletes)

    p = sub.add_parser("convert-equality-deletes", help="turn equality deletes into DVs / position deletes")
    table_options(p)
    p.add_argument("--branch", default="main")
    p.add_argument("--backend", default="auto", choices=["auto", "cpu", "cuda"], help="where kernels run")
    p.set_defaults(run=cmd_convert)

    p = sub.add_parser("rewrite-manifests", help="rewrite manifests into target-sized ones by partition")
    table_options(p)
    p.add_argument("--spec-id", type=int, metavar="N", help="only the manifests of this partition spec")
    p.add_argument(
        "--target-size-bytes", type=int, metavar="N", help="default: commit.manifest.target-size-bytes"
    )
    p.add_argument("--branch", default="main")
    p.set_defaults(run=cmd_rewrite_manifests)


def parse_when(text: str, option: str = "--older-than") -> int:
    """``text`` (see the module doc) as milliseconds since the epoch."""
    age = _AGE.match(text)
    try:
        if age:
            delta = dt.timedelta(**{_UNITS[age.group(2)]: int(age.group(1))})
            return to_ms(dt.datetime.now(dt.UTC) - delta)
        if text.strip().isdigit():
            if int(text) >= 1 << 63:
                raise OverflowError
            return int(text)
        moment = dt.datetime.fromisoformat(text.strip())
    except OverflowError:
        raise GpuEngineError(f"{option} {text!r}: beyond the times a snapshot can have") from None
    except ValueError:
        raise GpuEngineError(
            f"{option} {text!r}: expected an ISO time, milliseconds since the epoch, or an age like 7d"
        ) from None
    return to_ms(moment)  # naive: UTC


def cmd_expire(args: argparse.Namespace, console: Console) -> int:
    if args.retain_last is not None and args.retain_last < 1:
        raise GpuEngineError(f"--retain-last {args.retain_last}: expected 1 or more")
    older = None if args.older_than is None else parse_when(args.older_than)
    table = open_table(args)
    result = table.expire_snapshots(
        older_than=older, retain_last=args.retain_last, snapshot_ids=args.snapshot_id
    )
    summary = {
        "expired_snapshots": len(result.expired_snapshot_ids),
        "removed_refs": list(result.removed_refs),
        "deleted_data_files": len(result.deleted_data_files),
        "deleted_delete_files": len(result.deleted_delete_files),
        "deleted_manifests": len(result.deleted_manifests),
        "deleted_manifest_lists": len(result.deleted_manifest_lists),
        "deleted_statistics_files": len(result.deleted_statistics_files),
        "undeleted": list(result.undeleted),
        "metadata_location": result.metadata_location,
    }
    return report(args, console, f"expired snapshots of {args.table}", summary)


def cmd_orphans(args: argparse.Namespace, console: Console) -> int:
    older = None if args.older_than is None else parse_when(args.older_than)
    table = open_table(args)
    orphans = table.remove_orphan_files(older_than=older, dry_run=args.dry_run)
    verb = "found" if args.dry_run else "removed"
    summary = {f"orphans_{verb}": len(orphans), "files": orphans, "dry_run": args.dry_run}
    return report(args, console, f"orphan files of {args.table}", summary)


def cmd_rewrite_deletes(args: argparse.Namespace, console: Console) -> int:
    table = open_table(args)
    result = table.rewrite_position_deletes(options=options(args.option), branch=args.branch)
    return report(args, console, f"rewrote position deletes of {args.table}", _delete_summary(result))


def cmd_convert(args: argparse.Namespace, console: Console) -> int:
    table = open_table(args)
    result = table.convert_equality_deletes(branch=args.branch, backend=args.backend)
    return report(args, console, f"converted equality deletes of {args.table}", _delete_summary(result))


def cmd_rewrite_manifests(args: argparse.Namespace, console: Console) -> int:
    if args.target_size_bytes is not None and args.target_size_bytes < 1:
        raise GpuEngineError(f"--target-size-bytes {args.target_size_bytes}: expected 1 or more")
    table = open_table(args)
    result = table.rewrite_manifests(
        spec_id=args.spec_id, target_size_bytes=args.target_size_bytes, branch=args.branch
    )
    summary = {
        "rewritten_manifests": len(result.rewritten_manifests),
        "added_manifests": len(result.added_manifests),
        "entries": result.entries,
        "snapshot_id": None if result.commit is None else result.commit.snapshot_id,
        "message": "nothing to do" if result.commit is None else None,
    }
    return report(args, console, f"rewrote manifests of {args.table}", summary)


def _delete_summary(result: DeleteRewriteResult) -> dict[str, Any]:
    return {
        "removed_delete_files": len(result.removed_delete_files),
        "added_delete_files": len(result.added_delete_files),
        "data_files": result.data_files,
        "dangling_removed": result.dangling_removed,
        "snapshot_id": None if result.commit is None else result.commit.snapshot_id,
        "message": "nothing to do" if result.commit is None else None,
    }
