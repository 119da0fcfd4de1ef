"""Row updates: gpu-engine's upsert and overwrite vs PyIceberg's ``upsert`` and ``overwrite``.

    python bench/row_updates.py [--rows 2000000] [--changes 20000] [--repeat 3] [--quiet-wait 900]
                                [--work-dir DIR] [--out bench/results]

The Arrow table of ``bench/write.py`` (``id`` a seeded permutation of 0..rows-1, ``ts``, ``value``,
``name``, ``category``) is appended, untimed, to a fresh unpartitioned v2 table of each peer (SQL catalog on
SQLite, local warehouse), ``--repeat`` times per operation. Then, timed:

* ``upsert``: ``--changes`` rows keyed on ``id``, half of them existing ids with a new ``value`` (spread
  over every data file), half new ids. gpu-engine: ``tbl.upsert(changes, on=["id"])``, equality deletes of
  the keys and the rows in one snapshot, nothing read. PyIceberg 0.12: ``tbl.upsert(changes,
  join_cols=["id"])``, which reads the matching rows, compares them and commits an overwrite and an append.
* ``overwrite``: the rows with ``id < changes`` replaced by ``--changes`` rows of new ids. gpu-engine:
  ``tbl.overwrite(new, "id < k")`` (merge-on-read: position deletes, the data files stay); PyIceberg:
  ``tbl.overwrite(new, overwrite_filter="id < k")`` (copy-on-write: matched data files rewritten).

Every repetition is checked after its timed call, each peer reading its own table: the row count, the
sorted ids, and the ``value`` column of the changed ids. A peer that raises is "unsupported", one with
other rows a "wrong result"; neither gets a rate. An untimed warm-up runs each operation once per peer
first. Writes ``row-updates-<device-slug>.json`` and ``.png`` under ``--out``.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import Any

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parents[1])]

import _report as rep  # noqa: E402
from write import make_data, timed, wait_quiet  # noqa: E402

PEER_PACKAGES = ("pyiceberg", "pyiceberg-core", "sqlalchemy", "matplotlib")
OURS, PYICEBERG = "gpu-engine-cpu", "pyiceberg"
PEERS = (OURS, PYICEBERG)
LABELS = {OURS: "gpu-engine (cpu)", PYICEBERG: "PyIceberg"}
COLORS = {OURS: "#2a7ab9", PYICEBERG: "#999999"}
OPS = ("upsert", "overwrite")
DEFAULT_SEED = 20_261_125


def changes_for(data: Any, op: str, changes: int, seed: int) -> Any:
    """The rows ``op`` writes: for an upsert, half existing ids (their rows with ``value`` + 1000) and half
    new ids; for an overwrite, new ids only."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    updated = changes // 2 if op == "upsert" else 0
    rng = np.random.default_rng(seed)
    picked = data.take(pa.array(rng.choice(data.num_rows, updated, replace=False)))
    picked = picked.set_column(2, "value", pc.add(picked["value"], 1000.0))
    fresh = make_data(changes - updated, 3, seed + 1)
    fresh = fresh.set_column(0, "id", pc.add(fresh["id"], data.num_rows))
    return pa.concat_tables([picked, fresh])


def expected_after(data: Any, op: str, changed: Any, cut: int) -> Any:
    """The rows each peer's table must hold after ``op``."""
    import pyarrow as pa
    import pyarrow.compute as pc

    gone = pc.is_in(data["id"], changed["id"]) if op == "upsert" else pc.less(data["id"], cut)
    return pa.concat_tables([data.filter(pc.invert(gone)), changed])


class Peer:
    """One peer's fresh table holding ``data`` in ``root``."""

    def __init__(self, peer: str, root: Path, data: Any) -> None:
        self.peer = peer
        root.mkdir(parents=True, exist_ok=True)
        (root / "warehouse").mkdir(exist_ok=True)
        uri, warehouse = f"sqlite:///{root / 'catalog.db'}", f"file://{root / 'warehouse'}"
        if peer == OURS:
            import gpu_engine as ge

            cat: Any = ge.load_catalog("bench", uri=uri, warehouse=warehouse)
        else:
            from pyiceberg.catalog.sql import SqlCatalog

            cat = SqlCatalog("bench", uri=uri, warehouse=warehouse)
        cat.create_namespace("db")
        self.table: Any = cat.create_table("db.t", schema=data.schema, properties={"format-version": "2"})
        self.table.append(data)

    def run(self, op: str, changed: Any, cut: int) -> None:
        where = f"id < {cut}"
        if self.peer == OURS:
            if op == "upsert":
                self.table.upsert(changed, on=["id"], backend="cpu")
            else:
                self.table.overwrite(changed, where, backend="cpu")
        elif op == "upsert":
            self.table.upsert(changed, join_cols=["id"])
        else:
            self.table.overwrite(changed, overwrite_filter=where)

    def rows(self) -> Any:
        if self.peer == OURS:
            return self.table.refresh().scan(backend="cpu").to_arrow()
        return self.table.refresh().scan().to_arrow()


def check(got: Any, want: Any, changed: Any) -> dict[str, Any]:
    """Same count, same sorted ids, and the changed ids carry the new values."""
    import pyarrow.compute as pc

    if got.num_rows != want.num_rows:
        return {"same_rows": False, "why": f"{got.num_rows} rows, expected {want.num_rows}"}
    got_ids, want_ids = (t["id"].take(pc.sort_indices(t["id"])) for t in (got, want))
    if not got_ids.equals(want_ids):
        return {"same_rows": False, "why": "sorted ids differ"}
    mine = got.filter(pc.is_in(got["id"], changed["id"])).sort_by("id")["value"]
    if not mine.equals(changed.sort_by("id")["value"]):
        return {"same_rows": False, "why": "the changed rows do not hold the new values"}
    return {"same_rows": True, "why": None}


def run_peer(peer: str, op: str, data: Any, changed: Any, cut: int, args: Any, work: Path) -> dict[str, Any]:
    runs: list[float] = []
    checks: list[dict[str, Any]] = []
    load = list(os.getloadavg())
    watch = rep.CpuWatch.start()
    want = expected_after(data, op, changed, cut)
    try:
        for i in range(args.repeat):
            root = work / f"{peer}-{op}-{i}"
            p = Peer(peer, root, data)
            runs.append(timed(lambda p=p: p.run(op, changed, cut)))  # type: ignore[misc]
            checks.append(check(p.rows(), want, changed))
            del p
            shutil.rmtree(root, ignore_errors=True)
    except Exception as exc:
        return {"status": "unsupported", "reason": rep.first_line(exc), "loadavg_at_start": load}
    out: dict[str, Any] = {"loadavg_at_start": load, "others_busy_cores": watch.others_busy_cores()}
    out["checks"] = checks
    bad = [c for c in checks if not c["same_rows"]]
    if bad:
        return out | {"status": "wrong result", "why": bad[0]["why"]}
    t = rep.Timing(tuple(runs))
    return out | {"status": "ok", **t.to_json(), "rows_per_s": changed.num_rows / t.best_s}


def chart(path: Path, payload: dict[str, Any], slug: str) -> Path:
    results, params = payload["results"], payload["parameters"]
    categories = [
        f"upsert {params['changes']:,} rows by id (half new) into {params['rows']:,}",
        f"overwrite id < {params['changes']:,} with {params['changes']:,} rows",
    ]
    notes = [
        f"best of {params['repeat']} (fresh table each); ours: equality deletes + rows (upsert), position "
        "deletes + rows (overwrite); PyIceberg: reads and rewrites",
        "ours defers work to scans (deletes applied on read) until a compaction folds the deletes in",
    ]
    for op, ratio in payload["speedups"].items():
        if ratio:
            notes.append(f"{op}: PyIceberg time / gpu-engine time = {ratio['best']:.2f}x (best)")
    for op, per in results.items():
        for peer, r in per.items():
            if r.get("status") != "ok":
                notes.append(
                    f"{op}: {LABELS[peer]} {r.get('status')}: {r.get('reason') or r.get('why')}"[:200]
                )
    series = [
        rep.Series(LABELS[p], [results[op][p].get("rows_per_s") for op in OPS], COLORS[p]) for p in PEERS
    ]
    return rep.grouped_barh(
        path,
        title=f"Upsert and overwrite: gpu-engine vs PyIceberg ({slug})",
        categories=categories,
        series=series,
        xlabel="changed rows per second (best run; higher is better)",
        notes=notes,
    )


def main() -> int:
    p = rep.arg_parser(__doc__)
    p.add_argument("--rows", type=int, default=2_000_000)
    p.add_argument("--changes", type=int, default=20_000)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--seed", type=int, default=DEFAULT_SEED)
    p.add_argument("--quiet-wait", type=float, default=900.0, help="max seconds to wait for a quiet machine")
    p.add_argument("--work-dir", default=None, help="where the tables are written (default: a temp dir)")
    p.add_argument("--out", default=str(rep.DEFAULT_OUT))
    args = p.parse_args()

    slug, device = rep.device_info()
    data = make_data(args.rows, 30, args.seed)
    changed = {op: changes_for(data, op, args.changes, args.seed) for op in OPS}
    cut = args.changes
    results: dict[str, dict[str, dict[str, Any]]] = {}
    with rep.work_dir("row-updates-bench-", args.work_dir) as work:
        small = make_data(20_000, 3, 1)
        for peer in PEERS:  # warm-up: imports and JIT compilation stay out of the timings
            for op in OPS:
                Peer(peer, work / f"warm-{peer}-{op}", small).run(op, changes_for(small, op, 200, 2), 200)
        quiet = wait_quiet(args.quiet_wait)
        for op in OPS:
            for peer in PEERS:
                r = run_peer(peer, op, data, changed[op], cut, args, work)
                results.setdefault(op, {})[peer] = r
                shown = (
                    f"best {r['best_s']:.3f} s" if r["status"] == "ok" else r.get("reason") or r.get("why")
                )
                print(f"  {op:9} {peer:15} {r['status']}: {shown}", flush=True)
    speedups = {
        op: (
            {
                "best": per[PYICEBERG]["best_s"] / per[OURS]["best_s"],
                "median": per[PYICEBERG]["median_s"] / per[OURS]["median_s"],
            }
            if per[OURS]["status"] == per[PYICEBERG]["status"] == "ok"
            else None
        )
        for op, per in results.items()
    }
    failures = [
        f"{op}: {peer} {r['status']}: {r.get('reason') or r.get('why')}"
        for op, per in results.items()
        for peer, r in per.items()
        if r["status"] != "ok"
    ]
    payload: dict[str, Any] = {
        **rep.header("row-updates", PEER_PACKAGES, device, slug),
        "parameters": {
            "rows": args.rows,
            "changes": args.changes,
            "repeat": args.repeat,
            "seed": args.seed,
            "format_version": 2,
            "arrow_bytes": data.nbytes,
        },
        "quiet": quiet,
        "method": {
            "call": {
                OURS: "tbl.upsert(changes, on=['id'], backend='cpu') (equality deletes + rows, one snapshot, "
                "nothing read); tbl.overwrite(new, 'id < k', backend='cpu') (position deletes + rows)",
                PYICEBERG: "tbl.upsert(changes, join_cols=['id']) (reads and compares the matching rows); "
                "tbl.overwrite(new, overwrite_filter='id < k') (copy-on-write)",
            },
            "process": "both peers in one process after an untimed warm-up; per op and peer, `repeat` x: "
            "fresh SQL catalog (SQLite) + warehouse, fresh v2 table with the rows appended (untimed), "
            "the timed call, an untimed check by the peer's own scan",
            "speedup": "PyIceberg time / gpu-engine time (best; median alongside)",
        },
        "results": results,
        "speedups": speedups,
        "failures": failures,
        "notes": [
            rep.contention_note("while a peer's timed runs ran", "this process"),
            "merge-on-read defers work: scans apply gpu-engine's equality and position deletes until a "
            "compaction (or convert_equality_deletes) folds them in; PyIceberg's tables need no such step",
        ],
    }
    return rep.finish(
        Path(args.out), f"row-updates-{slug}", payload, lambda path: chart(path, payload, slug), failures
    )


if __name__ == "__main__":
    sys.exit(main())
