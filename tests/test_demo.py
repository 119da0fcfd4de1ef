"""make demo's module runs the main job end to end on a small table: build, scan, compact, scan."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpu_engine import demo


@pytest.mark.parametrize(("version", "strategy"), [(3, "binpack"), (2, "sort")])
def test_demo_compacts_and_keeps_the_rows(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], version: int, strategy: str
) -> None:
    demo.main(
        ["--warehouse", str(tmp_path), "--format-version", str(version), "--appends", "6", "--rows", "400",
         "--strategy", strategy, "--backend", "cpu"]
    )  # fmt: skip
    out = capsys.readouterr().out
    assert "rows identical before and after: yes" in out
    assert "backend cpu" in out
    assert (tmp_path / "catalog.db").exists()


def test_events_have_the_requested_rows_and_some_nulls() -> None:
    table = demo.events(5000, start_id=10)
    assert table.num_rows == 5000
    assert table["id"][0].as_py() == 10
    assert table["id"].null_count == 0
    assert all(0 < table[c].null_count < 500 for c in ("ts", "user", "amount"))
