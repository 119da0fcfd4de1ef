"""``gpu-engine alter`` against a SQLite catalog configured through PYICEBERG_CATALOG__*: schema, spec and
sort order changes land (read back as metadata and rows), --json output, errors exit 2 naming the cause."""

from __future__ import annotations

from pathlib import Path

import pytest

import gpu_engine as ge
from gpu_engine.cli import main

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
    assert out["partition_fields"] == ["id_bucket: bucket[4]"]
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
