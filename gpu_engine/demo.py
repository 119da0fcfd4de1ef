"""``make demo``: the main job, for real, on generated data in an embedded SQLite catalog.

Builds an events table the way streaming writers leave it (many small appends, merge-on-read deletes:
deletion vectors on v3, position deletes on v2, and equality deletes), scans it, compacts it with the
binpack strategy (or ``--strategy sort``), scans it again, and reports what changed: files, delete
files, rows (which must be equal) and the time each step took. The warehouse goes to ``--warehouse``
(default: a fresh temporary directory, kept so you can look at it).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
from rich.console import Console
from rich.table import Table

from .backend import choose
from .catalog import load_catalog
from .table import Table as IcebergTable


def events(rows: int, seed: int = 7, start_id: int = 0) -> pa.Table:
    """Generated events: id, ts (3 days), user, amount, with ~1% nulls outside the id."""
    rng = np.random.default_rng(seed)
    mask = rng.random(rows) < 0.01
    base = np.datetime64("2026-11-20T00:00:00", "us").astype(np.int64)
    ts = base + rng.integers(0, 3 * 86_400_000_000, rows)
    return pa.table(
        {
            "id": pa.array(np.arange(start_id, start_id + rows, dtype=np.int64)),
            "ts": pa.array(ts, pa.timestamp("us", tz="UTC"), mask=mask),
            "user": pa.array([f"user-{u}" for u in rng.integers(0, 500, rows)], mask=mask),
            "amount": pa.array(rng.normal(100, 30, rows), mask=mask),
        }
    )


@dataclass(frozen=True)
class State:
    data_files: int
    delete_files: int
    rows: int
    scan_seconds: float


def state(table: IcebergTable, backend: str) -> tuple[State, pa.Table]:
    scan = table.scan(backend=backend)
    plan = scan.plan()
    start = time.perf_counter()
    rows = scan.to_arrow()
    seconds = time.perf_counter() - start
    deletes = {(d.path, d.content_offset) for t in plan.tasks for d in t.deletes}
    files = {t.file.path for t in plan.tasks}
    return State(len(files), len(deletes), rows.num_rows, seconds), rows


def build(warehouse: Path, version: int, appends: int, rows: int, console: Console) -> IcebergTable:
    catalog = load_catalog("demo", uri=f"sqlite:///{warehouse}/catalog.db", warehouse=warehouse.as_uri())
    if "demo" not in [ns[0] for ns in catalog.list_namespaces()]:
        catalog.create_namespace("demo")
    name = f"demo.events_v{version}_{int(time.time() * 1000)}"
    table = catalog.create_table(
        name,
        schema=events(1).schema,
        partition_spec=["bucket(4, user)"],
        properties={"format-version": str(version)},
    )
    start = time.perf_counter()
    for i in range(appends):
        table.append(events(rows, seed=i, start_id=i * rows))
    table.delete(f"id < {appends * rows // 20}")  # 5% of the rows: position deletes (v2) / DVs (v3)
    keys = pa.table({"user": pa.array([f"user-{u}" for u in range(0, 500, 50)])})
    table.delete_rows(keys, on=["user"])  # equality deletes: every row of 10 users
    console.print(
        f"built {name}: {appends} appends of {rows:,} rows, a 5% delete and an equality delete "
        f"in {time.perf_counter() - start:.1f} s"
    )
    return table


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--warehouse", type=Path, help="warehouse directory (default: a new temporary one)")
    parser.add_argument("--format-version", type=int, default=3, choices=[2, 3])
    parser.add_argument("--appends", type=int, default=40)
    parser.add_argument("--rows", type=int, default=5_000, help="rows per append")
    parser.add_argument("--strategy", default="binpack", choices=["binpack", "sort", "zorder"])
    parser.add_argument("--backend", default="auto", choices=["auto", "cpu", "cuda"])
    args = parser.parse_args(argv)
    console = Console()
    choice = choose(args.backend)
    console.print(f"backend {choice.name}: {choice.reason}")
    warehouse = args.warehouse or Path(tempfile.mkdtemp(prefix="gpu-engine-demo-"))
    warehouse.mkdir(parents=True, exist_ok=True)
    table = build(warehouse.resolve(), args.format_version, args.appends, args.rows, console)
    before, rows_before = state(table, choice.name)
    order = {"binpack": None, "sort": "user, ts DESC", "zorder": "user, amount"}[args.strategy]
    result = table.compact(args.strategy, sort_order=order, backend=choice.name)
    console.print(result.plan.explain(), highlight=False)
    after, rows_after = state(table, choice.name)
    same = rows_before.sort_by("id").equals(rows_after.sort_by("id"))
    report(before, after, result.seconds, result.added_bytes, console)
    console.print(f"rows identical before and after: {'yes' if same else 'NO'}; warehouse: {warehouse}")
    if not same:
        raise SystemExit("compaction changed the table's rows")


def report(before: State, after: State, seconds: float, added_bytes: int, console: Console) -> None:
    out = Table(title="compaction")
    out.add_column("")
    out.add_column("before", justify="right")
    out.add_column("after", justify="right")
    out.add_row("data files", f"{before.data_files:,}", f"{after.data_files:,}")
    out.add_row("delete files applied", f"{before.delete_files:,}", f"{after.delete_files:,}")
    out.add_row("rows", f"{before.rows:,}", f"{after.rows:,}")
    out.add_row("full scan (s)", f"{before.scan_seconds:.3f}", f"{after.scan_seconds:.3f}")
    out.add_row("compaction (s)", "", f"{seconds:.3f} ({added_bytes / 1e6:.1f} MB written)")
    console.print(out)


if __name__ == "__main__":
    main()
