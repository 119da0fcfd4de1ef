"""bench/device_kit.py: the archive cut into parts and joined again, the calls it writes, and the budgeted
run of the device steps (failures, time-outs and a spent budget are each recorded, the rest still run)."""

from __future__ import annotations

import importlib.util
import json
import os
import random
import sys
import tarfile
from pathlib import Path
from types import ModuleType

import pytest

_PATH = Path(__file__).resolve().parents[2] / "bench" / "device_kit.py"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("device_kit", _PATH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["device_kit"] = module  # dataclasses resolve annotations through sys.modules
    spec.loader.exec_module(module)
    return module


kit = _load()


@pytest.mark.parametrize("size", [0, 1, 999, 1000, 1001, 4321])
def test_parts_join_to_the_original(tmp_path: Path, size: int) -> None:
    data = random.Random(size).randbytes(size)
    archive = tmp_path / "kit.tar"
    archive.write_bytes(data)
    parts = kit.split_file(archive, 1000, tmp_path / "parts")
    assert len(parts) == -(-size // 1000)
    assert all(p.stat().st_size <= 1000 for p in parts)
    assert [p.parent.name for p in parts] == [f"{i:02d}" for i in range(1, len(parts) + 1)]
    if not parts:
        return
    gathered = tmp_path / "gathered"
    gathered.mkdir()
    for p in parts:
        (gathered / p.name).write_bytes(p.read_bytes())
    assert kit.join_parts(gathered, tmp_path / "joined.tar").read_bytes() == data


def test_a_missing_part_is_named(tmp_path: Path) -> None:
    archive = tmp_path / "kit.tar"
    archive.write_bytes(b"x" * 2500)
    parts = kit.split_file(archive, 1000, tmp_path / "parts")
    gathered = tmp_path / "gathered"
    gathered.mkdir()
    for p in (parts[0], parts[2]):
        (gathered / p.name).write_bytes(p.read_bytes())
    with pytest.raises(SystemExit, match=r"part\(s\) \[2\] missing"):
        kit.join_parts(gathered, tmp_path / "joined.tar")
    with pytest.raises(SystemExit, match="no parts"):
        kit.join_parts(tmp_path / "parts" / "none", tmp_path / "joined.tar")


def test_wheel_names() -> None:
    assert kit.wheel_project("SQLAlchemy-2.1.9-cp312-cp312-manylinux2014_x86_64.whl") == "sqlalchemy"
    assert kit.wheel_project("typing_extensions-4.16.0-py3-none-any.whl") == "typing-extensions"
    assert "typing-extensions" in kit.DEVICE_HAS and "fastavro" not in kit.DEVICE_HAS


def test_calls_carry_one_part_each_and_the_last_runs_the_check(tmp_path: Path) -> None:
    parts = [kit.REPO / ".device" / "parts" / f"{i:02d}" / f"kit.tar.part{i:02d}" for i in (1, 2, 3)]
    text = kit.calls_text(parts, 300)
    assert text.count("## call ") == 3
    assert '- carry: [".device/parts/02"]' in text
    last = text.split("## call 3 of 3")[1]
    assert "device_kit.py install /tmp/ge-kit" in last and "check --budget-s 300" in last
    assert "timeout_s: 360" in last
    assert "install" not in text.split("## call 3 of 3")[0]


def _step(name: str, code: str, cap_s: int) -> object:
    return kit.Step(name, (sys.executable, "-c", code), cap_s)


def test_steps_record_failures_timeouts_and_a_spent_budget(tmp_path: Path) -> None:
    plan = [
        _step("fails", "import sys; print('boom'); sys.exit(3)", 30),
        _step("slow", "import time; time.sleep(30)", 1),
        _step("ok", "print('fine')", 30),
        _step("rest", "import time; time.sleep(30)", 30),  # gets what is left of the budget
        _step("late", "print('never')", 30),
    ]
    out = kit.run_steps(plan, 4.0, tmp_path, dict(os.environ), reserve_s=0.0, min_step_s=0.5)
    status = {r["step"]: r["status"] for r in out}
    assert status["fails"] == "failed (exit 3)"
    assert status["slow"] == "timed out after 1 s"
    assert status["ok"] == "ok"
    assert status["rest"].startswith("timed out after ")
    assert float(status["rest"].split()[3]) < 4
    assert status["late"] == "not run: device time budget spent"
    assert (tmp_path / "fails.log").read_text().strip() == "boom"
    assert not (tmp_path / "late.log").exists()


def test_each_finished_step_is_published_before_the_next_starts(tmp_path: Path) -> None:
    logs, results, out = tmp_path / "logs", tmp_path / "results", tmp_path / "out"
    for d in (logs, results, out):
        d.mkdir()
    seen: list[list[str]] = []

    def progress(done: list[dict[str, object]]) -> None:
        kit.publish({"steps": done}, logs, results, out)
        with tarfile.open(out / "device-check.tar.gz") as tar:
            seen.append(sorted(n for n in tar.getnames() if n.endswith(".log")))

    plan = [_step("one", "print(1)", 30), _step("two", "print(2)", 30)]
    kit.run_steps(plan, 60.0, logs, dict(os.environ), reserve_s=0.0, after_step=progress)
    assert seen == [["logs/one.log"], ["logs/one.log", "logs/two.log"]]
    assert [s["step"] for s in json.loads((out / "device-check.json").read_text())["steps"]] == ["one", "two"]
    assert not list(out.glob("*.tmp"))


def test_the_frame_stages_step_follows_the_scan_where_cudf_is_carried(tmp_path: Path) -> None:
    names = [s.name for s in kit.steps(sys.executable, tmp_path, quick=False, cudf=True)]
    assert names.index("frame-stages") == names.index("scan") + 1
    assert "frame-stages" not in [s.name for s in kit.steps(sys.executable, tmp_path, quick=False)]
