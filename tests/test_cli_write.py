"""``gpu-engine create|append|delete`` against a SQLite catalog configured through PYICEBERG_CATALOG__*:
the rows left equal the expected rows computed in pyarrow; --json output; errors exit 2 naming the cause."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

import gpu_engine as ge
from gpu_engine.cli import main

NAME = "clitest"
IDENT = "db.events"


@pytest.fixture
def catalog_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    warehouse = tmp_path / "warehouse"
    warehouse.mkdir()
    monkeypatch.setenv("PYICEBERG_HOME", str(tmp_path))  # no user ~/.pyiceberg.yaml interferes
    monkeypatch.setenv(f"PYICEBERG_CATALOG__{NAME.upper()}__URI", f"sqlite:///{tmp_path / 'catalog.db'}")
    monkeypatch.setenv(f"PYICEBERG_CATALOG__{NAME.upper()}__WAREHOUSE", warehouse.as_uri())
    ge.load_catalog(NAME).create_namespace("db")
    return tmp_path


def _rows(start: int, stop: int) -> pa.Table:
    ids = list(range(start, stop))
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "region": pa.array(["eu" if i % 3 else "us" for i in ids], pa.string()),
            "value": pa.array([i * 1.5 for i in ids], pa.float64()),
        }
    )


def _write(tmp_path: Path, name: str, table: pa.Table) -> str:
    path = tmp_path / name
    pq.write_table(table, path)
    return str(path)


def _create_and_append(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], files: int, rows_each: int, *create: str
) -> None:
    """Create table IDENT with ``_rows``' schema (``create``: more ``gpu-engine create`` options), then
    append ``files`` Parquet files of ``rows_each`` rows, ids counting from 0."""
    schema_file = _write(tmp_path, "schema.parquet", _rows(0, 0))
    _json(capsys, "create", IDENT, "--catalog", NAME, "--schema", schema_file, *create)
    for i in range(files):
        data = _write(tmp_path, f"{i}.parquet", _rows(i * rows_each, (i + 1) * rows_each))
        _json(capsys, "append", IDENT, "--catalog", NAME, data)


def _json(capsys: pytest.CaptureFixture[str], *argv: str) -> Any:
    assert main([*argv, "--json"]) == 0, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)


def _sorted(t: pa.Table) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = t.sort_by([("id", "ascending"), ("region", "ascending")]).to_pylist()
    return rows


def test_create_append_delete_roundtrip(catalog_env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tmp = catalog_env
    first, second = _rows(0, 60), _rows(60, 100)
    schema_file = _write(tmp, "schema.parquet", first.slice(0, 0))
    created = _json(
        capsys, "create", IDENT, "--catalog", NAME, "--schema", schema_file,
        "--partition-by", "region", "--partition-by", "bucket(4, id)", "--property", "owner=tests",
    )  # fmt: skip
    assert created["table"] == IDENT and created["format_version"] == 2 and created["partition_fields"] == 2
    assert created["metadata_location"].endswith(".metadata.json")

    appended = _json(
        capsys,
        "append",
        IDENT,
        "--catalog",
        NAME,
        _write(tmp, "a.parquet", first),
        _write(tmp, "b.parquet", second),
    )
    assert appended["rows_written"] == 100 and appended["files_written"] == len(appended["files"]) >= 2
    table = ge.load_catalog(NAME).load_table(IDENT)
    assert table.properties["owner"] == "tests"
    assert table.metadata.current_snapshot_id == appended["snapshot_id"]

    deleted = _json(
        capsys,
        "delete",
        IDENT,
        "--catalog",
        NAME,
        "--filter",
        "id < 10 or value >= 140",
        "--isolation",
        "snapshot",
    )
    expected = pa.concat_tables([first, second])
    gone = pc.or_(pc.less(expected["id"], 10), pc.greater_equal(expected["value"], 140))
    assert deleted["rows_deleted"] == pc.sum(gone.cast(pa.int64())).as_py() > 0
    assert deleted["snapshot_id"] is not None
    expected = expected.filter(pc.invert(gone))

    keys = pa.table({"id": pa.array([20, 21, 22, 999], pa.int64()), "region": ["eu", "eu", "eu", "eu"]})
    by_keys = _json(
        capsys,
        "delete",
        IDENT,
        "--catalog",
        NAME,
        "--keys",
        _write(tmp, "k.parquet", keys),
        "--on",
        "id,region",
    )
    assert by_keys["snapshot_id"] is not None and by_keys["delete_files_added"] >= 1
    assert by_keys["keys_written"] == 4 and "rows_deleted" not in by_keys  # not what they match: unread
    pairs = set(zip(keys["id"].to_pylist(), keys["region"].to_pylist(), strict=True))
    mask = [(r["id"], r["region"]) not in pairs for r in expected.to_pylist()]
    expected = expected.filter(pa.array(mask))
    assert (
        expected.num_rows == 100 - deleted["rows_deleted"] - 2
    )  # (21, "eu") is not a row (21 is "us"), nor 999

    nothing = _json(capsys, "delete", IDENT, "--catalog", NAME, "--filter", "id > 1000")
    assert nothing["rows_deleted"] == 0 and nothing["snapshot_id"] is None
    assert nothing["message"] == "nothing matched"

    out = tmp / "scan.parquet"
    summary = _json(capsys, "scan", IDENT, "--catalog", NAME, "--backend", "cpu", "-o", str(out))
    assert summary["rows"] == expected.num_rows
    assert _sorted(pq.read_table(out)) == _sorted(expected)
    loaded = ge.load_catalog(NAME).load_table(IDENT).scan(backend="cpu").to_arrow()
    assert _sorted(loaded) == _sorted(expected)


@pytest.mark.parametrize("mode", ["merge-on-read", "copy-on-write"])
def test_overwrite_replaces_the_matching_rows(
    catalog_env: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], mode: str
) -> None:
    _create_and_append(tmp_path, capsys, 2, 20, "--property", f"write.delete.mode={mode}")
    new = _write(tmp_path, "new.parquet", _rows(100, 110))
    out = _json(capsys, "overwrite", IDENT, "--catalog", NAME, new, "--filter", "region = 'us'")
    assert out["rows_deleted"] == len([i for i in range(40) if i % 3 == 0]) and out["rows_written"] == 10
    assert (out["delete_files_added"] > 0) == (mode == "merge-on-read")
    assert (out["data_files_rewritten"] > 0) == (mode == "copy-on-write")
    table = ge.load_catalog(NAME).load_table(IDENT)
    assert table.metadata.current_snapshot_id == out["snapshot_id"]
    expected = pa.concat_tables(
        [_rows(0, 40).filter(pc.not_equal(_rows(0, 40)["region"], "us")), _rows(100, 110)]
    )
    assert _sorted(table.scan(backend="cpu").to_arrow()) == _sorted(expected)
    everything = _json(capsys, "overwrite", IDENT, "--catalog", NAME, new, "--isolation", "snapshot")
    assert everything["rows_written"] == 10
    assert _sorted(ge.load_catalog(NAME).load_table(IDENT).scan().to_arrow()) == _sorted(_rows(100, 110))
    assert (
        main(["overwrite", IDENT, "--catalog", NAME, new, "--filter", "id < 3", "--dynamic-partitions"]) == 2
    )
    assert "not both" in capsys.readouterr().err
    before = ge.load_catalog(NAME).load_table(IDENT).metadata_location
    assert main(["overwrite", IDENT, "--catalog", NAME, new, "--filter", " "]) == 2  # an empty "$VAR"
    assert "empty filter" in capsys.readouterr().err
    assert ge.load_catalog(NAME).load_table(IDENT).metadata_location == before


def test_overwrite_dynamic_partitions(
    catalog_env: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _create_and_append(tmp_path, capsys, 2, 30, "--partition-by", "region")
    us_only = _rows(100, 130).filter(pc.equal(_rows(100, 130)["region"], "us"))
    new = _write(tmp_path, "us.parquet", us_only)
    out = _json(capsys, "overwrite", IDENT, "--catalog", NAME, new, "--dynamic-partitions")
    assert out["partitions_replaced"] == 1 and out["rows_written"] == us_only.num_rows
    assert out["data_files_removed"] == 2  # each append wrote one "us" file
    table = ge.load_catalog(NAME).load_table(IDENT)
    old = _rows(0, 60)
    expected = pa.concat_tables([old.filter(pc.not_equal(old["region"], "us")), us_only])
    assert _sorted(table.scan(backend="cpu").to_arrow()) == _sorted(expected)


def test_upsert_by_key(catalog_env: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _create_and_append(tmp_path, capsys, 1, 10, "--partition-by", "region")
    changed = _rows(5, 15)
    changed = changed.set_column(2, "value", pa.array([-1.0] * changed.num_rows))
    out = _json(
        capsys,
        "upsert",
        IDENT,
        "--catalog",
        NAME,
        _write(tmp_path, "u.parquet", changed),
        "--on",
        "id,region",
    )
    assert out["rows_written"] == 10 and out["delete_files_added"] >= 1
    expected = pa.concat_tables([_rows(0, 5), changed])
    assert _sorted(ge.load_catalog(NAME).load_table(IDENT).scan().to_arrow()) == _sorted(expected)
    empty = _write(tmp_path, "e.parquet", _rows(0, 0))
    assert _json(capsys, "upsert", IDENT, "--catalog", NAME, empty, "--on", "id,region")["message"]
    assert main(["upsert", IDENT, "--catalog", NAME, empty]) == 2  # no identifier fields: name --on
    assert "no identifier fields" in capsys.readouterr().err


def test_append_merge_schema(catalog_env: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _create_and_append(tmp_path, capsys, 1, 5)
    wider = _rows(5, 8).append_column("note", pa.array(["a", "b", "c"]))
    path = _write(tmp_path, "wider.parquet", wider)
    assert main(["append", IDENT, "--catalog", NAME, path]) == 2  # the table lacks "note"
    capsys.readouterr()
    assert _json(capsys, "append", IDENT, "--catalog", NAME, path, "--merge-schema")["rows_written"] == 3
    table = ge.load_catalog(NAME).load_table(IDENT)
    assert [f.name for f in table.schema().fields] == ["id", "region", "value", "note"]
    notes = table.scan().to_arrow()["note"].to_pylist()
    assert sorted(n for n in notes if n) == ["a", "b", "c"] and notes.count(None) == 5


def test_create_from_json_schema_and_rich_output(
    catalog_env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    schema = {
        "type": "struct",
        "fields": [
            {"id": 1, "name": "id", "required": True, "type": "long"},
            {"id": 2, "name": "ts", "required": False, "type": "timestamp"},
        ],
    }
    path = catalog_env / "schema.json"
    path.write_text(json.dumps(schema))
    argv = ["create", "db.v3", "--catalog", NAME, "--schema", str(path), "--partition-by", "day(ts)"]
    assert main([*argv, "--format-version", "3"]) == 0
    assert "metadata" in capsys.readouterr().out  # the summary table
    table = ge.load_catalog(NAME).load_table("db.v3")
    assert table.format_version == 3 and [f.name for f in table.schema().fields] == ["id", "ts"]

    data = pa.table(
        {"id": pa.array([1, 2], pa.int64()), "ts": pa.array([0, 86_400_000_000], pa.timestamp("us"))}
    )
    assert main(["append", "db.v3", "--catalog", NAME, _write(catalog_env, "d.parquet", data)]) == 0
    assert "rows written" in capsys.readouterr().out
    assert main(["delete", "db.v3", "--catalog", NAME, "--filter", "id = 1"]) == 0
    assert "rows deleted" in capsys.readouterr().out
    assert ge.load_catalog(NAME).load_table("db.v3").scan(backend="cpu").to_arrow()["id"].to_pylist() == [2]


def test_errors_exit_2_naming_the_cause(catalog_env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tmp = catalog_env
    data = _write(tmp, "a.parquet", _rows(0, 10))
    assert main(["create", IDENT, "--catalog", NAME, "--schema", data]) == 0
    assert main(["append", IDENT, "--catalog", NAME, data]) == 0
    capsys.readouterr()
    before = ge.load_catalog(NAME).load_table(IDENT).metadata.current_snapshot_id

    def fails(*argv: str, naming: str) -> None:
        assert main(list(argv)) == 2
        assert naming in capsys.readouterr().err.replace("\n", "")

    fails("create", IDENT, "--catalog", NAME, "--schema", data, naming="db.events")  # exists
    fails("append", IDENT, "--catalog", NAME, data, "--relocate", naming="--relocate")  # not for catalogs
    fails(
        "create", "db.other", "--catalog", NAME, "--schema", str(tmp / "nope.parquet"), naming="nope.parquet"
    )
    fails(
        "create", "db.other", "--catalog", NAME, "--schema", data, "--property", "novalue", naming="novalue"
    )
    fails("append", IDENT, "--catalog", NAME, data, str(tmp / "missing.parquet"), naming="missing.parquet")
    fails(
        "delete",
        IDENT,
        "--catalog",
        NAME,
        "--filter",
        "id = 1",
        "--keys",
        data,
        "--on",
        "id",
        naming="--keys",
    )
    fails("delete", IDENT, "--catalog", NAME, naming="--filter")
    fails("delete", IDENT, "--catalog", NAME, "--keys", data, "--on", "id,no_such_col", naming="no_such_col")
    fails("delete", IDENT, "--catalog", NAME, "--keys", data, naming="--on")
    fails(
        "delete",
        IDENT,
        "--catalog",
        NAME,
        "--keys",
        data,
        "--on",
        "id",
        "--isolation",
        "snapshot",
        naming="--isolation goes with --filter",
    )
    fails(
        "delete", IDENT, "--catalog", NAME, "--keys", str(tmp / "k.parquet"), "--on", "id", naming="k.parquet"
    )
    fails("delete", IDENT, "--catalog", NAME, "--filter", "bogus_col = 1", naming="bogus_col")
    fails("delete", "db.absent", "--catalog", NAME, "--filter", "id = 1", naming="absent")
    assert ge.load_catalog(NAME).load_table(IDENT).metadata.current_snapshot_id == before  # nothing committed


def test_scan_from_snapshot_reads_the_rows_appended_since(
    catalog_env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``scan --from-snapshot``: Iceberg's incremental append scan (a delete in between passed over)."""
    _create_and_append(catalog_env, capsys, 1, 10)
    start = ge.load_catalog(NAME).load_table(IDENT).metadata.current_snapshot_id
    for i in (1, 2):
        _json(
            capsys,
            "append",
            IDENT,
            "--catalog",
            NAME,
            _write(catalog_env, f"more{i}.parquet", _rows(i * 10, i * 10 + 10)),
        )
    _json(capsys, "delete", IDENT, "--catalog", NAME, "--filter", "id >= 15")
    out = catalog_env / "appended.parquet"
    argv = ["scan", IDENT, "--catalog", NAME, "--from-snapshot", str(start), "-o", str(out), "--json"]
    assert main(argv) == 0, capsys.readouterr().err
    assert sorted(pq.read_table(out)["id"].to_pylist()) == list(range(10, 30))
    inclusive = [*argv[:-3], "--from-inclusive", "--filter", "id < 12", "-o", str(out), "--json"]
    assert main(inclusive) == 0, capsys.readouterr().err
    assert sorted(pq.read_table(out)["id"].to_pylist()) == [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]
    capsys.readouterr()
    assert main(["scan", IDENT, "--catalog", NAME, "--from-inclusive"]) == 2
    assert "--from-inclusive needs --from-snapshot" in capsys.readouterr().err
    assert main(["scan", IDENT, "--catalog", NAME, "--from-snapshot", str(start), "--as-of", "1"]) == 2
    assert "not at --as-of" in capsys.readouterr().err
    assert main(["scan", IDENT, "--catalog", NAME, "--from-snapshot", "42"]) == 2
    assert "from snapshot 42 is not in the table" in " ".join(capsys.readouterr().err.split())


def test_changes_lists_inserted_and_deleted_rows(
    catalog_env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``changes``: a changelog with a merge-on-read delete, as Parquet with the change columns."""
    _create_and_append(catalog_env, capsys, 2, 10)
    start = ge.load_catalog(NAME).load_table(IDENT).metadata.current_snapshot_id
    _json(capsys, "delete", IDENT, "--catalog", NAME, "--filter", "id in (3, 15)")
    _json(capsys, "append", IDENT, "--catalog", NAME, _write(catalog_env, "more.parquet", _rows(20, 22)))
    out = catalog_env / "changes.parquet"
    argv = ["changes", IDENT, "--catalog", NAME, "--from-snapshot", str(start)]
    summary = _json(capsys, *argv, "--columns", "id", "-o", str(out))
    assert summary["snapshots"] == 2 and summary["deleted_rows"] == 2 and summary["inserted_rows"] == 2
    assert summary["files_changed"] == 2 and summary["files_added"] == 1
    got = pq.read_table(out)
    assert got.column_names == ["id", "_change_type", "_change_ordinal", "_commit_snapshot_id"]
    triples = zip(
        got["_change_ordinal"].to_pylist(),
        got["_change_type"].to_pylist(),
        got["id"].to_pylist(),
        strict=True,
    )
    assert sorted(triples) == [(0, "DELETE", 3), (0, "DELETE", 15), (1, "INSERT", 20), (1, "INSERT", 21)]
    kept = _json(capsys, *argv, "--keep-carry-overs")
    assert (kept["deleted_rows"], kept["inserted_rows"]) == (2, 2)  # merge-on-read: nothing carried over
    assert main(argv) == 0
    assert "changes summary" in capsys.readouterr().out
    assert main(["changes", IDENT, "--catalog", NAME, "--from-inclusive"]) == 2
    assert "--from-inclusive needs --from-snapshot" in capsys.readouterr().err
    assert main(["changes", IDENT, "--catalog", NAME, "--from-snapshot", "7"]) == 2
    assert "from snapshot 7 is not in the table" in " ".join(capsys.readouterr().err.split())
    assert main([*argv, "--compute-updates"]) == 2
    assert "--compute-updates needs --identifier-columns" in capsys.readouterr().err
    assert main([*argv, "--identifier-columns", "id"]) == 2
    assert "--identifier-columns needs --compute-updates" in capsys.readouterr().err
    same, changed = _rows(20, 21), _rows(21, 22)
    changed = changed.set_column(2, "value", pa.array([-1.0]))
    up = _write(catalog_env, "up.parquet", pa.concat_tables([same, changed]))
    _json(capsys, "upsert", IDENT, "--catalog", NAME, up, "--on", "id")
    updated = _json(capsys, *argv, "--compute-updates", "--identifier-columns", "id")
    counts = (updated["updated_rows"], updated["inserted_rows"], updated["deleted_rows"])
    assert counts == (1, 2, 2)  # 21 updated; 20 written back unchanged: a carry-over, no change
    net = _json(capsys, *argv, "--net-changes")  # 20 and 21 appended in the range; 3 and 15 deleted
    assert (net["inserted_rows"], net["deleted_rows"]) == (2, 2)


def test_create_in_a_new_namespace_and_conflicting_versions(
    catalog_env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    schema_file = _write(catalog_env, "schema.parquet", _rows(0, 0))
    assert main(["create", "fresh.t", "--catalog", NAME, "--schema", schema_file]) == 2
    assert "fresh" in capsys.readouterr().err
    created = _json(
        capsys, "create", "fresh.t", "--catalog", NAME, "--schema", schema_file, "--create-namespace"
    )
    assert created["table"] == "fresh.t"
    argv = ["create", "fresh.u", "--catalog", NAME, "--schema", schema_file, "--format-version", "1"]
    assert main([*argv, "--property", "format-version=3"]) == 2
    assert "disagree" in capsys.readouterr().err


def test_a_full_disk_is_an_error_line_naming_the_operation_and_file(
    catalog_env: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """ENOSPC while writing the commit's metadata files: exit 2 with an `error:` line naming the command
    and the file (not a traceback of an OSError naming neither); the table keeps its rows."""
    import errno
    import os

    _create_and_append(tmp_path, capsys, 1, 5)
    data = _write(tmp_path, "more.parquet", _rows(5, 9))
    real = os.fsync

    def full(fd: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", full)
    assert main(["append", IDENT, "--catalog", NAME, data]) == 2
    monkeypatch.setattr(os, "fsync", real)
    err = capsys.readouterr().err
    assert "error:" in err and "append" in err and "No space left on device" in err
    assert "(writing " in err and "Traceback" not in err
    assert ge.load_catalog(NAME).load_table(IDENT).scan().to_arrow().num_rows == 5


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["scan", "events"], "table 'events' has no namespace (name it NAMESPACE.TABLE)"),
        (["changes", IDENT, "--compute-updates", "--net-changes"], "--net-changes cannot be combined"),
        (["changes", IDENT, "--compute-updates"], "--compute-updates needs --identifier-columns"),
        (["upsert", IDENT, "{data}"], "--on: table db.events has no identifier fields"),
        (["rewrite-manifests", IDENT, "--target-size-bytes", "-5"], "--target-size-bytes -5: expected 1"),
        (["expire-snapshots", IDENT, "--older-than", "9" * 20], "--older-than '99999999999999999999'"),
        (["expire-snapshots", IDENT, "--older-than", "9999999999d"], "--older-than '9999999999d': beyond"),
    ],
    ids=["no-namespace", "net-and-updates", "no-update-keys", "no-upsert-keys", "size", "ms", "age"],
)
def test_errors_name_the_cli_option(
    catalog_env: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    """Mistakes caught by the API are told in the CLI's terms: the option at fault, the table as given."""
    _create_and_append(catalog_env, capsys, 1, 5)
    data = _write(catalog_env, "data.parquet", _rows(0, 2))
    assert main([a.replace("{data}", data) for a in argv] + ["--catalog", NAME]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err, err
