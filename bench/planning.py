"""Scan planning: gpu-engine's columnar planner vs PyIceberg's ``plan_files`` on one large generated table.

    python bench/planning.py [--files 100000] [--manifests 500] [--out bench/results] [--cache-dir DIR]
                             [--regenerate] [--repeat 3] [--profile]

The table (see ``_gen_table.py``; written by PyIceberg, cached in ``--cache-dir``, default
``/tmp/gpu-engine-bench/planning-<files>-<manifests>``) has ``--files`` data files in ``--manifests``
manifests, partitioned by ``day(ts)`` with files of random days in every manifest. Cases:

- ``ts`` window of whole days keeping ~1% of the files (per-file partition pruning; the target case),
- ``id`` range keeping exactly 1% (``id`` is no partition column: metrics pruning on bounds only),
- ``true`` (no filter: every file planned).

Per case each engine runs in its own subprocess (so its peak RSS is that engine's alone): load the table
through the SQL catalog, one warm-up plan, then ``--repeat`` timed plans (best and median). Both engines
must keep exactly the same set of data files, and the count the generator's layout predicts; any
difference is recorded and fails the run. ``--profile`` adds a cProfile of one gpu-engine plan of the
target case (manifests read serially: cProfile only sees the main thread). The workers run on a copy of
``gpu_engine/`` taken at start (the checkout is shared; ``--no-snapshot-code`` runs the checkout itself);
the JSON records its fingerprint and whether the checkout changed during the run. Before the measured
workers, one unmeasured gpu-engine worker fills numba's on-disk cache (``jit_prime`` in the JSON: its first
plan includes the JIT compilation a fresh install pays once), so compilation does not inflate a measured
process's first plan or peak RSS (``--no-prime`` skips it).

Writes ``planning-<cpu-slug>.json`` and ``.png`` (and ``planning-profile-<cpu-slug>.txt``) under ``--out``.
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
import resource
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SRC_ENV = "PLANNING_BENCH_SRC"  # a snapshot of gpu_engine/ for the workers (see --no-snapshot-code)
_SNAPSHOT = [os.environ[SRC_ENV]] if os.environ.get(SRC_ENV) else []
sys.path[:0] = [str(Path(__file__).resolve().parent), *_SNAPSHOT, str(Path(__file__).resolve().parents[1])]

import _report as rep  # noqa: E402
from _gen_table import (  # noqa: E402
    CATALOG_NAME,
    DEFAULT_SEED,
    GeneratedTable,
    ensure_table,
    load_generated,
)

ENGINES = ("gpu-engine", "pyiceberg")
PEER_PACKAGES = ("pyiceberg", "pyiceberg-core", "fastavro", "matplotlib")
TARGET_SPEEDUP = 5.0
TARGET_CASE = "ts"
KEEP_FRACTION = 0.01
RESULT_PREFIX = "PLANNING-RESULT "
CONTENTION_NOTE = rep.contention_note("while the timed runs ran", "the measuring process")


@dataclass(frozen=True)
class Case:
    key: str
    label: str
    filter: str
    expected_files: int


def ts_window(table: GeneratedTable) -> tuple[int, int, int]:
    """(first day index, days, files kept) of the whole-day window (3 or 4 days) whose file count is closest
    to KEEP_FRACTION of the files (earliest on ties)."""
    per_day = table.files_per_day
    goal = KEEP_FRACTION * table.files
    best: tuple[float, int, int, int] | None = None
    for days in (3, 4):
        for first in range(len(per_day) - days + 1):
            kept = sum(per_day[first : first + days])
            key = (abs(kept - goal), first, days, kept)
            if best is None or key < best:
                best = key
    assert best is not None
    return best[1], best[2], best[3]


def cases(table: GeneratedTable) -> list[Case]:
    first, days, ts_kept = ts_window(table)
    lo, hi = table.day(first), table.day(first + days)
    n = max(1, round(KEEP_FRACTION * table.files))
    a = (table.files - n) // 3  # files a .. a+n-1 hold ids [a*stride, (a+n)*stride)
    id_lo, id_hi = a * table.id_stride, (a + n) * table.id_stride - 1
    return [
        Case(
            "ts",
            f"ts, {days} days (partition)",
            f"ts >= '{lo.isoformat()}T00:00:00' and ts < '{hi.isoformat()}T00:00:00'",
            ts_kept,
        ),
        Case("id", "id range (metrics only)", f"id >= {id_lo} and id <= {id_hi}", n),
        Case("true", "true (all files)", "true", table.files),
    ]


# -- worker: one engine, one filter, in its own process ---------------------------------------------------


def _peak_rss_mb() -> float:
    """This process's peak RSS: ``VmHWM`` (the high-water mark of this process image), else ``ru_maxrss``.

    ``ru_maxrss`` survives ``exec``: a child spawned by a large parent starts with the parent's RSS as its
    maximum, so it cannot tell a small worker's peak; ``VmHWM`` belongs to the new image only.
    """
    peak = rep.status_mb("VmHWM")
    return peak if peak is not None else _ru_maxrss_mb()


def _ru_maxrss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def _digest(paths: list[str]) -> str:
    return hashlib.sha256("\n".join(paths).encode()).hexdigest()


def _pyiceberg_planner(table: GeneratedTable, expr: str) -> tuple[Callable[[], Any], Callable[[Any], Any]]:
    from pyiceberg.catalog.sql import SqlCatalog

    tbl = SqlCatalog(CATALOG_NAME, uri=table.catalog_uri, warehouse=table.warehouse).load_table(
        table.identifier
    )

    def plan() -> list[Any]:
        return list(tbl.scan(row_filter=expr).plan_files())

    def describe(tasks: list[Any]) -> dict[str, Any]:
        return {"tasks": len(tasks), "paths": sorted({t.file.file_path for t in tasks})}

    return plan, describe


def _ours_planner(
    table: GeneratedTable, expr: str, max_workers: int | None = None
) -> tuple[Callable[[], Any], Callable[[Any], Any]]:
    import gpu_engine as ge

    tbl = ge.load_catalog(CATALOG_NAME, uri=table.catalog_uri, warehouse=table.warehouse).load_table(
        table.identifier
    )
    scan = tbl.scan(filter=expr)
    if max_workers is not None:
        scan = dataclasses.replace(scan, options=dataclasses.replace(scan.options, max_workers=max_workers))

    def plan() -> Any:
        return scan.plan()

    def describe(plan: Any) -> dict[str, Any]:
        return {
            "tasks": len(plan.tasks),
            "paths": sorted({t.file.path for t in plan.tasks}),
            "summary": dataclasses.asdict(plan.summary),
        }

    return plan, describe


def run_worker(args: argparse.Namespace) -> None:
    table = load_generated(Path(args.cache_dir), args.files, args.manifests, args.seed)
    if table is None:
        raise SystemExit(f"no generated table in {args.cache_dir}")
    rss_start = _peak_rss_mb()
    factory = _ours_planner if args.worker == "gpu-engine" else _pyiceberg_planner
    load_s, (plan, describe) = rep.once(lambda: factory(table, args.filter))
    rss_loaded = _peak_rss_mb()
    warmup_s, first = rep.once(plan)
    warm_paths = describe(first)["paths"]
    del first
    peak_cold = _peak_rss_mb()
    rss_warm = rep.reset_peak_rss()
    watch = rep.CpuWatch.start()
    timing, result = rep.measure(plan, args.repeat)
    busy = watch.others_busy_cores()
    peak_timed = rep.peak_rss_since_reset(rss_warm)
    described = describe(result)
    paths = described.pop("paths")
    Path(args.paths_out).write_text("\n".join(paths) + "\n")
    out: dict[str, Any] = {
        **timing.to_json(),
        "warmup_s": warmup_s,
        "load_s": load_s,
        "peak_rss_mb": max(peak_cold, peak_timed or 0.0),
        "peak_rss_timed_mb": peak_timed,
        "rss_before_timed_mb": rss_warm,
        "ru_maxrss_mb": _ru_maxrss_mb(),
        "rss_before_load_mb": rss_start,
        "rss_after_load_mb": rss_loaded,
        "files_kept": len(paths),
        "paths_sha256": _digest(paths),
        "warmup_same_files": warm_paths == paths,
        "others_busy_cores": busy,
        "engine_source": _engine_source(args.worker),
        **described,
    }
    if args.profile_out:
        out["profile"] = _profile(table, args.filter, Path(args.profile_out), args.profile_top)
    rep.print_result(RESULT_PREFIX, out)


def _engine_source(engine: str) -> str:
    module = sys.modules["gpu_engine" if engine == "gpu-engine" else "pyiceberg"]
    return str(Path(module.__file__ or "?").parent)


def _profile(table: GeneratedTable, expr: str, path: Path, top: int) -> dict[str, Any]:
    """cProfile one serial gpu-engine plan (max_workers=1: cProfile sees only the calling thread)."""
    plan, _ = _ours_planner(table, expr, max_workers=1)
    plan()  # warm (layouts, imports)
    serial_s, _ = rep.once(plan)
    profiler = cProfile.Profile()
    wall_s, _ = rep.once(lambda: profiler.runcall(plan))
    text = io.StringIO()
    stats = pstats.Stats(profiler, stream=text)
    stats.sort_stats("cumulative").print_stats(top)
    stats.sort_stats("tottime").print_stats(top)
    header = (
        f"gpu-engine plan, filter {expr!r}, manifests read serially (max_workers=1)\n"
        f"serial plan without profiler: {serial_s:.3f} s; under cProfile: {wall_s:.3f} s\n"
    )
    path.write_text(header + text.getvalue())
    return {"serial_s": serial_s, "profiled_s": wall_s, "path": str(path)}


# -- driver -----------------------------------------------------------------------------------------------


def spawn(
    engine: str,
    case: Case,
    args: argparse.Namespace,
    table: GeneratedTable,
    work: Path,
    profile: Path | None,
    env: dict[str, str],
    repeat: int | None = None,
) -> tuple[dict[str, Any], list[str]]:
    paths_out = work / f"{case.key}-{engine}.txt"
    cmd = rep.script_cmd(
        __file__,
        "--worker",
        engine,
        "--filter",
        case.filter,
        "--files",
        str(table.files),
        "--manifests",
        str(table.manifests),
        "--seed",
        str(table.seed),
        "--cache-dir",
        table.cache_dir,
        "--repeat",
        str(repeat or args.repeat),
        "--paths-out",
        str(paths_out),
    )
    if profile is not None:
        cmd += ["--profile-out", str(profile), "--profile-top", str(args.profile_top)]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False, env=env)
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith(RESULT_PREFIX)]
    if done.returncode != 0 or not lines:
        sys.stderr.write(done.stdout + done.stderr)
        raise SystemExit(f"{engine} worker failed on case {case.key!r} (exit {done.returncode})")
    return json.loads(lines[-1][len(RESULT_PREFIX) :]), paths_out.read_text().split()


def validate(table: GeneratedTable) -> dict[str, Any]:
    """The generated table loads in PyIceberg and in gpu-engine (metadata file and SQL catalog) alike."""
    from pyiceberg.catalog.sql import SqlCatalog

    import gpu_engine as ge

    theirs = SqlCatalog(CATALOG_NAME, uri=table.catalog_uri, warehouse=table.warehouse).load_table(
        table.identifier
    )
    by_file = ge.load_table(table.metadata_location.removeprefix("file://"))
    by_catalog = ge.load_catalog(CATALOG_NAME, uri=table.catalog_uri, warehouse=table.warehouse).load_table(
        table.identifier
    )
    snap = theirs.current_snapshot()
    ours = [t.metadata.current_snapshot() for t in (by_file, by_catalog)]
    checks = {
        "pyiceberg_snapshot_id": snap.snapshot_id if snap else None,
        "gpu_engine_file_snapshot_id": ours[0].snapshot_id if ours[0] else None,
        "gpu_engine_catalog_snapshot_id": ours[1].snapshot_id if ours[1] else None,
        "pyiceberg_format_version": theirs.format_version,
        "gpu_engine_format_version": by_catalog.format_version,
        "same_metadata_location": theirs.metadata_location == by_catalog.metadata_location,
    }
    ids = {checks[k] for k in checks if k.endswith("snapshot_id")}
    if ids != {table.snapshot_id} or not checks["same_metadata_location"]:
        raise SystemExit(f"the generated table does not load the same everywhere: {checks}")
    return checks


def _diff(a: list[str], b: list[str], limit: int = 5) -> dict[str, Any]:
    sa, sb = set(a), set(b)
    return {
        "only_gpu_engine": sorted(sa - sb)[:limit],
        "only_pyiceberg": sorted(sb - sa)[:limit],
        "counts": [len(sa - sb), len(sb - sa)],
    }


def run_driver(args: argparse.Namespace) -> int:
    cache_dir = Path(args.cache_dir or f"/tmp/gpu-engine-bench/planning-{args.files}-{args.manifests}")
    print(f"table: {cache_dir} ({args.files:,} files in {args.manifests:,} manifests)", flush=True)
    table, generated_now = ensure_table(
        cache_dir, args.files, args.manifests, seed=args.seed, regenerate=args.regenerate
    )
    if generated_now:
        print(f"  generated in {table.generate_s:.1f} s", flush=True)
    slug = rep.cpu_slug()
    out_dir = Path(args.out)
    results: list[dict[str, Any]] = []
    failures: list[str] = []
    with tempfile.TemporaryDirectory(prefix="planning-bench-") as tmp:
        work = Path(tmp)
        env = dict(os.environ)
        if args.snapshot_code:  # the checkout is shared: every worker plans with the code as it is now
            src = work / "src"
            code = rep.snapshot_code(src)
            env[SRC_ENV] = str(src)
            sys.path.insert(0, str(src))
        else:
            code = {"snapshot": False, "gpu_engine_sha256": rep.code_fingerprint(rep.PACKAGE)}
        validation = validate(table)
        prime: dict[str, Any] | None = None
        if args.prime:  # compile (and cache on disk) numba code once, so no measured process pays for it
            case = cases(table)[0]
            primed, _ = spawn("gpu-engine", case, args, table, work, None, env, repeat=1)
            prime = {"case": case.key, "first_plan_s": primed["warmup_s"]} | {
                k: primed[k] for k in ("peak_rss_mb", "best_s", "engine_source")
            }
            print(f"  primed numba's cache: first plan {primed['warmup_s']:.2f} s", flush=True)
        for case in cases(table):
            if args.cases and case.key not in args.cases:
                continue
            per_engine: dict[str, dict[str, Any]] = {}
            paths: dict[str, list[str]] = {}
            for engine in ENGINES:
                profile = None
                if args.profile and engine == "gpu-engine" and case.key == TARGET_CASE:
                    profile = out_dir / f"planning-profile-{slug}.txt"
                    out_dir.mkdir(parents=True, exist_ok=True)
                per_engine[engine], paths[engine] = spawn(engine, case, args, table, work, profile, env)
                r = per_engine[engine]
                print(
                    f"  {case.key:5} {engine:10} best {r['best_s'] * 1e3:9.1f} ms  median "
                    f"{r['median_s'] * 1e3:9.1f} ms  first {r['warmup_s']:6.2f} s  peak RSS "
                    f"{r['peak_rss_mb']:6.0f} MB (timed plans {r['peak_rss_timed_mb'] or 0:6.0f} MB)  "
                    f"files {r['files_kept']:6,}  others busy {r['others_busy_cores'] or 0:.2f} cores",
                    flush=True,
                )
            ours, theirs = per_engine["gpu-engine"], per_engine["pyiceberg"]
            match = paths["gpu-engine"] == paths["pyiceberg"]
            expected_ok = ours["files_kept"] == case.expected_files == theirs["files_kept"]
            entry: dict[str, Any] = {
                "case": case.key,
                "label": case.label,
                "filter": case.filter,
                "expected_files": case.expected_files,
                "kept_fraction": theirs["files_kept"] / table.files,
                "plans_match": match,
                "files_as_expected": expected_ok,
                "speedup_best": theirs["best_s"] / ours["best_s"],
                "speedup_median": theirs["median_s"] / ours["median_s"],
                "engines": per_engine,
            }
            if not match:
                entry["difference"] = _diff(paths["gpu-engine"], paths["pyiceberg"])
                failures.append(f"{case.key}: the engines planned different files {entry['difference']}")
            if not expected_ok:
                failures.append(
                    f"{case.key}: expected {case.expected_files} files, gpu-engine kept "
                    f"{ours['files_kept']}, PyIceberg {theirs['files_kept']}"
                )
            if not (ours["warmup_same_files"] and theirs["warmup_same_files"]):
                failures.append(f"{case.key}: a warm-up plan differs from the timed plan")
            print(f"  {case.key:5} speedup {entry['speedup_best']:.2f}x  plans match: {match}", flush=True)
            results.append(entry)

    rep.note_checkout_changes(code)
    target = next((r for r in results if r["case"] == TARGET_CASE), None)
    payload: dict[str, Any] = {
        "bench": "planning",
        "environment": rep.environment(PEER_PACKAGES),
        "table": {
            **{k: v for k, v in table.to_json().items() if k != "files_per_day"},
            "files_per_manifest": table.files / table.manifests,
            "days": len(table.files_per_day),
            "generated_now": generated_now,
            "writer": "pyiceberg write_manifest/write_manifest_list (one Avro block per entry, deflate) "
            "+ catalog.commit_table",
            "validation": validation,
        },
        "code": code,
        "jit_prime": prime,
        "method": {
            "repeat": args.repeat,
            "warmup": 1,
            "process": "one subprocess per engine and case; peak_rss_mb = peak RSS (VmHWM) of that process "
            "over imports, table load, warm-up (first plan: may include JIT compilation) and timed plans; "
            "peak_rss_timed_mb = peak over the timed plans only (VmHWM reset after the warm-up, when "
            "rss_before_timed_mb was resident); rss_before_load_mb / rss_after_load_mb = VmHWM before and "
            "after importing the engine and loading the table; ru_maxrss_mb for reference only (it "
            "inherits the spawning driver's RSS across exec)",
            "pyiceberg": "list(table.scan(row_filter=F).plan_files())",
            "gpu-engine": "table.scan(filter=F).plan()",
            "speedup": "pyiceberg seconds / gpu-engine seconds (best of repeat)",
        },
        "target": {
            "text": "plan time >= 5x faster than PyIceberg's plan_files, filter keeping ~1%, 2-core machine",
            "case": TARGET_CASE,
            "required_speedup": TARGET_SPEEDUP,
            "speedup": target["speedup_best"] if target else None,
            "met": bool(target and target["plans_match"] and target["speedup_best"] >= TARGET_SPEEDUP),
            "usable_cores": rep.usable_cores(),
            "two_core_machine": rep.usable_cores() == 2,
        },
        "cases": results,
        "failures": failures,
        "notes": [CONTENTION_NOTE],
    }
    return rep.finish(
        out_dir, f"planning-{slug}", payload, lambda path: chart(path, results, table, slug), failures
    )


def ms(result: dict[str, Any], engine: str) -> float:
    return float(result["engines"][engine]["best_s"]) * 1e3


def chart(path: Path, results: list[dict[str, Any]], table: GeneratedTable, slug: str) -> Path:
    categories = [
        f"{r['label']}: {r['engines']['pyiceberg']['files_kept']:,} files ({r['kept_fraction']:.2%})"
        for r in results
    ]
    target = next((r for r in results if r["case"] == TARGET_CASE), None)
    notes = [
        "pairs: gpu-engine / PyIceberg, each in its own process; speedup = PyIceberg time / gpu-engine time"
    ]
    if target is not None:
        met = target["plans_match"] and target["speedup_best"] >= TARGET_SPEEDUP
        notes.append(
            f"target: {TARGET_CASE} case >= {TARGET_SPEEDUP:.0f}x on a 2-core machine: "
            f"{'met' if met else 'NOT met'} ({target['speedup_best']:.2f}x, {rep.usable_cores()} cores)"
        )
    for r in results:
        ours, theirs = r["engines"]["gpu-engine"], r["engines"]["pyiceberg"]
        notes.append(
            f"{r['case']}: {r['speedup_best']:.1f}x faster (best), {r['speedup_median']:.1f}x (median); "
            f"peak RSS {ours['peak_rss_mb']:.0f} / {theirs['peak_rss_mb']:.0f} MB (timed plans "
            f"{ours['peak_rss_timed_mb'] or 0:.0f} / {theirs['peak_rss_timed_mb'] or 0:.0f} MB); first plan "
            f"{ours['warmup_s']:.2f} s vs {theirs['warmup_s']:.2f} s; plans match: {r['plans_match']}; "
            f"others busy {ours['others_busy_cores'] or 0:.2f} / {theirs['others_busy_cores'] or 0:.2f} cores"
        )
    return rep.grouped_barh(
        path,
        title=f"Scan planning, {table.files:,} data files in {table.manifests:,} manifests ({slug})",
        categories=categories,
        series=[
            rep.Series(
                "gpu-engine scan().plan()",
                [r["engines"]["gpu-engine"]["best_s"] * 1e3 for r in results],
                "#2a7ab9",
            ),
            rep.Series(
                "PyIceberg plan_files()",
                [r["engines"]["pyiceberg"]["best_s"] * 1e3 for r in results],
                "#999999",
            ),
        ],
        xlabel="plan time, ms (best of runs; lower is better)",
        notes=notes,
    )


def main() -> int:
    p = rep.arg_parser(__doc__)
    p.add_argument("--files", type=int, default=100_000)
    p.add_argument("--manifests", type=int, default=500)
    p.add_argument("--out", default=str(rep.DEFAULT_OUT))
    p.add_argument(
        "--cache-dir", default=None, help="default /tmp/gpu-engine-bench/planning-<files>-<manifests>"
    )
    p.add_argument("--regenerate", action="store_true", help="write the table again even if cached")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--seed", type=int, default=DEFAULT_SEED)
    p.add_argument("--cases", nargs="*", choices=("ts", "id", "true"), help="default: all")
    p.add_argument("--profile", action="store_true", help="cProfile one gpu-engine plan of the ts case")
    p.add_argument("--profile-top", type=int, default=25)
    p.add_argument(
        "--no-prime",
        dest="prime",
        action="store_false",
        help="skip the unmeasured gpu-engine run that fills numba's on-disk cache before the measured ones",
    )
    p.add_argument(
        "--no-snapshot-code",
        dest="snapshot_code",
        action="store_false",
        help="run the workers on the checkout's gpu_engine/ as it is at each spawn (default: on a copy taken "
        "at start, so edits made meanwhile in a shared checkout cannot mix code versions within one run)",
    )
    p.add_argument("--worker", choices=ENGINES, help=argparse.SUPPRESS)
    p.add_argument("--filter", help=argparse.SUPPRESS)
    p.add_argument("--paths-out", help=argparse.SUPPRESS)
    p.add_argument("--profile-out", help=argparse.SUPPRESS)
    args = p.parse_args()
    return rep.run_mode(args, {"worker": run_worker}, run_driver)


if __name__ == "__main__":
    sys.exit(main())
