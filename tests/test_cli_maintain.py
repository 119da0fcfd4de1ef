"""``gpu-engine expire-snapshots | remove-orphan-files | rewrite-position-deletes | convert-equality-deletes |
rewrite-manifests`` against a SQLite catalog: each does its job (files, snapshots and delete files counted,
rows unchanged), --json output, and bad arguments exit 2 naming the option."""

from __future__ import annotations

import datetime as dt
import os
import time
from pathlib import Path

import pyarrow as pa
import pytest

import gpu_engine as ge
from gpu_engine.cli import main
from gpu_engine.cli.maintain import parse_when
from gpu_engine.errors import GpuEngineError
from gpu_engine.io.paths import normalize

from .test_cli_write import IDENT, NAME, _create_and_append, _json, _rows, _write, catalog_env

__all__ = ["catalog_env"]


def _ids() -> list[int]:
    tbl = ge.load_catalog(NAME).load_table(IDENT)
    return sorted(tbl.scan().to_arrow()["id"].to_pylist())


def test_maintenance_jobs_keep_rows_and_report_what_they_did(
    catalog_env: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _create_and_append(tmp_path, capsys, 3, 10, "--format-version", "2")
    _json(capsys, "delete", IDENT, "--catalog", NAME, "--filter", "id < 3")
    _json(capsys, "delete", IDENT, "--catalog", NAME, "--filter", "id = 12")
    keys = _write(tmp_path, "k.parquet", pa.table({"id": pa.array([20, 21], pa.int64())}))
    _json(capsys, "delete", IDENT, "--catalog", NAME, "--keys", keys, "--on", "id")
    live = [i for i in range(30) if i >= 3 and i not in (12, 20, 21)]
    assert _ids() == live

    converted = _json(capsys, "convert-equality-deletes", IDENT, "--catalog", NAME, "--backend", "cpu")
    assert converted["removed_delete_files"] == 1 and converted["added_delete_files"] >= 1
    assert converted["snapshot_id"] is not None and _ids() == live
    rewritten = _json(
        capsys, "rewrite-position-deletes", IDENT, "--catalog", NAME, "--option", "rewrite-all=true"
    )
    assert rewritten["removed_delete_files"] >= 2 and _ids() == live
    again = _json(capsys, "convert-equality-deletes", IDENT, "--catalog", NAME)
    assert again["message"] == "nothing to do" and again["snapshot_id"] is None

    manifests = _json(capsys, "rewrite-manifests", IDENT, "--catalog", NAME)
    # the data manifests merge into one; the deletes' one manifest (manifests holding DELETED entries only
    # were dropped by the commits that emptied them) is left as it is
    assert manifests["rewritten_manifests"] >= 3 and manifests["added_manifests"] == 1
    assert manifests["entries"] >= 3 and manifests["snapshot_id"] is not None and _ids() == live
    again = _json(capsys, "rewrite-manifests", IDENT, "--catalog", NAME)
    assert again["message"] == "nothing to do" and again["snapshot_id"] is None

    ids = [s.snapshot_id for s in ge.load_catalog(NAME).load_table(IDENT).metadata.snapshots]
    named = _json(capsys, "expire-snapshots", IDENT, "--catalog", NAME, "--snapshot-id", str(ids[1]))
    assert named["expired_snapshots"] == 1 and _ids() == live
    snapshots = len(ge.load_catalog(NAME).load_table(IDENT).metadata.snapshots)
    expired = _json(
        capsys, "expire-snapshots", IDENT, "--catalog", NAME, "--older-than", "0m", "--retain-last", "1"
    )
    assert expired["expired_snapshots"] == snapshots - 1
    assert expired["deleted_manifest_lists"] == snapshots - 1 and expired["deleted_delete_files"] >= 3
    assert not expired["undeleted"] and _ids() == live
    assert len(ge.load_catalog(NAME).load_table(IDENT).metadata.snapshots) == 1

    location = Path(normalize(ge.load_catalog(NAME).load_table(IDENT).location))
    orphan = location / "data" / "stray.parquet"
    orphan.write_bytes(b"not referenced")
    week_ago = time.time() - 7 * 86400
    os.utime(orphan, (week_ago, week_ago))
    fresh = location / "data" / "in-flight.parquet"
    fresh.write_bytes(b"a writer may still commit it")
    found = _json(capsys, "remove-orphan-files", IDENT, "--catalog", NAME, "--dry-run")
    assert found["orphans_found"] == 1 and found["files"][0].endswith("stray.parquet") and orphan.exists()
    removed = _json(capsys, "remove-orphan-files", IDENT, "--catalog", NAME)
    assert removed["orphans_removed"] == 1 and not orphan.exists() and fresh.exists()
    assert _ids() == live
    assert main(["remove-orphan-files", IDENT, "--catalog", NAME, "--dry-run"]) == 0  # the table view too
    assert "orphans found" in capsys.readouterr().out


def test_when_forms() -> None:
    assert parse_when("2026-11-01") == int(dt.datetime(2026, 11, 1, tzinfo=dt.UTC).timestamp() * 1000)
    assert parse_when("2026-11-01T12:00:00+02:00") == int(
        dt.datetime(2026, 11, 1, 10, tzinfo=dt.UTC).timestamp() * 1000
    )
    assert parse_when("1700000000000") == 1_700_000_000_000
    now = time.time() * 1000
    assert abs(parse_when("7d") - (now - 7 * 86_400_000)) < 60_000
    assert abs(parse_when(" 12h ") - (now - 12 * 3_600_000)) < 60_000
    with pytest.raises(GpuEngineError, match="--older-than 'last week': expected an ISO time"):
        parse_when("last week")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["expire-snapshots", "--retain-last", "0"], "--retain-last 0: expected 1 or more"),
        (["expire-snapshots", "--older-than", "soon"], "--older-than 'soon'"),
        (["rewrite-position-deletes", "--option", "rewrite-all"], "--option 'rewrite-all': expected K=V"),
        (["rewrite-position-deletes", "--option", "nope=1"], "nope"),
        (["rewrite-manifests", "--spec-id", "7"], "spec"),
        (["rewrite-manifests", "--target-size-bytes", "0"], "--target-size-bytes 0: expected 1 or more"),
    ],
)
def test_maintenance_errors_exit_2(
    catalog_env: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    schema_file = _write(tmp_path, "schema.parquet", _rows(0, 0))
    _json(capsys, "create", IDENT, "--catalog", NAME, "--schema", schema_file)
    before = ge.load_catalog(NAME).load_table(IDENT).metadata_location
    assert main([argv[0], IDENT, "--catalog", NAME, *argv[1:]]) == 2
    assert message in " ".join(capsys.readouterr().err.split())
    assert ge.load_catalog(NAME).load_table(IDENT).metadata_location == before
