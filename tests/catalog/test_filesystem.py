"""File-system tables: current-metadata selection on every fixture table, relocation, and commits."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import threading
import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import gpu_engine as ge
from gpu_engine.catalog.filesystem import (
    FileSystemCatalog,
    commit_table_dir,
    find_current_metadata,
    metadata_version,
)
from gpu_engine.errors import (
    CommitConflict,
    InvalidOption,
    MetadataError,
    NamespaceAlreadyExists,
    NoSuchTable,
    UnsupportedFeature,
)
from gpu_engine.iceberg.metadata import metadata_to_json
from gpu_engine.io.fileio import LocalFileIO, load_file_io

SHARED = Path(__file__).resolve().parents[2].parent / "shared"
FIXTURES = SHARED / "fixtures"
if not (FIXTURES / "INVENTORY.json").is_file():  # a missing fixture tree fails the run, never skips it
    raise RuntimeError(
        f"fixture tables not found at {FIXTURES} (expected ../shared/fixtures next to the repo)"
    )
INVENTORY: list[dict[str, Any]] = json.loads((FIXTURES / "INVENTORY.json").read_text())["tables"]

# The metadata file each rule of SOURCES.md selects, for the tables that exercise a rule.
EXPECTED_CURRENT = {
    # DuckDB hints holding a file name (without the .metadata.json suffix)
    "duckdb-iceberg/data/persistent/uuid": "00001-43fda1f4-1c96-4376-ad16-91beb71d0759.metadata.json",
    "duckdb-iceberg/data/persistent/is_null_is_not_null": (
        "00001-43ceeb9a-cd0d-4556-b1e2-513b5bf88ff8.metadata.json"
    ),
    # Impala: empty version-hint.text -> highest version
    "impala/iceberg_test/iceberg_v3/iceberg_v3_deletion_vectors": "v3.metadata.json",
    # numeric order, not string order: v16 > v9
    "pg_lake/sample_tables_v3/public/v3_evolution_full": "v16.metadata.json",
    # gzip-compressed metadata named by a numeric hint
    "duckdb-iceberg/data/persistent/iceberg/lineitem_iceberg_gz": "v2.gz.metadata.json",
    # no hint, only v1/v2
    "impala/iceberg_test/hadoop_catalog/ice/iceberg_alltypes_part": "v2.metadata.json",
    # no hint, catalog-style names 00000..00013
    "pg_lake/sample_tables/public/spark_generated_iceberg_ddl_test": (
        "00013-0cfc30af-a802-4a38-9355-4ef102c0fe77.metadata.json"
    ),
    # no hint; an unnumbered vfinal written after 00000/00001 (greatest last-updated-ms)
    "duckdb-iceberg/data/persistent/equality_delete_extra_column/warehouse/ns/t": "vfinal.metadata.json",
    # hint 7; hand-made v3.1/v3.2/v4.1 beside it are newer by last-updated-ms but are not current
    "duckdb-iceberg/data/persistent/name_mapping/warehouse_1/mydb/t1": "v7.metadata.json",
    # .txt hint with a trailing newline
    "impala/iceberg_test/hadoop_catalog/ice/airports_parquet": "v2.metadata.json",
}
# INVENTORY.json's counts for name_mapping/t1 describe v4.1.metadata.json (the newest by last-updated-ms);
# the table's version-hint.text says 7, and v7 lists v1..v6 in its metadata-log.
INVENTORY_COUNTS_FROM_OTHER_FILE = {"duckdb-iceberg/data/persistent/name_mapping/warehouse_1/mydb/t1": (2, 3)}


def rel(entry: dict[str, Any]) -> str:
    return str(entry["path"]).removeprefix("fixtures/")


@pytest.mark.parametrize("entry", INVENTORY, ids=rel)
def test_every_fixture_table_loads_relocated(entry: dict[str, Any]) -> None:
    table_dir = SHARED / entry["path"]
    tbl = ge.load_table(table_dir, relocate=True)
    md = tbl.metadata
    assert Path(tbl.metadata_location).parent == table_dir / "metadata"
    if rel(entry) in EXPECTED_CURRENT:
        assert Path(tbl.metadata_location).name == EXPECTED_CURRENT[rel(entry)]
    snapshots, schemas = INVENTORY_COUNTS_FROM_OTHER_FILE.get(
        rel(entry), (entry["snapshots"], entry["schemas"])
    )
    assert (md.format_version, len(md.snapshots), len(md.schemas)) == (
        entry["format_version"],
        snapshots,
        schemas,
    )
    assert md.location == entry["location_in_metadata"]
    # relocation: the recorded location and the current snapshot's manifest list land in the fixture
    assert os.path.normpath(tbl.io.resolve(tbl.location)) == str(table_dir)
    snapshot = md.current_snapshot()
    if snapshot is not None and snapshot.manifest_list:
        assert Path(tbl.io.resolve(snapshot.manifest_list)).is_file()
    assert tbl.identifier == (table_dir.name,)
    assert isinstance(tbl.catalog, FileSystemCatalog)
    assert tbl.schema() == md.schema and tbl.spec() == md.spec and tbl.properties == md.properties


@pytest.mark.parametrize("entry", INVENTORY, ids=rel)
def test_listing_without_hint_agrees_with_the_hint(entry: dict[str, Any], tmp_path: Path) -> None:
    source = SHARED / entry["path"] / "metadata"
    (tmp_path / "metadata").mkdir()
    for f in source.iterdir():
        if ".metadata.json" in f.name:
            shutil.copy(f, tmp_path / "metadata" / f.name)
    io = load_file_io()
    assert (
        Path(find_current_metadata(io, str(tmp_path))).name
        == Path(find_current_metadata(io, str(source.parent))).name
    )


def test_load_from_metadata_file_relocates_to_the_directory_above_metadata() -> None:
    table_dir = FIXTURES / "dremio-oss/iceberg/v2/products_with_eq_deletes"
    path = table_dir / "metadata" / "v5.metadata.json"
    tbl = ge.load_table(str(path), relocate=True)
    assert tbl.metadata_location == str(path) and tbl.catalog is None
    assert tbl.io.resolve("file:/tmp/iceberg-test-tables/v2/products_with_eq_deletes/data/x.parquet") == str(
        table_dir / "data/x.parquet"
    )
    assert tbl.refresh() is tbl and tbl.metadata_location == str(path)  # static: stays on its file


def test_path_map_alone_and_merged_with_relocate() -> None:
    table_dir = FIXTURES / "pg_lake/data_iceberg/test_types"
    plain = ge.load_table(table_dir)
    assert plain.io.resolve("s3://testbucketcdw/iceberg/public/test_types/data/a") == (
        "s3://testbucketcdw/iceberg/public/test_types/data/a"
    )
    mapped = ge.load_table(table_dir, path_map={"s3://testbucketcdw/iceberg": "/mnt/x"})
    assert (
        mapped.io.resolve("s3://testbucketcdw/iceberg/public/test_types/data/a")
        == "/mnt/x/public/test_types/data/a"
    )
    both = ge.load_table(table_dir, relocate=True, path_map={"s3://other/bucket": "/mnt/y"})
    assert both.io.resolve("s3://testbucketcdw/iceberg/public/test_types/data/a") == f"{table_dir}/data/a"
    assert both.io.resolve("s3://other/bucket/f") == "/mnt/y/f"


def test_missing_directory_and_non_tables_are_named(tmp_path: Path) -> None:
    missing = tmp_path / "no_such_table"
    with pytest.raises(NoSuchTable, match="no_such_table"):
        ge.load_table(missing)
    (tmp_path / "plain").mkdir()
    with pytest.raises(NoSuchTable, match=r"plain is not an Iceberg table directory"):
        ge.load_table(tmp_path / "plain")
    (tmp_path / "empty" / "metadata").mkdir(parents=True)
    with pytest.raises(NoSuchTable, match=r"no metadata file .* in .*empty/metadata"):
        ge.load_table(tmp_path / "empty")


@pytest.mark.parametrize(
    ("path", "message"),
    [
        (None, r"load_table path=None: expected a table directory or metadata file \(a str or os.PathLike\)"),
        (5, r"load_table path=5: .* not int"),
        (b"/tmp/t", r"load_table path=b'/tmp/t': .* not bytes"),
    ],
)
def test_a_path_of_the_wrong_type_is_named(path: object, message: str) -> None:
    """InvalidOption naming the argument, not os.fspath's TypeError (or a regex's, for bytes)."""
    with pytest.raises(InvalidOption, match=message):
        ge.load_table(path)  # type: ignore[arg-type]


def test_a_path_map_of_the_wrong_type_is_named(tmp_path: Path) -> None:
    """path_map values must be strings: ``{"a": 5}`` was an AttributeError on ``rstrip``."""
    entry = next(e for e in INVENTORY if not e.get("extra_path_map"))
    with pytest.raises(InvalidOption, match=r"path_map entry 'a': 5: prefixes must be strings"):
        ge.load_table(FIXTURES / rel(entry), path_map={"a": 5})  # type: ignore[dict-item]


# -- synthetic directories for each selection rule --------------------------------------------------------


def make_table(
    root: Path, files: dict[str, int], hint: str | None = None, hint_name: str = "version-hint.text"
) -> Path:
    """A table directory with metadata files {name: last-updated-ms} (minimal JSON) and an optional hint."""
    meta = root / "metadata"
    meta.mkdir(parents=True)
    for name, ts in files.items():
        (meta / name).write_text(json.dumps({"format-version": 2, "last-updated-ms": ts}))
    if hint is not None:
        (meta / hint_name).write_text(hint)
    return root


def current(root: Path) -> str:
    return Path(find_current_metadata(load_file_io(), str(root))).name


@pytest.mark.parametrize(
    ("files", "hint", "expected"),
    [
        ({"v9.metadata.json": 9, "v16.metadata.json": 1}, None, "v16.metadata.json"),
        ({"v9.metadata.json": 9, "v16.metadata.json": 1}, "", "v16.metadata.json"),
        ({"v1.metadata.json": 1, "v2.metadata.json": 2}, "1", "v2.metadata.json"),  # stale hint: walk forward
        ({"v1.metadata.json": 1, "v2.metadata.json": 2, "v4.metadata.json": 4}, "1", "v2.metadata.json"),
        ({"v1.metadata.json": 1, "v2.metadata.json.gz": 2}, "2\n", "v2.metadata.json.gz"),
        ({"00001-a.metadata.json": 1, "00002-b.metadata.json": 2}, "00001-a", "00001-a.metadata.json"),
        ({"00001-a.metadata.json": 1}, "00001-a.metadata.json", "00001-a.metadata.json"),
        (
            {"00002-a.metadata.json": 5, "00002-b.metadata.json": 7, "00001-c.metadata.json": 9},
            None,
            "00002-b.metadata.json",
        ),
        ({"00010-a.metadata.json": 1, "00009-b.metadata.json": 2}, None, "00010-a.metadata.json"),
        ({"v2.metadata.json": 2, "vfinal.metadata.json": 3}, None, "vfinal.metadata.json"),
        ({"v2.metadata.json": 5, "vold.metadata.json": 3}, None, "v2.metadata.json"),
        (
            {"v2.metadata.json": 2, "v2.1.metadata.json": 1, "v10.gz.metadata.json": 0},
            None,
            "v10.gz.metadata.json",
        ),
        # a hint that is neither a version nor a metadata file's name is ignored, as Java's findVersion does
        ({"v1.metadata.json": 1, "v2.metadata.json": 2}, "3x", "v2.metadata.json"),
        ({"v1.metadata.json": 1, "v2.metadata.json": 2}, "+1", "v2.metadata.json"),
        ({"v1.metadata.json": 1, "v2.metadata.json": 2}, "1e3", "v2.metadata.json"),
        ({"v1.metadata.json": 1, "v2.metadata.json": 2}, "\u00b2", "v2.metadata.json"),  # int() refuses it
    ],
)
def test_selection_rules(tmp_path: Path, files: dict[str, int], hint: str | None, expected: str) -> None:
    assert current(make_table(tmp_path / "t", files, hint)) == expected


def test_txt_hint(tmp_path: Path) -> None:
    root = make_table(
        tmp_path / "t",
        {"v1.metadata.json": 1, "v3.metadata.json": 3, "v2.metadata.json": 2},
        "2",
        "version-hint.txt",
    )
    assert current(root) == "v3.metadata.json"  # v2 by the hint, then v3 exists


def test_a_directory_named_as_the_hint_is_no_hint(tmp_path: Path) -> None:
    root = make_table(tmp_path / "t", {"v1.metadata.json": 1, "v2.metadata.json": 2})
    (root / "metadata" / "version-hint.text").mkdir()
    assert current(root) == "v2.metadata.json"


def test_hint_naming_a_missing_file_is_an_error(tmp_path: Path) -> None:
    root = make_table(tmp_path / "t", {"v1.metadata.json": 1}, "5")
    with pytest.raises(MetadataError, match=r"version-hint.text names version 5"):
        current(root)
    root = make_table(tmp_path / "u", {"v1.metadata.json": 1}, "00003-gone")
    with pytest.raises(MetadataError, match=r"'00003-gone'"):
        current(root)


def test_a_hint_to_a_pruned_version_gives_way_to_the_listing(tmp_path: Path) -> None:
    """A slow writer's hint lands after later commits pruned its version (delete-after-commit): the
    versions listed after it are current; none listed after it is still an error."""
    root = make_table(tmp_path / "t", {"v6.metadata.json": 6, "v7.metadata.json": 7}, "4")
    assert current(root) == "v7.metadata.json"
    root = make_table(tmp_path / "u", {"v2.metadata.json": 2, "v3.metadata.json": 3}, "4")
    with pytest.raises(MetadataError, match=r"version-hint.text names version 4"):
        current(root)


def test_a_file_name_hint_walks_forward_to_versions_committed_after_it(tmp_path: Path) -> None:
    """DuckDB's hint names a file; a commit through the directory killed between writing v2 and replacing
    the hint left it behind: v2 landed (Java's listing reader takes it), so it is current here too."""
    files = {
        "00000-a.metadata.json": 0,
        "00001-b.metadata.json": 1,
        "v2.metadata.json": 2,
        "v3.metadata.json": 3,
    }
    assert current(make_table(tmp_path / "t", files, "00001-b")) == "v3.metadata.json"
    files = {"00000-a.metadata.json": 0, "00001-b.metadata.json": 1}
    assert current(make_table(tmp_path / "u", files, "00000-a")) == "00000-a.metadata.json"  # by the hint


def test_metadata_version() -> None:
    assert metadata_version("v16.metadata.json") == 16
    assert metadata_version("v2.gz.metadata.json") == 2
    assert metadata_version("v3.1.metadata.json") == 3
    assert metadata_version("00012-0cfc30af-a802.metadata.json") == 12
    assert metadata_version("vfinal.metadata.json") is None
    assert metadata_version("v1.avro") is None


# -- commits -----------------------------------------------------------------------------------------------


def copy_table(name: str, tmp_path: Path) -> Path:
    target = tmp_path / Path(name).name
    shutil.copytree(FIXTURES / name, target)
    for p in [target, *target.rglob("*")]:
        p.chmod(0o755 if p.is_dir() else 0o644)
    return target


def write_next_metadata(tbl: ge.Table, directory: Path, bump_ms: int = 1000) -> str:
    obj = metadata_to_json(tbl.metadata)
    obj["last-updated-ms"] = tbl.metadata.last_updated_ms + bump_ms
    path = directory / f"{uuid.uuid4()}.metadata.json"
    path.write_text(json.dumps(obj))
    return str(path)


def test_commit_writes_the_next_version_and_moves_the_hint(tmp_path: Path) -> None:
    table_dir = copy_table("pg_lake/sample_tables_v3/public/v3_evolution_full", tmp_path)
    tbl = ge.load_table(table_dir, relocate=True)
    assert Path(tbl.metadata_location).name == "v16.metadata.json"
    assert tbl.catalog is not None
    new = write_next_metadata(tbl, table_dir / "metadata")
    committed = tbl.catalog.commit_metadata(tbl.identifier, tbl.metadata_location, new)
    assert Path(committed).name == "v17.metadata.json"
    assert not Path(new).exists()  # renamed into place
    assert (table_dir / "metadata" / "version-hint.text").read_text() == "17"
    before = tbl.metadata.last_updated_ms
    assert tbl.refresh().metadata_location == committed
    assert tbl.metadata.last_updated_ms == before + 1000
    assert tbl.io.resolve(tbl.location) == str(table_dir)  # the handle keeps its relocation
    # a writer still based on v16 loses
    stale = write_next_metadata(ge.load_table(table_dir / "metadata" / "v16.metadata.json"), tmp_path)
    with pytest.raises(CommitConflict, match=r"v17\.metadata\.json"):
        tbl.catalog.commit_metadata(tbl.identifier, str(table_dir / "metadata" / "v16.metadata.json"), stale)
    assert Path(stale).exists()  # a failed commit leaves the new file to its writer


def test_concurrent_commits_from_one_base_exactly_one_wins(tmp_path: Path) -> None:
    table_dir = copy_table("dremio-oss/iceberg/v2/orders", tmp_path)
    base = ge.load_table(table_dir)
    assert base.catalog is not None
    news = [write_next_metadata(base, tmp_path, bump_ms=i + 1) for i in range(6)]
    outcomes: list[str] = []
    barrier = threading.Barrier(len(news))

    def commit(new: str) -> None:
        barrier.wait()
        catalog = FileSystemCatalog("fs", warehouse=str(tmp_path))
        try:
            outcomes.append(catalog.commit_metadata(("orders",), base.metadata_location, new))
        except CommitConflict:
            outcomes.append("conflict")

    threads = [threading.Thread(target=commit, args=(n,)) for n in news]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    winners = [o for o in outcomes if o != "conflict"]
    assert len(winners) == 1 and Path(winners[0]).name == "v4.metadata.json"
    assert current(table_dir) == "v4.metadata.json"


@pytest.mark.parametrize("ours_gzip", [True, False], ids=["ours-gzip", "ours-plain"])
def test_a_commit_racing_one_under_another_codecs_name_conflicts(tmp_path: Path, ours_gzip: bool) -> None:
    """Two writers from one base link v<N+1> under names their metadata codecs give (``v2.gz.metadata.json``,
    ``v2.metadata.json``): exclusive creation alone lets both succeed and readers see one. The writer that
    finds the other name beside its own withdraws its file: a conflict (retried), never a lost commit."""
    table_dir = copy_table("dremio-oss/iceberg/v2/orders", tmp_path)
    base = ge.load_table(table_dir)
    top = int(current(table_dir).split(".")[0].removeprefix("v"))
    ours = write_next_metadata(base, tmp_path)
    if ours_gzip:
        gz = Path(ours.replace(".metadata.json", ".gz.metadata.json"))
        gz.write_bytes(gzip.compress(Path(ours).read_bytes()))
        ours = str(gz)
    theirs = table_dir / "metadata" / f"v{top + 1}{'.metadata.json' if ours_gzip else '.gz.metadata.json'}"
    payload = Path(write_next_metadata(base, tmp_path, bump_ms=7)).read_bytes()

    class _Racing(LocalFileIO):
        def write_bytes(self, path: str, data: bytes) -> None:
            if Path(path).name.startswith(f"v{top + 1}."):  # the other writer links first, unseen
                theirs.write_bytes(payload if ours_gzip else gzip.compress(payload))
            super().write_bytes(path, data)

    with pytest.raises(CommitConflict, match=rf"v{top + 1}"):
        commit_table_dir(_Racing(), str(table_dir), base.metadata_location, ours)
    left = sorted(p.name for p in (table_dir / "metadata").glob(f"v{top + 1}.*"))
    assert left == [theirs.name]  # ours withdrawn: the other writer's commit is the one readers see
    assert current(table_dir) == theirs.name


def test_create_through_commit_and_catalog_listing(tmp_path: Path) -> None:
    cat = FileSystemCatalog("fs", warehouse=str(tmp_path / "wh"))
    cat.create_namespace("db")
    with pytest.raises(NamespaceAlreadyExists):
        cat.create_namespace("db")
    assert cat.list_namespaces() == [("db",)] and cat.list_tables("db") == []
    source = ge.load_table(FIXTURES / "pg_lake/sample_tables_v3/public/v3_minimal")
    (tmp_path / "wh" / "db" / "t" / "metadata").mkdir(parents=True)
    new = write_next_metadata(source, tmp_path)
    assert Path(cat.commit_metadata("db.t", None, new)).name == "v1.metadata.json"
    assert cat.list_tables("db") == [("db", "t")] and cat.list_namespaces() == [("db",)]
    assert cat.table_exists("db.t") and not cat.table_exists("db.u")
    assert cat.load_table("db.t").metadata.table_uuid == source.metadata.table_uuid
    with pytest.raises(CommitConflict):
        cat.commit_metadata("db.t", None, write_next_metadata(source, tmp_path))
    with pytest.raises(UnsupportedFeature):
        cat.drop_table("db.t")


def test_commit_to_a_table_without_hint(tmp_path: Path) -> None:
    table_dir = copy_table("pg_lake/sample_tables/public/spark_generated_iceberg_test", tmp_path)
    tbl = ge.load_table(table_dir, relocate=True)
    assert tbl.catalog is not None and Path(tbl.metadata_location).name.startswith("00009-")
    # a writer's uncommitted <uuid>.metadata.json is never current, even when newer
    pending = write_next_metadata(tbl, table_dir / "metadata", bump_ms=10**6)
    assert current(table_dir) == Path(tbl.metadata_location).name
    # a numbered new file inside metadata/ does not count as current while committing it
    numbered = str(table_dir / "metadata" / f"00010-{uuid.uuid4()}.metadata.json")
    Path(pending).rename(numbered)
    committed = tbl.catalog.commit_metadata(tbl.identifier, tbl.metadata_location, numbered)
    assert Path(committed).name == "v10.metadata.json" and not Path(numbered).exists()
    assert current(table_dir) == "v10.metadata.json"
    assert (table_dir / "metadata" / "version-hint.text").read_text() == "10"


def test_a_table_or_namespace_named_metadata_keeps_its_parent_a_namespace(tmp_path: Path) -> None:
    """Only a ``metadata/`` holding a ``*.metadata.json`` makes a table (Java's HadoopCatalog.isTableDir): a
    table ``db.metadata`` made ``db`` look like a table, hiding the namespace and its other tables."""
    cat = FileSystemCatalog("fs", warehouse=str(tmp_path / "wh"))
    cat.create_namespace("db")
    schema = pa.schema([("id", pa.int64())])
    cat.create_table("db.events", schema)
    cat.create_table("db.metadata", schema)
    assert cat.namespace_exists("db") and cat.list_namespaces() == [("db",)]
    assert sorted(cat.list_tables("db")) == [("db", "events"), ("db", "metadata")]
    cat.create_table("db.later", schema)
    cat.create_namespace(("ns", "metadata"))
    assert cat.namespace_exists("ns") and cat.list_namespaces("ns") == [("ns", "metadata")]
    (tmp_path / "wh" / "db" / "half" / "metadata").mkdir(parents=True)  # a create that failed early
    assert ("db", "half") not in cat.list_tables("db")


def _files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


def test_a_catalog_tables_directory_is_not_committed_to(tmp_path: Path) -> None:
    """A SQL catalog's table (metadata named NNNNN-<uuid>, no version hint) loaded by its directory reads,
    but a write is refused before any file is written: the catalog would not see a v<N> committed there
    and would count the new files as orphans; so with a stale hint. With a hint naming the newest such file
    (DuckDB's tables) it commits."""
    cat = ge.load_catalog("c", uri=f"sqlite:///{tmp_path}/c.db", warehouse=(tmp_path / "wh").as_uri())
    cat.create_namespace("db")
    rows = pa.table({"id": pa.array([1, 2], pa.int64())})
    cat.create_table("db.t", rows.schema).append(rows)
    table_dir = tmp_path / "wh" / "db" / "t"
    by_dir = ge.load_table(str(table_dir))
    assert by_dir.scan().to_arrow().num_rows == 2
    before = _files(table_dir)
    with pytest.raises(UnsupportedFeature, match=r"named as a catalog names it .* through that catalog"):
        by_dir.append(rows)
    assert _files(table_dir) == before
    assert cat.load_table("db.t").scan().to_arrow().num_rows == 2

    current = Path(by_dir.metadata_location.removeprefix("file://"))
    hint = current.parent / "version-hint.text"
    hint.write_text(current.name.removesuffix(".metadata.json"))  # for DuckDB, then the catalog moves on
    cat.load_table("db.t").append(rows)
    with pytest.raises(UnsupportedFeature, match=r"its version hint is stale \(00002-"):
        ge.load_table(str(table_dir)).append(rows)
    assert cat.load_table("db.t").scan().to_arrow().num_rows == 4
    newest = Path(cat.load_table("db.t").metadata_location.removeprefix("file://"))
    hint.write_text(newest.name.removesuffix(".metadata.json"))
    ge.load_table(str(table_dir)).append(rows)
    assert ge.load_table(str(table_dir)).scan().to_arrow().num_rows == 6
