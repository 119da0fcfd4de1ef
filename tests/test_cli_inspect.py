"""``gpu-engine inspect``: each metadata table as JSON rows, on the screen and as Parquet; bad arguments exit
2 naming the option."""

from __future__ import annotations

import json
import os
import stat
import threading
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import gpu_engine as ge
from gpu_engine.cli import main

from .test_cli_write import IDENT, NAME, _create_and_append, _json, catalog_env

__all__ = ["catalog_env"]


def _table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _create_and_append(tmp_path, capsys, 2, 9, "--partition-by", "region")
    _json(capsys, "delete", IDENT, "--catalog", NAME, "--filter", "id = 4")


def _rows_of(capsys: pytest.CaptureFixture[str], *argv: str) -> list[dict[str, object]]:
    assert main(["inspect", IDENT, "--catalog", NAME, *argv, "--json"]) == 0, capsys.readouterr().err
    rows: list[dict[str, object]] = json.loads(capsys.readouterr().out)
    return rows


def test_each_metadata_table(
    catalog_env: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    _table(tmp_path, capsys)
    partitions = _rows_of(capsys, "partitions")
    assert sorted(str(r["partition"]) for r in partitions) == ["{'region': 'eu'}", "{'region': 'us'}"]
    assert sum(int(str(r["record_count"])) for r in partitions) == 18
    assert sum(int(str(r["position_delete_record_count"])) for r in partitions) == 1
    files = _rows_of(capsys, "files", "--columns", "content,record_count")
    assert sorted((r["content"], r["record_count"]) for r in files) == [
        (0, 3),
        (0, 3),
        (0, 6),
        (0, 6),
        (1, 1),
    ]
    snapshots = _rows_of(capsys, "snapshots")
    assert [r["operation"] for r in snapshots] == ["append", "append", "delete"]
    first = int(str(snapshots[0]["snapshot_id"]))
    assert len(_rows_of(capsys, "files", "--snapshot", str(first))) == 2
    assert [r["name"] for r in _rows_of(capsys, "refs")] == ["main"]
    assert len(_rows_of(capsys, "history")) == 3 and len(_rows_of(capsys, "manifests")) >= 2
    assert len(_rows_of(capsys, "data_files")) == 4 and len(_rows_of(capsys, "delete_files")) == 1
    assert len(_rows_of(capsys, "data_files", "--snapshot", str(first))) == 2
    assert {r["reference_snapshot_id"] for r in _rows_of(capsys, "all_manifests")} == {
        r["snapshot_id"] for r in snapshots
    }
    assert len(_rows_of(capsys, "all_files")) == 5 and len(_rows_of(capsys, "metadata_log_entries")) >= 4
    entries = _rows_of(capsys, "entries", "--columns", "status,data_file,readable_metrics")
    assert sorted(int(str(r["status"])) for r in entries) == [1] * 5 and all(
        "region" in str(r["readable_metrics"]) for r in entries
    )
    assert (
        len(_rows_of(capsys, "entries", "--snapshot", str(first))) == 2
        and len(_rows_of(capsys, "all_entries")) == 5
    )
    assert (
        main(["inspect", IDENT, "--catalog", NAME, "entries"]) == 0
        and "entries (5 rows" in capsys.readouterr().out
    )
    out = tmp_path / "files.parquet"
    assert main(["inspect", IDENT, "--catalog", NAME, "files", "-o", str(out)]) == 0
    assert pq.read_table(out).num_rows == 5
    fifo = tmp_path / "files.fifo"  # not a regular file (as /dev/null): written to, not replaced
    os.mkfifo(fifo)
    received: list[bytes] = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_bytes()), daemon=True)
    reader.start()
    assert main(["inspect", IDENT, "--catalog", NAME, "files", "-o", str(fifo)]) == 0
    reader.join(timeout=60)
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode) and pq.read_table(pa.BufferReader(received[0])).num_rows == 5
    monkeypatch.setenv("COLUMNS", "250")
    assert main(["inspect", IDENT, "--catalog", NAME, "partitions", "--limit", "1"]) == 0
    screen = capsys.readouterr().out
    assert "partitions (2 rows, first 1)" in screen and "record_count" in screen
    tbl = ge.load_catalog(NAME).load_table(IDENT)
    assert tbl.inspect.partitions().num_rows == 2


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["refs", "--snapshot", "1"], "--snapshot: refs has no snapshot to choose"),
        (["all_files", "--snapshot", "1"], "--snapshot: all_files has no snapshot to choose"),
        (["files", "--columns", "nope"], "--columns: files has no column(s) ['nope']"),
        (["files", "--snapshot", "42"], "no snapshot with id 42"),
        (["files", "--limit", "-1"], "--limit -1: expected 0 or more"),
    ],
)
def test_inspect_errors_exit_2(
    catalog_env: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    _table(tmp_path, capsys)
    assert main(["inspect", IDENT, "--catalog", NAME, *argv]) == 2
    assert message in " ".join(capsys.readouterr().err.split())


def test_unpartitioned_parquet_output_stdout_and_strict_json(
    catalog_env: Path, tmp_path: Path, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    """An unpartitioned table's files table as Parquet (no field-less partition struct), to stdout with
    ``-o -``; --json stays strict JSON when bounds are infinite."""
    import io

    import pyarrow as pa

    cat = ge.load_catalog(NAME)
    cat.create_namespace("u")
    tbl = cat.create_table("u.f", pa.schema([("x", pa.float64())]))
    tbl.append(pa.table({"x": pa.array([float("-inf"), 1.0, float("inf")])}))
    out = tmp_path / "files.parquet"
    assert main(["inspect", "u.f", "--catalog", NAME, "files", "-o", str(out)]) == 0
    assert pq.read_table(out).num_rows == 1 and "partition" not in pq.read_table(out).column_names
    for what in ("entries", "all_entries"):  # the field-less partition inside data_file goes too
        assert main(["inspect", "u.f", "--catalog", NAME, what, "-o", str(out)]) == 0
        data_file = pq.read_table(out).column("data_file")
        assert len(data_file) == 1 and "partition" not in [f.name for f in data_file.type]
        assert data_file[0]["record_count"].as_py() == 3
    capsysbinary.readouterr()
    assert main(["inspect", "u.f", "--catalog", NAME, "files", "-o", "-"]) == 0
    assert pq.read_table(io.BytesIO(capsysbinary.readouterr().out)).num_rows == 1
    assert not (Path.cwd() / "-").exists()
    assert main(["inspect", "u.f", "--catalog", NAME, "files", "--json"]) == 0

    def refuse(constant: str) -> None:
        raise ValueError(f"not JSON: {constant}")

    rows = json.loads(capsysbinary.readouterr().out, parse_constant=refuse)
    assert rows[0]["record_count"] == 3
