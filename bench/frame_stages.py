"""Where a frame scan (``TableScan.to_cudf`` / ``to_frame``) spends its time, stage by stage.

    python bench/frame_stages.py METADATA_JSON | --scan-kind KIND [--frames cudf|arrow] [--repeat 3]
                                [--workers N ...] [--gc freeze|disable] [--profile-top 30] [--out FILE]

Measured in one process, after a warm-up call: the whole call (default workers, then each of
``--workers``); the sum over tasks of
:func:`~gpu_engine.execute.frame_task.prepare` (run on worker threads, so it may exceed the wall time), the
calling thread's time in :func:`~gpu_engine.execute.frame_task.decode` and in the frame library's ``read``
(the decoder call), loading the table, planning, the final concat; Python's garbage collections during
the call (count and seconds); with ``--gc``, the same call with the collector frozen after the warm-up
(``gc.freeze``) or disabled; the raw
decoder call alone on the same files (cuDF: ``cudf.read_parquet`` of the paths; arrow: ``pq.read_table``
per file); and a cProfile of one call with ``workers=1`` (every stage on the calling thread). Prints one
JSON object and, with ``--out``, writes the profile text there.
"""

from __future__ import annotations

import argparse
import cProfile
import dataclasses
import gc
import io
import json
import pstats
import statistics
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import gpu_engine as ge
from gpu_engine.execute import frame_scan
from gpu_engine.execute.frames import ArrowFrames
from gpu_engine.execute.stream import ordered, prefetch
from gpu_engine.io.fileio import local_path
from gpu_engine.scan import TableScan


class Stages:
    """Seconds per stage, summed over the calls since :meth:`reset` (thread-safe)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.seconds: dict[str, float] = {}
        self.calls: dict[str, int] = {}

    def reset(self) -> None:
        self.seconds.clear()
        self.calls.clear()

    def add(self, name: str, seconds: float) -> None:
        with self.lock:
            self.seconds[name] = self.seconds.get(name, 0.0) + seconds
            self.calls[name] = self.calls.get(name, 0) + 1

    def wrap(self, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*a: Any, **kw: Any) -> Any:
            start = time.perf_counter()
            try:
                return fn(*a, **kw)
            finally:
                self.add(name, time.perf_counter() - start)

        return timed


class Collections:
    """Python's garbage collections while counting."""

    def __init__(self) -> None:
        self.count, self.seconds, self.by_gen = 0, 0.0, [0, 0, 0]
        self._start = 0.0
        gc.callbacks.append(self._callback)

    def reset(self) -> None:
        self.count, self.seconds, self.by_gen = 0, 0.0, [0, 0, 0]

    def _callback(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._start = time.perf_counter()
        else:
            self.count += 1
            self.by_gen[info["generation"]] += 1
            self.seconds += time.perf_counter() - self._start


def make_frames(kind: str) -> Any:
    if kind == "arrow":
        return ArrowFrames()
    from gpu_engine.backend.cudf_frames import CudfFrames

    return CudfFrames()


def synchronize(kind: str) -> None:
    if kind == "cudf":
        import cupy

        cupy.cuda.runtime.deviceSynchronize()


@contextmanager
def frozen(mode: str) -> Iterator[None]:
    if mode == "freeze":
        gc.collect()
        gc.freeze()
    elif mode == "disable":
        gc.disable()
    try:
        yield
    finally:
        gc.enable()
        gc.unfreeze()


@contextmanager
def batches(files: int | None) -> Iterator[None]:
    """At most ``files`` files a decoder call (default: :data:`frame_scan.BATCH_FILES`)."""
    default = frame_scan.BATCH_FILES
    frame_scan.BATCH_FILES = default if files is None else files
    try:
        yield
    finally:
        frame_scan.BATCH_FILES = default


@contextmanager
def pipelined(on: bool) -> Iterator[None]:
    """An experiment: the tasks prepared in order on one thread, up to 64 ahead of the decoder, so that a
    decoder call (cuDF's releases the GIL) overlaps the preparation of the next batch's tasks (on the
    calling thread they alternate; on several threads the preparations contend for the GIL)."""
    if not on:
        yield
        return
    default = frame_scan._frames

    def frames_pipelined(run, ctx, plan, frames, limit, host_decode, workers):  # type: ignore[no-untyped-def]
        def prepared(task: Any) -> Iterator[Any]:
            yield task, frame_scan.prepare(task, ctx)  # type: ignore[attr-defined]

        ahead = prefetch(ordered(plan.tasks, prepared, workers=1), max_bytes=64, size=lambda _: 1)
        try:
            yield from frame_scan._Decoder(run, ctx, frames, limit, host_decode).decode_all(ahead)
        finally:
            ahead.close()  # type: ignore[attr-defined]

    frame_scan._frames = frames_pipelined
    try:
        yield
    finally:
        frame_scan._frames = default


def main() -> int:
    p = argparse.ArgumentParser()
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("metadata", nargs="?", help="the table's metadata JSON")
    where.add_argument(
        "--scan-kind", help="the newest table bench/scan.py cached of this kind (position, dv, ...)"
    )
    p.add_argument("--frames", choices=("cudf", "arrow"), default="cudf")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--profile-top", type=int, default=30)
    p.add_argument("--workers", type=int, nargs="*", default=[], help="also with these worker counts")
    p.add_argument("--gc", nargs="*", choices=("freeze", "disable"), default=[], help="also with gc so")
    p.add_argument(
        "--batch-files",
        type=int,
        nargs="*",
        default=[],
        help="also with at most this many files a decoder call, on the calling thread and pipelined (the "
        "tasks prepared on one thread ahead of the decoder: an experiment, see pipelined())",
    )
    p.add_argument("--out")
    args = p.parse_args()
    if args.scan_kind:
        args.metadata = scan_table(args.scan_kind, SCAN_CACHE)
    stages, collections = Stages(), Collections()
    frames = make_frames(args.frames)
    backend = "cuda" if args.frames == "cudf" else "cpu"
    frame_scan.prepare = stages.wrap("prepare (all tasks, worker threads)", frame_scan.prepare)  # type: ignore[attr-defined]
    frame_scan.decode = stages.wrap("decode (calling thread)", frame_scan.decode)  # type: ignore[attr-defined]
    TableScan._planned = stages.wrap("plan", TableScan._planned)  # type: ignore[method-assign]
    frames.read = stages.wrap("read: decoder call (calling thread)", frames.read)
    frames.concat = stages.wrap("concat", frames.concat)

    def call(workers: int | None = None) -> Any:
        start = time.perf_counter()
        scan = ge.load_table(args.metadata).scan(backend=backend)
        scan = scan if workers is None else dataclasses.replace(scan, workers=workers)
        stages.add("load table", time.perf_counter() - start)
        out = scan.to_frame(frames, host_decode=False)
        synchronize(args.frames)
        return out

    call()  # warm: imports, kernels, dtypes
    report: dict[str, Any] = {"frames": args.frames, "metadata": args.metadata}
    runs: list[tuple[str, int | None, int | None, bool]] = [("enabled", None, None, False)]
    runs += [("enabled", w, None, False) for w in args.workers] + [(m, None, None, False) for m in args.gc]
    runs += [("enabled", 1, b, piped) for b in args.batch_files for piped in (False, True)]
    for mode, workers, batch, piped in runs:
        walls = []
        with frozen(mode), batches(batch), pipelined(piped):
            for _ in range(args.repeat):
                stages.reset()
                collections.reset()
                start = time.perf_counter()
                call(workers)
                walls.append(time.perf_counter() - start)
        name = f"gc {mode}, workers {workers or 'default'}"
        name += "" if batch is None else f", {batch} files a batch" + (", pipelined" if piped else "")
        report[name] = {
            "wall_s": [round(w, 4) for w in walls],
            "median_s": round(statistics.median(walls), 4),
            "last_call_stages_s": {k: round(v, 4) for k, v in stages.seconds.items()},
            "last_call_stage_calls": dict(stages.calls),
            "last_call_gc": {
                "count": collections.count,
                "by_generation": list(collections.by_gen),
                "s": round(collections.seconds, 4),
            },
        }
    report["gc objects tracked"] = len(gc.get_objects())
    paths = [local_path(t.file.path) for t in ge.load_table(args.metadata).scan().plan().tasks]
    report["files"] = len(paths)
    report["raw decoder call_s"] = raw_read(args.frames, paths, args.repeat)
    profiler = cProfile.Profile()
    start = time.perf_counter()
    profiler.runcall(call, 1)
    report["workers=1 under cProfile_s"] = round(time.perf_counter() - start, 4)
    print(json.dumps(report, indent=2))
    if args.out:
        text = io.StringIO()
        text.write(json.dumps(report, indent=2) + "\n-- workers=1, cProfile, tottime --\n")
        stats = pstats.Stats(profiler, stream=text)
        stats.sort_stats("tottime").print_stats(args.profile_top)
        text.write("-- cumulative --\n")
        stats.sort_stats("cumulative").print_stats(args.profile_top)
        Path(args.out).write_text(text.getvalue())
    return 0


SCAN_CACHE = Path.home() / ".cache" / "gpu-engine-bench"  # bench/scan.py's tables


def scan_table(kind: str, cache: Path) -> str:
    """The metadata JSON of the newest table of ``kind`` that ``bench/scan.py`` cached under ``cache``."""
    metas = sorted(cache.glob(f"scan-*/{kind}-*/meta.json"), key=lambda m: m.stat().st_mtime)
    if not metas:
        raise SystemExit(f"no {kind} table cached by bench/scan.py under {cache}: run it first")
    location: str = json.loads(metas[-1].read_text())["metadata_location"]
    return location


def raw_read(kind: str, paths: list[str], repeat: int) -> list[float]:
    if kind == "cudf":
        import cudf

        def read() -> Any:
            return cudf.read_parquet(paths, dataset_kwargs={"partitioning": None}, use_pandas_metadata=False)
    else:
        import pyarrow.parquet as pq

        def read() -> Any:
            return [pq.read_table(p) for p in paths]

    read()
    out = []
    for _ in range(repeat):
        start = time.perf_counter()
        read()
        synchronize(kind)
        out.append(round(time.perf_counter() - start, 4))
    return out


if __name__ == "__main__":
    raise SystemExit(main())
