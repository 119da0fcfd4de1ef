"""The gpu-engine command line: plan, its options and its errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpu_engine.cli import main

FIXTURES = Path(__file__).resolve().parents[1].parent / "shared" / "fixtures"
BUCKET = FIXTURES / "pg_lake" / "sample_tables_v3" / "public" / "v3_partitioned_bucket"


def test_fixtures_are_present() -> None:
    assert BUCKET.is_dir(), f"fixtures missing at {FIXTURES}: CI needs shared/ beside the repository"


def test_plan_json_prunes_bucket_partitions(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", str(BUCKET), "--relocate", "--filter", "id = 5", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    summary = out["summary"]
    assert summary["data_files_total"] == 7
    assert summary["data_files_pruned_by_partition"] == 6
    assert len(out["tasks"]) == 1 and "id_bucket=" in out["tasks"][0]["file"]


def test_plan_table_output(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", str(BUCKET), "--relocate"]) == 0
    text = capsys.readouterr().out
    assert "data files total" in text and "tasks" in text


def test_errors_name_the_cause(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["plan", str(tmp_path / "nope")]) == 2
    assert "nope" in capsys.readouterr().err
    assert main(["plan", str(BUCKET), "--relocate", "--filter", "no_such_column = 1"]) == 2
    assert "no_such_column" in capsys.readouterr().err
    assert main(["plan", str(BUCKET), "--path-map", "missing-equals"]) == 2
    assert "OLD=NEW" in capsys.readouterr().err


def test_interrupt_ends_with_a_line_not_a_traceback(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from gpu_engine.cli import plan

    def interrupted(*args: object, **kwargs: object) -> int:
        raise KeyboardInterrupt

    monkeypatch.setattr(plan, "cmd_plan", interrupted)
    assert main(["plan", str(BUCKET), "--relocate"]) == 130  # as a shell reports SIGINT
    assert capsys.readouterr().err.strip() == "interrupted: plan"


def test_exclusive_snapshot_options() -> None:
    with pytest.raises(SystemExit):
        main(["plan", str(BUCKET), "--snapshot", "1", "--ref", "main"])


def test_python_dash_m_runs_the_command() -> None:
    """``python -m gpu_engine.cli`` is the ``gpu-engine`` command (the package had no ``__main__``)."""
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-m", "gpu_engine.cli", "--help"], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0 and done.stdout.startswith("usage: gpu-engine"), done.stderr
