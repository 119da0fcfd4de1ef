"""``gpu-engine compact`` against a SQLite catalog configured through PYICEBERG_CATALOG__*: --dry-run
explains and writes nothing, a compaction keeps the rows and reports its counts (--json and the table
report), sort orders, options and --where pass through, bad options exit 2 naming the option."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyiceberg.table import StaticTable

import gpu_engine as ge
from gpu_engine.catalog import Catalog
from gpu_engine.cli import main
from gpu_engine.execute import frame_rewrite
from gpu_engine.table import Table

NAME = "clicompact"


def _catalog(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Catalog:
    """Catalog NAME (SQLite) configured through the environment, with namespace ``db``."""
    warehouse = tmp_path / "warehouse"
    warehouse.mkdir()
    monkeypatch.setenv("PYICEBERG_HOME", str(tmp_path))
    monkeypatch.setenv(f"PYICEBERG_CATALOG__{NAME.upper()}__URI", f"sqlite:///{tmp_path / 'catalog.db'}")
    monkeypatch.setenv(f"PYICEBERG_CATALOG__{NAME.upper()}__WAREHOUSE", warehouse.as_uri())
    cat = ge.load_catalog(NAME)
    cat.create_namespace("db")
    return cat


@pytest.fixture
def table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Table:
    cat = _catalog(tmp_path, monkeypatch)
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), ("name", pa.string())])
    tbl = cat.create_table("db.t", schema=schema, properties={"format-version": "3"})
    for i in range(6):
        tbl.append(pa.table({"id": list(range(i * 10, i * 10 + 10)), "name": [f"n{i}"] * 10}, schema=schema))
    tbl.delete("id in (1, 2, 33)")
    return tbl


def _json(capsys: pytest.CaptureFixture[str], *argv: str) -> Any:
    code = main([*argv, "--json"])
    out = capsys.readouterr()
    assert code == 0, out.err
    return json.loads(out.out)


def test_dry_run_explains_and_writes_nothing(table: Table, capsys: pytest.CaptureFixture[str]) -> None:
    before = table.metadata_location
    report = _json(capsys, "compact", "db.t", "--catalog", NAME, "--dry-run")
    assert report["dry-run"] is True
    assert report["planned-files"] == 6 and report["planned-groups"] == 1
    assert report["rewritten-data-files-count"] == 0
    assert any("group 0" in line for line in report["plan"])
    (planned,) = report["planned"]  # the groups as values, not only as text: they were nowhere in the JSON
    files = table.scan().plan().tasks
    assert planned["files"] == 6 and planned["bytes"] == sum(t.file.file_size_in_bytes for t in files)
    assert planned["index"] == 0 and planned["expected-output-files"] == 1 and planned["delete-files"] >= 1
    assert report["groups"] == []  # none rewritten
    assert table.refresh().metadata_location == before


def test_compact_keeps_rows_and_reports(table: Table, capsys: pytest.CaptureFixture[str]) -> None:
    rows = table.scan().to_arrow().sort_by("id")
    report = _json(
        capsys, "compact", "db.t", "--catalog", NAME, "--strategy", "sort", "--sort-order", "name DESC, id",
        "--option", "min-input-files=2",
    )  # fmt: skip
    assert report["rewritten-data-files-count"] == 6
    assert report["added-data-files-count"] == 1
    assert report["removed-delete-files-count"] >= 1
    assert report["strategy"] == "sort" and report["options"]["min-input-files"] == 2
    table.refresh()
    assert table.scan().to_arrow().sort_by("id").equals(rows)
    written = table.scan().to_arrow()
    assert written["name"].to_pylist() == sorted(written["name"].to_pylist(), reverse=True)


def test_table_report(table: Table, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compact", "db.t", "--catalog", NAME]) == 0
    out = capsys.readouterr().out
    assert "data files rewritten" in out and "6" in out
    assert "strategy binpack" in out
    assert "pyarrow: 1 group(s)" in out  # auto without a GPU


def test_parquet_io_passes_through(
    table: Table, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    rows = table.scan().to_arrow().sort_by("id")
    report = _json(capsys, "compact", "db.t", "--catalog", NAME, "--parquet-io", "arrow-frames")
    assert [g["parquet_io"] for g in report["groups"]] == ["arrow"]
    assert table.refresh().scan().to_arrow().sort_by("id").equals(rows)
    argv = ["compact", "db.t", "--catalog", NAME, "--strategy", "sort", "--sort-order", "id DESC"]
    monkeypatch.setattr(frame_rewrite, "WHOLE_BYTES", 0)  # sorts too large for frames: the host orders
    assert main([*argv, "--parquet-io", "arrow-frames", "--option", "rewrite-all=true"]) == 0
    out = capsys.readouterr().out
    assert "pyarrow: 1 group(s)" in out and "pyarrow because arrow:" in out
    report = _json(capsys, *argv, "--parquet-io", "arrow-frames", "--option", "rewrite-all=true")
    [why] = [g["parquet_io_reason"] for g in report["groups"]]
    assert why.startswith("arrow: a sort of more than 0 GiB of input")
    with pytest.raises(SystemExit) as exited:
        main([*argv, "--parquet-io", "gpu"])
    assert exited.value.code == 2 and "--parquet-io" in capsys.readouterr().err


def test_bad_option_exits_2_naming_it(table: Table, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compact", "db.t", "--catalog", NAME, "--option", "min-input-filez=2"]) == 2
    assert "min-input-filez" in capsys.readouterr().err
    assert main(["compact", "db.t", "--catalog", NAME, "--option", "oops"]) == 2
    assert "K=V" in capsys.readouterr().err
    assert main(["compact", "db.t", "--catalog", NAME, "--strategy", "zorder"]) == 2
    assert "zorder" in capsys.readouterr().err


def test_failed_groups_exit_1_with_json_too(table: Table, capsys: pytest.CaptureFixture[str]) -> None:
    """A scheduled job reads --json: a group that failed must still fail the command."""
    victim = Path(str(table.scan().plan().tasks[0].file.path).removeprefix("file://"))
    victim.write_bytes(b"not parquet")
    argv = ["compact", "db.t", "--catalog", NAME, "--option", "partial-progress.enabled=true", "--json"]
    assert main(argv) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["failed-groups"]


PARTITIONED = pa.schema([pa.field("id", pa.int64(), nullable=False), ("region", pa.string())])
APPENDS = [
    pa.table({"id": [i * 10 + j for j in range(6)], "region": ["eu", "us", "apac"] * 2}, schema=PARTITIONED)
    for i in range(3)
]  # each append writes one file to each of the three region partitions


@pytest.fixture
def partitioned(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Table:
    tbl = _catalog(tmp_path, monkeypatch).create_table(
        "db.p", schema=PARTITIONED, partition_spec=["region"], properties={"format-version": "2"}
    )
    for data in APPENDS:
        tbl.append(data)
    return tbl


def _live_files(tbl: Table) -> dict[str, str]:
    """The current snapshot's data files and their region, as PyIceberg reads the manifests."""
    files = StaticTable.from_metadata(tbl.metadata_location).inspect.files()
    return {f["file_path"]: f["partition"]["region"] for f in files.to_pylist()}


def test_where_rewrites_only_the_matching_partitions(
    partitioned: Table, capsys: pytest.CaptureFixture[str]
) -> None:
    """--where region = 'eu': eu's three files become one; us and apac keep exactly their files (without the
    filter every partition would be rewritten); the rows are those appended."""
    before = _live_files(partitioned)
    assert sorted(before.values()) == sorted(["eu", "us", "apac"] * 3)
    report = _json(
        capsys, "compact", "db.p", "--catalog", NAME, "--where", "region = 'eu'",
        "--option", "min-input-files=2",
    )  # fmt: skip
    assert report["rewritten-data-files-count"] == 3 and report["added-data-files-count"] == 1
    after = _live_files(partitioned.refresh())
    kept = {path: region for path, region in before.items() if region != "eu"}
    new = {path: region for path, region in after.items() if path not in before}
    assert {path: region for path, region in after.items() if path in before} == kept
    assert list(new.values()) == ["eu"]
    expected = pa.concat_tables(APPENDS).sort_by("id").to_pylist()
    assert partitioned.scan().to_arrow().sort_by("id").to_pylist() == expected


def test_bad_where_exits_2_naming_it(partitioned: Table, capsys: pytest.CaptureFixture[str]) -> None:
    """An unknown column or an unparsable filter: exit 2 naming the column or showing the text, and no new
    snapshot."""
    before = partitioned.metadata_location
    assert main(["compact", "db.p", "--catalog", NAME, "--where", "regoin = 'eu'"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error:") and "regoin" in err and "Traceback" not in err
    assert main(["compact", "db.p", "--catalog", NAME, "--where", "region =="]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error:") and "region ==" in err and "Traceback" not in err
    assert partitioned.refresh().metadata_location == before
