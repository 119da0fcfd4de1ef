"""Writes: gpu-engine's append and merge-on-read delete vs PyIceberg's append and copy-on-write delete.

    python bench/write.py [--rows 5000000] [--days 30] [--delete-fraction 0.05] [--repeat 3]
                          [--specs unpartitioned day] [--quiet-wait 900] [--work-dir DIR]
                          [--out bench/results]

One Arrow table (``id`` long: a seeded permutation of 0..rows-1, ``ts`` timestamp spread over ``--days`` days,
``value`` double, ``name`` string, ``category`` string) is built once. For each layout (unpartitioned, and
partitioned by ``day(ts)``) and each peer, ``--repeat`` times: a fresh SQL catalog (SQLite) and warehouse,
a fresh v2 table, then

* ``append``: ``tbl.append(arrow)`` (timed), and
* ``delete``: ``tbl.delete("id < k")`` (timed), k = rows * delete-fraction. The ids are a permutation, so
  the deleted rows are spread over every data file: gpu-engine writes position delete files (merge-on-read,
  the data files stay), PyIceberg 0.12 rewrites every data file it touches (copy-on-write, its default).

After the timed calls, outside the timing, every repetition is checked: gpu-engine's table read with
gpu-engine's scan, PyIceberg's with PyIceberg's, must hold exactly the surviving rows (count, and the sorted
ids equal ``k..rows-1``). A peer that raises is "unsupported", one with other rows a "wrong result"; neither
gets a rate. One untimed warm-up (a small append and delete per peer) runs first, so JIT compilation and
imports stay out of the timings. Both peers run in this one process, one after the other.

Before measuring, the driver waits (up to ``--quiet-wait`` s) for a quiet machine (1-minute load average
below 0.8 and other processes using under 0.2 cores); the load is recorded either way.

Writes ``write-<device-slug>.json`` and ``.png`` under ``--out``.
"""

from __future__ import annotations

import argparse
import gc
import os
import shutil
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parents[1])]

import _report as rep  # noqa: E402

PEER_PACKAGES = ("pyiceberg", "pyiceberg-core", "sqlalchemy", "matplotlib")
OURS, PYICEBERG = "gpu-engine-cpu", "pyiceberg"
PEERS = (OURS, PYICEBERG)
LABELS = {OURS: "gpu-engine (cpu)", PYICEBERG: "PyIceberg"}
COLORS = {OURS: "#2a7ab9", PYICEBERG: "#999999"}
SPECS: dict[str, list[str]] = {"unpartitioned": [], "day": ["day(ts)"]}
SPEC_LABELS = {"unpartitioned": "unpartitioned", "day": "partitioned by day(ts)"}
OPS = ("append", "delete")
LOAD_BELOW = 0.8
QUIET_CORES = 0.2
DEFAULT_SEED = 20_260_523
CONTENTION_NOTE = rep.contention_note("while a peer's timed runs ran", "this process")


@dataclass(frozen=True)
class Target:
    key: str
    text: str
    op: str
    speedup: float


TARGETS = (
    Target(
        "cpu-append",
        "append throughput on CPU >= 1.0x PyIceberg's append of the same Arrow data",
        "append",
        1.0,
    ),
    Target(
        "cpu-delete",
        "delete of 5% of rows, merge-on-read, >= 10x PyIceberg's copy-on-write delete",
        "delete",
        10.0,
    ),
)


# -- data ------------------------------------------------------------------------------------------------


def make_data(rows: int, days: int, seed: int) -> Any:
    """The Arrow table every peer appends (no nulls: PyIceberg and gpu-engine then agree on the schema)."""
    import numpy as np
    import pyarrow as pa

    rng = np.random.default_rng(seed)
    ids = rng.permutation(rows).astype(np.int64)
    start_us = 1_767_225_600 * 1_000_000  # 2026-01-01T00:00:00
    ts = np.sort(rng.integers(0, days * 86_400 * 1_000_000, rows)) + start_us
    value = rng.standard_normal(rows)
    names = np.array([f"name-{i:05d}" for i in range(10_000)], dtype=object)
    categories = np.array(
        ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta"], dtype=object
    )
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "ts": pa.array(ts, pa.timestamp("us")),
            "value": pa.array(value, pa.float64()),
            "name": pa.array(names[rng.integers(0, len(names), rows)], pa.string()),
            "category": pa.array(categories[rng.integers(0, len(categories), rows)], pa.string()),
        }
    )


# -- the peers -----------------------------------------------------------------------------------------------


class Peer:
    """One peer's fresh catalog and table in ``root``: ``append``, ``delete``, ``ids`` (read back)."""

    def __init__(self, peer: str, root: Path, schema: Any, spec: list[str]) -> None:
        self.peer = peer
        root.mkdir(parents=True, exist_ok=True)
        uri, warehouse = f"sqlite:///{root / 'catalog.db'}", f"file://{root / 'warehouse'}"
        (root / "warehouse").mkdir(exist_ok=True)
        if peer == OURS:
            import gpu_engine as ge

            cat = ge.load_catalog("bench", uri=uri, warehouse=warehouse)
            cat.create_namespace("db")
            self.table: Any = cat.create_table(
                "db.t", schema=schema, partition_spec=spec, properties={"format-version": "2"}
            )
        else:
            from pyiceberg.catalog.sql import SqlCatalog
            from pyiceberg.transforms import DayTransform

            sql = SqlCatalog("bench", uri=uri, warehouse=warehouse)
            sql.create_namespace("db")
            tbl = sql.create_table("db.t", schema=schema, properties={"format-version": "2"})
            if spec:
                assert spec == ["day(ts)"], spec
                with tbl.update_spec() as update:
                    update.add_field("ts", DayTransform(), "ts_day")
            self.table = tbl

    def append(self, data: Any) -> None:
        if self.peer == OURS:
            self.table.append(data, backend="cpu")
        else:
            self.table.append(data)

    def delete(self, where: str) -> None:
        if self.peer == OURS:
            self.result = self.table.delete(where, backend="cpu")
        else:
            self.table.delete(where)

    def delete_summary(self) -> dict[str, Any]:
        """What the delete wrote: files added (data or delete files) and data files removed."""
        if self.peer == OURS:
            names = {0: "data", 1: "position-deletes", 2: "equality-deletes"}
            kinds = [names.get(int(f.content), str(f.content)) for f in self.result.added]
            return {
                "added_files": len(self.result.added),
                "added_kinds": sorted(set(kinds)),
                "removed_data_files": len(self.result.removed_data_files),
            }
        summary = self.table.current_snapshot().summary
        keys = ("added-data-files", "deleted-data-files", "added-delete-files", "added-position-delete-files")
        return {k: summary.get(k) for k in keys}

    def ids(self) -> Any:
        """The table's ``id`` column, read with the peer's own scan, sorted."""
        import pyarrow.compute as pc

        if self.peer == OURS:
            self.table.refresh()
            col = self.table.scan(backend="cpu").to_arrow().column("id")
        else:
            col = self.table.refresh().scan().to_arrow().column("id")
        return pc.sort_indices(col), col


def check(peer: Peer, rows: int, cut: int) -> dict[str, Any]:
    """The surviving rows must be ids ``cut..rows-1``, each exactly once."""
    import numpy as np

    order, col = peer.ids()
    got = np.asarray(col.take(order).to_numpy())
    if len(got) != rows - cut:
        return {"same_rows": False, "why": f"{len(got)} rows, expected {rows - cut}", "rows": len(got)}
    if not np.array_equal(got, np.arange(cut, rows, dtype=np.int64)):
        return {"same_rows": False, "why": "sorted ids differ from the surviving ids", "rows": len(got)}
    return {"same_rows": True, "why": None, "rows": len(got)}


def timed(fn: Callable[[], object]) -> float:
    gc.collect()
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def run_peer(
    peer: str, spec: str, data: Any, schema: Any, where: str, cut: int, args: argparse.Namespace, work: Path
) -> dict[str, Any]:
    """``repeat`` x (fresh table, timed append, timed delete, check); per op: runs, best, median."""
    runs: dict[str, list[float]] = {op: [] for op in OPS}
    checks: list[dict[str, Any]] = []
    watch = rep.CpuWatch.start()
    load = list(os.getloadavg())
    try:
        for i in range(args.repeat):
            root = work / f"{peer}-{spec}-{i}"
            p = Peer(peer, root, schema, SPECS[spec])
            runs["append"].append(timed(lambda p=p: p.append(data)))  # type: ignore[misc]
            runs["delete"].append(timed(lambda p=p: p.delete(where)))  # type: ignore[misc]
            checks.append(check(p, data.num_rows, cut))
            files = sum(1 for f in (root / "warehouse").rglob("*") if f.is_file())
            checks[-1]["files_in_warehouse"] = files
            checks[-1]["delete_wrote"] = p.delete_summary()
            del p
            shutil.rmtree(root, ignore_errors=True)
    except Exception as exc:
        return {"status": "unsupported", "reason": rep.first_line(exc), "loadavg_at_start": load}
    out: dict[str, Any] = {"loadavg_at_start": load, "others_busy_cores": watch.others_busy_cores()}
    out["checks"] = checks
    bad = [c for c in checks if not c["same_rows"]]
    if bad:
        return out | {"status": "wrong result", "why": bad[0]["why"]}
    out["status"] = "ok"
    mb = data.nbytes / 1e6
    for op in OPS:
        t = rep.Timing(tuple(runs[op]))
        rows = data.num_rows if op == "append" else cut
        out[op] = t.to_json() | {
            "rows_per_s": rows / t.best_s,
            "rows_per_s_median": rows / t.median_s,
            "arrow_mb_per_s": mb / t.best_s,
        }
    return out


def warm_up(schema: Any, work: Path) -> dict[str, float]:
    """One small append + delete per peer and layout: imports and JIT compilation, untimed in the results."""
    small = make_data(20_000, 3, 1)
    out: dict[str, float] = {}
    for peer in PEERS:
        start = time.perf_counter()
        for spec in SPECS:
            p = Peer(peer, work / f"warm-{peer}-{spec}", schema, SPECS[spec])
            p.append(small)
            p.delete("id < 1000")
            assert check(p, 20_000, 1000)["same_rows"], (peer, spec)
        out[peer] = time.perf_counter() - start
        shutil.rmtree(work / f"warm-{peer}-unpartitioned", ignore_errors=True)
        shutil.rmtree(work / f"warm-{peer}-day", ignore_errors=True)
    return out


def wait_quiet(max_wait_s: float) -> dict[str, Any]:
    start = time.perf_counter()
    while os.getloadavg()[0] >= LOAD_BELOW and time.perf_counter() - start < max_wait_s:
        time.sleep(5.0)
    remaining = max(0.0, max_wait_s - (time.perf_counter() - start))
    rep.wait_for_quiet(remaining, below_cores=QUIET_CORES)
    load = list(os.getloadavg())
    return {
        "waited_s": time.perf_counter() - start,
        "max_wait_s": max_wait_s,
        "loadavg_before_measuring": load,
        "quiet": load[0] < LOAD_BELOW,
        "rule": f"1-minute load average < {LOAD_BELOW} and other processes < {QUIET_CORES} cores",
    }


# -- results ---------------------------------------------------------------------------------------------


def speedups(results: dict[str, dict[str, dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    """Per layout and op: PyIceberg time / gpu-engine time (best and median), where both are ok."""
    out: dict[str, dict[str, Any]] = {}
    for spec, per in results.items():
        mine, theirs = per.get(OURS, {}), per.get(PYICEBERG, {})
        for op in OPS:
            if mine.get("status") == "ok" and theirs.get("status") == "ok":
                out.setdefault(spec, {})[op] = {
                    "best": theirs[op]["best_s"] / mine[op]["best_s"],
                    "median": theirs[op]["median_s"] / mine[op]["median_s"],
                }
            else:
                out.setdefault(spec, {})[op] = None
    return out


def evaluate_targets(ratios: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for t in TARGETS:
        per = {spec: (r[t.op]["best"] if r.get(t.op) else None) for spec, r in ratios.items()}
        met = rep.overall_met(None if v is None else v >= t.speedup for v in per.values())
        shown = ", ".join(f"{k} {v:.2f}x" if v is not None else f"{k} n/a" for k, v in per.items())
        fields = {"threshold": t.speedup, "speedup_best": per}
        out.append(rep.target_result(t.key, t.text, met, shown, **fields))
    return out


def chart(path: Path, payload: dict[str, Any], slug: str) -> Path:
    results = payload["results"]
    params = payload["parameters"]
    specs = list(results)
    cats = [(spec, op) for op in OPS for spec in specs]
    categories = [
        (f"append {params['rows']:,} rows" if op == "append" else f"delete {params['deleted_rows']:,} rows")
        + f", {SPEC_LABELS[spec]}"
        for spec, op in cats
    ]
    notes = [
        f"best of {params['repeat']} (fresh table each); Arrow data {params['arrow_bytes'] / 1e6:,.0f} MB; "
        "ours: merge-on-read position deletes, PyIceberg: copy-on-write rewrite",
        "delete bars: deleted rows per second",
    ]
    for spec, per in payload["speedups"].items():
        shown = [f"{op} {v['best']:.2f}x" for op, v in per.items() if v]
        if shown:
            notes.append(
                f"{SPEC_LABELS[spec]}: gpu-engine / PyIceberg (time ratio, best): " + ", ".join(shown)
            )
    for spec, per in results.items():
        for peer, r in per.items():
            if r.get("status") != "ok":
                notes.append(
                    f"{spec}: {LABELS[peer]} {r.get('status')}: {(r.get('reason') or r.get('why'))}"[:200]
                )
    notes += rep.target_notes(payload["targets"])
    series = [
        rep.Series(
            LABELS[p],
            [
                results[s][p][op]["rows_per_s"] if results[s].get(p, {}).get("status") == "ok" else None
                for s, op in cats
            ],
            COLORS[p],
        )
        for p in PEERS
    ]
    return rep.grouped_barh(
        path,
        title=f"Append and 5% delete: gpu-engine vs PyIceberg ({slug})",
        categories=categories,
        series=series,
        xlabel="rows per second (best run; higher is better)",
        notes=notes,
    )


def main() -> int:
    p = rep.arg_parser(__doc__)
    p.add_argument("--rows", type=int, default=5_000_000)
    p.add_argument("--days", type=int, default=30)
    p.add_argument("--delete-fraction", type=float, default=0.05)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--seed", type=int, default=DEFAULT_SEED)
    p.add_argument("--specs", nargs="+", choices=list(SPECS), default=list(SPECS))
    p.add_argument("--quiet-wait", type=float, default=900.0, help="max seconds to wait for a quiet machine")
    p.add_argument("--work-dir", default=None, help="where the tables are written (default: a temp dir)")
    p.add_argument("--out", default=str(rep.DEFAULT_OUT))
    args = p.parse_args()

    slug, device = rep.device_info()
    data = make_data(args.rows, args.days, args.seed)
    schema = data.schema
    cut = int(args.rows * args.delete_fraction)
    where = f"id < {cut}"
    with rep.work_dir("write-bench-", args.work_dir) as work:
        warm = warm_up(schema, work)
        quiet = wait_quiet(args.quiet_wait)
        print(f"load average {quiet['loadavg_before_measuring']} after {quiet['waited_s']:.0f} s", flush=True)
        results: dict[str, dict[str, dict[str, Any]]] = {}
        for spec in args.specs:
            for peer in PEERS:
                r = run_peer(peer, spec, data, schema, where, cut, args, work)
                results.setdefault(spec, {})[peer] = r
                if r["status"] == "ok":
                    for op in OPS:
                        m = r[op]
                        print(
                            f"  {spec:13} {peer:15} {op:6} best {m['best_s']:7.3f} s  median "
                            f"{m['median_s']:7.3f} s  {m['rows_per_s'] / 1e6:7.2f} M rows/s  "
                            f"{m['arrow_mb_per_s']:8.1f} MB/s  others busy {r['others_busy_cores'] or 0:.2f}",
                            flush=True,
                        )
                else:
                    print(
                        f"  {spec:13} {peer:15} {r['status']}: {r.get('reason') or r.get('why')}", flush=True
                    )

    ratios = speedups(results)
    targets = evaluate_targets(ratios)
    failures = [
        f"{spec}: {peer} {r['status']}: {r.get('reason') or r.get('why')}"
        for spec, per in results.items()
        for peer, r in per.items()
        if r["status"] != "ok"
    ]
    payload: dict[str, Any] = {
        **rep.header("write", PEER_PACKAGES, device, slug),
        "parameters": {
            "rows": args.rows,
            "days": args.days,
            "delete_fraction": args.delete_fraction,
            "deleted_rows": cut,
            "delete_filter": where,
            "repeat": args.repeat,
            "seed": args.seed,
            "specs": {s: SPECS[s] for s in args.specs},
            "format_version": 2,
            "arrow_bytes": data.nbytes,
            "arrow_schema": str(schema).splitlines(),
        },
        "quiet": quiet,
        "warm_up_s": warm,
        "method": {
            "call": {
                OURS: "tbl.append(arrow, backend='cpu'); tbl.delete(filter, backend='cpu') (merge-on-read: "
                "position delete files); read back with tbl.scan(backend='cpu').to_arrow()",
                PYICEBERG: "tbl.append(arrow); tbl.delete(filter) (copy-on-write: data files rewritten); "
                "read back with tbl.scan().to_arrow()",
            },
            "process": "both peers in one process, after one untimed warm-up per peer (small append + delete "
            "per layout); per layout and peer, `repeat` x: fresh SQL catalog (SQLite) + warehouse on local "
            "disk, fresh v2 table, timed append, timed delete, untimed check",
            "rates": "append: rows / best_s, arrow_mb_per_s = Arrow table nbytes / 1e6 / best_s; delete: "
            "deleted rows / best_s (arrow_mb_per_s: the whole table's nbytes / best_s)",
            "checks": "every repetition: the table read with the peer's own scan holds exactly ids "
            "cut..rows-1 (count + sorted ids)",
            "speedup": "PyIceberg time / gpu-engine time (best; median alongside)",
            "ids": "a seeded permutation, so the deleted 5% is spread over every data file",
        },
        "results": results,
        "speedups": ratios,
        "targets": targets,
        "failures": failures,
        "notes": [CONTENTION_NOTE],
    }
    out_dir = Path(args.out)
    return rep.finish(
        out_dir, f"write-{slug}", payload, lambda path: chart(path, payload, slug), failures, targets
    )


if __name__ == "__main__":
    sys.exit(main())
