"""The GPU checks of a lent device machine (H100/H200), prepared here and run there in few calls.

The device image (Python 3.12, CUDA 13) has pyarrow, numba, numba-cuda, CuPy, pandas, pytest,
hypothesis and rich, but none of this project's other dependencies, the fixtures beside the checkout do
not travel, and nothing can be downloaded there. A call carries at most 64 MiB and a session has 15
minutes of device time, so the work is prepared here:

    .venv/bin/python bench/device_kit.py pack [--with-cudf]

writes ``.device/`` (git-ignored): the missing wheels for the device's Python (the versions of this
checkout's ``.venv``) and a copy of ``../shared/fixtures``, as one archive cut into parts of at most
``--part-mib`` MiB, one folder per part, and ``.device/CALLS.md``: the device calls to make, back to back
(the machine stays warm about 30 s between calls). Each call but the last copies its part outside the
checkout; the last one joins the parts, installs the wheels into a folder of their own
(``install``) and runs ``check``: the gpu-marked tests, then the kernel, scan and compaction benchmarks,
each with what is left of ``--budget-s``, results and logs in one archive under ``$OUT``. A step that
fails or runs out of time is recorded as such; the others still run.
"""

from __future__ import annotations

import argparse
import importlib.metadata as md
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
KIT = REPO / ".device"
FIXTURES = REPO.parent / "shared" / "fixtures"

# what the device image holds already (KINDS.md of the device tool, read 2026-11-17); carried only when
# missing there
DEVICE_HAS = frozenset((
    "annotated-doc", "anyio", "attrs", "certifi", "charset-normalizer", "click", "cloudpickle",
    "contourpy", "cuda-bindings", "cuda-core", "cuda-pathfinder", "cuda-toolkit", "cupy-cuda13x", "cycler",
    "filelock", "fonttools", "fsspec", "hypothesis", "idna", "iniconfig", "jinja2", "kiwisolver",
    "llvmlite", "markdown-it-py", "markupsafe", "matplotlib", "mdurl", "numba", "numba-cuda",
    "nvidia-cublas", "nvidia-cuda-cupti", "nvidia-cuda-nvrtc", "nvidia-cuda-runtime", "nvidia-cudnn-cu13",
    "nvidia-cufft", "nvidia-cufile", "nvidia-curand", "nvidia-cusolver", "nvidia-cusparse",
    "nvidia-cusparselt-cu13", "nvidia-ml-py", "nvidia-nccl-cu13", "nvidia-nvjitlink", "nvidia-nvshmem-cu13",
    "nvidia-nvtx", "packaging", "pandas", "pathspec",
    "pillow", "pip", "pluggy", "psutil", "pyarrow", "pygments", "pyparsing", "pytest", "pytest-timeout",
    "pytest-xdist", "python-dateutil", "pyyaml", "requests", "rich", "setuptools", "six",
    "sortedcontainers", "typing-extensions", "tzdata", "urllib3", "wheel",
))  # fmt: skip
# the project's runtime dependencies and the tests' independent readers; pyspark (and Java) stay behind:
# Spark runs are measured on clusters, not in a 15-minute device slot
CARRIED = (
    # the image's numpy 2.5 breaks its numba-cuda 0.30.4 (np.row_stack is gone: every kernel compile
    # fails; seen on an H200, 2026-11-27): the tested numpy goes along and comes first on the path
    "numpy",
    "fastavro",
    "backports.zstd",  # fastavro's zstandard codec (Python < 3.14)
    "cramjam",
    "zstandard",
    "sqlalchemy",
    "pyroaring",
    "mmh3",
    "pyiceberg",
    "duckdb",
    "duckdb-extension-iceberg",
    "duckdb-extension-avro",
)
CUDF = ("cudf-cu13",)
# cuDF 26.10 wants pandas 3.0.x; the image's pandas is carried over with it
CUDF_PINS = ("pandas>=3.0,<3.1",)
# pulled in by cuDF's dependencies but not needed to run it where CUDA's compiler is installed (the device
# image has nvcc and the toolkit): ~200 MB, four device calls
NOT_CARRIED = frozenset(
    ("nvidia-cuda-nvcc", "nvidia-nvvm", "nvidia-cuda-crt", "nvidia-cuda-cccl", "numba-cuda-mlir")
)
DEVICE_PYTHON = "3.12"
PLATFORMS = (
    "manylinux_2_28_x86_64",
    "manylinux_2_27_x86_64",
    "manylinux_2_24_x86_64",
    "manylinux2014_x86_64",
)
PLATFORMS += ("manylinux_2_17_x86_64", "manylinux_2_5_x86_64", "manylinux1_x86_64", "linux_x86_64")


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def pinned(names: Iterable[str]) -> list[str]:
    """``name==version`` of each package as this interpreter has it installed (the tested versions);
    a bare name where it is not installed."""
    out = []
    for name in names:
        try:
            out.append(f"{name}=={md.version(name)}")
        except md.PackageNotFoundError:
            out.append(name)
    return out


def wheel_project(filename: str) -> str:
    """The canonical project name of a wheel file (``SQLAlchemy-2.0-...whl`` -> ``sqlalchemy``)."""
    return canonical(filename.split("-", 1)[0])


def split_file(path: Path, part_bytes: int, out_dir: Path) -> list[Path]:
    """Cut ``path`` into ``out_dir/NN/<name>.partNN`` of at most ``part_bytes`` each (one folder per part,
    so that each device call carries one folder)."""
    if part_bytes <= 0:
        raise ValueError("part size must be positive")
    parts = []
    with path.open("rb") as src:
        index = 1
        while chunk := src.read(part_bytes):
            folder = out_dir / f"{index:02d}"
            folder.mkdir(parents=True, exist_ok=True)
            part = folder / f"{path.name}.part{index:02d}"
            part.write_bytes(chunk)
            parts.append(part)
            index += 1
    return parts


def join_parts(parts_dir: Path, target: Path) -> Path:
    """Concatenate ``parts_dir``'s ``*.partNN`` files in order into ``target``; a gap in the numbering is
    an error naming the missing part (a call that did not run)."""
    parts = sorted(parts_dir.glob("*.part[0-9][0-9]"))
    if not parts:
        raise SystemExit(f"no parts in {parts_dir}: run the earlier calls of .device/CALLS.md first")
    numbers = [int(p.name[-2:]) for p in parts]
    missing = sorted(set(range(1, max(numbers) + 1)) - set(numbers))
    if missing:
        raise SystemExit(f"{parts_dir}: part(s) {missing} missing: run their calls of .device/CALLS.md first")
    with target.open("wb") as out:
        for part in parts:
            with part.open("rb") as src:
                shutil.copyfileobj(src, out)
    return target


# -- pack (here) -----------------------------------------------------------------------------------------


def download_wheels(
    dest: Path, python_version: str, packages: Sequence[str], pins: Sequence[str] = ()
) -> list[Path]:
    """The wheels of ``packages`` (their tested versions) and ``pins`` (requirement strings, carried even
    where the image has the project) and their dependencies for ``python_version`` on x86-64 Linux, less
    the ones the device image has."""
    cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--only-binary=:all:", "--dest", str(dest)]
    cmd += ["--python-version", python_version, "--implementation", "cp"]
    for platform in PLATFORMS:
        cmd += ["--platform", platform]
    subprocess.run([*cmd, *pinned(packages), *pins], check=True)
    forced = {canonical(re.split(r"[<>=!~ ]", p, maxsplit=1)[0]) for p in pins}
    kept = []
    for wheel in sorted(dest.glob("*.whl")):
        if wheel_project(wheel.name) in (DEVICE_HAS - forced) | NOT_CARRIED:
            wheel.unlink()
        else:
            kept.append(wheel)
    return kept


def calls_text(parts: Sequence[Path], budget_s: int) -> str:
    """The device calls, in order: each part's folder is carried by one call."""
    rel = [p.parent.relative_to(REPO) for p in parts]
    lines = [
        "# Device calls for the GPU checks (make them back to back: the machine goes back after ~30 s idle)",
        "",
    ]
    for i, folder in enumerate(rel, 1):
        copy = f"mkdir -p /tmp/ge-kit/parts && cp {folder}/* /tmp/ge-kit/parts/"
        if i < len(rel):
            command, timeout = copy, 120
        else:
            command = (
                f"{copy} && python3 bench/device_kit.py install /tmp/ge-kit && "
                f"python3 bench/device_kit.py check --budget-s {budget_s}"
            )
            timeout = budget_s + 60
        lines += [
            f"## call {i} of {len(rel)}",
            f'- carry: ["{folder}"]',
            f"- timeout_s: {timeout}",
            f"- command: `{command}`",
            "",
        ]
    lines += [
        "Then: copy the archive's bench/results files into bench/results and commit them with the logs;",
        "give_back unless you rerun at once.",
        "",
    ]
    return "\n".join(lines)


def pack(args: argparse.Namespace) -> int:
    if not FIXTURES.is_dir():
        raise SystemExit(f"fixtures missing at {FIXTURES}: the device tests read them")
    shutil.rmtree(KIT, ignore_errors=True)
    KIT.mkdir()
    with tempfile.TemporaryDirectory(prefix="ge-kit-") as tmp:
        stage = Path(tmp) / "kit"
        wheels = stage / "wheels"
        wheels.mkdir(parents=True)
        packages = [*CARRIED, *(CUDF if args.with_cudf else ())]
        pins = CUDF_PINS if args.with_cudf else ()
        kept = download_wheels(wheels, args.python_version, packages, pins)
        shutil.copytree(FIXTURES, stage / "fixtures", symlinks=True)
        archive = Path(tmp) / "kit.tar"
        with tarfile.open(archive, "w") as tar:
            tar.add(stage, arcname="kit")
        parts = split_file(archive, args.part_mib << 20, KIT / "parts")
        size = archive.stat().st_size
    (KIT / "CALLS.md").write_text(calls_text(parts, args.budget_s))
    mib = size / 2**20
    print(
        f"{len(kept)} wheels for Python {args.python_version} + fixtures: {mib:.1f} MiB, {len(parts)} part(s)"
    )
    for wheel in kept:
        print(f"  {wheel.name}")
    print(f"calls: {KIT / 'CALLS.md'}")
    return 0


# -- install (device) ------------------------------------------------------------------------------------


def site_dir(kit: Path) -> Path:
    return kit / "site"


def install(args: argparse.Namespace) -> int:
    kit = Path(args.kit)
    archive = join_parts(kit / "parts", kit / "kit.tar")
    with tarfile.open(archive) as tar:
        tar.extractall(kit, filter="data")
    archive.unlink()
    wheels = sorted((kit / "kit" / "wheels").glob("*.whl"))
    site = site_dir(kit)
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "install",
        "--quiet",
        "--no-index",
        "--no-deps",
        "--target",
        str(site),
    ]
    subprocess.run([*cmd, *map(str, wheels)], check=True)
    link = FIXTURES
    if not link.exists():
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(kit / "kit" / "fixtures", target_is_directory=True)
    print(f"installed {len(wheels)} wheels into {site}; fixtures at {link}")
    return 0


# -- check (device) --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Step:
    name: str
    argv: tuple[str, ...]
    cap_s: int  # at most this long, and never past the budget


def steps(python: str, bench_out: Path, *, quick: bool, cudf: bool = False) -> list[Step]:
    """The check's steps by priority; with ``cudf`` (carried), its decoder is measured too: the scan's
    ``to_cudf`` against the CUDA backend's ``to_arrow`` and PyIceberg, compaction against raw cuDF."""
    common = ["--out", str(bench_out), *(["--rows", "2000000"] if quick else [])]
    timed = [*common, "--quiet-wait", "5"]
    ours_gpu = ["gpu-engine-cudf"] if cudf else ["gpu-engine-cuda"]
    peers = ["--peers", "gpu-engine-cpu", *ours_gpu, "pyiceberg"]
    scan = [*timed, "--repeat", "2", "--kinds", "position", "dv", "--no-check-peers", *peers]
    compaction = [
        *timed,
        "--repeat",
        "1",
        "--workloads",
        "dv",
        "--peers",
        "gpu-engine-cpu",
        "gpu-engine-cuda",
        *(["gpu-engine-cudf", "raw-cudf"] if cudf else []),
    ]
    stages = ["--scan-kind", "position", "--frames", "cudf", "--repeat", "3", "--workers", "1", "4"]
    stages += ["--batch-files", "16", "34"]  # smaller decoder calls, pipelined with the preparation
    stages += ["--out", str(bench_out / "frame-stages-position-device.txt")]
    # the image's pytest-benchmark warns under xdist (an error with -W error); short tracebacks and a cap on
    # failures, so that a run with many of them still ends with its summary inside the step's time; -v
    # names each test as it ends (a run cut at its cap prints no failure messages)
    pytest = [python, "-m", "pytest", "-v", "-m", "gpu", "-p", "no:cacheprovider", "-p", "no:benchmark"]
    pytest += ["--tb=short", "-rfE", "--maxfail=150", "--ignore=tests/spark"]  # Spark is not carried
    if importlib.util.find_spec("xdist") is not None:
        pytest += ["-n", "14"]  # each worker compiles its kernels: 14 of the 16 cores
    return [  # by priority: what a later step cannot get is recorded as not run
        # 550 tests took 43 s on an H200 (8 workers), 659 with cuDF 66 s; with the cuDF writer's fixture
        # compactions (~800 tests), 300 took 91 s (8 workers)
        Step("gpu-tests", tuple(pytest), 260),
        # cut at 130 s in three runs (each peer's cold first call takes 11-17 s, twice per peer and kind)
        Step("scan", (python, "bench/scan.py", *scan), 200),
        # the scan table's to_cudf stage by stage (~25 s; ~35 s with the batch variants), with cuDF only
        *([Step("frame-stages", (python, "bench/frame_stages.py", *stages), 60)] if cudf else []),
        Step("kernels", (python, "bench/kernels.py", *common), 45),  # its last case printed at 40 s
        # ~80 s with cuDF, then a profile of the cuDF peer (its targets missed) ~30 s
        Step("compaction", (python, "bench/compaction.py", *compaction), 130),
    ]


def run_steps(
    plan: Sequence[Step],
    budget_s: float,
    logs: Path,
    env: Mapping[str, str],
    *,
    reserve_s: float = 20.0,
    min_step_s: float = 15.0,
    after_step: Callable[[list[dict[str, Any]]], None] = lambda done: None,
) -> list[dict[str, Any]]:
    """Run each step with ``min(cap, time left)`` (``reserve_s`` kept for packing the results); a step
    with under ``min_step_s`` left is not started. ``after_step`` gets the records so far after each
    step (to publish them: a call cut short still returns what finished)."""
    deadline = time.monotonic() + budget_s - reserve_s
    out: list[dict[str, Any]] = []
    for step in plan:
        left = deadline - time.monotonic()
        if left < min_step_s:
            out.append({"step": step.name, "status": "not run: device time budget spent"})
            continue
        limit = min(step.cap_s, left)
        log = logs / f"{step.name}.log"
        started = time.monotonic()
        with log.open("w") as fh:
            try:
                rc = subprocess.run(step.argv, cwd=REPO, env=dict(env), stdout=fh, stderr=subprocess.STDOUT,
                                    timeout=limit).returncode  # fmt: skip
                status = "ok" if rc == 0 else f"failed (exit {rc})"
            except subprocess.TimeoutExpired:
                status = f"timed out after {limit:.0f} s"
        out.append({"step": step.name, "status": status, "seconds": round(time.monotonic() - started, 1)})
        print(f"{step.name}: {status} ({out[-1]['seconds']} s)", flush=True)
        after_step(out)
    return out


def publish(summary: Mapping[str, Any], logs: Path, results: Path, out: Path) -> None:
    """Write the summary and the archive of logs and results under ``out`` (replacing earlier ones)."""
    (logs / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    partial = out / "device-check.tar.gz.tmp"
    with tarfile.open(partial, "w:gz") as tar:
        tar.add(logs, arcname="logs")
        tar.add(results, arcname="results")
    partial.replace(out / "device-check.tar.gz")
    shutil.copy(logs / "summary.json", out / "device-check.json")


def check(args: argparse.Namespace) -> int:
    started = time.monotonic()
    kit = Path(args.kit)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(site_dir(kit)), str(REPO), env.get("PYTHONPATH")) if p
    )
    out = Path(os.environ.get("OUT") or args.out)
    out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="ge-check-"))
    logs, results = work / "logs", work / "results"
    logs.mkdir()
    results.mkdir()
    code = "from gpu_engine.backend import probe_cuda; p = probe_cuda(); print(p.available, p.detail)"
    probe = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=False)
    smi = shutil.which("nvidia-smi")
    gpu = subprocess.run([smi, "-L"], capture_output=True, text=True, check=False).stdout if smi else ""
    summary: dict[str, Any] = {"probe": (probe.stdout + probe.stderr).strip(), "nvidia_smi": gpu.strip()}
    if not probe.stdout.startswith("True") and not args.allow_no_gpu:
        summary["steps"] = [{"step": "all", "status": "not run: no usable CUDA device"}]
    else:
        plan = [
            s
            for s in steps(sys.executable, results, quick=args.quick, cudf=(site_dir(kit) / "cudf").is_dir())
            if not args.steps or s.name in args.steps
        ]
        spent = time.monotonic() - started

        def progress(done: list[dict[str, Any]]) -> None:
            publish({**summary, "steps": done}, logs, results, out)

        summary["steps"] = run_steps(plan, args.budget_s - spent, logs, env, after_step=progress)
    publish(summary, logs, results, out)
    print(json.dumps(summary, indent=2))
    return 0 if all(s["status"] == "ok" for s in summary["steps"]) else 1


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    pk = sub.add_parser("pack", help="here: build .device/ (wheels + fixtures in parts, CALLS.md)")
    pk.add_argument("--python-version", default=DEVICE_PYTHON, help="the device's Python (default 3.12)")
    pk.add_argument("--with-cudf", action="store_true", help="carry cuDF too (~450 MB: many more calls)")
    pk.add_argument(
        "--part-mib", type=int, default=56, help="part size: the call limit is 64 MiB with the tree"
    )
    pk.add_argument("--budget-s", type=int, default=480, help="check's time budget written into CALLS.md")
    pk.set_defaults(run=pack)
    ins = sub.add_parser("install", help="device: join the parts, install the wheels, link the fixtures")
    ins.add_argument("kit", help="where the calls copied the parts (/tmp/ge-kit)")
    ins.set_defaults(run=install)
    ck = sub.add_parser("check", help="device: gpu tests and benchmarks within a time budget")
    ck.add_argument("--kit", default="/tmp/ge-kit")
    ck.add_argument("--budget-s", type=float, default=480)
    ck.add_argument(
        "--steps", nargs="*", choices=["gpu-tests", "kernels", "compaction", "scan", "frame-stages"]
    )
    ck.add_argument("--quick", action="store_true", help="benchmarks on 2M rows instead of their defaults")
    ck.add_argument("--out", default="device-check-out", help="where results go when $OUT is not set")
    ck.add_argument(
        "--allow-no-gpu", action="store_true", help="rehearse without a device (the CUDA simulator)"
    )
    ck.set_defaults(run=check)
    args = p.parse_args(argv)
    result: int = args.run(args)
    return result


if __name__ == "__main__":
    sys.exit(main())
