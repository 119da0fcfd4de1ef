"""Shared plumbing for the benchmarks: environment capture, timing, JSON and PNG output.

Every bench writes ``bench/results/<bench>-<device-slug>.json`` (plus a PNG) naming the machine, the
device and the versions, so results from different machines sit side by side in the repository.
Benchmarks measure; they are not timed tests: compare as ratios within one run.
"""

from __future__ import annotations

import datetime as dt
import gc
import importlib.metadata as md
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import time
import tomllib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

REPO_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = REPO_ROOT / "bench" / "results"
BASE_PACKAGES = ("numpy", "numba", "numba-cuda", "cuda-bindings", "pyarrow")

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


def slugify(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def cpu_slug() -> str:
    """Names a CPU-only run after the host: ``cpu-amd-epyc-2c``."""
    model = re.sub(r"\(r\)|\(tm\)|\bcpu\b|@.*$|\d+-core processor", "", cpu_model().lower())
    return slugify(f"cpu {model} {usable_cores()}c")


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
