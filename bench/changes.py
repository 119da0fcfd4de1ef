"""Incremental reads: gpu-engine's changelog and incremental append scans vs reading two snapshots and
diffing them, the way a pipeline gets changes from PyIceberg or DuckDB today.

    python bench/changes.py [--rows 2000000] [--files 10] [--changes 20000] [--repeat 3]
                            [--quiet-wait 900] [--work-dir DIR] [--out bench/results]

One v2 table (SQL catalog on SQLite, local warehouse), written untimed by gpu-engine: the Arrow table of
``bench/write.py`` appended in ``--files`` appends (snapshot ``base``), then a merge-on-read delete of the
``--changes`` rows with the smallest ids, spread over every data file (``deleted``), then an append of
``--changes`` new rows (``appended``). Every peer reads that same table. Timed, per change:

* ``delete``: the rows ``base`` -> ``deleted`` removed. gpu-engine:
  ``tbl.incremental_changelog_scan(base, to_snapshot_id=deleted)`` (position deletes compared per file).
  PyIceberg: both snapshots scanned, then a left-anti join on ``id`` each way. DuckDB: ``iceberg_scan`` of
  both snapshots, ``EXCEPT ALL`` each way.
* ``append``: the rows ``deleted`` -> ``appended`` added. gpu-engine: ``tbl.incremental_append_scan``;
  the peers as above.
* ``cow-delete``: the same delete on a second table deleting copy-on-write (every data file rewritten
  without the rows). gpu-engine's changelog reads the removed and the added files and cancels the rows
  carried over unchanged, comparing whole rows (the peers' anti-join compares ``id`` only).
* ``upsert``: a third table written in id order (keys arriving in time, as auto-increment keys of a CDC
  stream), then ``tbl.upsert`` of the ``--changes`` most recent keys with a new ``value``: an equality
  delete and a data file, as Flink's upsert mode writes them. Each key is deleted and inserted.
  gpu-engine reads only the files the delete's key range can reach; PyIceberg cannot read equality
  deletes (``unsupported``).

Each result is checked: the deleted (or added) ids exactly, nothing else changed. Writes
``changes-<device-slug>.json`` and ``.png`` under ``--out``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parents[1])]

import _report as rep  # noqa: E402
from scan import duckdb_connection  # noqa: E402
from write import make_data, timed, wait_quiet  # noqa: E402

PEER_PACKAGES = ("pyiceberg", "pyiceberg-core", "duckdb", "duckdb-extension-iceberg", "matplotlib")
OURS, PYICEBERG, DUCKDB = "gpu-engine-cpu", "pyiceberg", "duckdb"
PEERS = (OURS, PYICEBERG, DUCKDB)
LABELS = {
    OURS: "gpu-engine (cpu)",
    PYICEBERG: "PyIceberg (2 scans + anti-join)",
    DUCKDB: "DuckDB (2 scans + EXCEPT ALL)",
}
COLORS = {OURS: "#2a7ab9", PYICEBERG: "#999999", DUCKDB: "#e0a030"}
CHANGES = ("delete", "append", "cow-delete", "upsert")
EXPECTED_UNSUPPORTED = {(PYICEBERG, "upsert")}  # PyIceberg refuses equality deletes
DEFAULT_SEED = 20_261_125


def build(
    root: Path, data: Any, files: int, changes: int, seed: int, mode: str = "merge-on-read"
) -> tuple[Any, dict[str, int]]:
    """The table (deleting with ``mode``), and its snapshots ``base``, ``deleted`` and ``appended``."""
    import pyarrow.compute as pc

    import gpu_engine as ge

    (root / "warehouse").mkdir(parents=True)
    cat = ge.load_catalog(
        "bench", uri=f"sqlite:///{root / 'catalog.db'}", warehouse=f"file://{root / 'warehouse'}"
    )
    cat.create_namespace("db")
    properties = {"format-version": "2", "write.delete.mode": mode}
    tbl = cat.create_table("db.t", schema=data.schema, properties=properties)
    step = -(-data.num_rows // files)
    for start in range(0, data.num_rows, step):
        tbl.append(data.slice(start, step))
    snaps = {"base": tbl.metadata.current_snapshot_id}
    tbl.delete(f"id < {changes}", backend="cpu")
    snaps["deleted"] = tbl.metadata.current_snapshot_id
    fresh = make_data(changes, 3, seed + 1)
    tbl.append(fresh.set_column(0, "id", pc.add(fresh["id"], data.num_rows)))
    snaps["appended"] = tbl.metadata.current_snapshot_id
    return tbl, {k: int(v) for k, v in snaps.items() if v is not None}


def build_upsert(root: Path, data: Any, files: int, changes: int) -> tuple[Any, dict[str, int]]:
    """The table written in id order, and its snapshots ``base`` and ``upserted`` (the ``changes`` greatest
    ids given a new ``value``)."""
    import pyarrow.compute as pc

    import gpu_engine as ge

    ordered = data.sort_by("id")
    (root / "warehouse").mkdir(parents=True)
    cat = ge.load_catalog(
        "bench", uri=f"sqlite:///{root / 'catalog.db'}", warehouse=f"file://{root / 'warehouse'}"
    )
    cat.create_namespace("db")
    tbl = cat.create_table("db.t", schema=data.schema, properties={"format-version": "2"})
    step = -(-data.num_rows // files)
    for start in range(0, data.num_rows, step):
        tbl.append(ordered.slice(start, step))
    snaps = {"base": tbl.metadata.current_snapshot_id}
    recent = ordered.slice(data.num_rows - changes, changes)
    tbl.upsert(recent.set_column(2, "value", pc.add(recent["value"], 1.0)), on=["id"], backend="cpu")
    snaps["upserted"] = tbl.metadata.current_snapshot_id
    return tbl, {k: int(v) for k, v in snaps.items() if v is not None}


def reader(peer: str, tbl: Any) -> Any:
    """``(before, after, change) -> (deleted ids, inserted ids)`` for ``peer``."""
    import pyarrow as pa

    if peer == OURS:

        def ours(before: int, after: int, change: str) -> tuple[pa.Array, pa.Array]:
            if change == "append":
                rows = tbl.incremental_append_scan(before, to_snapshot_id=after, backend="cpu").to_arrow()
                return pa.array([], pa.int64()), rows["id"]
            changes = tbl.incremental_changelog_scan(before, to_snapshot_id=after, backend="cpu").to_arrow()
            kind = changes["_change_type"]
            return (changes.filter(pa.compute.equal(kind, "DELETE"))["id"],
                    changes.filter(pa.compute.equal(kind, "INSERT"))["id"])  # fmt: skip

        return ours
    if peer == PYICEBERG:
        from pyiceberg.table import StaticTable

        static = StaticTable.from_metadata(tbl.metadata_location)

        def pyiceberg(before: int, after: int, change: str) -> tuple[pa.Array, pa.Array]:
            old, new = (static.scan(snapshot_id=s).to_arrow() for s in (before, after))
            gone = old.join(new, keys="id", join_type="left anti")
            added = new.join(old, keys="id", join_type="left anti")
            return gone["id"], added["id"]

        return pyiceberg
    con = duckdb_connection(os.cpu_count() or 1)
    location = tbl.metadata_location

    def duckdb(before: int, after: int, change: str) -> tuple[pa.Array, pa.Array]:
        def diff(a: int, b: int) -> pa.Array:
            sql = (f"SELECT * FROM iceberg_scan('{location}', snapshot_from_id={a}) EXCEPT ALL "
                   f"SELECT * FROM iceberg_scan('{location}', snapshot_from_id={b})")  # fmt: skip
            return con.execute(sql).to_arrow_table()["id"]

        return diff(before, after), diff(after, before)

    return duckdb


def expected(data: Any, changes: int) -> dict[str, tuple[list[int], list[int]]]:
    return {
        "delete": (list(range(changes)), []),
        "append": ([], list(range(data.num_rows, data.num_rows + changes))),
        "cow-delete": (list(range(changes)), []),
        "upsert": (list(range(data.num_rows - changes, data.num_rows)),) * 2,
    }


def run_peer(
    peer: str, cases: dict[str, tuple[Any, int, int]], want: dict[str, Any], repeat: int
) -> dict[str, Any]:
    """Per change: (table, before, after) read ``repeat`` times after an untimed warm-up per table."""
    out: dict[str, Any] = {}
    readers: dict[int, Any] = {}
    for change, (tbl, before, after) in cases.items():
        load = list(os.getloadavg())
        try:
            if id(tbl) not in readers:
                readers[id(tbl)] = reader(peer, tbl)
                readers[id(tbl)](before, after, change)  # warm-up: imports, connections, JIT
            read = readers[id(tbl)]
        except Exception as exc:
            out[change] = {"status": "unsupported", "reason": rep.first_line(exc), "loadavg_at_start": load}
            continue
        runs: list[float] = []
        got: list[Any] = []
        call = _call(read, (before, after), change, got)
        try:
            for _ in range(repeat):
                runs.append(timed(call))
        except Exception as exc:
            out[change] = {"status": "unsupported", "reason": rep.first_line(exc), "loadavg_at_start": load}
            continue
        deleted, inserted = got[-1]
        same = (sorted(deleted.to_pylist()), sorted(inserted.to_pylist())) == want[change]
        t = rep.Timing(tuple(runs))
        out[change] = {"loadavg_at_start": load, "status": "ok" if same else "wrong result", **t.to_json()}
    return out


def _call(read: Any, snapshots: tuple[int, int], change: str, into: list[Any]) -> Any:
    return lambda: into.append(read(*snapshots, change))


def chart(path: Path, payload: dict[str, Any], slug: str) -> Path:
    results, params = payload["results"], payload["parameters"]
    categories = [
        f"rows a delete of {params['changes']:,} (of {params['rows']:,}) removed",
        f"rows an append of {params['changes']:,} added",
        f"rows a copy-on-write delete of {params['changes']:,} removed (every file rewritten)",
        f"rows an upsert of {params['changes']:,} recent keys changed (equality deletes)",
    ]
    notes = [f"best of {params['repeat']}; the same table for every peer; {params['files']} data files"]
    for change, ratios in payload["speedups"].items():
        for peer, ratio in ratios.items():
            notes.append(f"{change}: {LABELS[peer]} time / gpu-engine time = {ratio:.2f}x")
    series = [
        rep.Series(
            LABELS[p],
            [
                1.0 / r["best_s"] if r.get("status") == "ok" else None
                for r in (results[p][c] for c in CHANGES)
            ],
            COLORS[p],
        )
        for p in PEERS
        if p in results
    ]
    return rep.grouped_barh(
        path,
        title=f"Incremental reads: gpu-engine vs two snapshot scans + diff ({slug})",
        categories=categories,
        series=series,
        xlabel="change reads per second (best run; higher is better)",
        notes=notes,
    )


def main() -> int:
    p = rep.arg_parser(__doc__)
    p.add_argument("--rows", type=int, default=2_000_000)
    p.add_argument("--files", type=int, default=10)
    p.add_argument("--changes", type=int, default=20_000)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--peers", nargs="+", choices=PEERS, default=list(PEERS), help="gpu-engine always runs")
    p.add_argument("--seed", type=int, default=DEFAULT_SEED)
    p.add_argument("--quiet-wait", type=float, default=900.0, help="max seconds to wait for a quiet machine")
    p.add_argument("--work-dir", default=None, help="where the table is written (default: a temp dir)")
    p.add_argument("--out", default=str(rep.DEFAULT_OUT))
    args = p.parse_args()
    args.peers = sorted({OURS, *args.peers}, key=PEERS.index)

    slug, device = rep.device_info()
    data = make_data(args.rows, 30, args.seed)
    want = expected(data, args.changes)
    with rep.work_dir("changes-bench-", args.work_dir) as work:
        tbl, snaps = build(work / "table", data, args.files, args.changes, args.seed)
        cow, cow_snaps = build(work / "cow", data, args.files, args.changes, args.seed, "copy-on-write")
        ups, ups_snaps = build_upsert(work / "upsert", data, args.files, args.changes)
        cases = {
            "delete": (tbl, snaps["base"], snaps["deleted"]),
            "append": (tbl, snaps["deleted"], snaps["appended"]),
            "cow-delete": (cow, cow_snaps["base"], cow_snaps["deleted"]),
            "upsert": (ups, ups_snaps["base"], ups_snaps["upserted"]),
        }
        quiet = wait_quiet(args.quiet_wait)
        results = {peer: run_peer(peer, cases, want, args.repeat) for peer in PEERS if peer in args.peers}
    for peer, per in results.items():
        for change, r in per.items():
            shown = f"best {r['best_s']:.3f} s" if "best_s" in r else r.get("reason")
            print(f"  {change:10} {peer:15} {r['status']}: {shown}", flush=True)
    ours = results[OURS]
    speedups = {
        change: {
            peer: results[peer][change]["best_s"] / ours[change]["best_s"]
            for peer in (PYICEBERG, DUCKDB)
            if peer in results and results[peer][change]["status"] == ours[change]["status"] == "ok"
        }
        for change in CHANGES
    }
    failures = [
        f"{change}: {peer} {r['status']}: {r.get('reason', '')}"
        for peer, per in results.items()
        for change, r in per.items()
        if r["status"] != "ok"
        and not (r["status"] == "unsupported" and (peer, change) in EXPECTED_UNSUPPORTED)
    ]
    payload: dict[str, Any] = {
        **rep.header("changes", PEER_PACKAGES, device, slug),
        "parameters": {
            "rows": args.rows,
            "files": args.files,
            "changes": args.changes,
            "repeat": args.repeat,
            "seed": args.seed,
            "format_version": 2,
            "snapshots": snaps,
            "copy_on_write_snapshots": cow_snaps,
            "upsert_snapshots": ups_snaps,
        },
        "quiet": quiet,
        "method": {
            "call": {
                OURS: "tbl.incremental_changelog_scan(before, to_snapshot_id=after) (delete, upsert); "
                "tbl.incremental_append_scan(before, to_snapshot_id=after) (append); backend='cpu'",
                PYICEBERG: "StaticTable scans of both snapshots to Arrow, left-anti joins on id each way",
                DUCKDB: "iceberg_scan(snapshot_from_id=...) of both snapshots, EXCEPT ALL each way",
            },
            "process": "one table written untimed by gpu-engine; all peers in one process, each after an "
            "untimed warm-up call; `repeat` timed calls per change",
            "speedup": "peer time / gpu-engine time (best)",
        },
        "results": results,
        "speedups": speedups,
        "failures": failures,
        "notes": [
            "the peers' way reads every row of both snapshots; ours reads the files a snapshot touched (the "
            "delete: every data file, as its rows were spread over all of them; the append: the new file; "
            "the upsert: the files its equality delete's key range reaches, by their column metrics)",
        ],
    }
    return rep.finish(
        Path(args.out), f"changes-{slug}", payload, lambda path: chart(path, payload, slug), failures
    )


if __name__ == "__main__":
    sys.exit(main())
