"""make demo's module runs end to end on a small table and reports every partition transform."""

from __future__ import annotations

import pytest

from gpu_engine import demo


def test_demo_reports_each_transform(capsys: pytest.CaptureFixture[str]) -> None:
    demo.main(["--rows", "70000", "--backend", "cpu"])
    out = capsys.readouterr().out
    assert "backend cpu" in out
    for _, _, transform in demo.PARTITION_FIELDS:
        assert transform in out


def test_events_have_the_requested_rows_and_some_nulls() -> None:
    table = demo.events(5000)
    assert table.num_rows == 5000
    assert all(0 < table[c].null_count < 500 for c in table.column_names)
