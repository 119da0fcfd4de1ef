"""``gpu-engine scan``: Parquet output (to a file or stdout), column/filter/limit options, time travel
(--snapshot, --as-of, --ref), the JSON summary and its errors."""

from __future__ import annotations

import io
import json
import os
import shutil
import stat
import threading
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

import gpu_engine as ge
from gpu_engine.cli import main

from .execute.oracles import assert_same_rows

FIXTURES = Path(__file__).resolve().parents[1].parent / "shared" / "fixtures"
TABLE = FIXTURES / "dremio-oss" / "iceberg" / "table_with_delete"  # 594 rows in 6 files, a position delete
NESTED = FIXTURES / "pg_lake" / "sample_tables_v3" / "public" / "v3_nested_basic"


def _expected(**scan: Any) -> pa.Table:
    return ge.load_table(TABLE, relocate=True).scan(backend="cpu", **scan).to_arrow()


def _unwrapped(text: str) -> str:
    """Console text with rich's line wrapping (80 columns when not a terminal) undone."""
    return text.replace("\n", "")


def _scan(*options: str) -> int:
    return main(["scan", str(TABLE), "--relocate", "--backend", "cpu", *options])


def test_fixtures_are_present() -> None:
    assert TABLE.is_dir(), f"fixtures missing at {FIXTURES}: CI needs shared/ beside the repository"


def test_output_file_holds_exactly_the_scan_rows(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out.parquet"
    assert _scan("-o", str(out)) == 0
    written = pq.read_table(out)
    expected = _expected()
    assert written.num_rows == expected.num_rows == 594
    assert written.column_names == expected.column_names
    assert_same_rows(written, expected, context="scan -o out.parquet")
    assert "594" in capsys.readouterr().out  # the summary table


def test_columns_filter_and_limit(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out.parquet"
    assert _scan("--columns", "category, id,_pos", "--filter", "category = 'qux'", "-o", str(out)) == 0
    written = pq.read_table(out)
    assert written.column_names == ["category", "id", "_pos"]
    assert_same_rows(
        written, _expected(filter="category = 'qux'", columns=["category", "id", "_pos"]), context=""
    )
    assert written.num_rows == 94  # 100 rows, 6 deleted
    assert pc.all(pc.equal(written.column("category"), "qux")).as_py()

    limited = tmp_path / "limited.parquet"
    assert _scan("--limit", "150", "-o", str(limited)) == 0
    rows = pq.read_table(limited)
    assert rows.num_rows == 150
    full = {tuple(r.values()) for r in _expected().to_pylist()}
    assert {tuple(r.values()) for r in rows.to_pylist()} <= full


def test_nested_column(tmp_path: Path) -> None:
    out = tmp_path / "out.parquet"
    assert main(["scan", str(NESTED), "--relocate", "--columns", "id,point.x", "-o", str(out)]) == 0
    written = pq.read_table(out)
    assert written.column_names == ["id", "point"]
    assert written.schema.field("point").type == pa.struct([pa.field("x", pa.float64())])


def test_json_summary(capsys: pytest.CaptureFixture[str]) -> None:
    assert _scan("--json", "--filter", "id < 250") == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["rows"] == _expected(filter="id < 250").num_rows
    assert summary["files"] == 3  # ids 0-249 are in the first three files
    assert summary["backend"] == "cpu"
    assert summary["backend_reason"] == "backend='cpu' requested"
    assert summary["output"] is None
    assert {"tasks", "bytes_read", "delete_files_applied", "seconds"} <= summary.keys()


def test_parquet_to_stdout_summary_to_stderr(capsysbinary: pytest.CaptureFixture[bytes]) -> None:
    assert _scan("-o", "-", "--json", "--columns", "id,category") == 0
    captured = capsysbinary.readouterr()
    assert captured.out[:4] == b"PAR1" and captured.out[-4:] == b"PAR1"
    written = pq.read_table(io.BytesIO(captured.out))
    assert_same_rows(written, _expected(columns=["id", "category"]), context="scan -o -")
    summary = json.loads(captured.err)
    assert summary["rows"] == 594 and summary["output"] == "-"


def test_parquet_to_stdout_without_json_keeps_stdout_clean(
    capsysbinary: pytest.CaptureFixture[bytes],
) -> None:
    assert _scan("-o", "-", "--limit", "5") == 0
    captured = capsysbinary.readouterr()
    assert pq.read_table(io.BytesIO(captured.out)).num_rows == 5
    assert b"scan summary" in captured.err


def test_preview_without_output(capsys: pytest.CaptureFixture[str]) -> None:
    assert _scan("--columns", "id", "--limit", "3") == 0
    text = _unwrapped(capsys.readouterr().out)
    assert "first 3 rows" in text and "scan summary" in text


def test_bad_table_path(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["scan", str(tmp_path / "nope"), "--relocate"]) == 2
    assert "nope" in capsys.readouterr().err


def test_bad_column_and_filter(capsys: pytest.CaptureFixture[str]) -> None:
    assert _scan("--columns", "no_such_column") == 2
    assert "no_such_column" in capsys.readouterr().err
    assert _scan("--columns", ",") == 2  # not every column
    assert "--columns" in capsys.readouterr().err
    assert _scan("--columns", "id,id") == 2
    assert _scan("--limit", "-1") == 2
    assert "--limit -1" in _unwrapped(capsys.readouterr().err)
    assert _scan("--filter", "no_such_column = 1") == 2
    assert "no_such_column" in capsys.readouterr().err


def test_an_output_that_is_not_a_regular_file_is_written_to_not_replaced(tmp_path: Path) -> None:
    """`-o /dev/null` (as root) replaced the device with a regular file: the whole written file was renamed
    onto the output. A FIFO (or a device) is written to; a link to a file writes that file, the link kept."""
    fifo = tmp_path / "rows.fifo"
    os.mkfifo(fifo)
    received: list[bytes] = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_bytes()), daemon=True)
    reader.start()
    assert _scan("-o", str(fifo), "--columns", "id") == 0
    reader.join(timeout=60)
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)  # still the FIFO
    assert pq.read_table(pa.BufferReader(received[0])).num_rows == _expected().num_rows
    real = tmp_path / "real.parquet"
    real.write_bytes(b"old")
    link = tmp_path / "latest.parquet"
    link.symlink_to(real)
    assert _scan("-o", str(link), "--columns", "id") == 0
    assert link.is_symlink() and pq.read_table(real).num_rows == _expected().num_rows


def test_unwritable_output(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _scan("-o", str(tmp_path / "no" / "such" / "dir" / "out.parquet")) == 2
    assert "cannot write there" in capsys.readouterr().err


def test_failed_scan_leaves_no_output_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A data file missing half way through: exit code 2 naming it, and no partial Parquet file behind."""
    table = tmp_path / "table"
    shutil.copytree(TABLE, table)
    missing = table / "data" / "quuz" / "quuz-0.parquet"  # the last task: earlier rows were written
    missing.unlink()
    out = tmp_path / "out.parquet"
    assert main(["scan", str(table), "--relocate", "--backend", "cpu", "-o", str(out)]) == 2
    assert str(missing) in _unwrapped(capsys.readouterr().err)
    assert not out.exists()
    assert list(tmp_path.glob(".out.parquet.*")) == []  # no temporary file either


def test_a_failed_scan_keeps_the_file_it_would_have_replaced(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The writer emptied the output when it opened it, and the failed scan then removed it: the user's
    previous file was lost for a scan that produced nothing."""
    table = tmp_path / "table"
    shutil.copytree(TABLE, table)
    (table / "data" / "quuz" / "quuz-0.parquet").unlink()
    out = tmp_path / "report.parquet"
    pq.write_table(pa.table({"previous": [1, 2, 3]}), out)
    assert main(["scan", str(table), "--relocate", "--backend", "cpu", "-o", str(out)]) == 2
    assert pq.read_table(out).column("previous").to_pylist() == [1, 2, 3]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.parquet", "table"]
    capsys.readouterr()
    assert _scan("-o", str(out)) == 0  # a scan that succeeds replaces it
    assert pq.read_table(out).num_rows == 594


def test_a_failed_scan_to_stdout_ends_without_a_footer(
    tmp_path: Path, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    """Piped output of a failed scan must not read as a valid file missing rows."""
    table = tmp_path / "table"
    shutil.copytree(TABLE, table)
    (table / "data" / "quuz" / "quuz-0.parquet").unlink()  # the last task: earlier rows were written
    assert main(["scan", str(table), "--relocate", "--backend", "cpu", "-o", "-"]) == 2
    out = capsysbinary.readouterr().out
    assert out[-4:] != b"PAR1"
    with pytest.raises(pa.ArrowInvalid):
        pq.read_table(io.BytesIO(out))


def test_a_reader_that_stops_early_gets_no_traceback(tmp_path: Path) -> None:
    """`gpu-engine scan ... -o - | head -c 10`: the closed pipe ends the command quietly (exit 141)."""
    import subprocess
    import sys

    cat = ge.load_catalog("c", uri=f"sqlite:///{tmp_path}/c.db", warehouse=f"file://{tmp_path}/wh")
    cat.create_namespace("db")
    rng = pa.array(range(400_000), pa.int64())
    cat.create_table("db.big", pa.schema([("id", pa.int64()), ("s", pa.string())])).append(
        pa.table({"id": rng, "s": pc.cast(rng, pa.string())})
    )
    env = {"PYICEBERG_CATALOG__C__URI": f"sqlite:///{tmp_path}/c.db",
           "PYICEBERG_CATALOG__C__WAREHOUSE": f"file://{tmp_path}/wh"}  # fmt: skip
    command = [str(Path(sys.executable).parent / "gpu-engine"), "scan", "db.big", "--catalog", "c", "-o", "-"]
    proc = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={**os.environ, **env}
    )
    assert proc.stdout is not None and proc.stdout.read(10)[:4] == b"PAR1"
    proc.stdout.close()
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 141 and b"Traceback" not in err, err.decode()


def test_columns_parquet_cannot_hold_are_an_error_before_the_output_is_created(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``_partition`` of an unpartitioned table is an empty struct, which Parquet cannot store: exit 2
    naming the output, and no empty file left (it was a traceback and a 0-byte file)."""
    table = ge.load_table(NESTED, relocate=True)
    assert not table.spec().fields
    out = tmp_path / "out.parquet"
    args = ["scan", str(NESTED), "--relocate", "--backend", "cpu", "--columns", "_partition", "-o", str(out)]
    assert main(args) == 2
    err = _unwrapped(capsys.readouterr().err)
    assert f"-o {out}" in err and "cannot be written as Parquet" in err
    assert not out.exists()


BATCHES = [
    pa.table({"id": pa.array(range(i * 10, i * 10 + 10), pa.int64()), "s": [f"main{i}"] * 10})
    for i in range(3)
]
DEV = pa.table({"id": pa.array(range(100, 105), pa.int64()), "s": ["dev"] * 5})


@pytest.fixture
def travel(tmp_path: Path) -> dict[str, Any]:
    """Three appends to main (ids 0-9, 10-19, 20-29), tag ``v1`` at the first, branch ``dev`` at the second
    with its own append (ids 100-104); the metadata JSON as json reads it, for the expected snapshots."""
    cat = ge.load_catalog("c", uri=f"sqlite:///{tmp_path}/c.db", warehouse=(tmp_path / "wh").as_uri())
    cat.create_namespace("db")
    tbl = cat.create_table("db.t", BATCHES[0].schema)
    tbl.append(BATCHES[0])
    tbl.manage_snapshots().create_tag("v1").commit()
    time.sleep(0.005)  # each snapshot-log entry its own millisecond
    tbl.append(BATCHES[1])
    tbl.manage_snapshots().create_branch("dev").commit()
    time.sleep(0.005)
    tbl.append(BATCHES[2])
    tbl.append(DEV, branch="dev")
    location = str(tbl.metadata_location)
    with open(location.removeprefix("file://")) as f:
        metadata = json.load(f)
    return {"location": location, "metadata": metadata}


def _scan_at(travel: dict[str, Any], tmp_path: Path, *options: str) -> list[dict[str, Any]]:
    """The rows `scan -o` writes with ``options``, ordered by id."""
    out = tmp_path / "travel.parquet"
    assert main(["scan", travel["location"], "--backend", "cpu", *options, "-o", str(out)]) == 0
    rows: list[dict[str, Any]] = pq.read_table(out).sort_by("id").to_pylist()
    return rows


def _appended(*batches: pa.Table) -> list[dict[str, Any]]:
    """The rows of ``batches`` as appended, ordered by id."""
    rows: list[dict[str, Any]] = pa.concat_tables(batches).sort_by("id").to_pylist()
    return rows


def test_snapshot_option_reads_that_snapshot(travel: dict[str, Any], tmp_path: Path) -> None:
    """--snapshot ID: the rows appended up to that snapshot (a scan of the current one would have them all);
    the dev branch's snapshot holds main's first two appends and its own."""
    snaps = sorted(travel["metadata"]["snapshots"], key=lambda s: s["sequence-number"])
    ids = [s["snapshot-id"] for s in snaps]  # in commit order
    assert len(ids) == 4
    assert _scan_at(travel, tmp_path, "--snapshot", str(ids[0])) == _appended(BATCHES[0])
    assert _scan_at(travel, tmp_path, "--snapshot", str(ids[1])) == _appended(*BATCHES[:2])
    assert _scan_at(travel, tmp_path, "--snapshot", str(ids[2])) == _appended(*BATCHES)
    assert _scan_at(travel, tmp_path, "--snapshot", str(ids[3])) == _appended(*BATCHES[:2], DEV)


def test_as_of_option_reads_mains_snapshot_at_that_time(travel: dict[str, Any], tmp_path: Path) -> None:
    """--as-of MS: the snapshot main had at that time (the snapshot-log), up to and including the instant
    it became current; later than every entry is main's head, not the dev branch's newer snapshot."""
    log = [e["timestamp-ms"] for e in travel["metadata"]["snapshot-log"]]
    assert len(log) == 3 and log == sorted(set(log))
    assert _scan_at(travel, tmp_path, "--as-of", str(log[0])) == _appended(BATCHES[0])
    assert _scan_at(travel, tmp_path, "--as-of", str(log[1] - 1)) == _appended(BATCHES[0])
    assert _scan_at(travel, tmp_path, "--as-of", str(log[1])) == _appended(*BATCHES[:2])
    assert _scan_at(travel, tmp_path, "--as-of", str(log[2] - 1)) == _appended(*BATCHES[:2])
    assert _scan_at(travel, tmp_path, "--as-of", str(log[2] + 10**6)) == _appended(*BATCHES)


def test_ref_option_reads_the_branch_or_tag(travel: dict[str, Any], tmp_path: Path) -> None:
    """--ref NAME: a tag's snapshot, a branch's head (its own append included), main's head."""
    refs = travel["metadata"]["refs"]
    assert refs["v1"]["type"] == "tag" and refs["dev"]["type"] == "branch"
    assert _scan_at(travel, tmp_path, "--ref", "v1") == _appended(BATCHES[0])
    assert _scan_at(travel, tmp_path, "--ref", "dev") == _appended(*BATCHES[:2], DEV)
    assert _scan_at(travel, tmp_path, "--ref", "main") == _appended(*BATCHES)


def test_unknown_snapshot_ref_or_time_exits_2_naming_it(
    travel: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An unknown snapshot id, an unknown ref, a time before the first snapshot: exit 2 with one error line
    naming the value (not the current snapshot's rows, not a traceback), and no output file."""
    first = travel["metadata"]["snapshot-log"][0]["timestamp-ms"]
    out = tmp_path / "out.parquet"
    cases = [
        (["--snapshot", "123"], "no snapshot with id 123"),
        (["--ref", "nope"], "no branch or tag named 'nope'"),
        (["--as-of", str(first - 1)], f"no snapshot at or before timestamp {first - 1}"),
    ]
    for options, message in cases:
        assert main(["scan", travel["location"], "--backend", "cpu", *options, "-o", str(out)]) == 2
        err = _unwrapped(capsys.readouterr().err)
        assert err.startswith("error:") and message in err, (options, err)
        assert "Traceback" not in err
        assert not out.exists()
