"""Full-table scans with merge-on-read deletes: gpu-engine vs PyIceberg, Daft and DuckDB's iceberg_scan.

    python bench/scan.py [--rows 10000000] [--files 100] [--repeat 5] [--kinds position dv equality]
                         [--peers ...] [--cache-dir DIR] [--regenerate] [--out bench/results]
                         [--quiet-wait 1200] [--profile auto|always|never]
    python bench/scan.py --kinds upserts --rounds 20 --name scan-upserts ...

Three tables are written once by ``tests/execute/gen_table.py`` (independent of the engine) into
``--cache-dir`` (default ``~/.cache/gpu-engine-bench/scan-r<rows>-f<files>-s<seed>``) and reused: ``position``
(v2, ``--delete-fraction`` of the rows, default 5%, deleted by Parquet position-delete files), ``dv`` (v3,
the same fraction deleted by deletion vectors in Puffin files) and ``equality`` (v2, equality deletes on
``--eq-fraction`` of the ids, default 1%, plus ``name IS NULL`` keys: ~1% more rows). The generator's
surviving rows (``expected``) are cached beside each table as ``expected.parquet``. On request (not by
default), ``upserts`` (v2, Flink's upsert mode: ``--rounds`` commits, each deleting ``--eq-fraction`` of
the ids by equality and writing new rows for half of them), where data files carry different sets of
equality deletes.

Each peer reads the whole table, from its metadata JSON to one ``pyarrow.Table``, in its own subprocess per
table (so its peak RSS is its own): ``ge.load_table(path).scan(backend=...).to_arrow()`` (cpu; and cuda
when a real GPU is present), ``StaticTable.from_metadata(path).scan().to_arrow()`` (PyIceberg),
``daft.read_iceberg(StaticTable.from_metadata(path)).to_arrow()`` (Daft) and ``SELECT * FROM
iceberg_scan(path)`` with the ``.duckdb_extension`` files shipped in the ``duckdb-extension-avro`` and
``duckdb-extension-iceberg`` packages. One untimed warm-up call (its time is the first call in a fresh
process), then ``--repeat`` timed calls (best and median; fewer when they would take more than
``--time-budget`` s); every call's row count is checked against the generator's, and the last result is
compared with ``expected`` as a multiset of rows (sorted by every column, floats compared bit for bit)
outside the timing. A peer that raises is "unsupported" (with its error); one whose rows differ is a "wrong
result" and gets no rate or ratio; a worker still running after ``--peer-timeout`` s is killed ("timeout":
how long its first call had run gives a lower bound on the speedup against it).

gpu-engine's cold start is measured apart: per table a fresh process with an empty ``NUMBA_CACHE_DIR`` makes
one call (JIT compilation included); the measured process then uses the on-disk cache that call filled.
The workers run on a copy of ``gpu_engine/`` taken at start (the checkout is shared). Before the measured
workers the driver waits (up to ``--quiet-wait`` s) for a quiet machine: 1-minute load average below 0.5
and other processes using under 0.2 cores; the load is recorded either way.

Writes ``<name>-<device-slug>.json`` and ``.png`` (and ``<name>-profile-<slug>.txt`` with ``--profile``,
by default when a CPU target is missed) under ``--out``; ``--name`` defaults to ``scan``.
"""

from __future__ import annotations

import argparse
import cProfile
import dataclasses
import hashlib
import io
import json
import os
import pstats
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SRC_ENV = "SCAN_BENCH_SRC"  # a snapshot of gpu_engine/ for the workers
_SNAPSHOT = [os.environ[SRC_ENV]] if os.environ.get(SRC_ENV) else []
sys.path[:0] = [str(Path(__file__).resolve().parent), *_SNAPSHOT, str(Path(__file__).resolve().parents[1])]

import _report as rep  # noqa: E402

PEER_PACKAGES = (
    "pyiceberg",
    "pyiceberg-core",
    "duckdb",
    "duckdb-extension-iceberg",
    "duckdb-extension-avro",
    "daft",
    "fastavro",
    "pyroaring",
    "matplotlib",
)
COLUMNS = ("id", "ts", "value", "name", "category")
RESULT_PREFIX = "SCAN-RESULT "
STARTED_PREFIX = "SCAN-FIRST-CALL-STARTED "
DEFAULT_SEED = 20_260_506
OURS_CPU, OURS_CUDA, OURS_CUDF, PYICEBERG, DUCKDB, DAFT = (
    "gpu-engine-cpu",
    "gpu-engine-cuda",
    "gpu-engine-cudf",
    "pyiceberg",
    "duckdb",
    "daft",
)
OURS = (OURS_CPU, OURS_CUDA, OURS_CUDF)
PEERS = (OURS_CPU, OURS_CUDA, OURS_CUDF, PYICEBERG, DUCKDB, DAFT)
LABELS = {
    OURS_CPU: "gpu-engine (cpu)",
    OURS_CUDA: "gpu-engine (cuda)",
    OURS_CUDF: "gpu-engine to_cudf (cuDF decode)",
    PYICEBERG: "PyIceberg",
    DUCKDB: "DuckDB iceberg_scan",
    DAFT: "Daft",
}
COLORS = {
    OURS_CPU: "#2a7ab9",
    OURS_CUDA: "#76b900",
    OURS_CUDF: "#3d6b00",
    PYICEBERG: "#999999",
    DUCKDB: "#e3b505",
    DAFT: "#8e5ab5",
}
CONTENTION_NOTE = rep.contention_note("while the timed runs ran", "the measuring process")


@dataclass(frozen=True)
class Kind:
    key: str
    format_version: int
    label: str


KINDS = {
    "position": Kind("position", 2, "position deletes (v2)"),
    "dv": Kind("dv", 3, "deletion vectors (v3)"),
    "equality": Kind("equality", 2, "equality deletes (v2)"),
    "upserts": Kind("upserts", 2, "Flink-style upserts (v2)"),
}
DEFAULT_KINDS = ("position", "dv", "equality")


@dataclass(frozen=True)
class Target:
    key: str
    text: str
    peer: str  # the peer ours is compared with
    ours: str
    kinds: tuple[str, ...]
    speedup: float


POS_DV = ("position", "dv")
TARGETS = (
    Target(
        "cpu-pyiceberg", "CPU >= 1.5x PyIceberg (position deletes, DVs)", PYICEBERG, OURS_CPU, POS_DV, 1.5
    ),
    Target(
        "cpu-duckdb-eq",
        "CPU >= 1.0x DuckDB (equality deletes)",
        DUCKDB,
        OURS_CPU,
        ("equality", "upserts"),
        1.0,
    ),
    Target(
        "gpu-pyiceberg", "GPU >= 10x PyIceberg (position deletes, DVs)", PYICEBERG, OURS_CUDA, POS_DV, 10.0
    ),
    Target(
        "gpu-cudf-pyiceberg",
        "GPU to_cudf >= 10x PyIceberg (position deletes, DVs)",
        PYICEBERG,
        OURS_CUDF,
        POS_DV,
        10.0,
    ),
)


# -- tables: generated once, cached with the rows that must survive -----------------------------------------


def fraction_of(args: argparse.Namespace, kind: str) -> float:
    return args.eq_fraction if kind in ("equality", "upserts") else args.delete_fraction


def table_dir(args: argparse.Namespace, kind: str) -> Path:
    root = Path(args.cache_dir) if args.cache_dir else default_cache(args)
    rounds = f"-x{args.rounds}" if kind == "upserts" else ""
    return root / f"{kind}-{fraction_of(args, kind):g}{rounds}"


def default_cache(args: argparse.Namespace) -> Path:
    rg = f"-rg{args.row_group_rows}" if args.row_group_rows else ""
    return Path.home() / ".cache" / "gpu-engine-bench" / f"scan-r{args.rows}-f{args.files}-s{args.seed}{rg}"


def load_meta(directory: Path) -> dict[str, Any] | None:
    marker = directory / "meta.json"
    if not marker.exists() or not (directory / "expected.parquet").exists():
        return None
    meta: dict[str, Any] = json.loads(marker.read_text())
    return meta


def generate_kind(directory: Path, kind: str, args: argparse.Namespace) -> None:
    """Worker: write one table with ``tests/execute/gen_table.py`` and cache its expected rows."""
    import pyarrow.parquet as pq

    from tests.execute import gen_table

    fraction = fraction_of(args, kind)
    g = gen_table.generate(
        directory,
        kind=kind,  # type: ignore[arg-type]
        rows=args.rows,
        files=args.files,
        delete_fraction=fraction,
        format_version=KINDS[kind].format_version,
        seed=args.seed,
        row_group_rows=args.row_group_rows,
        rounds=args.rounds,
    )
    pq.write_table(g.expected.select(list(COLUMNS)), directory / "expected.parquet")
    meta = {
        "kind": kind,
        "format_version": g.format_version,
        "rows": args.rows,
        "files": args.files,
        "delete_fraction": fraction,
        "seed": args.seed,
        "row_group_rows": args.row_group_rows,
        "metadata_location": g.metadata_location.removeprefix("file://"),
        "snapshots": len(g.snapshots),
        "expected_rows": g.expected.num_rows,
        "generate_s": g.generate_s,
        "generator_sha256": hashlib.sha256(Path(gen_table.__file__).read_bytes()).hexdigest(),
    }
    (directory / "meta.json").write_text(json.dumps(meta, indent=2) + "\n")


def ensure_tables(args: argparse.Namespace, env: dict[str, str]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for kind in args.kinds:
        directory = table_dir(args, kind)
        meta = None if args.regenerate else load_meta(directory)
        if meta is None:
            shutil.rmtree(directory, ignore_errors=True)
            directory.mkdir(parents=True)
            print(f"generating {kind} table in {directory} ...", flush=True)
            cmd = [*worker_cmd(args), "--generate", kind, "--table-dir", str(directory)]
            subprocess.run(cmd, check=True, env=env)
            meta = load_meta(directory)
            assert meta is not None
            meta["generated_now"] = True
            print(f"  generated in {meta['generate_s']:.1f} s", flush=True)
        else:
            meta["generated_now"] = False
        meta["dir"] = str(directory)
        out[kind] = meta
    return out


def footprint(meta: dict[str, Any]) -> dict[str, Any]:
    """Bytes on disk of the live data and delete files (from gpu-engine's plan), and the rows they hold."""
    import gpu_engine as ge

    plan = ge.load_table(meta["metadata_location"]).scan().plan()
    data = {t.file.path: t.file for t in plan.tasks}
    deletes = {d.path: d for t in plan.tasks for d in t.deletes}
    return {
        "data_files": len(data),
        "data_bytes": sum(f.file_size_in_bytes for f in data.values()),
        "data_rows": sum(f.record_count for f in data.values()),
        "delete_files": len(deletes),
        "delete_bytes": sum(Path(p.removeprefix("file://")).stat().st_size for p in deletes),
        "delete_records": sum(d.record_count for d in deletes.values()),
        "tasks": len(plan.tasks),
    }


# -- the peers ----------------------------------------------------------------------------------------------


def reader(peer: str, location: str, threads: int) -> Callable[[], Any]:
    """A call that reads the whole table at ``location`` (a metadata JSON) into one pyarrow Table."""
    if peer in (OURS_CPU, OURS_CUDA):
        import gpu_engine as ge

        backend = "cpu" if peer == OURS_CPU else "cuda"
        return lambda: ge.load_table(location).scan(backend=backend).to_arrow()
    if peer == OURS_CUDF:
        import cupy

        import gpu_engine as ge

        def to_cudf() -> DeviceRows:
            frame = ge.load_table(location).scan(backend="cuda").to_cudf(host_decode=False)
            cupy.cuda.runtime.deviceSynchronize()  # the rows are on the device when the call returns
            return DeviceRows(frame)

        return to_cudf
    if peer == PYICEBERG:
        from pyiceberg.table import StaticTable

        return lambda: StaticTable.from_metadata(location).scan().to_arrow()
    if peer == DAFT:
        import daft
        from pyiceberg.table import StaticTable

        daft.set_runner_native(num_threads=threads)
        return lambda: daft.read_iceberg(StaticTable.from_metadata(location)).to_arrow()
    if peer == DUCKDB:
        con = duckdb_connection(threads)
        return lambda: con.execute("SELECT * FROM iceberg_scan(?)", [location]).to_arrow_table()
    raise ValueError(peer)


def duckdb_connection(threads: int) -> Any:
    import duckdb

    con = duckdb.connect(
        config={
            "allow_unsigned_extensions": "true",
            "autoinstall_known_extensions": "false",
            "autoload_known_extensions": "false",
            "threads": threads,
        }
    )
    site = Path(duckdb.__file__).resolve().parent.parent
    for ext in ("avro", "iceberg"):  # avro first: iceberg reads the manifests through it
        path = (
            site
            / f"duckdb_extension_{ext}"
            / "extensions"
            / f"v{duckdb.__version__}"
            / f"{ext}.duckdb_extension"
        )
        con.execute(f"LOAD '{path}'")
    return con


def threads_used(peer: str, threads: int) -> str:
    if peer == OURS_CUDF:
        return "one thread (cuDF decodes each file's row groups in one call)"
    if peer in (OURS_CPU, OURS_CUDA):
        from gpu_engine.execute.scan import default_workers

        return f"scan workers {default_workers()} (default; pyarrow CPU pool {_arrow_threads()})"
    if peer == PYICEBERG:
        workers = os.environ.get("PYICEBERG_MAX_WORKERS")
        return f"PYICEBERG_MAX_WORKERS={workers} (pyarrow CPU pool {_arrow_threads()})"
    if peer == DAFT:
        return f"daft.set_runner_native(num_threads={threads})"
    return f"threads={threads}"


def _arrow_threads() -> int:
    import pyarrow as pa

    return int(pa.cpu_count())


# -- checks: every call's row count, one full multiset comparison --------------------------------------------


def canonical(table: Any) -> Any:
    """``table``'s columns as comparable types (``value`` as its IEEE bits), rows sorted by every column."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    t = table.select(list(COLUMNS))
    value = t.column("value").cast(pa.float64()).combine_chunks()
    bits = np.asarray(value.fill_null(0.0).to_numpy(zero_copy_only=False)).view(np.int64)
    cols = {
        "id": t.column("id").cast(pa.int64()),
        "ts": t.column("ts").cast(pa.timestamp("us")).cast(pa.int64()),
        "value": pa.array(bits, mask=value.is_null().to_numpy(zero_copy_only=False)),
        "name": t.column("name").cast(pa.string()),
        "category": t.column("category").cast(pa.string()),
    }
    tbl = pa.table(cols)
    order = pc.sort_indices(tbl, sort_keys=[(c, "ascending") for c in COLUMNS], null_placement="at_end")
    return tbl.take(order)


@dataclasses.dataclass(frozen=True)
class DeviceRows:
    """A cuDF frame's rows: counted on the device, copied to the host only to check them."""

    frame: Any

    @property
    def num_rows(self) -> int:
        return len(self.frame)


def compare_rows(actual: Any, expected: Any) -> dict[str, Any]:
    if isinstance(actual, DeviceRows):
        actual = actual.frame.to_arrow()
    if actual.num_rows != expected.num_rows:
        return {"same_rows": False, "why": f"{actual.num_rows} rows, expected {expected.num_rows}"}
    missing = sorted(set(COLUMNS) - set(actual.column_names))
    if missing:
        return {"same_rows": False, "why": f"columns missing: {missing}"}
    a, e = canonical(actual), canonical(expected)
    differ = [c for c in COLUMNS if not a.column(c).combine_chunks().equals(e.column(c).combine_chunks())]
    if differ:
        return {"same_rows": False, "why": f"same row count, but the sorted rows differ in columns {differ}"}
    return {"same_rows": True, "why": None}


# -- worker: one peer, one table, in its own process ---------------------------------------------------------


def run_worker(args: argparse.Namespace) -> None:
    meta = load_meta(Path(args.table_dir))
    assert meta is not None, args.table_dir
    expected_rows = int(meta["expected_rows"])
    location = str(meta["metadata_location"])
    out: dict[str, Any] = {
        "peer": args.worker,
        "kind": meta["kind"],
        "loadavg_at_start": list(os.getloadavg()),
    }
    import_s, fn = rep.once(lambda: reader(args.worker, location, args.threads))
    out |= {"import_s": import_s, "threads": threads_used(args.worker, args.threads)}
    print(f"{STARTED_PREFIX}{time.time()}", flush=True)
    try:
        first_s, first = rep.once(fn)
    except Exception as exc:
        out |= {"status": "unsupported", "reason": rep.first_line(exc), "peak_rss_mb": rep.status_mb("VmHWM")}
        rep.print_result(RESULT_PREFIX, out)
        return
    out |= {"first_call_s": first_s, "first_rows": first.num_rows}
    del first
    counts: list[int] = []

    def call() -> Any:
        result = fn()
        counts.append(result.num_rows)
        return result

    result: Any = None
    peak_cold = rep.status_mb("VmHWM")
    out["peak_rss_mb"] = peak_cold
    # a slow peer gets fewer timed calls: at most --time-budget s of them (at least one)
    repeat = min(args.repeat, max(1, int(args.time_budget // max(first_s, 1e-9))))
    if args.repeat > 0:
        rss_before = rep.reset_peak_rss()
        watch = rep.CpuWatch.start()
        timing, result = rep.measure(call, repeat)
        peak_timed = rep.peak_rss_since_reset(rss_before)
        out |= timing.to_json() | {
            "repeat": repeat,
            "repeat_reduced": repeat < args.repeat,
            "others_busy_cores": watch.others_busy_cores(),
            "rss_before_timed_mb": rss_before,
            "peak_rss_timed_mb": peak_timed,
            "peak_rss_mb": max(peak_cold or 0.0, peak_timed or 0.0),
        }
    out["row_counts"] = sorted({*counts, out["first_rows"]})
    out["counts_ok"] = out["row_counts"] == [expected_rows]
    if result is not None and (args.check or not out["counts_ok"]):
        import pyarrow.parquet as pq

        expected = pq.read_table(Path(args.table_dir) / "expected.parquet")
        check_s, check = rep.once(lambda: compare_rows(result, expected))
        out |= {"rows_checked": True, "check_s": check_s, **check}
    else:
        out |= {"rows_checked": False, "same_rows": None}
    ok = out["counts_ok"] and out["same_rows"] is not False
    out["status"] = "ok" if ok else "wrong result"
    rep.print_result(RESULT_PREFIX, out)


def profiled_peer(peers: Sequence[str], targets: Sequence[Any], mode: str) -> str | None:
    """Which of ours to profile: with ``mode`` "always" or "auto" (where a target of it was missed),
    ``to_cudf`` before the CPU scan (one peer a run)."""
    for peer in (OURS_CUDF, OURS_CPU):
        missed = any(t["met"] is False and t["ours"] == peer for t in targets)
        if peer in peers and (mode == "always" or (mode == "auto" and missed)):
            return peer
    return None


def run_profile(args: argparse.Namespace) -> None:
    """cProfile serial scans (``workers=1``: cProfile sees the calling thread only) of ``--worker``'s peer,
    gpu-engine's CPU scan or its ``to_cudf`` (cuDF's device work is asynchronous: its time shows where the
    host waits for it)."""
    import gpu_engine as ge

    meta = load_meta(Path(args.table_dir))
    assert meta is not None
    location = str(meta["metadata_location"])
    peer = args.worker or OURS_CPU

    def call(workers: int | None) -> Any:
        scan = ge.load_table(location).scan(backend="cpu" if peer == OURS_CPU else "cuda")
        scan = scan if workers is None else dataclasses.replace(scan, workers=workers)
        if peer != OURS_CUDF:
            return scan.to_arrow()
        import cupy

        frame = scan.to_cudf(host_decode=False)
        cupy.cuda.runtime.deviceSynchronize()
        return frame

    def serial() -> Any:
        return call(1)

    def parallel() -> Any:
        return call(None)

    first = cProfile.Profile()  # the first call in this fresh process (numba's disk cache is warm)
    first_s, _ = rep.once(lambda: first.runcall(serial))
    parallel_s, _ = rep.once(parallel)
    serial_s, _ = rep.once(serial)
    profiler = cProfile.Profile()
    profiled_s, _ = rep.once(lambda: profiler.runcall(serial))
    text = io.StringIO()
    text.write(f"-- first call of a fresh process (numba disk cache warm), workers=1: {first_s:.3f} s --\n")
    first_stats = pstats.Stats(first, stream=text)
    first_stats.sort_stats("cumulative").print_stats(args.profile_top)
    text.write("-- a warm call, workers=1 --\n")
    stats = pstats.Stats(profiler, stream=text)
    stats.sort_stats("cumulative").print_stats(args.profile_top)
    stats.sort_stats("tottime").print_stats(args.profile_top)
    header = (
        f"== {meta['kind']}: {LABELS[peer]}, workers=1 under cProfile ==\n"
        f"default workers without profiler: {parallel_s:.3f} s; workers=1: {serial_s:.3f} s; "
        f"workers=1 under cProfile: {profiled_s:.3f} s; first call under cProfile: {first_s:.3f} s\n"
    )
    Path(args.profile_out).write_text(header + text.getvalue())
    summary = {"kind": meta["kind"], "peer": peer, "parallel_s": parallel_s, "serial_s": serial_s}
    summary["profiled_s"] = profiled_s
    summary["first_call_profiled_s"] = first_s
    rep.print_result(RESULT_PREFIX, summary)


# -- driver --------------------------------------------------------------------------------------------------


def worker_cmd(args: argparse.Namespace) -> list[str]:
    return rep.script_cmd(
        __file__,
        *("--rows", str(args.rows), "--files", str(args.files), "--seed", str(args.seed)),
        *("--delete-fraction", str(args.delete_fraction), "--eq-fraction", str(args.eq_fraction)),
        *(["--row-group-rows", str(args.row_group_rows)] if args.row_group_rows else []),
        *("--threads", str(args.threads), "--rounds", str(args.rounds)),
    )


def spawn(args: argparse.Namespace, extra: list[str], env: dict[str, str]) -> dict[str, Any]:
    """Run a worker (killed after ``--peer-timeout`` s) and return its result line as a dict."""
    proc = subprocess.Popen(
        [*worker_cmd(args), *extra], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )
    try:
        stdout, stderr = proc.communicate(timeout=args.peer_timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        stdout, stderr = proc.communicate()
        killed = time.time()
        started = [float(ln.split()[1]) for ln in stdout.splitlines() if ln.startswith(STARTED_PREFIX)]
        return {
            "status": "timeout",
            "timeout_s": args.peer_timeout,
            # the first call had run this long, unfinished, when the worker was killed
            "first_call_at_least_s": killed - started[0] if started else None,
            "reason": f"first call unfinished after {args.peer_timeout:g} s (worker killed)"
            if started
            else f"worker killed after {args.peer_timeout:g} s",
        }
    return rep.worker_result(proc.returncode, stdout, stderr, RESULT_PREFIX)


def rate(result: dict[str, Any], units: float) -> float | None:
    return units / float(result["best_s"]) if result.get("status") == "ok" and "best_s" in result else None


def run_driver(args: argparse.Namespace) -> int:
    slug, device = rep.device_info()
    peers = [p for p in args.peers if p not in (OURS_CUDA, OURS_CUDF) or device["cuda"]]
    out_dir = Path(args.out)
    base_env = dict(os.environ, PYICEBERG_MAX_WORKERS=str(args.threads))
    results: dict[str, dict[str, Any]] = {}
    cold: dict[str, dict[str, Any]] = {}
    profiles: list[dict[str, Any]] = []
    failures: list[str] = []
    with tempfile.TemporaryDirectory(prefix="scan-bench-") as tmp:
        work = Path(tmp)
        src = work / "src"
        code = rep.snapshot_code(src)
        env = dict(base_env, **{SRC_ENV: str(src)})
        tables = ensure_tables(args, env)
        for kind, meta in tables.items():
            meta |= footprint(meta)
            print(
                f"{kind:9} {meta['expected_rows']:,} rows kept of {meta['data_rows']:,} in "
                f"{meta['data_files']} data files ({meta['data_bytes'] / 1e6:.1f} MB), "
                f"{meta['delete_files']} delete files ({meta['delete_bytes'] / 1e6:.2f} MB)",
                flush=True,
            )
        quiet = rep.quiet_before_measuring(args.quiet_wait)
        for kind, meta in tables.items():
            results[kind] = {}
            for peer in peers:
                ours = peer in OURS
                peer_env = env
                if ours:  # cold start: an empty numba cache, one call; the measured process reuses its cache
                    cache = work / f"numba-{kind}-{peer}"
                    peer_env = dict(env, NUMBA_CACHE_DIR=str(cache))
                    r = spawn(args, ["--worker", peer, "--table-dir", meta["dir"], "--repeat", "0"], peer_env)
                    cold.setdefault(kind, {})[peer] = {
                        k: r.get(k) for k in ("status", "reason", "import_s", "first_call_s", "peak_rss_mb")
                    }
                    print(
                        f"  {kind:9} {peer:16} cold first call {r.get('first_call_s') or 0:7.2f} s",
                        flush=True,
                    )
                extra = ["--worker", peer, "--table-dir", meta["dir"], "--repeat", str(args.repeat)]
                r = spawn(args, [*extra, *(["--check"] if ours or args.check_peers else [])], peer_env)
                r["label"] = LABELS[peer]
                r["rows_per_s"] = rate(r, meta["expected_rows"])
                r["data_mb_per_s"] = rate(r, meta["data_bytes"] / 1e6)
                results[kind][peer] = r
                if r["status"] == "ok":
                    print(
                        f"  {kind:9} {peer:16} best {r['best_s']:7.3f} s  median {r['median_s']:7.3f} s  "
                        f"{r['rows_per_s'] / 1e6:6.2f} M rows/s  {r['data_mb_per_s']:7.1f} MB/s  first "
                        f"{r['first_call_s']:6.2f} s  peak RSS {r['peak_rss_mb']:6.0f} MB  others busy "
                        f"{r.get('others_busy_cores') or 0:.2f}",
                        flush=True,
                    )
                else:
                    why = r.get("reason") or r.get("why") or r.get("row_counts")
                    if r.get("first_call_s"):
                        why = f"{why} (first call {r.get('first_call_s') or 0:.2f} s)"
                    print(f"  {kind:9} {peer:16} {r['status']}: {why}", flush=True)
                if ours and r["status"] != "ok":
                    failures.append(f"{kind}: {peer} {r['status']}: {r.get('reason') or r.get('why')}")
        rep.note_checkout_changes(code)
        ratios = rep.time_ratios(results, OURS, against_ours=True, lower_bounds=True)
        targets = evaluate_targets(results, device)
        profiled = profiled_peer(peers, targets, args.profile)
        if profiled is not None:
            part_name = "cudf-" if profiled == OURS_CUDF else ""
            profile_path = out_dir / f"{args.name}-profile-{part_name}{slug}.txt"
            out_dir.mkdir(parents=True, exist_ok=True)
            texts = []
            for kind, meta in tables.items():
                part = work / f"profile-{kind}.txt"
                cache_env = dict(env, NUMBA_CACHE_DIR=str(work / f"numba-{kind}-{profiled}"))
                extra = ["--profile-worker", "--worker", profiled, "--table-dir", meta["dir"]]
                extra += ["--profile-out", str(part)]
                profiles.append(spawn(args, [*extra, "--profile-top", str(args.profile_top)], cache_env))
                if part.exists():
                    texts.append(part.read_text())
            profile_path.write_text("\n\n".join(texts))
            print(f"wrote {profile_path}", flush=True)

    payload: dict[str, Any] = {
        **rep.header("scan", PEER_PACKAGES, device, slug),
        "parameters": {
            "rows": args.rows,
            "files": args.files,
            "delete_fraction": args.delete_fraction,
            "eq_fraction": args.eq_fraction,
            **({"upsert_rounds": args.rounds} if "upserts" in args.kinds else {}),
            "seed": args.seed,
            "row_group_rows": args.row_group_rows,
            "repeat": args.repeat,
            "warmup": 1,
            "threads": args.threads,
            "kinds": list(args.kinds),
            "peers": peers,
        },
        "tables": tables,
        "code": code,
        "quiet": quiet,
        "method": {
            "call": {
                OURS_CPU: "ge.load_table(metadata_json).scan(backend='cpu').to_arrow()",
                OURS_CUDA: "ge.load_table(metadata_json).scan(backend='cuda').to_arrow()",
                OURS_CUDF: "ge.load_table(metadata_json).scan(backend='cuda').to_cudf(host_decode=False)",
                PYICEBERG: "StaticTable.from_metadata(metadata_json).scan().to_arrow()",
                DAFT: "daft.read_iceberg(StaticTable.from_metadata(metadata_json)).to_arrow()",
                DUCKDB: "con.execute('SELECT * FROM iceberg_scan(?)', [metadata_json]).to_arrow_table()",
            },
            "process": "one subprocess per peer and table: import + setup (import_s), one untimed warm-up "
            "call (first_call_s), then `repeat` timed calls (best_s, median_s, runs_s)",
            "rates": "rows_per_s = surviving rows returned / best_s; data_mb_per_s = bytes of the live data "
            "files on disk (delete files not counted) / 1e6 / best_s",
            "checks": "every call's row count equals the generator's expected count; the last timed result "
            "(gpu-engine always; peers unless --no-check-peers) equals expected.parquet as a multiset of "
            "rows",
            "slow_peers": "a worker gets at most time_budget s of timed calls (repeat reduced, at least one) "
            "and is killed after peer_timeout s: status 'timeout', first_call_at_least_s = how long its "
            "first call had run unfinished; speedups against it are lower bounds",
            "peak_rss": "VmHWM of the worker process: peak_rss_mb over imports, warm-up and timed calls "
            "(before the row check); peak_rss_timed_mb after resetting VmHWM (clear_refs 5) following the "
            "warm-up, over the timed calls only",
            "cold_start": "gpu-engine: a fresh process with an empty NUMBA_CACHE_DIR, one call (JIT compile "
            "included); the measured process then loads the compiled kernels from that cache",
            "speedup": "peer best_s / ours best_s (median ratio alongside); only where both results are ok",
        },
        "cold_start": cold,
        "results": results,
        "speedups": ratios,
        "targets": targets,
        "profiles": profiles,
        "failures": failures,
        "notes": [CONTENTION_NOTE],
    }
    return rep.finish(
        out_dir, f"{args.name}-{slug}", payload, lambda path: chart(path, payload, slug), failures, targets
    )


def evaluate_targets(
    results: dict[str, dict[str, dict[str, Any]]], device: dict[str, Any]
) -> list[dict[str, Any]]:
    out = []
    for t in TARGETS:
        per_kind: dict[str, Any] = {}
        verdicts: list[bool | None] = []
        for kind in t.kinds:
            mine, theirs = results.get(kind, {}).get(t.ours), results.get(kind, {}).get(t.peer)
            if t.ours in (OURS_CUDA, OURS_CUDF) and not device["cuda"]:
                per_kind[kind] = {"speedup": None, "met": None, "why": "not measured: no CUDA device here"}
            elif mine is None or theirs is None:
                per_kind[kind] = {"speedup": None, "met": None, "why": "not run"}
            elif mine.get("status") != "ok":
                per_kind[kind] = {"speedup": None, "met": False, "why": f"gpu-engine {mine.get('status')}"}
            elif theirs.get("status") == "timeout" and theirs.get("first_call_at_least_s"):
                s = theirs["first_call_at_least_s"] / mine["best_s"]
                why = f"{t.peer} timed out: speedup is a lower bound"
                per_kind[kind] = {"speedup": s, "lower_bound": True, "met": True if s >= t.speedup else None}
                per_kind[kind]["why"] = why
            elif theirs.get("status") != "ok":
                why = f"{t.peer} {theirs.get('status')}: {theirs.get('reason') or theirs.get('why')}"
                per_kind[kind] = {"speedup": None, "met": None, "why": why}
            else:
                s = theirs["best_s"] / mine["best_s"]
                per_kind[kind] = {"speedup": s, "met": s >= t.speedup, "why": None}
            verdicts.append(per_kind[kind]["met"])
        shown = ", ".join(
            f"{k} {'>= ' if v.get('lower_bound') else ''}{v['speedup']:.2f}x"
            if v["speedup"] is not None
            else f"{k} n/a ({v['why']})"
            for k, v in per_kind.items()
        )
        met = rep.overall_met(verdicts)
        fields = {"ours": t.ours, "peer": t.peer, "threshold": t.speedup, "kinds": per_kind}
        out.append(rep.target_result(t.key, t.text, met, shown, **fields))
    return out


def chart(path: Path, payload: dict[str, Any], slug: str) -> Path:
    results = payload["results"]
    tables = payload["tables"]
    kinds = list(results)
    peers = payload["parameters"]["peers"]
    categories = [
        f"{KINDS[k].label}: {tables[k]['expected_rows']:,} of {tables[k]['data_rows']:,} rows kept"
        for k in kinds
    ]
    notes = [
        f"{payload['parameters']['rows']:,} rows in {payload['parameters']['files']} files; best of "
        f"{payload['parameters']['repeat']} after a warm-up; each peer in its own process; "
        f"{payload['parameters']['threads']} threads"
    ]
    for k in kinds:
        for p, r in results[k].items():
            if r.get("status") != "ok":
                why = re.sub(
                    r"(?<![:\w/])/\S*/", ".../", str(r.get("reason") or r.get("why") or "")
                )  # paths: names
                notes.append(f"{k}: {LABELS[p]} {r.get('status')}: {why[:150]}")
    for k, per in payload["speedups"].items():
        shown = [
            f"{name.removeprefix('gpu-engine-')} {v['best']:.2f}x"
            if "best" in v
            else f"{name.removeprefix('gpu-engine-')} >= {v['best_at_least']:.0f}x"
            for name, v in per.items()
            if "best" in v or "best_at_least" in v
        ]
        if shown:
            notes.append(f"{k}: speedup ours/peer (peer time / our time, best): " + ", ".join(shown))
    notes += rep.target_notes(payload["targets"])
    return rep.grouped_barh(
        path,
        title=f"Full-table scan to Arrow with deletes applied ({slug})",
        categories=categories,
        series=rep.peer_series(results, peers, "rows_per_s", LABELS, COLORS),
        xlabel="surviving rows per second (best run; higher is better)",
        notes=notes,
    )


def main() -> int:
    p = rep.arg_parser(__doc__)
    p.add_argument("--rows", type=int, default=10_000_000)
    p.add_argument("--files", type=int, default=100)
    p.add_argument("--delete-fraction", type=float, default=0.05, help="position / DV tables")
    p.add_argument("--eq-fraction", type=float, default=0.01, help="equality table: fraction of ids deleted")
    p.add_argument("--row-group-rows", type=int, default=None)
    p.add_argument("--seed", type=int, default=DEFAULT_SEED)
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    p.add_argument("--kinds", nargs="+", choices=list(KINDS), default=list(DEFAULT_KINDS))
    p.add_argument("--rounds", type=int, default=20, help="upserts table: upsert commits")
    p.add_argument("--name", default="scan", help="results are <name>-<device-slug>.json/.png")
    p.add_argument("--peers", nargs="+", choices=PEERS, default=list(PEERS), help="cuda only with a GPU")
    p.add_argument(
        "--cache-dir", default=None, help="default ~/.cache/gpu-engine-bench/scan-r<rows>-f<files>-s<seed>"
    )
    p.add_argument("--regenerate", action="store_true", help="write the tables again even if cached")
    p.add_argument("--out", default=str(rep.DEFAULT_OUT))
    p.add_argument("--quiet-wait", type=float, default=1200.0, help="max seconds to wait for a quiet machine")
    p.add_argument(
        "--no-check-peers",
        dest="check_peers",
        action="store_false",
        help="check only the peers' row counts (default: their rows too, as for gpu-engine)",
    )
    p.add_argument("--peer-timeout", type=float, default=600.0, help="seconds before a worker is killed")
    p.add_argument(
        "--time-budget", type=float, default=240.0, help="seconds of timed calls per worker (fewer repeats)"
    )
    p.add_argument("--profile", choices=("auto", "always", "never"), default="auto")
    p.add_argument("--profile-top", type=int, default=30)
    p.add_argument("--worker", choices=PEERS, help=argparse.SUPPRESS)
    p.add_argument("--generate", choices=list(KINDS), help=argparse.SUPPRESS)
    p.add_argument("--profile-worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--table-dir", help=argparse.SUPPRESS)
    p.add_argument("--check", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--profile-out", help=argparse.SUPPRESS)
    args = p.parse_args()
    workers = {
        "generate": lambda a: generate_kind(Path(a.table_dir), a.generate, a),
        "profile_worker": run_profile,  # before "worker": a profile names its peer with --worker
        "worker": run_worker,
    }
    return rep.run_mode(args, workers, run_driver)


if __name__ == "__main__":
    sys.exit(main())
