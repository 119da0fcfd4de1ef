"""Shared plumbing for the benchmarks: environment capture, the code snapshot, timing, waiting for a quiet
machine, worker processes, target verdicts, JSON and PNG output.

Every bench writes ``bench/results/<bench>-<device-slug>.json`` (plus a PNG) naming the machine, the
device and the versions, so results from different machines sit side by side in the repository.
Benchmarks measure; they are not timed tests: compare as ratios within one run.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import gc
import hashlib
import importlib.metadata as md
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import tomllib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

REPO_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = REPO_ROOT / "bench" / "results"
PACKAGE = REPO_ROOT / "gpu_engine"
BASE_PACKAGES = ("numpy", "numba", "numba-cuda", "cuda-bindings", "pyarrow")

QUIET_LOAD_BELOW = 0.5  # wait_quiet: 1-minute load average
QUIET_CORES = 0.2  # wait_quiet: cores other processes use

R = TypeVar("R")


# -- environment ---------------------------------------------------------------------------------------


def cpu_model() -> str:
    """The CPU's marketing name from /proc/cpuinfo (falls back to platform.processor())."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return platform.processor() or "unknown"
    for line in text.splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def usable_cores() -> int:
    """Cores this process may run on (the affinity mask), which is what the parallel loops get."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _memory_total_bytes() -> int | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def host_info() -> dict[str, Any]:
    return {
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpu_model": cpu_model(),
        "cores": os.cpu_count(),
        "usable_cores": usable_cores(),
        "memory_bytes": _memory_total_bytes(),
        "loadavg_at_start": list(os.getloadavg()),
    }


def _project_version() -> str | None:
    try:
        return md.version("gpu-engine")
    except md.PackageNotFoundError:
        pass
    try:
        with (REPO_ROOT / "pyproject.toml").open("rb") as f:
            return str(tomllib.load(f)["project"]["version"])
    except (OSError, KeyError):
        return None


def versions(extra: Sequence[str] = ()) -> dict[str, str | None]:
    """Python, gpu-engine and package versions (None when a package is not installed)."""
    out: dict[str, str | None] = {"python": platform.python_version(), "gpu-engine": _project_version()}
    for name in (*BASE_PACKAGES, *extra):
        try:
            out[name] = md.version(name)
        except md.PackageNotFoundError:
            out[name] = None
    return out


def git_state() -> dict[str, Any]:
    """The checkout's commit (None before the first commit) and whether the tree has local changes."""

    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(["git", *args], cwd=REPO_ROOT, capture_output=True, text=True, timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            return None
        return done.stdout.strip() if done.returncode == 0 else None

    status = git("status", "--porcelain")
    return {"commit": git("rev-parse", "HEAD"), "dirty": bool(status) if status is not None else None}


def environment(extra_packages: Sequence[str] = ()) -> dict[str, Any]:
    """The common header of every results file."""
    return {
        "timestamp": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "host": host_info(),
        "versions": versions(extra_packages),
        "git": git_state(),
    }


def header(bench: str, packages: Sequence[str], device: Mapping[str, Any], slug: str) -> dict[str, Any]:
    """The first keys of a results file: the bench, ``environment(packages)``, the device with its slug."""
    return {"bench": bench, "environment": environment(packages), "device": {**device, "slug": slug}}


def slugify(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def cpu_slug() -> str:
    """Names a CPU-only run after the host: ``cpu-amd-epyc-2c``."""
    model = re.sub(r"\(r\)|\(tm\)|\bcpu\b|@.*$|\d+-core processor", "", cpu_model().lower())
    return slugify(f"cpu {model} {usable_cores()}c")


def device_info() -> tuple[str, dict[str, Any]]:
    """(slug, description): a real CUDA device names the run, else the CPU."""
    from gpu_engine.backend.select import probe_cuda

    probe = probe_cuda()
    if probe.available and not probe.simulated:
        from numba import cuda

        name = cuda.get_current_device().name
        name = name.decode() if isinstance(name, bytes) else str(name)
        return slugify(name), {"cuda": True, "detail": probe.detail, "name": name}
    return cpu_slug(), {"cuda": False, "detail": probe.detail}


# -- the code measured ------------------------------------------------------------------------------------


def code_fingerprint(package: Path) -> str:
    """sha256 over the relative paths and contents of the package's ``.py`` files."""
    h = hashlib.sha256()
    for path in sorted(package.rglob("*.py")):
        h.update(str(path.relative_to(package)).encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


def snapshot_code(src: Path) -> dict[str, Any]:
    """Copy the checkout's ``gpu_engine/`` to ``src/gpu_engine`` for the workers (the checkout is shared:
    edits made meanwhile cannot mix code versions within one run); the results' ``code`` record of it."""
    shutil.copytree(PACKAGE, src / "gpu_engine", ignore=shutil.ignore_patterns("__pycache__"))
    return {"snapshot": True, "gpu_engine_sha256": code_fingerprint(src / "gpu_engine")}


def note_checkout_changes(code: dict[str, Any]) -> None:
    """Add to ``code`` the checkout's fingerprint at the end and whether it changed during the run."""
    code["checkout_sha256_at_end"] = code_fingerprint(PACKAGE)
    code["checkout_changed_during_run"] = code["checkout_sha256_at_end"] != code["gpu_engine_sha256"]


# -- timing ---------------------------------------------------------------------------------------------


def _busy_cpu_seconds() -> float | None:
    """CPU seconds the whole machine has spent busy (not idle or iowait) since boot, from /proc/stat."""
    try:
        fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    except OSError:
        return None
    ticks = [int(f) for f in fields]
    busy = sum(ticks[:8]) - ticks[3] - ticks[4]  # user nice system [idle iowait] irq softirq steal
    return busy / os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class CpuWatch:
    """How busy the machine's other processes kept the cores while a measurement ran."""

    wall: float
    busy: float | None
    own: float

    @staticmethod
    def start() -> CpuWatch:
        t = os.times()
        return CpuWatch(time.perf_counter(), _busy_cpu_seconds(), t.user + t.system)

    def others_busy_cores(self) -> float | None:
        """Average cores used by other processes since ``start`` (0 on a quiet machine)."""
        now = CpuWatch.start()
        if self.busy is None or now.busy is None:
            return None
        return max(0.0, ((now.busy - self.busy) - (now.own - self.own)) / (now.wall - self.wall))


@dataclass(frozen=True)
class Timing:
    """Wall-clock seconds of repeated runs of one measured call."""

    runs_s: tuple[float, ...]

    @property
    def best_s(self) -> float:
        return min(self.runs_s)

    @property
    def median_s(self) -> float:
        return statistics.median(self.runs_s)

    def rate(self, units: float, *, best: bool = True) -> float:
        """``units`` per second (M rows/s when ``units`` is rows / 1e6)."""
        return units / (self.best_s if best else self.median_s)

    def to_json(self) -> dict[str, Any]:
        return {
            "best_s": round(self.best_s, 6),
            "median_s": round(self.median_s, 6),
            "runs_s": [round(t, 6) for t in self.runs_s],
        }


def measure(fn: Callable[[], R], repeat: int, sync: Callable[[], object] | None = None) -> tuple[Timing, R]:
    """Run ``fn`` ``repeat`` times (a collection first, ``sync`` before the clock stops); last result."""
    runs: list[float] = []
    result: R | None = None
    for _ in range(repeat):
        result = None  # free the previous output before timing the next run
        gc.collect()
        start = time.perf_counter()
        result = fn()
        if sync is not None:
            sync()
        runs.append(time.perf_counter() - start)
    assert result is not None
    return Timing(tuple(runs)), result


def once(fn: Callable[[], R], sync: Callable[[], object] | None = None) -> tuple[float, R]:
    """Seconds of a single call (warm-ups: includes JIT compilation)."""
    start = time.perf_counter()
    result = fn()
    if sync is not None:
        sync()
    return time.perf_counter() - start, result


def wait_for_quiet(max_wait_s: float, *, below_cores: float = 0.2, window_s: float = 2.0) -> float:
    """Wait (at most ``max_wait_s``) until other processes use fewer than ``below_cores`` cores over a
    ``window_s`` window; returns the seconds waited. For shared machines, where contention from other
    work would otherwise land in the timings."""
    start = time.perf_counter()
    while True:
        watch = CpuWatch.start()
        time.sleep(window_s)
        busy = watch.others_busy_cores()
        waited = time.perf_counter() - start
        if busy is None or busy < below_cores or waited >= max_wait_s:
            return waited


def wait_quiet(
    max_wait_s: float, *, load_below: float = QUIET_LOAD_BELOW, quiet_cores: float = QUIET_CORES
) -> dict[str, Any]:
    """Wait until the 1-minute load average is below ``load_below`` and other processes use under
    ``quiet_cores`` cores (``wait_for_quiet``), for at most ``max_wait_s``; the results' ``quiet`` record."""
    start = time.perf_counter()
    before = list(os.getloadavg())
    quiet = False
    while True:
        left = max_wait_s - (time.perf_counter() - start)
        wait_for_quiet(max(0.0, left), below_cores=quiet_cores)
        if os.getloadavg()[0] < load_below:
            quiet = True
            break
        if time.perf_counter() - start >= max_wait_s:
            break
        time.sleep(5.0)
    watch = CpuWatch.start()
    time.sleep(2.0)
    return {
        "max_wait_s": max_wait_s,
        "waited_s": time.perf_counter() - start - 2.0,
        "quiet": quiet,
        "criterion": f"1-minute load average < {load_below} and others busy < {quiet_cores} cores",
        "loadavg_before_wait": before,
        "loadavg_at_measurement": list(os.getloadavg()),
        "others_busy_cores_at_measurement": watch.others_busy_cores(),
    }


def quiet_before_measuring(max_wait_s: float) -> dict[str, Any]:
    """``wait_quiet`` with a line saying how it went; ``{"skipped": True}`` when ``max_wait_s`` <= 0."""
    if max_wait_s <= 0:
        return {"skipped": True}
    quiet = wait_quiet(max_wait_s)
    print(
        f"quiet wait: {quiet['waited_s']:.0f} s, quiet={quiet['quiet']}, load "
        f"{quiet['loadavg_at_measurement'][0]:.2f}",
        flush=True,
    )
    return quiet


def contention_note(during: str, minus: str) -> str:
    """The results' note on ``others_busy_cores``: busy ``during`` what, from /proc/stat ``minus`` whom."""
    return (
        f"others_busy_cores: average cores that other processes kept busy {during} (from /proc/stat minus "
        f"{minus}); well above 0 means the timings are depressed by contention"
    )


# -- workers: one measurement in its own process -------------------------------------------------------


def first_line(exc: BaseException) -> str:
    """``Type: first line of the message`` (at most 400 characters): why a peer is unsupported."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:400]


def status_mb(field: str) -> float | None:
    """A ``/proc/self/status`` memory field (``VmHWM``, ``VmRSS``) in MB, or None."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


def reset_peak_rss() -> float | None:
    """Collect garbage, then reset ``VmHWM`` to the current RSS (Linux ``clear_refs`` 5): the peak RSS from
    here on is the timed call's; the RSS then, or None (no reset)."""
    gc.collect()
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        return None
    return status_mb("VmRSS")


def peak_rss_since_reset(rss_before: float | None) -> float | None:
    """``VmHWM`` since ``reset_peak_rss`` returned ``rss_before`` (None where the reset failed)."""
    return status_mb("VmHWM") if rss_before is not None else None


def record_check(out: dict[str, Any], check: Mapping[str, Any]) -> None:
    """Add a row check (``same_rows``, ``why``) to a worker's result and set its status from it."""
    out["check"] = check
    out["status"] = "ok" if check["same_rows"] else "wrong result"
    if not check["same_rows"]:
        out["why"] = check["why"]


def print_result(prefix: str, out: Mapping[str, Any]) -> None:
    """A worker's result: one ``prefix`` + JSON line on stdout, which ``worker_result`` reads back."""
    print(prefix + json.dumps(out), flush=True)


def worker_result(returncode: int, stdout: str, stderr: str, prefix: str) -> dict[str, Any]:
    """The last ``prefix`` line a worker printed, as a dict; status ``error`` with the tail of its output when
    it exited non-zero or printed none."""
    lines = [ln for ln in stdout.splitlines() if ln.startswith(prefix)]
    if returncode != 0 or not lines:
        tail = (stdout + stderr).strip().splitlines()[-3:]
        return {"status": "error", "reason": f"worker exit {returncode}: {' | '.join(tail)[-600:]}"}
    result: dict[str, Any] = json.loads(lines[-1][len(prefix) :])
    return result


def arg_parser(doc: str | None) -> argparse.ArgumentParser:
    """A bench's command line parser, its module docstring (``doc``) as the help text, kept as written."""
    return argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)


def add_run_options(p: argparse.ArgumentParser, *, seed: int) -> None:
    """``--seed``, ``--quiet-wait``, ``--work-dir``, ``--keep-work``, ``--peer-timeout`` and ``--out``: the
    options of a bench that builds its tables in a work folder and measures each call in a worker process."""
    p.add_argument("--seed", type=int, default=seed)
    p.add_argument("--quiet-wait", type=float, default=1200.0, help="max seconds to wait for a quiet machine")
    p.add_argument("--work-dir", default=None, help="where the tables are built (default: a temp dir)")
    p.add_argument("--keep-work", action="store_true", help="keep the tables after the run")
    p.add_argument("--peer-timeout", type=float, default=1800.0, help="seconds before a worker is killed")
    p.add_argument("--out", default=str(DEFAULT_OUT))


@contextlib.contextmanager
def work_dir(prefix: str, parent: str | None = None, *, keep: bool = False) -> Iterator[Path]:
    """A fresh temporary folder (in ``parent``, default the system's) for tables and snapshots, removed
    afterwards unless ``keep``."""
    work = Path(tempfile.mkdtemp(prefix=prefix, dir=parent))
    try:
        yield work
    finally:
        if not keep:
            shutil.rmtree(work, ignore_errors=True)


def script_cmd(script: str, *args: str) -> list[str]:
    """The command line running ``script`` (a bench's ``__file__``) with this interpreter."""
    return [sys.executable, str(Path(script).resolve()), *args]


def run_mode(
    args: argparse.Namespace,
    workers: Mapping[str, Callable[[argparse.Namespace], object]],
    driver: Callable[[argparse.Namespace], int],
) -> int:
    """Run the first worker mode whose option is set in ``args`` (exit status 0), else the driver."""
    for option, worker in workers.items():
        if getattr(args, option):
            worker(args)
            return 0
    return driver(args)


# -- comparisons -----------------------------------------------------------------------------------------


def time_ratios(
    results: Mapping[str, Mapping[str, Mapping[str, Any]]],
    ours: Sequence[str],
    *,
    stats: Sequence[str] = ("best", "median"),
    against_ours: bool = False,
    lower_bounds: bool = False,
) -> dict[str, dict[str, dict[str, Any]]]:
    """Per case (``results[case][peer]``) and each of ``ours`` whose result is ok: against each other peer
    (``against_ours``: our other backends too), ``"<ours>/<peer>"``: the peer's status and, where it is ok,
    peer time / our time of each of ``stats`` (``best``: ``best_s``, ``median``: ``median_s``); with
    ``lower_bounds``, for a peer timed out in its first call, ``best_at_least``."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for case, per in results.items():
        for me in ours:
            mine = per.get(me) or {}
            if mine.get("status") != "ok":
                continue
            for peer, theirs in per.items():
                if peer == me or (peer in ours and not against_ours):
                    continue
                entry: dict[str, Any] = {"status": theirs.get("status")}
                if theirs.get("status") == "ok":
                    entry |= {stat: theirs[f"{stat}_s"] / mine[f"{stat}_s"] for stat in stats}
                elif (
                    lower_bounds and theirs.get("status") == "timeout" and theirs.get("first_call_at_least_s")
                ):
                    entry["best_at_least"] = theirs["first_call_at_least_s"] / mine["best_s"]
                out.setdefault(case, {})[f"{me}/{peer}"] = entry
    return out


# -- targets ----------------------------------------------------------------------------------------------

VERDICTS = {True: "met", False: "MISSED", None: "not measured"}


def overall_met(verdicts: Iterable[bool | None]) -> bool | None:
    """A target over its cases: False if one missed, else None if one was not measured (or none was), else
    True."""
    seen = list(verdicts)
    if False in seen:
        return False
    return None if not seen or None in seen else True


def target_result(key: str, text: str, met: bool | None, shown: str, **fields: Any) -> dict[str, Any]:
    """A target's record in the results: key, text, ``fields``, met, and the verdict line's text."""
    return {"key": key, "text": text, **fields, "met": met, "verdict": f"{VERDICTS[met]} ({shown})"}


def target_notes(targets: Iterable[Mapping[str, Any]], width: int = 200) -> list[str]:
    """The chart notes of the targets' verdicts (each cut to ``width`` characters)."""
    return [f"target {t['text']}: {t['verdict']}"[:width] for t in targets]


def print_verdicts(targets: Iterable[Mapping[str, Any]]) -> None:
    for t in targets:
        print(f"target {t['text']}: {t['verdict']}")


# -- output ---------------------------------------------------------------------------------------------


def _rounded(value: Any) -> Any:
    if isinstance(value, float):
        return float(f"{value:.5g}")
    if isinstance(value, Mapping):
        return {k: _rounded(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_rounded(v) for v in value]
    return value


def write_json(path: Path, payload: Mapping[str, Any]) -> Path:
    """Write ``payload`` (floats to 5 significant digits) atomically: a ``.tmp`` sibling, then rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(_rounded(payload), indent=2, allow_nan=False) + "\n")
    tmp.replace(path)
    return path


@dataclass(frozen=True)
class Series:
    """One bar per category (None: no bar, e.g. the peer does not implement the case)."""

    label: str
    values: Sequence[float | None]
    color: str


def grouped_barh(
    path: Path,
    *,
    title: str,
    categories: Sequence[str],
    series: Sequence[Series],
    xlabel: str,
    notes: Sequence[str] = (),
) -> Path:
    """Grouped horizontal bar chart, first category on top; log x when values span more than 20x."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    present = [v for s in series for v in s.values if v is not None and v > 0]
    log_x = bool(present) and max(present) / min(present) > 20
    height = 0.8 / max(1, len(series))
    rows = len(categories) * max(1, len(series))
    fig, ax = plt.subplots(figsize=(11, 1.6 + 0.3 * rows + 0.16 * len(notes)))
    for k, s in enumerate(series):
        ys = [i + (k - (len(series) - 1) / 2) * height for i in range(len(categories))]
        widths = [v if v is not None else 0.0 for v in s.values]
        bars = ax.barh(ys, widths, height=height * 0.95, color=s.color, label=s.label)
        for bar, v in zip(bars, s.values, strict=True):
            text = f" {v:,.0f}" if v is not None else " n/a"
            x = bar.get_width() if v is not None else (min(present) if log_x and present else 0.0)
            ax.text(x, bar.get_y() + bar.get_height() / 2, text, va="center", fontsize=7)
    ax.set_yticks(range(len(categories)), categories, fontsize=8)
    ax.invert_yaxis()
    if log_x:
        ax.set_xscale("log")
    if present:
        ax.set_xlim(right=max(present) * (1.8 if log_x else 1.12))
    ax.set_xlabel(xlabel + (" (log scale)" if log_x else ""))
    ax.grid(axis="x", which="both", alpha=0.3)
    ax.legend(loc="lower left", bbox_to_anchor=(0.0, 1.0), ncol=2, fontsize=8, frameon=False)
    ax.set_title(title, fontsize=10, pad=8 + 14 * ((len(series) + 1) // 2))  # room for the legend rows
    if notes:
        ax.text(
            0.0, -0.08 - 0.3 / max(1, rows), "\n".join(notes), transform=ax.transAxes, fontsize=7, va="top"
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=130, bbox_inches="tight")
    plt.close(fig)
    return path


def peer_series(
    results: Mapping[str, Mapping[str, Mapping[str, Any]]],
    peers: Sequence[str],
    metric: str,
    labels: Mapping[str, str],
    colors: Mapping[str, str],
) -> list[Series]:
    """One series per peer of ``results[category][peer][metric]`` over the categories (None where absent)."""
    return [Series(labels[p], [results[k].get(p, {}).get(metric) for k in results], colors[p]) for p in peers]


def write_results(
    out_dir: Path, stem: str, payload: Mapping[str, Any], chart: Callable[[Path], Path]
) -> tuple[Path, Path]:
    """``<stem>.json`` (``write_json``), then ``<stem>.png`` (drawn by ``chart``) under ``out_dir``."""
    return write_json(out_dir / f"{stem}.json", payload), chart(out_dir / f"{stem}.png")


def exit_status(failures: Sequence[str]) -> int:
    """Each failure on stderr; the exit status: 1 if there were any, else 0."""
    for failure in failures:
        print(f"FAILED: {failure}", file=sys.stderr)
    return 1 if failures else 0


def finish(
    out_dir: Path,
    stem: str,
    payload: Mapping[str, Any],
    chart: Callable[[Path], Path],
    failures: Sequence[str],
    targets: Iterable[Mapping[str, Any]] = (),
) -> int:
    """A driver's end: write the JSON and PNG, say so, print the targets' verdicts and the failures; the exit
    status."""
    json_path, png_path = write_results(out_dir, stem, payload, chart)
    print(f"wrote {json_path} and {png_path}")
    print_verdicts(targets)
    return exit_status(failures)
