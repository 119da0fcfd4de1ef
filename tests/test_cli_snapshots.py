"""``gpu-engine snapshots``: the listing (JSON and table), and branch/tag changes committed from the command
line; bad arguments exit 2 naming the option or the ref."""

from __future__ import annotations

from pathlib import Path

import pytest

import gpu_engine as ge
from gpu_engine.cli import main

from .test_cli_write import IDENT, NAME, _create_and_append, _json, catalog_env

__all__ = ["catalog_env"]


def _table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> list[int]:
    _create_and_append(tmp_path, capsys, 3, 5)
    return [s.snapshot_id for s in ge.load_catalog(NAME).load_table(IDENT).metadata.snapshots]


def test_list_then_tag_branch_rollback_and_remove(
    catalog_env: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "200")  # the listing's table unwrapped
    ids = _table(tmp_path, capsys)
    listing = _json(capsys, "snapshots", IDENT, "--catalog", NAME)
    assert [s["snapshot_id"] for s in listing["snapshots"]] == ids
    assert [s["operation"] for s in listing["snapshots"]] == ["append"] * 3
    assert [s["total_records"] for s in listing["snapshots"]] == [5, 10, 15]  # numbers (were strings)
    assert [s["added_records"] for s in listing["snapshots"]] == [5, 5, 5]
    assert listing["refs"] == {"main": {"type": "branch", "snapshot_id": ids[-1]}}
    changed = _json(
        capsys, "snapshots", IDENT, "--catalog", NAME, "--create-tag", f"first={ids[0]}",
        "--create-branch", "dev", "--rollback-to", str(ids[1]),
    )  # fmt: skip
    assert changed["current_snapshot_id"] == ids[1]
    assert changed["refs"]["first"] == {"type": "tag", "snapshot_id": ids[0]}
    assert changed["refs"]["dev"] == {"type": "branch", "snapshot_id": ids[-1]}
    tbl = ge.load_catalog(NAME).load_table(IDENT)
    assert tbl.scan().to_arrow().num_rows == 10 and tbl.scan(ref="dev").to_arrow().num_rows == 15
    back = _json(
        capsys, "snapshots", IDENT, "--catalog", NAME, "--fast-forward", "main=dev", "--remove-tag", "first"
    )
    assert back["current_snapshot_id"] == ids[-1] and set(back["refs"]) == {"main", "dev"}
    assert main(["snapshots", IDENT, "--catalog", NAME]) == 0
    out = capsys.readouterr().out
    assert str(ids[-1]) in out and "dev (branch)" in out and "append" in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--create-tag", "t=abc"], "--create-tag 't=abc': expected NAME or NAME=SNAPSHOT_ID"),
        (["--create-branch", "main"], "create branch 'main': a branch of that name exists"),
        (["--fast-forward", "main"], "--fast-forward 'main': expected BRANCH=REF"),
        (["--rollback-to", "42"], "no snapshot with id 42"),
        (["--remove-branch", "main"], "the main branch cannot be removed"),
    ],
)
def test_snapshot_errors_exit_2_and_change_nothing(
    catalog_env: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    _table(tmp_path, capsys)
    before = ge.load_catalog(NAME).load_table(IDENT).metadata_location
    assert main(["snapshots", IDENT, "--catalog", NAME, *argv]) == 2
    assert message in " ".join(capsys.readouterr().err.split())
    assert ge.load_catalog(NAME).load_table(IDENT).metadata_location == before


def test_snapshot_ids_are_shown_whole_on_a_narrow_terminal(
    catalog_env: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Piped output is 80 columns wide: the ids (what --snapshot and --rollback-to take) were cut short."""
    monkeypatch.setenv("COLUMNS", "80")
    ids = _table(tmp_path, capsys)
    assert main(["snapshots", IDENT, "--catalog", NAME]) == 0
    out = capsys.readouterr().out
    assert all(str(i) in out for i in ids)
