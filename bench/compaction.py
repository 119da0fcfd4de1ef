"""Compaction: gpu-engine's ``tbl.compact`` vs raw pyarrow / cuDF read+write and PyIceberg's overwrite.

    python bench/compaction.py [--rows 10000000] [--files 200] [--repeat 3]
                               [--workloads none position dv position-equality] [--peers ...]
                               [--delete-fraction 0.05] [--eq-fraction 0.01] [--quiet-wait 1200]
                               [--work-dir DIR] [--out bench/results] [--profile auto|always|never]

Tables. Per workload, one table is built once (in a subprocess, seeded, so a rerun builds the same rows) in
a fresh SQL catalog (SQLite) under ``--work-dir`` (default: a temp dir), with gpu-engine: ``files`` appends
of ``rows / files`` rows each (one small data file per append), schema ``id long`` (0..rows-1 in append
order), ``ts timestamp``, ``k long`` (a seeded permutation: unique), ``category string`` (12 values),
``payload string`` (40 chars: ``evt-`` + random hex), ``amount double``, ``r double`` (uniform in [0, 1));
``write.target-file-size-bytes`` = 512 MiB (the default, explicit). Then:

* ``none`` (v2): nothing deleted;
* ``position`` (v2): ``tbl.delete("r < 0.05")``: ~5% of rows, spread over every file, by position delete
  files (merge-on-read);
* ``dv`` (v3): the same delete on a v3 table: deletion vectors (Puffin);
* ``position-equality`` (v2): the position delete, then ``tbl.delete_rows(keys, on=["k"])`` with the ``k`` of
  1% of the rows (drawn from all rows): one equality delete file.

The surviving rows are computed from the generated columns (never read back), checked once against a scan
at build time, and kept as a mask. The built table is copied aside; before every measurement the table
directory is restored from that copy (data files hard-linked: no writer modifies a file in place; the SQLite
catalog copied), so every peer starts from identical files at identical paths. The data files are in the
OS page cache (just written, and the same inodes every time): the timings are of hot reads.

Peers (each measurement in a fresh subprocess, so its peak RSS is its own; the table already loaded):

* ``raw-pyarrow`` -- the floor of the IO work, no Iceberg: ``pq.read_table(<the data file paths>)``, then
  ``.filter(mask)`` with the precomputed live-row mask (built before the clock starts), then
  ``pq.write_table(live, out, compression="zstd")`` into one Parquet file (pyarrow's defaults otherwise).
  Same live rows, same input files, no metadata, no delete files read, no metrics, no commit.
* ``pyiceberg`` -- PyIceberg's only way to rewrite a table: ``pt.overwrite(pt.scan().to_arrow())``, ``pt``
  loaded through PyIceberg's ``SqlCatalog`` on the same catalog DB. PyIceberg 0.12 cannot plan a scan
  with equality deletes nor write v3 manifests: ``position-equality`` and ``dv`` are recorded as
  unsupported with its error.
* ``gpu-engine-cpu`` -- ``tbl.compact(options={"rewrite-all": "true"}, backend="cpu")``: every data file
  rewritten with its deletes applied, one replace commit.
* ``gpu-engine-cuda`` -- the same with ``backend="cuda"`` (pyarrow decodes and encodes);
  ``gpu-engine-cudf`` -- with cuDF's GPU Parquet reader and writer too (``parquet_io="cudf"``); and
  ``raw-cudf`` -- ``cudf.read_parquet(paths)``, the rows of the precomputed mask (a device array built
  before the clock starts), ``to_parquet(out, compression="ZSTD")``: only with a real CUDA device (else
  recorded as skipped with the reason).

Each worker first runs the same call on a small warm-up table of the same workload (imports, JIT compiled
kernels from the shared numba cache, first-call effects; its time is ``first_call_s``), then the timed call
on the big table, then checks its result outside the timing: the rows of the rewritten table read with
gpu-engine's scan (or of the raw peer's output file) must be exactly the surviving ids (count and sorted
ids); a mismatch is a "wrong result", printed and failing the run. Measurements are interleaved (per
repetition, every peer once) and repeated ``--repeat`` times; rates and ratios use the median.

Rates: ``input_mb_per_s`` = bytes of the data files rewritten (all of them, on disk) / 1e6 / median s;
``live_mb_per_s`` = their live bytes (each file's size x its live-row fraction) / 1e6 / median s. Peak RSS:
the worker's VmHWM reset just before the timed call (``peak_rss_timed_mb``), and over its whole life.

Before measuring the driver waits (up to ``--quiet-wait`` s; 0: not at all) for a quiet machine, as
bench/scan.py does. The workers run a copy of ``gpu_engine/`` taken at start (the checkout is shared).

Writes ``compaction-<device-slug>.json`` and ``.png`` (and ``compaction-profile-<slug>.txt``: one
compaction under cProfile, by default when a CPU target is missed; ``compaction-profile-cudf-<slug>.txt``
instead where the cuDF peer runs and misses one) under ``--out``.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parents[1])]

import _report as rep  # noqa: E402
from scan import (  # noqa: E402  (imported first: puts the gpu_engine snapshot of SRC_ENV on sys.path)
    RESULT_PREFIX,
    SRC_ENV,
    footprint,
)

PEER_PACKAGES = (
    "pyiceberg", "pyiceberg-core", "sqlalchemy", "cudf-cu12", "cudf-cu13", "cupy-cuda12x", "cupy-cuda13x",
    "matplotlib",
)  # fmt: skip
RAW_PA, PYICEBERG, OURS_CPU, OURS_CUDA, OURS_CUDF, RAW_CUDF = (
    "raw-pyarrow",
    "pyiceberg",
    "gpu-engine-cpu",
    "gpu-engine-cuda",
    "gpu-engine-cudf",
    "raw-cudf",
)
PEERS = (RAW_PA, PYICEBERG, OURS_CPU, OURS_CUDA, OURS_CUDF, RAW_CUDF)
OURS = (OURS_CPU, OURS_CUDA, OURS_CUDF)
CUDA_PEERS = (OURS_CUDA, OURS_CUDF, RAW_CUDF)
PARQUET_IO = {OURS_CPU: "pyarrow", OURS_CUDA: "pyarrow", OURS_CUDF: "cudf"}
LABELS = {
    RAW_PA: "raw pyarrow read+filter+write",
    PYICEBERG: "PyIceberg overwrite(scan().to_arrow())",
    OURS_CPU: "gpu-engine compact (cpu)",
    OURS_CUDA: "gpu-engine compact (cuda)",
    OURS_CUDF: "gpu-engine compact (cuda, cuDF Parquet)",
    RAW_CUDF: "raw cuDF read+filter+write",
}
COLORS = {
    RAW_PA: "#bbbbbb",
    PYICEBERG: "#777777",
    OURS_CPU: "#2a7ab9",
    OURS_CUDA: "#76b900",
    OURS_CUDF: "#3f6600",
    RAW_CUDF: "#b9d98a",
}
CATALOG_NAME = "bench"
IDENTIFIER = "db.t"
TARGET_FILE_SIZE = 512 << 20
DEFAULT_SEED = 20_260_601
WARM_ROWS, WARM_FILES = 20_000, 4
CATEGORIES = ("books", "clothing", "electronics", "garden", "grocery", "health", "music", "sports", "toys")
CONTENTION_NOTE = rep.contention_note("during a timed call", "the worker")


@dataclass(frozen=True)
class Workload:
    key: str
    format_version: int
    position: bool
    equality: bool

    def label(self, args: argparse.Namespace) -> str:
        pos, eq = f"{args.delete_fraction:.0%}", f"{args.eq_fraction:.0%}"
        if self.position and self.equality:
            return f"{pos} position + {eq} equality deletes (v{self.format_version})"
        if self.position:
            kind = "deletion vectors" if self.format_version >= 3 else "position deletes"
            return f"{pos} {kind} (v{self.format_version})"
        return f"no deletes (v{self.format_version})"


WORKLOADS = {
    "none": Workload("none", 2, False, False),
    "position": Workload("position", 2, True, False),
    "dv": Workload("dv", 3, True, False),
    "position-equality": Workload("position-equality", 2, True, True),
}


@dataclass(frozen=True)
class Target:
    key: str
    text: str
    ours: str
    peer: str | None  # None: an absolute rate (min_input_mb_per_s)
    workloads: tuple[str, ...]
    threshold: float  # ratio (peer time / our time), or MB/s of input when peer is None


TARGETS = (
    Target(
        "cpu-raw-pyarrow",
        "CPU throughput >= 0.9x raw pyarrow read+write of the same live rows",
        OURS_CPU,
        RAW_PA,
        tuple(WORKLOADS),
        0.9,
    ),
    Target(
        "cpu-pyiceberg",
        "CPU throughput >= 1.0x PyIceberg's full overwrite (where PyIceberg can rewrite the table)",
        OURS_CPU,
        PYICEBERG,
        ("none", "position"),
        1.0,
    ),
    Target("gpu-input-rate", "GPU >= 5 GB/s of input", OURS_CUDA, None, tuple(WORKLOADS), 5000.0),
    Target(
        "gpu-raw-cudf",
        "GPU throughput >= 0.5x raw cuDF read+write of the same files",
        OURS_CUDA,
        RAW_CUDF,
        tuple(WORKLOADS),
        0.5,
    ),
    Target(
        "gpu-cudf-input-rate",
        "GPU with cuDF's Parquet reader and writer >= 5 GB/s of input",
        OURS_CUDF,
        None,
        tuple(WORKLOADS),
        5000.0,
    ),
    Target(
        "gpu-cudf-raw-cudf",
        "GPU with cuDF's Parquet reader and writer >= 0.5x raw cuDF read+write of the same files",
        OURS_CUDF,
        RAW_CUDF,
        tuple(WORKLOADS),
        0.5,
    ),
)


# -- tables --------------------------------------------------------------------------------------------------


def catalog_props(table_dir: Path) -> dict[str, str]:
    live = table_dir / "live"
    return {"uri": f"sqlite:///{live / 'catalog.db'}", "warehouse": (live / "warehouse").as_uri()}


def file_rows(rows: int, files: int) -> list[int]:
    return [rows // files + (1 if i < rows % files else 0) for i in range(files)]


def make_file(rng: Any, start: int, n: int, k: Any) -> Any:
    """The Arrow rows ``start..start+n-1`` (``k``: their keys)."""
    import numpy as np
    import pyarrow as pa

    ids = np.arange(start, start + n, dtype=np.int64)
    ts = 1_767_225_600_000_000 + ids * 250_000 + rng.integers(0, 250_000, n)  # from 2026-01-01, ordered
    weights = 1.0 / np.arange(1, len(CATEGORIES) + 1)
    cats = rng.choice(len(CATEGORIES), n, p=weights / weights.sum())
    hexchars = np.frombuffer(b"0123456789abcdef", dtype=np.uint8)
    chars = np.empty((n, 40), dtype=np.uint8)
    chars[:, :4] = np.frombuffer(b"evt-", dtype=np.uint8)
    chars[:, 4:] = hexchars[rng.integers(0, 16, (n, 36))]
    offsets = np.arange(0, 40 * n + 1, 40, dtype=np.int32)
    payload = pa.StringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(chars.tobytes()))
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "ts": pa.array(ts, pa.timestamp("us")),
            "k": pa.array(k, pa.int64()),
            "category": pa.DictionaryArray.from_arrays(
                pa.array(cats, pa.int32()), pa.array(CATEGORIES, pa.string())
            ).cast(pa.string()),
            "payload": payload,
            "amount": pa.array(np.round(rng.gamma(2.0, 40.0, n), 2), pa.float64()),
            "r": pa.array(rng.random(n), pa.float64()),
        }
    )


def generate(table_dir: Path, workload: Workload, rows: int, files: int, args: argparse.Namespace) -> None:
    """Worker: build the table of ``workload`` in ``table_dir/live``; meta.json and live.npy beside it."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    import gpu_engine as ge

    start = time.perf_counter()
    live_dir = table_dir / "live"
    (live_dir / "warehouse").mkdir(parents=True)
    props = catalog_props(table_dir)
    cat = ge.load_catalog(CATALOG_NAME, uri=props["uri"], warehouse=props["warehouse"])
    cat.create_namespace("db")
    rng = np.random.default_rng([args.seed, rows, files])
    keys = rng.permutation(rows).astype(np.int64) + 10**12  # unique
    counts = file_rows(rows, files)
    schema = make_file(rng, 0, 1, keys[:1]).schema
    properties = {
        "format-version": str(workload.format_version),
        "write.target-file-size-bytes": str(TARGET_FILE_SIZE),
    }
    tbl = cat.create_table(IDENTIFIER, schema=schema, properties=properties)
    live = np.ones(rows, dtype=bool)
    data_files: list[dict[str, Any]] = []
    row = 0
    for i, n in enumerate(counts):
        batch = make_file(np.random.default_rng([args.seed, rows, files, i]), row, n, keys[row : row + n])
        if workload.position:
            live[row : row + n] = ~np.asarray(pc.less(batch.column("r"), args.delete_fraction))
        added = tbl.append(batch, backend="cpu")
        if len(added.files) != 1:
            raise SystemExit(f"append {i} wrote {len(added.files)} data files, expected 1")
        f = added.files[0]
        data_files.append({"path": f.path, "size": f.file_size_in_bytes, "rows": n, "start": row})
        row += n
    deleted = {"position": 0, "equality_keys": 0}
    if workload.position:
        where = f"r < {args.delete_fraction!r}"
        d = tbl.delete(where, backend="cpu")
        deleted["position"] = d.deleted_rows
        if d.deleted_rows != rows - int(live.sum()):
            raise SystemExit(f"{where} deleted {d.deleted_rows} rows, expected {rows - int(live.sum())}")
    if workload.equality:
        picked = rng.choice(rows, max(1, int(rows * args.eq_fraction)), replace=False)
        tbl.delete_rows(pa.table({"k": pa.array(keys[picked], pa.int64())}), on=["k"], backend="cpu")
        deleted["equality_keys"] = len(picked)
        live[picked] = False
    tbl.refresh()
    got = tbl.scan(backend="cpu", columns=["id"]).to_arrow().num_rows
    if got != int(live.sum()):
        raise SystemExit(f"built table scans to {got} rows, expected {int(live.sum())}")
    np.save(table_dir / "live.npy", live)
    live_bytes = sum(f["size"] * live[f["start"] : f["start"] + f["rows"]].mean() for f in data_files)
    meta = {
        "workload": workload.key,
        "format_version": workload.format_version,
        "rows": rows,
        "files": files,
        "seed": args.seed,
        "delete_fraction": args.delete_fraction if workload.position else 0.0,
        "eq_fraction": args.eq_fraction if workload.equality else 0.0,
        "deleted": deleted,
        "live_rows": int(live.sum()),
        "input_bytes": sum(f["size"] for f in data_files),
        "live_bytes": int(live_bytes),
        "catalog": props,
        "metadata_location": tbl.metadata_location.removeprefix("file://"),
        "data_files": data_files,
        "generate_s": time.perf_counter() - start,
    }
    (table_dir / "meta.json").write_text(json.dumps(meta) + "\n")


def load_meta(table_dir: Path) -> dict[str, Any]:
    meta: dict[str, Any] = json.loads((table_dir / "meta.json").read_text())
    return meta


def restore(table_dir: Path) -> None:
    """``live`` := ``pristine``: files hard-linked (never modified in place), the SQLite catalog copied."""

    def link(src: str, dst: str) -> None:
        if src.endswith((".db", ".db-journal", ".db-wal", ".db-shm")):
            shutil.copy2(src, dst)
        else:
            os.link(src, dst)

    live = table_dir / "live"
    shutil.rmtree(live, ignore_errors=True)
    shutil.copytree(table_dir / "pristine", live, copy_function=link)


# -- the peers -----------------------------------------------------------------------------------------------


def local(path: str) -> str:
    return path.removeprefix("file://")


@dataclass
class Prepared:
    """A peer's call on one table, its inputs ready; ``run`` is what the clock measures."""

    run: Callable[[], Any]
    describe: Callable[[Any], dict[str, Any]]
    output: str | None = None  # the raw peers' output file


def prepare(peer: str, table_dir: Path) -> Prepared:
    meta = load_meta(table_dir)
    props = meta["catalog"]
    if peer in OURS:
        import gpu_engine as ge

        backend = "cpu" if peer == OURS_CPU else "cuda"
        tbl = ge.load_catalog(CATALOG_NAME, uri=props["uri"], warehouse=props["warehouse"]).load_table(
            IDENTIFIER
        )
        how = {"backend": backend, "parquet_io": PARQUET_IO[peer]}
        return Prepared(lambda: tbl.compact(options={"rewrite-all": "true"}, **how), describe_compaction)
    if peer == PYICEBERG:
        from pyiceberg.catalog.sql import SqlCatalog

        pt = SqlCatalog(CATALOG_NAME, **props).load_table(IDENTIFIER)

        def overwrite() -> Any:
            pt.overwrite(pt.scan().to_arrow())
            return pt

        return Prepared(overwrite, describe_pyiceberg)
    import numpy as np

    paths = [local(f["path"]) for f in meta["data_files"]]
    mask = np.load(table_dir / "live.npy")
    out = str(table_dir / "live" / "raw-out.parquet")
    if peer == RAW_PA:
        import pyarrow as pa
        import pyarrow.parquet as pq

        keep = pa.array(mask)

        def raw_pyarrow() -> Any:
            live = pq.read_table(paths).filter(keep)
            pq.write_table(live, out, compression="zstd")
            return live.num_rows

        return Prepared(raw_pyarrow, lambda rows: {"rows_written": rows}, out)
    if peer == RAW_CUDF:
        import cudf
        import cupy

        keep_dev = cudf.Series(cupy.asarray(mask))

        def raw_cudf() -> Any:
            df = cudf.read_parquet(paths)
            live = df[keep_dev]
            live.to_parquet(out, compression="ZSTD")
            return len(live)

        return Prepared(raw_cudf, lambda rows: {"rows_written": rows}, out)
    raise ValueError(peer)


def describe_compaction(res: Any) -> dict[str, Any]:
    return {
        "backend": res.backend,
        "compact_seconds": res.seconds,
        "groups": len(res.groups),
        "rewritten_data_files": res.rewritten_data_files,
        "rewritten_bytes": res.rewritten_bytes,
        "added_data_files": res.added_data_files,
        "added_bytes": res.added_bytes,
        "removed_delete_files": res.removed_delete_files,
        "read_s": sum(g.read_seconds for g in res.groups),
        "order_s": sum(g.order_seconds for g in res.groups),
        "write_s": sum(g.write_seconds for g in res.groups),
        "rows_written": sum(g.rows for g in res.groups),
        "parquet_io": sorted({g.parquet_io for g in res.groups}),
        "parquet_io_reasons": sorted({g.parquet_io_reason for g in res.groups if g.parquet_io_reason}),
    }


def describe_pyiceberg(pt: Any) -> dict[str, Any]:
    summary = pt.current_snapshot().summary
    keys = ("added-data-files", "added-files-size", "added-records")
    out: dict[str, Any] = {k: summary.get(k) for k in keys}
    out["snapshots"] = len(pt.metadata.snapshots)
    return out


def check(peer: str, table_dir: Path, prepared: Prepared) -> dict[str, Any]:
    """The rewritten table (read with gpu-engine's scan) or the raw output holds exactly the live ids."""
    import numpy as np

    meta = load_meta(table_dir)
    expected = np.flatnonzero(np.load(table_dir / "live.npy"))
    out: dict[str, Any] = {}
    if prepared.output is not None:
        import pyarrow.parquet as pq

        out["output_bytes"] = os.path.getsize(prepared.output)
        col = pq.read_table(prepared.output, columns=["id"]).column("id")
    else:
        import gpu_engine as ge

        tbl = ge.load_catalog(
            CATALOG_NAME, uri=meta["catalog"]["uri"], warehouse=meta["catalog"]["warehouse"]
        ).load_table(IDENTIFIER)
        after = footprint({"metadata_location": tbl.metadata_location.removeprefix("file://")})
        out["after"] = {k: after[k] for k in ("data_files", "data_bytes", "delete_files", "delete_bytes")}
        out["output_bytes"] = after["data_bytes"]
        col = tbl.scan(backend="cpu", columns=["id"]).to_arrow().column("id")
    ids = np.sort(np.asarray(col.to_numpy()))
    out["rows"] = len(ids)
    if len(ids) != len(expected):
        return out | {"same_rows": False, "why": f"{len(ids)} rows, expected {len(expected)} live rows"}
    if not np.array_equal(ids, expected):
        return out | {"same_rows": False, "why": "same row count, but the ids differ from the live ids"}
    return out | {"same_rows": True, "why": None}


# -- worker: one measurement in its own process --------------------------------------------------------------


def run_worker(args: argparse.Namespace) -> None:
    peer, big, warm = args.worker, Path(args.table_dir), Path(args.warm_dir)
    out: dict[str, Any] = {"peer": peer, "loadavg_at_start": list(os.getloadavg())}
    try:
        import_s, prepared = rep.once(lambda: prepare(peer, warm))
        out["import_s"] = import_s
        out["first_call_s"], first = rep.once(prepared.run)
        warm_check = check(peer, warm, prepared)
        if not warm_check["same_rows"]:
            out |= {"status": "wrong result", "why": f"warm-up table: {warm_check['why']}"}
            rep.print_result(RESULT_PREFIX, out)
            return
        del first, prepared
        prepared = prepare(peer, big)
        out["peak_rss_warm_up_mb"] = rep.status_mb("VmHWM")  # imports, warm-up call, big table loaded
        out["rss_before_timed_mb"] = rep.reset_peak_rss()
        watch = rep.CpuWatch.start()
        seconds, result = rep.once(prepared.run)
        out["others_busy_cores"] = watch.others_busy_cores()
        out["peak_rss_timed_mb"] = rep.peak_rss_since_reset(out["rss_before_timed_mb"])
        out |= {"seconds": seconds, "detail": prepared.describe(result)}
        del result
    except Exception as exc:
        out |= {"status": "unsupported", "reason": rep.first_line(exc), "peak_rss_mb": rep.status_mb("VmHWM")}
        rep.print_result(RESULT_PREFIX, out)
        return
    out["peak_rss_mb"] = max(out["peak_rss_warm_up_mb"] or 0.0, rep.status_mb("VmHWM") or 0.0) or None
    rep.record_check(out, check(peer, big, prepared))
    rep.print_result(RESULT_PREFIX, out)


def run_profile(args: argparse.Namespace) -> None:
    """cProfile one compaction of ``--worker``'s peer (ours): the calling thread, plus each group's rewrite
    (run on the group runner's thread pool) under its own profiler, merged (Python 3.12 and later: one
    profiler, which sees every thread, and allows no other); the rewrite's scan with ``workers=1`` so that
    its reads run in the profiled thread (before 3.12, cProfile sees only the threads it runs in).
    cuDF's device work is asynchronous: its time shows where the host waits for it."""
    from gpu_engine.execute import frame_scan, group_runner
    from gpu_engine.execute import scan as scan_exec

    peer = args.worker or OURS_CPU
    warm = prepare(peer, Path(args.warm_dir))
    warm.run()
    group_profilers: list[cProfile.Profile] = []
    rewrite_group = group_runner.rewrite_file_group  # type: ignore[attr-defined]

    def profiled_rewrite(*a: Any, **kw: Any) -> Any:
        if sys.version_info >= (3, 12):  # one profiler at a time, and it sees every thread (sys.monitoring)
            return rewrite_group(*a, **kw)
        prof = cProfile.Profile()
        group_profilers.append(prof)
        return prof.runcall(rewrite_group, *a, **kw)

    scan_exec.default_workers = lambda: 1
    frame_scan.default_workers = lambda: 1  # type: ignore[attr-defined]  # the frame path's own import
    group_runner.rewrite_file_group = profiled_rewrite  # type: ignore[attr-defined]
    prepared = prepare(peer, Path(args.table_dir))
    profiler = cProfile.Profile()
    seconds, result = rep.once(lambda: profiler.runcall(prepared.run))
    text = io.StringIO()
    detail = describe_compaction(result)
    how = f"backend={'cpu' if peer == OURS_CPU else 'cuda'!r}, parquet_io={PARQUET_IO[peer]!r}"
    text.write(
        f"== {load_meta(Path(args.table_dir))['workload']}: tbl.compact(rewrite-all, {how}), "
        f"scan workers=1, under cProfile: {seconds:.3f} s (read {detail['read_s']:.3f} s, order "
        f"{detail['order_s']:.3f} s, write {detail['write_s']:.3f} s) ==\n"
    )
    stats = pstats.Stats(profiler, stream=text)
    for prof in group_profilers:
        stats.add(prof)
    text.write(
        "(the calling thread's profile merged with the group rewrites' (thread pool) profiles: the calling "
        "thread's wait for the group shows as lock acquire time, overlapping the rewrite's entries)\n"
    )
    text.write("-- cumulative, inside gpu_engine --\n")
    stats.sort_stats("cumulative").print_stats(r"gpu_engine", args.profile_top)
    text.write("-- cumulative, all --\n")
    stats.sort_stats("cumulative").print_stats(args.profile_top)
    text.write("-- tottime, all --\n")
    stats.sort_stats("tottime").print_stats(args.profile_top)
    Path(args.profile_out).write_text(text.getvalue())
    rep.print_result(RESULT_PREFIX, {"profiled_s": seconds, "detail": detail})


# -- driver --------------------------------------------------------------------------------------------------


def base_cmd(args: argparse.Namespace) -> list[str]:
    return rep.script_cmd(
        __file__,
        *("--seed", str(args.seed), "--delete-fraction", repr(args.delete_fraction)),
        *("--eq-fraction", repr(args.eq_fraction), "--profile-top", str(args.profile_top)),
    )


def spawn(args: argparse.Namespace, extra: list[str], env: dict[str, str]) -> dict[str, Any]:
    """Run a worker (killed after ``--peer-timeout`` s) and return its result line as a dict."""
    try:
        done = subprocess.run(
            [*base_cmd(args), *extra], capture_output=True, text=True, env=env, timeout=args.peer_timeout
        )
    except subprocess.TimeoutExpired:
        return {"status": "timeout", "reason": f"worker killed after {args.peer_timeout:g} s"}
    return rep.worker_result(done.returncode, done.stdout, done.stderr, RESULT_PREFIX)


def build_tables(args: argparse.Namespace, work: Path, env: dict[str, str]) -> dict[str, dict[str, Any]]:
    tables: dict[str, dict[str, Any]] = {}
    for key in args.workloads:
        for name, rows, files in (
            (key, args.rows, args.files),
            (f"{key}-warm", min(WARM_ROWS, args.rows), min(WARM_FILES, args.files)),
        ):
            d = work / "tables" / name
            extra = ["--generate", key, "--table-dir", str(d), "--rows", str(rows), "--files", str(files)]
            done = subprocess.run([*base_cmd(args), *extra], env=env, capture_output=True, text=True)
            if done.returncode != 0:
                raise SystemExit(f"building the {name} table failed:\n{done.stdout}{done.stderr}")
            shutil.copytree(d / "live", d / "pristine")
        meta = load_meta(work / "tables" / key)
        meta |= {"dir": str(work / "tables" / key), "warm_dir": str(work / "tables" / f"{key}-warm")}
        meta["built"] = footprint(meta)
        meta["label"] = WORKLOADS[key].label(args)
        del meta["data_files"]
        tables[key] = meta
        b = meta["built"]
        print(
            f"{key:17} v{meta['format_version']}: {meta['live_rows']:,} of {meta['rows']:,} rows live in "
            f"{b['data_files']} data files ({meta['input_bytes'] / 1e6:.1f} MB, live "
            f"{meta['live_bytes'] / 1e6:.1f} MB), {b['delete_files']} delete files "
            f"({b['delete_bytes'] / 1e6:.2f} MB); built in {meta['generate_s']:.1f} s",
            flush=True,
        )
    return tables


def summarize(runs: list[dict[str, Any]], meta: dict[str, Any]) -> dict[str, Any]:
    """One peer on one workload over the repetitions: the first failure, else median/best and rates."""
    bad = [r for r in runs if r.get("status") != "ok"]
    if bad:
        keep = ("status", "reason", "why", "peak_rss_mb", "first_call_s")
        return {k: bad[0][k] for k in keep if k in bad[0]} | {"runs": len(runs), "failed_runs": len(bad)}
    timing = rep.Timing(tuple(r["seconds"] for r in runs))
    median, best = timing.median_s, timing.best_s
    out: dict[str, Any] = {"status": "ok", **timing.to_json()}
    out |= {
        "input_mb_per_s": meta["input_bytes"] / 1e6 / median,
        "input_mb_per_s_best": meta["input_bytes"] / 1e6 / best,
        "live_mb_per_s": meta["live_bytes"] / 1e6 / median,
        "live_rows_per_s": meta["live_rows"] / median,
        "peak_rss_timed_mb": max(r.get("peak_rss_timed_mb") or 0.0 for r in runs) or None,
        "peak_rss_mb": max(r.get("peak_rss_mb") or 0.0 for r in runs) or None,
        "rss_before_timed_mb": [r.get("rss_before_timed_mb") for r in runs],
        "first_call_s": [r.get("first_call_s") for r in runs],
        "others_busy_cores": [r.get("others_busy_cores") for r in runs],
        "output_bytes": runs[-1]["check"].get("output_bytes"),
        "detail": runs[-1]["detail"],
    }
    if "after" in runs[-1]["check"]:
        out["table_after"] = runs[-1]["check"]["after"]
    if runs[-1]["detail"].get("read_s") is not None:
        for part in ("read_s", "order_s", "write_s"):
            out[f"median_{part}"] = rep.Timing(tuple(r["detail"][part] for r in runs)).median_s
    return out


def not_applicable(workload: Workload) -> str | None:
    """Why PyIceberg cannot rewrite ``workload``'s table (None: it can)."""
    if workload.equality:
        return "PyIceberg cannot read tables with equality deletes"
    if workload.format_version >= 3:
        return "PyIceberg cannot write v3 tables"
    return None


def evaluate_targets(
    results: dict[str, dict[str, dict[str, Any]]], device: dict[str, Any]
) -> list[dict[str, Any]]:
    out = []
    for t in TARGETS:
        per: dict[str, dict[str, Any]] = {}
        for key in (w for w in t.workloads if w in results):
            mine = results[key].get(t.ours, {})
            theirs = results[key].get(t.peer, {}) if t.peer else {"status": "ok"}
            if t.ours in (OURS_CUDA, OURS_CUDF) and not device["cuda"]:
                per[key] = {"value": None, "met": None, "why": "not measured: no CUDA device here"}
            elif not mine:
                per[key] = {"value": None, "met": None, "why": f"not measured: {t.ours} was not run"}
            elif mine.get("status") != "ok":
                per[key] = {"value": None, "met": False, "why": f"gpu-engine {mine.get('status')}"}
            elif theirs.get("status") != "ok":
                why = f"{t.peer} {theirs.get('status')}: {theirs.get('reason') or theirs.get('why')}"
                per[key] = {"value": None, "met": None, "why": why}
            else:
                v = mine["input_mb_per_s"] if t.peer is None else theirs["median_s"] / mine["median_s"]
                per[key] = {"value": v, "met": v >= t.threshold, "why": None}
        unit = " MB/s" if t.peer is None else "x"
        shown = ", ".join(
            f"{k} {v['value']:,.2f}{unit}" if v["value"] is not None else f"{k} n/a" for k, v in per.items()
        )
        met = rep.overall_met(v["met"] for v in per.values())
        fields = {"ours": t.ours, "peer": t.peer, "threshold": t.threshold, "workloads": per}
        out.append(rep.target_result(t.key, t.text, met, shown, **fields))
    return out


def chart(path: Path, payload: dict[str, Any], slug: str) -> Path:
    results, tables, params = payload["results"], payload["tables"], payload["parameters"]
    keys = list(results)
    peers = [p for p in PEERS if any(results[k].get(p, {}).get("status") == "ok" for k in keys)]
    categories = [
        f"{tables[k]['label']}: {tables[k]['input_bytes'] / 1e6:,.0f} MB in, "
        f"{tables[k]['live_rows']:,} rows live"
        for k in keys
    ]
    notes = [
        f"{params['rows']:,} rows in {params['files']} files; median of {params['repeat']}; every "
        "measurement in a fresh process after a warm-up on a small table; hot page cache"
    ]
    for k, per in payload["ratios"].items():
        shown = [
            f"{name.split('/')[0].removeprefix('gpu-engine-')} {v['median']:.2f}x {name.split('/')[1]}"
            for name, v in per.items()
            if "median" in v
        ]
        rss = ", ".join(
            f"{p} {r['peak_rss_timed_mb']:,.0f}"
            for p, r in results[k].items()
            if r.get("status") == "ok" and r.get("peak_rss_timed_mb")
        )
        notes.append(f"{k}: throughput ours/peer (median): {', '.join(shown)}; peak RSS MB: {rss}"[:230])
    not_ok: dict[tuple[str, str, str], list[str]] = {}  # one line per peer and reason, naming the workloads
    for k in keys:
        for p, r in results[k].items():
            if r.get("status") != "ok":
                why = str(r.get("reason") or r.get("why"))
                not_ok.setdefault((p, str(r.get("status")), why), []).append(k)
    notes += [f"{p} {status} ({', '.join(ks)}): {why}"[:200] for (p, status, why), ks in not_ok.items()]
    notes += rep.target_notes(payload["targets"], 230)
    return rep.grouped_barh(
        path,
        title=f"Rewrite every data file of a table, deletes applied ({slug})",
        categories=categories,
        series=rep.peer_series(results, peers, "input_mb_per_s", LABELS, COLORS),
        xlabel="MB/s of input data files (median run; higher is better)",
        notes=notes,
    )


def run_driver(args: argparse.Namespace) -> int:
    slug, device = rep.device_info()
    peers = [p for p in args.peers if p not in CUDA_PEERS or device["cuda"]]
    skipped = {
        p: {"status": "skipped", "reason": f"no CUDA device here: {device['detail']}"}
        for p in args.peers
        if p not in peers
    }
    out_dir = Path(args.out)
    results: dict[str, dict[str, dict[str, Any]]] = {}
    all_runs: dict[str, dict[str, list[dict[str, Any]]]] = {}
    failures: list[str] = []
    profile: dict[str, Any] | None = None
    with rep.work_dir("compaction-bench-", args.work_dir, keep=args.keep_work) as work:
        src = work / "src"
        code = rep.snapshot_code(src)
        env = dict(os.environ, **{SRC_ENV: str(src), "NUMBA_CACHE_DIR": str(work / "numba")})
        tables = build_tables(args, work, env)
        quiet = rep.quiet_before_measuring(args.quiet_wait)
        for key, meta in tables.items():
            big, warm = Path(meta["dir"]), Path(meta["warm_dir"])
            runs: dict[str, list[dict[str, Any]]] = {p: [] for p in peers}
            for i in range(args.repeat):
                for peer in peers:
                    if runs[peer] and runs[peer][-1].get("status") != "ok":
                        continue  # unsupported / failing: once is enough
                    restore(big)
                    restore(warm)
                    r = spawn(args, ["--worker", peer, "--table-dir", str(big), "--warm-dir", str(warm)], env)
                    runs[peer].append(r)
                    if r.get("status") == "ok":
                        print(
                            f"  {key:17} #{i + 1} {peer:15} {r['seconds']:8.3f} s  "
                            f"{meta['input_bytes'] / 1e6 / r['seconds']:8.1f} MB/s in  peak RSS "
                            f"{r.get('peak_rss_timed_mb') or 0:7.0f} MB  others busy "
                            f"{r.get('others_busy_cores') or 0:.2f}",
                            flush=True,
                        )
                    else:
                        why = r.get("reason") or r.get("why")
                        print(f"  {key:17} #{i + 1} {peer:15} {r.get('status')}: {why}", flush=True)
            restore(big)
            all_runs[key] = runs
            results[key] = {p: summarize(runs[p], meta) for p in peers} | skipped
            na = not_applicable(WORKLOADS[key])
            if na and results[key].get(PYICEBERG, {}).get("status") == "unsupported":
                r = results[key][PYICEBERG]
                r |= {"status": "not applicable", "reason": f"{na} ({r.get('reason')})"}
            for p in peers:
                r = results[key][p]
                if (p in OURS or r["status"] == "wrong result") and r["status"] != "ok":
                    failures.append(f"{key}: {p} {r['status']}: {r.get('reason') or r.get('why')}")
        rep.note_checkout_changes(code)
        ratio = rep.time_ratios(results, OURS, stats=("median", "best"))  # ours / peer throughput
        targets = evaluate_targets(results, device)
        profiled = profiled_peer(peers, targets, args.profile)
        if profiled is not None:
            profile = write_profile(args, profiled, tables, ratio, env, out_dir, slug)

    payload: dict[str, Any] = {
        **rep.header("compaction", PEER_PACKAGES, device, slug),
        "parameters": {
            "rows": args.rows,
            "files": args.files,
            "delete_fraction": args.delete_fraction,
            "eq_fraction": args.eq_fraction,
            "repeat": args.repeat,
            "seed": args.seed,
            "workloads": list(args.workloads),
            "peers": list(args.peers),
            "warm_up_table": {"rows": min(WARM_ROWS, args.rows), "files": min(WARM_FILES, args.files)},
            "target_file_size_bytes": TARGET_FILE_SIZE,
            "pyiceberg_max_workers": os.environ.get("PYICEBERG_MAX_WORKERS"),
        },
        "tables": tables,
        "code": code,
        "quiet": quiet,
        "method": {
            "call": {
                RAW_PA: "pq.read_table(data_file_paths).filter(live_mask) -> pq.write_table(live, out, "
                "compression='zstd'); mask precomputed (pa.array) before the clock",
                PYICEBERG: "pt = SqlCatalog(same catalog DB).load_table('db.t'); pt.overwrite(pt.scan()."
                "to_arrow())",
                OURS_CPU: "tbl.compact(options={'rewrite-all': 'true'}, backend='cpu')",
                OURS_CUDA: "tbl.compact(options={'rewrite-all': 'true'}, backend='cuda', "
                "parquet_io='pyarrow')",
                OURS_CUDF: "tbl.compact(options={'rewrite-all': 'true'}, backend='cuda', parquet_io='cudf')",
                RAW_CUDF: "cudf.read_parquet(data_file_paths)[live_mask_on_device].to_parquet(out, "
                "compression='ZSTD'); mask copied to the device before the clock",
            },
            "tables": "per workload one seeded table built once with gpu-engine (files x tbl.append of "
            "rows/files rows: one data file each; then tbl.delete('r < f') and/or tbl.delete_rows(keys, "
            "on=['k'])); restored before every measurement from a pristine copy (data hard-linked, catalog "
            "DB copied), so every peer rewrites identical files at identical paths from a hot page cache",
            "process": "one fresh subprocess per measurement: imports, the same call on a small warm-up "
            "table (first_call_s, checked), then the timed call on the big table, then the check; peers "
            "interleaved per repetition; `repeat` repetitions",
            "rates": "input_mb_per_s = bytes of all data files rewritten (on disk) / 1e6 / median_s; "
            "live_mb_per_s = live bytes (per file: size x live-row fraction) / 1e6 / median_s",
            "checks": "after every timed call, outside the timing: the table read with gpu-engine's cpu scan "
            "(ours and PyIceberg) or the output file (raw peers) holds exactly the live ids (count + sorted "
            "ids); otherwise status 'wrong result' and the run fails",
            "peak_rss": "peak_rss_timed_mb: the worker's VmHWM after resetting it (clear_refs 5) just before "
            "the timed call, i.e. the timed call's peak resident memory (max over repetitions); rss_before_"
            "timed_mb: the resident memory at that reset (imports, warm-up leftovers); host memory only "
            "(device memory not included)",
            "ratios": "ours/peer throughput = peer median_s / our median_s (best alongside); same input "
            "bytes for every peer",
            "v3": "on v3 tables gpu-engine also writes the row-lineage columns _row_id and "
            "_last_updated_sequence_number (the raw peers do not)",
        },
        "results": results,
        "runs": all_runs,
        "ratios": ratio,
        "targets": targets,
        "profile": profile,
        "failures": failures,
        "notes": [CONTENTION_NOTE],
    }
    stem = f"compaction-{slug}"
    return rep.finish(out_dir, stem, payload, lambda path: chart(path, payload, slug), failures, targets)


# the peer a profile is taken of, the raw peer it is compared with, and the profile file's name part
PROFILED = {OURS_CPU: (RAW_PA, ""), OURS_CUDF: (RAW_CUDF, "cudf-")}


def profiled_peer(peers: Sequence[str], targets: Sequence[dict[str, Any]], mode: str) -> str | None:
    """Which of ours to profile: with ``mode`` "always" or "auto" (where a target of it was missed),
    cuDF's peer before the CPU one (one profile a run)."""
    for peer in (OURS_CUDF, OURS_CPU):
        missed = any(t["met"] is False and t["ours"] == peer for t in targets)
        if peer in peers and (mode == "always" or (mode == "auto" and missed)):
            return peer
    return None


def write_profile(
    args: argparse.Namespace,
    peer: str,
    tables: dict[str, dict[str, Any]],
    ratio: dict[str, dict[str, dict[str, Any]]],
    env: dict[str, str],
    out_dir: Path,
    slug: str,
) -> dict[str, Any]:
    """cProfile one compaction by ``peer`` of the workload where it fares worst against its raw peer."""
    raw, part = PROFILED[peer]
    key = min(tables, key=lambda k: ratio.get(k, {}).get(f"{peer}/{raw}", {}).get("median", 9e9))
    big, warm = Path(tables[key]["dir"]), Path(tables[key]["warm_dir"])
    restore(big)
    restore(warm)
    path = out_dir / f"compaction-profile-{part}{slug}.txt"
    out_dir.mkdir(parents=True, exist_ok=True)
    extra = ["--profile-worker", "--worker", peer, "--table-dir", str(big), "--warm-dir", str(warm)]
    r = spawn(args, [*extra, "--profile-out", str(path)], env)
    restore(big)
    print(f"wrote {path}" if path.exists() else f"profile failed: {r.get('reason')}", flush=True)
    return {"peer": peer, "workload": key, "file": path.name if path.exists() else None, **r}


def main() -> int:
    p = rep.arg_parser(__doc__)
    p.add_argument("--rows", type=int, default=10_000_000)
    p.add_argument("--files", type=int, default=200)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--workloads", nargs="+", choices=list(WORKLOADS), default=list(WORKLOADS))
    p.add_argument("--peers", nargs="+", choices=PEERS, default=list(PEERS), help="cuda ones only with a GPU")
    p.add_argument("--delete-fraction", type=float, default=0.05, help="rows deleted by position / DV")
    p.add_argument("--eq-fraction", type=float, default=0.01, help="rows deleted by equality deletes")
    rep.add_run_options(p, seed=DEFAULT_SEED)
    p.add_argument("--profile", choices=("auto", "always", "never"), default="auto")
    p.add_argument("--profile-top", type=int, default=30)
    p.add_argument("--worker", choices=PEERS, help=argparse.SUPPRESS)
    p.add_argument("--generate", choices=list(WORKLOADS), help=argparse.SUPPRESS)
    p.add_argument("--profile-worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--table-dir", help=argparse.SUPPRESS)
    p.add_argument("--warm-dir", help=argparse.SUPPRESS)
    p.add_argument("--profile-out", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.rows < args.files or args.files < 1:
        p.error("need rows >= files >= 1")
    workers = {
        "generate": lambda a: generate(Path(a.table_dir), WORKLOADS[a.generate], a.rows, a.files, a),
        "profile_worker": run_profile,  # before "worker": a profile names its peer with --worker
        "worker": run_worker,
    }
    return rep.run_mode(args, workers, run_driver)


if __name__ == "__main__":
    sys.exit(main())
