"""Compaction on Spark (``local[2]``) vs single-process compaction of the same table, and a scaling model.

    python bench/spark.py [--rows 4000000] [--files 80] [--buckets 4] [--repeat 3] [--master local[2]]
                          [--delete-fraction 0] [--model-groups 64] [--quiet-wait 1200]
                          [--work-dir DIR] [--keep-work] [--out bench/results]

Table. One table is built once (in a subprocess, seeded) in a fresh SQL catalog (SQLite) under
``--work-dir`` (default: a temp dir), with gpu-engine, from bench/compaction.py's row generator (schema
``id long``, ``ts``, ``k``, ``category``, ``payload`` (40 chars), ``amount``, ``r``): partitioned by
``bucket(<buckets>, id)``, ``files`` appends of ``rows / files`` rows each (each append writes one small data
file per bucket), ``write.target-file-size-bytes`` = 512 MiB. With ``--delete-fraction f`` > 0,
``tbl.delete("r < f")`` adds position deletes (default: none). ``tbl.compact(options={"rewrite-all":
"true"})`` then plans one file group per bucket: ``G = buckets`` groups that can run in parallel. A small
warm-up table (the same shape, 20,000 rows in 4 appends) is built beside it. Both are restored before every
measurement from a pristine copy (bench/compaction.py's ``restore``: data hard-linked, catalog copied), so
every measurement rewrites identical files at identical paths from a hot page cache.

Measurements (each in a fresh subprocess; the backend ``cpu``, and ``cuda`` too with a real CUDA device,
else recorded as skipped with the reason):

* ``single-c1-<backend>``: ``tbl.compact(options={"rewrite-all": "true",
  "max-concurrent-file-group-rewrites": "1"}, backend=...)``: one group at a time, each group alone on the
  machine (its throughput is the per-group throughput of one executor with one device);
* ``single-c2-<backend>``: the same with 2 groups at a time (threads of one process);
* ``spark-<backend>``: ``gpu_engine.spark.compact(spark, tbl, options={"rewrite-all": "true"}, ...)`` on a
  ``gpu_engine.spark.local_session(--master)`` (2 task slots: 2 groups at a time, each a Spark job of one
  task whose Python worker calls ``rewrite_group``). The session start is timed apart (``session_start_s``,
  not in the compaction time); then one compaction of the warm-up table in the same session (Python
  workers started, imports done, numba kernels loaded from the shared on-disk cache; ``first_call_s``),
  then the timed compaction of the big table.

Every worker first compacts the warm-up table (checked), then the big one (timed), then checks the result
outside the timing: the rewritten table read with gpu-engine's scan holds exactly the live ids
(bench/compaction.py's ``check``). Measurements are interleaved (per repetition each once) and repeated
``--repeat`` times; the median is reported.

What is derived from one compaction (a ``progress`` callback stamps each group's start, i.e. its submission,
and the arrival of its result on the driver; ``RewriteResult`` times each group's read / order / write where
it runs, i.e. on the executor under Spark):

* ``plan_s``: call -> first group submitted (validation, options, planning); ``commit_s``: last group
  result -> return (the replace commit, serial on the driver); ``groups_wall_s`` in between;
* per group: ``exec_s`` = read + order + write (executor-side), ``driver_wall_s`` = submission -> result on
  the driver, ``dispatch_s`` = their difference (under Spark: the per-job overhead: DataFrame of the
  pickled group, job scheduling, task launch, Arrow to and from the Python worker, collect), ``mb_per_s`` =
  the group's input bytes / exec_s;
* ``overhead_s`` = wall s - max over groups of exec_s (what is not the longest group's own work), for Spark
  and single-process alike; Spark's orchestration overhead is reported as that, as its excess over the
  single-process run with the same concurrency (c2), and as ratios of the wall times;
* ``executor_share``: max group exec_s / wall s and sum of exec_s / (wall s x concurrency): on a GPU, the
  executor-side time vs the total (these are group timings, read + order + write: decode, transfers and
  encode included; the kernels alone are not timed separately).

Peak RSS: single process: the worker's VmHWM reset just before the timed call; Spark: the driver process's
VmHWM likewise, plus ``peak_tree_rss_mb``: the summed RSS of the worker and all its descendants (JVM, Python
daemon and workers), sampled every 0.1 s during the timed call.

Before measuring the driver waits (up to ``--quiet-wait`` s; 0: not at all) for a quiet machine, as
bench/scan.py does. The workers, and Spark's Python workers (through ``PYTHONPATH``), run a copy of
``gpu_engine/`` taken at start (the checkout is shared).

Writes ``spark-<device-slug>.json`` and ``.png``, and ``spark-scaling-model.md`` (the model
``T(N) = T_plan + T_commit + ceil(G / N) * (t_group + o)`` for N executors x 1 device, filled in from this
run's numbers) under ``--out``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parents[1])]

import _report as rep  # noqa: E402
from compaction import (  # noqa: E402  (imports scan first, which puts the SRC_ENV snapshot on sys.path)
    CATALOG_NAME,
    CONTENTION_NOTE,
    DEFAULT_SEED,
    IDENTIFIER,
    TARGET_FILE_SIZE,
    WARM_FILES,
    WARM_ROWS,
    Prepared,
    catalog_props,
    check,
    describe_compaction,
    file_rows,
    load_meta,
    make_file,
    restore,
    summarize,
)
from scan import RESULT_PREFIX, SRC_ENV  # noqa: E402

PEER_PACKAGES = ("pyspark", "py4j", "matplotlib")
MODES = ("single-c1", "single-c2", "spark")
BACKENDS = ("cpu", "cuda")
MODE_LABELS = {
    "single-c1": "single process, 1 group at a time",
    "single-c2": "single process, 2 groups at a time",
    "spark": "Spark {master}, 2 groups at a time",
}
COLORS = {
    ("cpu", "wall"): "#2a7ab9",
    ("cpu", "group"): "#9cc3e4",
    ("cuda", "wall"): "#76b900",
    ("cuda", "group"): "#b9d98a",
}
MODEL_EXECUTORS = (1, 2, 4, 8, 16)
MODEL_FILE = "spark-scaling-model.md"
TREE_SAMPLE_S = 0.1


# -- the table -------------------------------------------------------------------------------------------


def generate(table_dir: Path, rows: int, files: int, args: argparse.Namespace) -> None:
    """Worker: build the partitioned table in ``table_dir/live``; meta.json and live.npy beside it (the
    layout of bench/compaction.py's tables, so its ``restore`` and ``check`` apply)."""
    import numpy as np
    import pyarrow.compute as pc

    import gpu_engine as ge

    start = time.perf_counter()
    (table_dir / "live" / "warehouse").mkdir(parents=True)
    props = catalog_props(table_dir)
    cat = ge.load_catalog(CATALOG_NAME, uri=props["uri"], warehouse=props["warehouse"])
    cat.create_namespace("db")
    rng = np.random.default_rng([args.seed, rows, files])
    keys = rng.permutation(rows).astype(np.int64) + 10**12
    schema = make_file(rng, 0, 1, keys[:1]).schema
    properties = {"format-version": "2", "write.target-file-size-bytes": str(TARGET_FILE_SIZE)}
    spec = [f"bucket({args.buckets}, id)"]
    tbl = cat.create_table(IDENTIFIER, schema=schema, partition_spec=spec, properties=properties)
    live = np.ones(rows, dtype=bool)
    appends: list[dict[str, Any]] = []
    row = 0
    for i, n in enumerate(file_rows(rows, files)):
        batch = make_file(np.random.default_rng([args.seed, rows, files, i]), row, n, keys[row : row + n])
        if args.delete_fraction > 0:
            live[row : row + n] = ~np.asarray(pc.less(batch.column("r"), args.delete_fraction))
        added = tbl.append(batch, backend="cpu")
        size = sum(f.file_size_in_bytes for f in added.files)
        appends.append({"files": len(added.files), "size": size, "rows": n, "start": row})
        row += n
    if args.delete_fraction > 0:
        d = tbl.delete(f"r < {args.delete_fraction!r}", backend="cpu")
        if d.deleted_rows != rows - int(live.sum()):
            raise SystemExit(f"deleted {d.deleted_rows} rows, expected {rows - int(live.sum())}")
    tbl.refresh()
    got = tbl.scan(backend="cpu", columns=["id"]).to_arrow().num_rows
    if got != int(live.sum()):
        raise SystemExit(f"built table scans to {got} rows, expected {int(live.sum())}")
    plan = tbl.compact(options={"rewrite-all": "true"}, dry_run=True).plan
    np.save(table_dir / "live.npy", live)
    live_bytes = sum(a["size"] * live[a["start"] : a["start"] + a["rows"]].mean() for a in appends)
    meta = {
        "rows": rows,
        "files": files,
        "partition_spec": spec,
        "seed": args.seed,
        "delete_fraction": args.delete_fraction,
        "data_files": sum(a["files"] for a in appends),
        "live_rows": int(live.sum()),
        "input_bytes": sum(a["size"] for a in appends),
        "live_bytes": int(live_bytes),
        "planned_groups": len(plan.groups),
        "group_bytes": [g.input_bytes for g in plan.groups],
        "group_files": [len(g.files) for g in plan.groups],
        "catalog": props,
        "metadata_location": tbl.metadata_location.removeprefix("file://"),
        "generate_s": time.perf_counter() - start,
    }
    (table_dir / "meta.json").write_text(json.dumps(meta) + "\n")


# -- worker: one compaction measurement in its own process ---------------------------------------------


class Timeline:
    """``CompactionProgress`` that stamps each group's submission and the arrival of its result."""

    def __init__(self) -> None:
        self.started: dict[int, float] = {}
        self.finished: dict[int, float] = {}

    def group_started(self, group: Any) -> None:
        self.started[group.index] = time.perf_counter()

    def group_finished(self, group: Any, result: Any, error: str | None) -> None:
        self.finished[group.index] = time.perf_counter()


class ProcessTree:
    """This process and all its descendants (the JVM, Spark's Python daemon and workers), from /proc:
    ``snapshot()`` gives their summed RSS (MB), count and CPU seconds; used as a context manager, a thread
    samples the peak RSS every ``every_s``."""

    def __init__(self, every_s: float = TREE_SAMPLE_S) -> None:
        self.every_s, self.peak_mb, self.samples, self.max_processes = every_s, 0.0, 0, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    @staticmethod
    def snapshot() -> tuple[float, int, float]:
        stats: dict[int, list[str]] = {}
        for entry in os.scandir("/proc"):
            if entry.name.isdigit():
                try:
                    stats[int(entry.name)] = Path(entry.path, "stat").read_text().rsplit(")", 1)[1].split()
                except (OSError, IndexError):
                    continue
        tree, frontier = {os.getpid()}, {os.getpid()}
        while frontier:
            frontier = {p for p, f in stats.items() if int(f[1]) in frontier and p not in tree}
            tree |= frontier
        pages, ticks = 0, 0
        for pid in tree & stats.keys():
            ticks += sum(int(v) for v in stats[pid][11:15])  # utime stime cutime cstime
            try:
                pages += int(Path(f"/proc/{pid}/statm").read_text().split()[1])
            except (OSError, IndexError, ValueError):
                continue
        return pages * os.sysconf("SC_PAGE_SIZE") / 2**20, len(tree), ticks / os.sysconf("SC_CLK_TCK")

    def _loop(self) -> None:
        while not self._stop.is_set():
            mb, n, _ = self.snapshot()
            self.peak_mb, self.max_processes = max(self.peak_mb, mb), max(self.max_processes, n)
            self.samples += 1
            self._stop.wait(self.every_s)

    def __enter__(self) -> ProcessTree:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def describe(res: Any, timeline: Timeline, t0: float, t1: float) -> dict[str, Any]:
    """``describe_compaction`` plus the per-group and plan / groups / commit split of one compaction."""
    out = describe_compaction(res)
    groups = []
    for g in res.groups:
        exec_s = g.read_seconds + g.order_seconds + g.write_seconds
        wall = timeline.finished[g.group_index] - timeline.started[g.group_index]
        groups.append(
            {
                "index": g.group_index,
                "files": g.files_rewritten,
                "bytes": g.bytes_rewritten,
                "rows": g.rows,
                "read_s": g.read_seconds,
                "order_s": g.order_seconds,
                "write_s": g.write_seconds,
                "exec_s": exec_s,
                "driver_wall_s": wall,
                "dispatch_s": wall - exec_s,
                "mb_per_s": g.bytes_rewritten / 1e6 / exec_s if exec_s > 0 else None,
            }
        )
    first = min(timeline.started.values()) - t0
    last = max(timeline.finished.values()) - t0
    exec_all = [g["exec_s"] for g in groups]
    return out | {
        "commits": len(res.commits),
        "plan_s": first,
        "groups_wall_s": last - first,
        "commit_s": (t1 - t0) - last,
        "max_group_exec_s": max(exec_all),
        "sum_group_exec_s": sum(exec_all),
        "overhead_s": (t1 - t0) - max(exec_all),
        "group_detail": groups,
    }


def run_worker(args: argparse.Namespace) -> None:
    mode, backend = args.worker.rsplit("-", 1)
    big, warm = Path(args.table_dir), Path(args.warm_dir)
    out: dict[str, Any] = {"measurement": args.worker, "loadavg_at_start": list(os.getloadavg())}
    spark: Any = None
    try:
        import_s, module = rep.once(lambda: __import__("gpu_engine"))
        out |= {"import_s": import_s, "gpu_engine": module.__file__}
        if mode == "spark":
            from gpu_engine.spark import compact as spark_compact
            from gpu_engine.spark import local_session

            out["session_start_s"], spark = rep.once(lambda: local_session(args.master, app_name="bench"))
            spark.sparkContext.setLogLevel("ERROR")
            out["default_parallelism"] = spark.sparkContext.defaultParallelism
            probe = spark.sparkContext.parallelize([0], 1)
            out["executor_gpu_engine"] = probe.map(lambda _: __import__("gpu_engine").__file__).collect()[0]
            options = {"rewrite-all": "true"}  # concurrency: the session's task slots (defaultParallelism)

            def call(tbl: Any, progress: Any = None) -> Any:
                return spark_compact(spark, tbl, options=options, backend=backend, progress=progress)

        else:
            concurrency = mode.removeprefix("single-c")
            options = {"rewrite-all": "true", "max-concurrent-file-group-rewrites": concurrency}

            def call(tbl: Any, progress: Any = None) -> Any:
                return tbl.compact(options=options, backend=backend, progress=progress)

        import gpu_engine as ge

        def load(table_dir: Path) -> Any:
            props = load_meta(table_dir)["catalog"]
            cat = ge.load_catalog(CATALOG_NAME, uri=props["uri"], warehouse=props["warehouse"])
            return cat.load_table(IDENTIFIER)

        checked = Prepared(run=lambda: None, describe=describe_compaction)
        out["first_call_s"], _ = rep.once(lambda: call(load(warm)))
        warm_check = check(args.worker, warm, checked)
        if not warm_check["same_rows"]:
            out |= {"status": "wrong result", "why": f"warm-up table: {warm_check['why']}"}
            return
        tbl = load(big)
        out["peak_rss_warm_up_mb"] = rep.status_mb("VmHWM")
        out["rss_before_timed_mb"] = rep.reset_peak_rss()
        timeline = Timeline()
        if mode == "spark":
            busy0, (_, _, tree_cpu0) = rep._busy_cpu_seconds(), ProcessTree.snapshot()
            with ProcessTree() as tree:
                t0 = time.perf_counter()
                result = call(tbl, timeline)
                t1 = time.perf_counter()
            busy1, (_, _, tree_cpu1) = rep._busy_cpu_seconds(), ProcessTree.snapshot()
            out |= {"peak_tree_rss_mb": tree.peak_mb, "tree_processes": tree.max_processes}
            out["tree_cpu_s"] = tree_cpu1 - tree_cpu0
            if busy0 is not None and busy1 is not None:  # others: not this process nor its descendants
                out["others_busy_cores"] = max(0.0, (busy1 - busy0 - out["tree_cpu_s"]) / (t1 - t0))
        else:
            watch = rep.CpuWatch.start()
            t0 = time.perf_counter()
            result = call(tbl, timeline)
            t1 = time.perf_counter()
            out["others_busy_cores"] = watch.others_busy_cores()
        out["peak_rss_timed_mb"] = rep.peak_rss_since_reset(out["rss_before_timed_mb"])
        out |= {"seconds": t1 - t0, "detail": describe(result, timeline, t0, t1)}
        del result
        out["peak_rss_mb"] = max(out["peak_rss_warm_up_mb"] or 0.0, rep.status_mb("VmHWM") or 0.0) or None
        rep.record_check(out, check(args.worker, big, checked))
    except Exception as exc:
        out |= {"status": "error", "reason": rep.first_line(exc), "peak_rss_mb": rep.status_mb("VmHWM")}
    finally:
        if spark is not None:
            out["session_stop_s"], _ = rep.once(spark.stop)
        rep.print_result(RESULT_PREFIX, out)


# -- driver ----------------------------------------------------------------------------------------------


def base_cmd(args: argparse.Namespace) -> list[str]:
    return rep.script_cmd(
        __file__,
        *("--seed", str(args.seed), "--delete-fraction", repr(args.delete_fraction)),
        *("--buckets", str(args.buckets), "--master", args.master),
    )


def spawn(args: argparse.Namespace, extra: list[str], env: dict[str, str]) -> dict[str, Any]:
    """Run a worker in its own process group (all of it, JVM included, killed after ``--peer-timeout`` s)
    and return its result line as a dict."""
    proc = subprocess.Popen(
        [*base_cmd(args), *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=env[SRC_ENV],  # Spark's Python workers put their cwd first on sys.path: the snapshot there
        start_new_session=True,
    )
    try:
        stdout, stderr = proc.communicate(timeout=args.peer_timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        return {"status": "timeout", "reason": f"worker killed after {args.peer_timeout:g} s"}
    return rep.worker_result(proc.returncode, stdout, stderr, RESULT_PREFIX)


def build_tables(args: argparse.Namespace, work: Path, env: dict[str, str]) -> dict[str, Any]:
    for name, rows, files in (
        ("big", args.rows, args.files),
        ("warm", min(WARM_ROWS, args.rows), min(WARM_FILES, args.files)),
    ):
        d = work / "tables" / name
        extra = ["--generate", "--table-dir", str(d), "--rows", str(rows), "--files", str(files)]
        done = subprocess.run([*base_cmd(args), *extra], env=env, capture_output=True, text=True)
        if done.returncode != 0:
            raise SystemExit(f"building the {name} table failed:\n{done.stdout}{done.stderr}")
        shutil.copytree(d / "live", d / "pristine")
    meta = load_meta(work / "tables" / "big")
    meta |= {"dir": str(work / "tables" / "big"), "warm_dir": str(work / "tables" / "warm")}
    meta["warm"] = {k: load_meta(work / "tables" / "warm")[k] for k in ("rows", "files", "planned_groups")}
    print(
        f"table: {meta['live_rows']:,} of {meta['rows']:,} rows live in {meta['data_files']} data files "
        f"({meta['input_bytes'] / 1e6:.1f} MB), partitioned by {meta['partition_spec'][0]}: "
        f"{meta['planned_groups']} groups planned; built in {meta['generate_s']:.1f} s",
        flush=True,
    )
    return meta


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def summarize_runs(runs: list[dict[str, Any]], meta: dict[str, Any]) -> dict[str, Any]:
    """bench/compaction.py's summary plus the medians of the plan / groups / commit split."""
    out = summarize(runs, meta)
    if out["status"] != "ok":
        return out
    details = [r["detail"] for r in runs]
    for key in ("plan_s", "groups_wall_s", "commit_s", "max_group_exec_s", "sum_group_exec_s", "overhead_s"):
        out[f"median_{key}"] = _median([d[key] for d in details])
    groups = [g for d in details for g in d["group_detail"]]
    out["group_exec_s"] = _median([g["exec_s"] for g in groups])
    out["group_dispatch_s"] = _median([g["dispatch_s"] for g in groups])
    out["group_mb_per_s"] = _median([g["mb_per_s"] for g in groups if g["mb_per_s"]])
    out["group_bytes"] = _median([g["bytes"] for g in groups])
    out["groups"] = len(details[-1]["group_detail"])
    for key in ("session_start_s", "session_stop_s", "default_parallelism", "executor_gpu_engine"):
        if key in runs[-1]:
            values = [r[key] for r in runs]
            out[key] = _median(values) if isinstance(values[0], float) else values[-1]
    tree = [r["peak_tree_rss_mb"] for r in runs if r.get("peak_tree_rss_mb")]
    if tree:
        out["peak_tree_rss_mb"] = max(tree)
    return out


def analyse(results: dict[str, dict[str, Any]], backends: list[str]) -> dict[str, dict[str, Any]]:
    """Per backend: Spark's overhead against single process, and the executor-side share of the time."""
    out: dict[str, dict[str, Any]] = {}
    for b in backends:
        c1, c2, sp = (results.get(f"{m}-{b}", {}) for m in MODES)
        if sp.get("status") != "ok":
            out[b] = {"status": sp.get("status"), "reason": sp.get("reason") or sp.get("why")}
            continue
        wall = sp["median_s"]
        conc = sp.get("default_parallelism") or 2
        a: dict[str, Any] = {
            "status": "ok",
            "spark_s": wall,
            "spark_max_group_exec_s": sp["median_max_group_exec_s"],
            "spark_overhead_s": sp["median_overhead_s"],
            "spark_overhead_fraction": sp["median_overhead_s"] / wall,
            "spark_plan_s": sp["median_plan_s"],
            "spark_commit_s": sp["median_commit_s"],
            "spark_group_dispatch_s": sp["group_dispatch_s"],
            "spark_session_start_s": sp.get("session_start_s"),
            "executor_share": {
                "max_group_exec_over_wall": sp["median_max_group_exec_s"] / wall,
                "sum_group_exec_over_wall_x_slots": sp["median_sum_group_exec_s"] / (wall * conc),
                "read_s": sp["median_read_s"],
                "order_s": sp["median_order_s"],
                "write_s": sp["median_write_s"],
                "what": "executor-side group time (RewriteResult read + order + write, summed over groups "
                "unless 'max') vs the compaction's wall time on the driver; the kernels alone are not "
                "timed separately: these group timings include decode, transfers and encode",
            },
        }
        for name, single in (("single_c1", c1), ("single_c2", c2)):
            if single.get("status") == "ok":
                a[f"{name}_s"] = single["median_s"]
                a[f"{name}_overhead_s"] = single["median_overhead_s"]
                a[f"spark_over_{name}"] = wall / single["median_s"]
        if "single_c2_s" in a:
            a["spark_minus_single_c2_s"] = wall - a["single_c2_s"]
            if a["single_c2_overhead_s"] > 0:
                a["spark_overhead_over_single_c2_overhead"] = (
                    a["spark_overhead_s"] / a["single_c2_overhead_s"]
                )
        out[b] = a
    return out


def predict(
    t_plan: float, t_commit: float, t_group: float, o: float, groups: int, n: int
) -> dict[str, float | int]:
    waves = math.ceil(groups / n)
    return {"n": n, "waves": waves, "seconds": t_plan + t_commit + waves * (t_group + o)}


def scaling_model(
    results: dict[str, dict[str, Any]], meta: dict[str, Any], backends: list[str], model_groups: list[int]
) -> dict[str, Any]:
    """T(N) = T_plan + T_commit + ceil(G / N) * (t_group + o), per measured backend."""
    out: dict[str, Any] = {
        "formula": "T(N) = T_plan + T_commit + ceil(G / N) * (t_group + o)",
        "executors": list(MODEL_EXECUTORS),
        "backends": {},
    }
    for b in backends:
        sp, c1 = results.get(f"spark-{b}", {}), results.get(f"single-c1-{b}", {})
        if sp.get("status") != "ok" or c1.get("status") != "ok":
            why = sp.get("reason") or sp.get("why") or c1.get("reason") or c1.get("why")
            out["backends"][b] = {"status": "not measured", "reason": why}
            continue
        t_plan, t_commit = sp["median_plan_s"], sp["median_commit_s"]
        t_group, o = c1["group_exec_s"], sp["group_dispatch_s"]
        group_bytes = c1["group_bytes"]
        per: dict[str, Any] = {
            "status": "ok",
            "T_plan_s": t_plan,
            "T_commit_s": t_commit,
            "t_group_s": t_group,
            "o_s": o,
            "group_bytes": group_bytes,
            "group_mb_per_s": c1["group_mb_per_s"],
            "single_c1_s": c1["median_s"],
            "sources": {
                "T_plan_s": f"spark-{b}: median of (compaction call -> first group submitted)",
                "T_commit_s": f"spark-{b}: median of (last group result on the driver -> return)",
                "t_group_s": f"single-c1-{b}: median over groups and runs of read+order+write, one group at "
                "a time on the whole machine",
                "o_s": f"spark-{b}: median over groups and runs of (driver-side group wall - executor-side "
                "read+order+write)",
            },
            "predictions": {},
        }
        for g in dict.fromkeys([meta["planned_groups"], *model_groups]):
            rows = []
            base = predict(t_plan, t_commit, t_group, o, g, 1)["seconds"]
            for n in MODEL_EXECUTORS:
                p = predict(t_plan, t_commit, t_group, o, g, n)
                p["speedup_vs_n1"] = base / p["seconds"]
                p["mb_per_s"] = g * group_bytes / 1e6 / p["seconds"]
                if g == meta["planned_groups"]:
                    p["speedup_vs_single_c1_measured"] = c1["median_s"] / p["seconds"]
                rows.append(p)
            per["predictions"][str(g)] = rows
        conc = sp.get("default_parallelism") or 2
        contended = predict(t_plan, t_commit, sp["group_exec_s"], o, meta["planned_groups"], conc)
        per["validation"] = {
            "n": conc,
            "predicted_s_with_measured_spark_group_time": contended["seconds"],
            "spark_group_exec_s": sp["group_exec_s"],
            "measured_spark_s": sp["median_s"],
            "what": "the model at N = the local session's task slots, with t_group taken from the Spark "
            "executors themselves (contended: the slots share this machine's cores), against the measured "
            "Spark wall time",
        }
        out["backends"][b] = per
    return out


def chart(path: Path, payload: dict[str, Any], slug: str) -> Path:
    results, params, table = payload["results"], payload["parameters"], payload["table"]
    backends = [b for b in BACKENDS if any(results.get(f"{m}-{b}", {}).get("status") == "ok" for m in MODES)]
    categories = [MODE_LABELS[m].format(master=params["master"]) for m in MODES]
    series = []
    for b in backends:
        runs = [results.get(f"{m}-{b}", {}) for m in MODES]
        series.append(
            rep.Series(f"{b}: table MB/s (wall)", [r.get("input_mb_per_s") for r in runs], COLORS[b, "wall"])
        )
        series.append(
            rep.Series(
                f"{b}: per-group MB/s (executor-side, median group)",
                [r.get("group_mb_per_s") for r in runs],
                COLORS[b, "group"],
            )
        )
    notes = [
        f"{table['rows']:,} rows, {table['data_files']} data files ({table['input_bytes'] / 1e6:,.0f} MB) in "
        f"{table['planned_groups']} groups ({table['partition_spec'][0]}, rewrite-all); median of "
        f"{params['repeat']}; fresh process per measurement after a warm-up compaction; hot page cache"
    ]
    for b, a in payload["analysis"].items():
        if a.get("status") != "ok":
            notes.append(f"{b}: {a.get('status')}: {a.get('reason')}"[:200])
            continue
        notes.append(
            f"{b}: Spark {a['spark_s']:.2f} s = {a.get('spark_over_single_c2', float('nan')):.2f}x the "
            "single-process c2 time; "
            f"overhead (wall - longest group) {a['spark_overhead_s']:.2f} s vs single c2 "
            f"{a.get('single_c2_overhead_s', float('nan')):.2f} s; per-job dispatch "
            f"{a['spark_group_dispatch_s']:.2f} s; session start {a['spark_session_start_s']:.1f} s (not in "
            f"the wall time)"
        )
    for key, r in results.items():
        if r.get("status") not in ("ok", "skipped"):  # skipped: in the analysis line of its backend
            notes.append(f"{key} {r.get('status')}: {r.get('reason') or r.get('why')}"[:200])
    return rep.grouped_barh(
        path,
        title=f"Compaction of one table: single process vs Spark {params['master']} ({slug})",
        categories=categories,
        series=series,
        xlabel="MB/s of input data files (median run; higher is better)",
        notes=notes,
    )


def _fmt(value: float | None, spec: str = ".2f") -> str:
    return "n/a" if value is None else format(value, spec)


def model_markdown(payload: dict[str, Any], json_name: str) -> str:
    """The scaling model as Markdown, every number from ``payload``."""
    env, dev, table, params = (
        payload["environment"],
        payload["device"],
        payload["table"],
        payload["parameters"],
    )
    model, results = payload["model"], payload["results"]
    g = table["planned_groups"]
    lines = [
        "# Compaction on Spark: a scaling model for N executors x 1 GPU",
        "",
        f"Generated by `bench/spark.py` from the numbers in `{json_name}` (run {env['timestamp']} on "
        f"{env['host']['cpu_model']}, {env['host']['usable_cores']} usable cores; device: "
        f"{dev.get('name') or 'none'} ({dev['detail']})). Command: `{env['command']}`. Do not edit: "
        "re-running the bench rewrites this file.",
        "",
        f"Table: {table['rows']:,} rows in {table['data_files']} data files "
        f"({table['input_bytes'] / 1e6:,.1f} MB), partitioned by `{table['partition_spec'][0]}`; "
        f"`rewrite-all` plans G = {g} file groups of "
        f"{_fmt(statistics.median(table['group_bytes']) / 1e6, ',.1f')} MB (median). Median of "
        f"{params['repeat']} run(s) per measurement.",
        "",
        "## Model",
        "",
        "    T(N) = T_plan + T_commit + ceil(G / N) * (t_group + o)",
        "",
        "* `T_plan`: driver, from the compaction call to the first group submitted (validation, options, "
        "manifest planning); serial.",
        "* `T_commit`: driver, from the last group's result to the return (one `replace` commit: manifests, "
        "manifest list, metadata file, catalog swap); serial.",
        "* `t_group`: one group's rewrite where it runs (`RewriteResult` read + order + write), measured in "
        "a single process running one group at a time with the whole machine to itself: what one executor "
        "with one device does per group.",
        "* `o`: Spark's per-job overhead. Each group is one Spark job of one task. `o` is the group's wall "
        "time seen by the driver (submission to result) minus its executor-side time: building the "
        "DataFrame from the pickled group, scheduling, launching the task, Arrow to and from the Python "
        "worker, and collecting the result. It is on the critical path of every wave, so it is multiplied "
        "by the number of waves.",
        "* The `ceil(G / N)` waves assume equal groups and one group per executor at a time "
        "(`max-concurrent-file-group-rewrites` >= N).",
        "",
    ]
    for b in BACKENDS:
        m = model["backends"][b]
        if m.get("status") != "ok":
            unknown = " The GPU per-group throughput is unknown until measured on a CUDA device." * (
                b == "cuda"
            )
            lines += [f"## Backend `{b}`: {m.get('status')}", "", f"{m.get('reason')}.{unknown}", ""]
            continue
        lines += [
            f"## Backend `{b}`: measured inputs",
            "",
            "| input | value | from |",
            "|---|---|---|",
            f"| T_plan | {_fmt(m['T_plan_s'], '.3f')} s | {m['sources']['T_plan_s']} |",
            f"| T_commit | {_fmt(m['T_commit_s'], '.3f')} s | {m['sources']['T_commit_s']} |",
            f"| t_group | {_fmt(m['t_group_s'], '.3f')} s ({_fmt(m['group_mb_per_s'], ',.1f')} MB/s per "
            f"group) | {m['sources']['t_group_s']} |",
            f"| o | {_fmt(m['o_s'], '.3f')} s | {m['sources']['o_s']} |",
            f"| G | {g} | planned groups of the measured table |",
            "",
            "Measured wall times (driver; Spark session start not included):",
            "",
            "| measurement | wall s | MB/s of input | longest group s | wall - longest group s | plan s | "
            "commit s | per-group dispatch s |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for mode in MODES:
            r = results.get(f"{mode}-{b}", {})
            label = MODE_LABELS[mode].format(master=params["master"])
            if r.get("status") != "ok":
                lines.append(f"| {label} | {r.get('status')} | | | | | | |")
                continue
            lines.append(
                f"| {label} | {_fmt(r['median_s'], '.3f')} | {_fmt(r['input_mb_per_s'], ',.1f')} | "
                f"{_fmt(r['median_max_group_exec_s'], '.3f')} | {_fmt(r['median_overhead_s'], '.3f')} | "
                f"{_fmt(r['median_plan_s'], '.3f')} | {_fmt(r['median_commit_s'], '.3f')} | "
                f"{_fmt(r['group_dispatch_s'], '.3f')} |"
            )
        sp = results[f"spark-{b}"]
        lines += [
            "",
            f"Spark session start: {_fmt(sp.get('session_start_s'), '.1f')} s (once per application, not in "
            "the model).",
            "",
        ]
        for groups, rows in m["predictions"].items():
            hypothetical = int(groups) != g
            lines += [
                f"### Predicted, G = {groups}"
                + (" (hypothetical: the same group size, more groups)" if hypothetical else " (this table)"),
                "",
                "| N executors x 1 device | waves | T(N) s | speedup vs N = 1 | MB/s |"
                + ("" if hypothetical else " vs measured single process (1 group at a time) |"),
                "|---|---|---|---|---|" + ("" if hypothetical else "---|"),
            ]
            for p in rows:
                row = (
                    f"| {p['n']} | {p['waves']} | {_fmt(p['seconds'], '.3f')} | "
                    f"{_fmt(p['speedup_vs_n1'], '.2f')}x | {_fmt(p['mb_per_s'], ',.1f')} |"
                )
                if not hypothetical:
                    row += f" {_fmt(p['speedup_vs_single_c1_measured'], '.2f')}x |"
                lines.append(row)
            lines.append("")
        v = m["validation"]
        lines += [
            f"Check: at N = {v['n']} with the group time the Spark executors themselves measured "
            f"({_fmt(v['spark_group_exec_s'], '.3f')} s: {v['n']} groups sharing this machine's cores), the "
            f"model gives {_fmt(v['predicted_s_with_measured_spark_group_time'], '.3f')} s; Spark measured "
            f"{_fmt(v['measured_spark_s'], '.3f')} s.",
            "",
        ]
    lines += [
        "## Caveats",
        "",
        "* Shared storage bandwidth: the model assumes `t_group` does not grow with N. N executors read and "
        "write through the same object store or file system; once their summed rate (N x the per-group MB/s "
        "above, reading and writing) reaches its bandwidth, `t_group` grows and the speedup flattens. Here "
        "the input is in the local page cache, which is the best case.",
        "* The driver's commit is serial: `T_plan + T_commit` do not shrink with N (Amdahl), and both grow "
        "with the number of files and groups (more manifests to read and write). With partial progress "
        "(`partial-progress.enabled`) there are several commits, each serial on the driver.",
        f"* The group count limits parallelism: with G = {g} groups no more than {g} executors are busy, and "
        "the speedup steps with `ceil(G / N)`: N beyond G buys nothing, and N that does not divide G leaves "
        "executors idle in the last wave. Groups are per partition and capped by "
        "`max-file-group-size-bytes`; unequal groups make the longest group the floor.",
        "* GPU per-group throughput is unknown until measured on a device: with `backend='cuda'` `t_group` "
        "changes (and `o` then becomes a larger share of the time); run this bench on a CUDA host to fill in "
        "the `cuda` section. The group timings are read + order + write (decode, transfers, encode); the "
        "kernels are not timed on their own.",
        f"* `o` was measured on `{params['master']}`, where the driver, the JVM and the Python workers share "
        f"{env['host']['usable_cores']} cores with the groups; on a cluster the driver is not contended by "
        "the executors, and `o` includes network round trips instead.",
        "* Spark session start and Python worker start (imports, numba cache loads, CUDA context) are paid "
        "once per application / worker and excluded here: this bench warms them up before timing.",
        "",
    ]
    return "\n".join(lines)


def run_driver(args: argparse.Namespace) -> int:
    slug, device = rep.device_info()
    backends = [b for b in BACKENDS if b == "cpu" or device["cuda"]]
    measurements = [f"{m}-{b}" for b in backends for m in MODES]
    skipped = {
        f"{m}-{b}": {"status": "skipped", "reason": f"no CUDA device here: {device['detail']}"}
        for b in BACKENDS
        if b not in backends
        for m in MODES
    }
    out_dir = Path(args.out)
    runs: dict[str, list[dict[str, Any]]] = {m: [] for m in measurements}
    failures: list[str] = []
    with rep.work_dir("spark-bench-", args.work_dir, keep=args.keep_work) as work:
        src = work / "src"
        code = rep.snapshot_code(src)
        pythonpath = os.pathsep.join([str(src), *filter(None, [os.environ.get("PYTHONPATH")])])
        env = dict(
            os.environ,
            **{SRC_ENV: str(src), "NUMBA_CACHE_DIR": str(work / "numba"), "PYTHONPATH": pythonpath},
        )
        table = build_tables(args, work, env)
        quiet = rep.quiet_before_measuring(args.quiet_wait)
        big, warm = Path(table["dir"]), Path(table["warm_dir"])
        for i in range(args.repeat):
            for m in measurements:
                if runs[m] and runs[m][-1].get("status") != "ok":
                    continue
                restore(big)
                restore(warm)
                r = spawn(args, ["--worker", m, "--table-dir", str(big), "--warm-dir", str(warm)], env)
                runs[m].append(r)
                ran = {r.get("gpu_engine"), r.get("executor_gpu_engine")} - {None}
                stray = sorted(p for p in ran if not p.startswith(str(src)))
                if stray and r.get("status") == "ok":
                    r |= {"status": "error", "reason": f"ran gpu_engine from {stray}, not the snapshot {src}"}
                if r.get("status") == "ok":
                    d = r["detail"]
                    extra = f"  session start {r['session_start_s']:.1f} s" if "session_start_s" in r else ""
                    print(
                        f"  #{i + 1} {m:15} {r['seconds']:8.3f} s  "
                        f"{table['input_bytes'] / 1e6 / r['seconds']:8.1f} MB/s in  plan {d['plan_s']:.3f}  "
                        f"groups {d['groups_wall_s']:.3f}  commit {d['commit_s']:.3f}  longest group "
                        f"{d['max_group_exec_s']:.3f} s{extra}  others busy "
                        f"{r.get('others_busy_cores') or 0:.2f}",
                        flush=True,
                    )
                else:
                    print(
                        f"  #{i + 1} {m:15} {r.get('status')}: {r.get('reason') or r.get('why')}", flush=True
                    )
        restore(big)
        results = {m: summarize_runs(runs[m], table) for m in measurements} | skipped
        for m in measurements:
            if results[m]["status"] != "ok":
                failures.append(
                    f"{m} {results[m]['status']}: {results[m].get('reason') or results[m].get('why')}"
                )
        rep.note_checkout_changes(code)

    table_out = {
        k: v for k, v in table.items() if k not in ("dir", "warm_dir", "catalog", "metadata_location")
    }
    payload: dict[str, Any] = {
        **rep.header("spark", PEER_PACKAGES, device, slug),
        "parameters": {
            "rows": args.rows,
            "files": args.files,
            "buckets": args.buckets,
            "delete_fraction": args.delete_fraction,
            "repeat": args.repeat,
            "seed": args.seed,
            "master": args.master,
            "warm_up_table": table["warm"],
            "target_file_size_bytes": TARGET_FILE_SIZE,
            "model_groups": args.model_groups,
        },
        "table": table_out,
        "code": code,
        "quiet": quiet,
        "method": {
            "call": {
                "single-c1": "tbl.compact(options={'rewrite-all': 'true', "
                "'max-concurrent-file-group-rewrites': '1'}, backend=b, progress=timeline)",
                "single-c2": "the same with 'max-concurrent-file-group-rewrites': '2'",
                "spark": "gpu_engine.spark.compact(spark, tbl, options={'rewrite-all': 'true'}, backend=b, "
                "progress=timeline) on gpu_engine.spark.local_session(master); concurrency = the session's "
                "defaultParallelism",
            },
            "process": "one fresh subprocess per measurement: imports, (Spark: session start, timed apart), "
            "a compaction of the warm-up table (first_call_s, checked), the timed compaction of the big "
            "table, the check; measurements interleaved per repetition",
            "split": "plan_s: call -> first group submitted; commit_s: last group result on the driver -> "
            "return; per group exec_s = RewriteResult read + order + write (where the group ran), "
            "driver_wall_s = submission -> result on the driver, dispatch_s = driver_wall_s - exec_s",
            "overhead": "overhead_s = wall - max over groups of exec_s; Spark's orchestration overhead vs "
            "single process: analysis.<backend>.spark_overhead_s against single_c2_overhead_s, "
            "spark_minus_single_c2_s and spark_over_single_c*",
            "rates": "input_mb_per_s = bytes of all data files rewritten / 1e6 / median_s; group_mb_per_s = "
            "median over groups and runs of group input bytes / 1e6 / exec_s",
            "peak_rss": "peak_rss_timed_mb: the worker's (the Spark driver's) VmHWM reset just before the "
            "timed call; peak_tree_rss_mb (Spark): summed RSS of the worker and its descendants (JVM, Python "
            f"daemon and workers) sampled every {TREE_SAMPLE_S} s during the timed call",
            "gpu": "with a CUDA device the same measurements with backend='cuda'; analysis.cuda."
            "executor_share is the executor-side group time vs the total (the group timings are what "
            "RewriteResult has: read + order + write; kernels are not timed apart)",
        },
        "results": results,
        "skipped": skipped,
        "runs": runs,
        "analysis": analyse(results, list(BACKENDS)),
        "failures": failures,
        "notes": [CONTENTION_NOTE],
    }
    payload["model"] = scaling_model(results, table, list(BACKENDS), args.model_groups)
    json_path, png_path = rep.write_results(
        out_dir, f"spark-{slug}", payload, lambda path: chart(path, payload, slug)
    )
    model_path = out_dir / MODEL_FILE
    model_path.write_text(model_markdown(json.loads(json_path.read_text()), json_path.name))
    print(f"wrote {json_path}, {png_path} and {model_path}")
    for b, a in payload["analysis"].items():
        if a.get("status") == "ok":
            print(
                f"{b}: Spark {a['spark_s']:.3f} s vs single c2 {a.get('single_c2_s', float('nan')):.3f} s "
                f"(x{a.get('spark_over_single_c2', float('nan')):.2f}); overhead "
                f"{a['spark_overhead_s']:.3f} s "
                f"({a['spark_overhead_fraction']:.0%} of the wall time), single c2 overhead "
                f"{a.get('single_c2_overhead_s', float('nan')):.3f} s"
            )
    return rep.exit_status(failures)


def main() -> int:
    p = rep.arg_parser(__doc__)
    p.add_argument("--rows", type=int, default=4_000_000)
    p.add_argument("--files", type=int, default=80, help="appends (each writes one file per bucket)")
    p.add_argument("--buckets", type=int, default=4, help="bucket(N, id) partitions: the groups planned")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--master", default="local[2]", help="Spark master of the local session")
    p.add_argument("--delete-fraction", type=float, default=0.0, help="rows deleted by position deletes")
    p.add_argument("--model-groups", type=int, nargs="*", default=[64], help="extra G for the model")
    rep.add_run_options(p, seed=DEFAULT_SEED)
    p.add_argument("--worker", choices=[f"{m}-{b}" for b in BACKENDS for m in MODES], help=argparse.SUPPRESS)
    p.add_argument("--generate", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--table-dir", help=argparse.SUPPRESS)
    p.add_argument("--warm-dir", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.rows < args.files or args.files < 1 or args.buckets < 1:
        p.error("need rows >= files >= 1 and buckets >= 1")
    workers = {"generate": lambda a: generate(Path(a.table_dir), a.rows, a.files, a), "worker": run_worker}
    return rep.run_mode(args, workers, run_driver)


if __name__ == "__main__":
    sys.exit(main())
