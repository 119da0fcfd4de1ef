"""SQL catalog compatibility: JDBC V0 tables, the SQLite catalogs PyIceberg wrote beside the fixture
tables, and connection errors."""

from __future__ import annotations

import importlib
import json
import shutil
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

import gpu_engine as ge
from gpu_engine.catalog.sql import SqlCatalog
from gpu_engine.errors import CatalogError
from gpu_engine.iceberg.metadata import metadata_to_json

pyiceberg_sql = importlib.import_module("pyiceberg.catalog.sql")

FIXTURES = Path(__file__).resolve().parents[2].parent / "shared" / "fixtures"
if not FIXTURES.is_dir():  # a missing fixture tree fails the run, never skips it
    raise RuntimeError(f"fixture tables not found at {FIXTURES}")


JDBC_V0_DDL = [
    "CREATE TABLE iceberg_tables(catalog_name VARCHAR(255) NOT NULL,"
    "table_namespace VARCHAR(255) NOT NULL,table_name VARCHAR(255) NOT NULL,"
    "metadata_location VARCHAR(1000),previous_metadata_location VARCHAR(1000),"
    "PRIMARY KEY (catalog_name, table_namespace, table_name))",
    "CREATE TABLE iceberg_namespace_properties(catalog_name VARCHAR(255) NOT NULL,"
    "namespace VARCHAR(255) NOT NULL,property_key VARCHAR(255),property_value VARCHAR(1000),"
    "PRIMARY KEY (catalog_name, namespace, property_key))",
]


def test_jdbc_v0_catalog_without_iceberg_type(tmp_path: Path) -> None:
    db = tmp_path / "jdbc.db"
    with closing(sqlite3.connect(db)) as conn, conn:
        for ddl in JDBC_V0_DDL:
            conn.execute(ddl)
    source = ge.load_table(FIXTURES / "dremio-oss/iceberg/v2/orders", relocate=True)
    cat = ge.load_catalog("jdbc", uri=f"sqlite:///{db}")
    cat.create_namespace("db")
    cat.register_table("db.orders", source.metadata_location)
    new = str(tmp_path / "next.metadata.json")
    Path(new).write_text(json.dumps(metadata_to_json(source.metadata)))
    cat.commit_metadata("db.orders", source.metadata_location, new)
    with closing(sqlite3.connect(db)) as conn, conn:
        assert [r[1] for r in conn.execute("PRAGMA table_info(iceberg_tables)")] == [
            "catalog_name",
            "table_namespace",
            "table_name",
            "metadata_location",
            "previous_metadata_location",
        ]
        assert conn.execute(
            "SELECT metadata_location, previous_metadata_location FROM iceberg_tables"
        ).fetchall() == [(new, source.metadata_location)]
    # PyIceberg reads the V0 catalog too
    py = pyiceberg_sql.SqlCatalog("jdbc", uri=f"sqlite:///{db}")
    assert py.load_table("db.orders").metadata_location == new
    py.close()
    cat.close()
    # schema_version=v1 adds the column, as PyIceberg does; old rows (NULL type) stay tables
    upgraded = ge.load_catalog("jdbc", uri=f"sqlite:///{db}", schema_version="v1")
    assert upgraded.list_tables("db") == [("db", "orders")]
    upgraded.close()


FIXTURE_CATALOGS = sorted(
    p.parent.name for p in (FIXTURES / "duckdb-iceberg/data/persistent").glob("*/pyiceberg_catalog.db")
)


@pytest.mark.parametrize("name", FIXTURE_CATALOGS)
def test_pyiceberg_written_fixture_catalogs(name: str, tmp_path: Path) -> None:
    """The SQLite catalogs PyIceberg wrote beside DuckDB's test tables (V0 schema, relative locations)."""
    assert len(FIXTURE_CATALOGS) == 9
    db = tmp_path / "catalog.db"
    shutil.copy(FIXTURES / "duckdb-iceberg/data/persistent" / name / "pyiceberg_catalog.db", db)
    db.chmod(0o644)
    with closing(sqlite3.connect(db)) as conn, conn:
        catalog_name, namespace, table, location = conn.execute(
            "SELECT catalog_name, table_namespace, table_name, metadata_location FROM iceberg_tables"
        ).fetchone()
    root = str(FIXTURES / "duckdb-iceberg/data/persistent")
    cat = ge.load_catalog(
        catalog_name,
        uri=f"sqlite:///{db}",
        path_map={"data/persistent": root, "file://data/persistent": root},
    )
    assert cat.list_namespaces() == [(namespace,)]
    assert cat.list_tables(namespace) == [(namespace, table)]
    tbl = cat.load_table((namespace, table))
    assert tbl.metadata_location == location
    on_disk = ge.load_table(Path(tbl.io.resolve(location)).parent.parent)
    assert Path(on_disk.metadata_location).name == Path(location).name
    snapshot = tbl.metadata.current_snapshot()
    assert snapshot is not None and snapshot.manifest_list
    assert Path(tbl.io.resolve(snapshot.manifest_list)).is_file()
    cat.close()


def test_postgres_without_server_or_driver_is_a_catalog_error() -> None:
    with pytest.raises(CatalogError, match="postgresql") as info:
        ge.load_catalog("pg", uri="postgresql://user:hunter2@127.0.0.1:1/iceberg")
    assert "hunter2" not in str(info.value)
    with pytest.raises(CatalogError, match=r"needs the pg8000 driver: pip install pg8000"):
        ge.load_catalog("pg", uri="postgresql+pg8000://user@127.0.0.1:1/iceberg")


def test_missing_uri_is_named() -> None:
    with pytest.raises(CatalogError, match="needs uri"):
        SqlCatalog("x")
