"""``gpu-engine alter`` against a SQLite catalog configured through PYICEBERG_CATALOG__*: schema, spec and
sort order changes land (read back as metadata and rows), --json output, errors exit 2 naming the cause."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest

import gpu_engine as ge
from gpu_engine.cli import main
from gpu_engine.commit.schema_update import SchemaUpdate
from gpu_engine.errors import CommitConflict

from .test_cli_write import IDENT, NAME, _json, _rows, _write, catalog_env

__all__ = ["catalog_env"]


def test_alter_schema_spec_and_sort_order(
    catalog_env: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    schema_file = _write(tmp_path, "schema.parquet", _rows(0, 0))
    _json(capsys, "create", IDENT, "--catalog", NAME, "--schema", schema_file, "--partition-by", "region")
    _json(capsys, "append", IDENT, "--catalog", NAME, _write(tmp_path, "a.parquet", _rows(0, 10)))
    out = _json(
        capsys, "alter", IDENT, "--catalog", NAME,
        "--add-column", "note:string", "--rename-column", "value=amount", "--update-column", "id:long",
        "--add-partition-field", "bucket(4, id)", "--drop-partition-field", "region",
        "--sort-order", "id DESC",
    )  # fmt: skip
    assert out["schema_id"] == 1 and out["spec_id"] == 1 and out["sort_order_id"] == 1
    assert out["columns"] == ["id: long", "region: string", "amount: double", "note: string"]
    assert out["partition_fields"] == ["id_bucket_4: bucket[4]"]
    tbl = ge.load_catalog(NAME).load_table(IDENT)
    assert tbl.metadata_location == out["metadata_location"]
    got = tbl.scan().to_arrow().sort_by("id")
    expected = _rows(0, 10).rename_columns(["id", "region", "amount"])
    assert got.select(["id", "region", "amount"]).to_pylist() == expected.to_pylist()
    assert got["note"].null_count == 10
    assert _json(capsys, "alter", IDENT, "--catalog", NAME, "--unsorted")["sort_order_id"] == 0


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ([], "nothing to change"),
        (["--add-column", "note"], "expected NAME:TYPE"),
        (["--add-column", "region:string"], "exists already"),
        (["--drop-column", "region"], "partition field 'region' uses it"),
        (["--update-column", "value:int"], "double cannot be promoted to int"),
        (["--rename-partition-field", "nope=x"], "has no such field"),
        (["--sort-order", "nope"], "no column 'nope'"),
        (["--move", "id sideways"], "expected NAME first | NAME before OTHER"),
        (["--move", "id after nope"], "no column 'nope'"),
        (["--identifier-fields", "region"], "identifier field 'region': it is optional"),
        (["--identifier-fields", "id,,id"], "expected distinct comma-separated columns"),
        (["--union-schema-of", "/no/such.parquet"], "--union-schema-of /no/such.parquet: no such file"),
        (["--set-property", "comment"], "expected KEY=VALUE"),
        (["--set-property", "format-version=1"], "versions cannot go down"),
        (["--set-property", "write.target-file-size-bytes=big"], "target-file-size-bytes='big'"),
        (["--remove-property", "uuid"], "reserved by Iceberg"),
    ],
)
def test_alter_errors_exit_2_and_change_nothing(
    catalog_env: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    schema_file = _write(tmp_path, "schema.parquet", _rows(0, 0))
    _json(capsys, "create", IDENT, "--catalog", NAME, "--schema", schema_file, "--partition-by", "region")
    before = ge.load_catalog(NAME).load_table(IDENT).metadata_location
    assert main(["alter", IDENT, "--catalog", NAME, *argv]) == 2
    assert message in " ".join(capsys.readouterr().err.split())
    assert ge.load_catalog(NAME).load_table(IDENT).metadata_location == before


def test_alter_union_move_and_identifier_fields_then_delete_by_key(
    catalog_env: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    schema = {"type": "struct", "fields": [
        {"id": 1, "name": "id", "type": "long", "required": True},
        {"id": 2, "name": "region", "type": "string", "required": False},
        {"id": 3, "name": "value", "type": "double", "required": False},
    ]}  # fmt: skip
    (tmp_path / "schema.json").write_text(json.dumps(schema))
    _json(capsys, "create", IDENT, "--catalog", NAME, "--schema", str(tmp_path / "schema.json"))
    _json(capsys, "append", IDENT, "--catalog", NAME, _write(tmp_path, "a.parquet", _rows(0, 6)))
    wider = _rows(6, 9).append_column("note", pa.array(["x", "y", "z"]))
    wider = wider.cast(
        wider.schema.set(0, pa.field("id", pa.int64(), nullable=False))
    )  # else id turns optional
    wider_file = _write(tmp_path, "b.parquet", wider)
    out = _json(
        capsys, "alter", IDENT, "--catalog", NAME, "--union-schema-of", wider_file,
        "--move", "note after id", "--identifier-fields", "id",
    )  # fmt: skip
    assert out["columns"] == ["id: long", "note: string", "region: string", "value: double"]
    assert out["identifier_fields"] == ["id"]
    _json(capsys, "append", IDENT, "--catalog", NAME, wider_file)
    keys = _write(tmp_path, "k.parquet", pa.table({"id": pa.array([1, 7], pa.int64())}))
    deleted = _json(capsys, "delete", IDENT, "--catalog", NAME, "--keys", keys)  # on the identifier field
    assert deleted["keys_written"] == 2 and "rows_deleted" not in deleted  # equality deletes count keys
    got = ge.load_catalog(NAME).load_table(IDENT).scan().to_arrow()
    assert got.column_names == ["id", "note", "region", "value"]
    assert sorted(got["id"].to_pylist()) == [0, 2, 3, 4, 5, 6, 8]
    assert sorted(n for n in got["note"].to_pylist() if n) == ["x", "z"]


def test_alter_properties_and_upgrade_the_format(
    catalog_env: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    schema_file = _write(tmp_path, "schema.parquet", _rows(0, 0))
    _json(capsys, "create", IDENT, "--catalog", NAME, "--schema", schema_file, "--format-version", "2",
          "--property", "owner=me")  # fmt: skip
    _json(capsys, "append", IDENT, "--catalog", NAME, _write(tmp_path, "a.parquet", _rows(0, 10)))
    out = _json(
        capsys, "alter", IDENT, "--catalog", NAME, "--set-property", "format-version=3",
        "--set-property", "comment=events", "--remove-property", "owner",
    )  # fmt: skip
    assert out["format_version"] == 3
    assert out["properties"]["comment"] == "events" and "owner" not in out["properties"]
    _json(capsys, "delete", IDENT, "--catalog", NAME, "--filter", "id < 3")
    tbl = ge.load_catalog(NAME).load_table(IDENT)
    assert tbl.metadata.format_version == 3
    assert sorted(tbl.scan().to_arrow()["id"].to_pylist()) == list(range(3, 10))


@pytest.mark.parametrize(
    ("argv", "message"),
    [  # a later step's option is bad: the earlier steps must not be committed (format-version: irreversible)
        (["--set-property", "format-version=3", "--add-column", "price:decimall(10, 2)"],
         "--add-column 'price:decimall(10, 2)': unknown Iceberg primitive type"),
        (["--set-property", "y=2", "--rename-column", "foo"], "--rename-column 'foo': expected OLD=NEW"),
        (["--add-column", "q:int", "--add-partition-field", "bucket(x, id)"], "bucket(x, id)"),
        (["--set-property", "y=2", "--add-column", "q:int", "--add-partition-field", "day(nope)"], "nope"),
        (["--add-column", "q:int", "--sort-order", "nope"], "no column 'nope'"),
        (["--set-property", "y=2", "--move", "id sideways"], "expected NAME first | NAME before OTHER"),
        (["--add-column", "q:int", "--rename-partition-field", "a=b=c"], "has no such field"),
        (["--set-property", "y=2", "--union-schema-of", "/no/such.parquet"], "no such file"),
    ],
)  # fmt: skip
def test_a_failing_later_step_commits_nothing(
    catalog_env: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    schema_file = _write(tmp_path, "schema.parquet", _rows(0, 0))
    _json(capsys, "create", IDENT, "--catalog", NAME, "--schema", schema_file, "--format-version", "2")
    before = ge.load_catalog(NAME).load_table(IDENT)
    assert main(["alter", IDENT, "--catalog", NAME, *argv]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert message in err and "already committed" not in err
    after = ge.load_catalog(NAME).load_table(IDENT)
    assert after.metadata_location == before.metadata_location
    assert after.metadata.format_version == 2 and "y" not in after.metadata.properties


def test_later_steps_are_checked_on_the_earlier_steps_result(
    catalog_env: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    schema_file = _write(tmp_path, "schema.parquet", _rows(0, 0))
    _json(capsys, "create", IDENT, "--catalog", NAME, "--schema", schema_file, "--format-version", "2")
    out = _json(
        capsys, "alter", IDENT, "--catalog", NAME, "--set-property", "format-version=3",
        "--add-column", "ts:timestamp", "--rename-column", "region=zone",
        "--add-partition-field", "day(ts)", "--add-partition-field", "zone", "--sort-order", "ts, zone",
    )  # fmt: skip
    assert out["format_version"] == 3 and out["columns"][-1] == "ts: timestamp"
    assert out["partition_fields"] == ["ts_day: day", "zone: identity"] and out["sort_order_id"] == 1


def test_a_failure_at_commit_time_says_what_was_already_committed(
    catalog_env: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    schema_file = _write(tmp_path, "schema.parquet", _rows(0, 0))
    _json(capsys, "create", IDENT, "--catalog", NAME, "--schema", schema_file)

    def lost_race(self: SchemaUpdate, **kwargs: object) -> None:
        raise CommitConflict("update_schema: the table changed meanwhile")

    monkeypatch.setattr(SchemaUpdate, "commit", lost_race)
    argv = ["alter", IDENT, "--catalog", NAME, "--set-property", "owner=me", "--add-column", "note:string"]
    assert main(argv) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "changed meanwhile (already committed: the properties; nothing after that)" in err
    assert ge.load_catalog(NAME).load_table(IDENT).metadata.properties["owner"] == "me"
