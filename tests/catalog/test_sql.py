"""SQL catalog on SQLite and PostgreSQL: interop both ways with PyIceberg's SqlCatalog, the commit pointer
swap (conflicts, races, lost connections), namespaces, views and the catalog tables' columns."""

from __future__ import annotations

import importlib
import json
import multiprocessing
import re
import sqlite3
import threading
import uuid
from datetime import datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
import sqlalchemy as sa

import gpu_engine as ge
from gpu_engine.catalog.sql import SqlCatalog
from gpu_engine.errors import (
    CatalogError,
    CommitConflict,
    CommitStateUnknown,
    InvalidProperty,
    MetadataError,
    NamespaceAlreadyExists,
    NamespaceNotEmpty,
    NoSuchNamespace,
    NoSuchTable,
    TableAlreadyExists,
)
from gpu_engine.iceberg.metadata import metadata_to_json
from gpu_engine.iceberg.schema import schema_to_json

from .postgres_server import PostgresServer

pyiceberg_sql = importlib.import_module("pyiceberg.catalog.sql")

ARROW_SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("name", pa.string()),
        pa.field("ts", pa.timestamp("us")),
        pa.field("price", pa.decimal128(10, 2)),
        pa.field("tags", pa.list_(pa.string())),
        pa.field("attrs", pa.map_(pa.string(), pa.int64())),
        pa.field("point", pa.struct([pa.field("x", pa.float64()), pa.field("y", pa.float64())])),
    ]
)
ROWS = pa.Table.from_pylist(
    [
        {
            "id": 1,
            "name": "a",
            "ts": datetime(2024, 1, 1),
            "price": Decimal("1.50"),
            "tags": ["x"],
            "attrs": [("k", 1)],
            "point": {"x": 1.0, "y": 2.0},
        },
        {"id": 2, "name": None, "ts": None, "price": None, "tags": [], "attrs": [], "point": None},
    ],
    schema=ARROW_SCHEMA,
)


@pytest.fixture(params=["sqlite", "postgresql"])
def uri(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh, empty catalog database: a SQLite file, or a new database on a throwaway PostgreSQL server."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'catalog.db'}"
    server: PostgresServer = request.getfixturevalue("postgres")
    return server.new_database()


@pytest.fixture
def warehouse(tmp_path: Path) -> str:
    return f"file://{tmp_path / 'warehouse'}"


@pytest.fixture
def py_catalog(uri: str, warehouse: str) -> Any:
    cat = pyiceberg_sql.SqlCatalog("default", uri=uri, warehouse=warehouse)
    yield cat
    cat.close()


@pytest.fixture
def catalog(py_catalog: Any, uri: str, warehouse: str) -> Any:
    cat = ge.load_catalog("default", uri=uri, warehouse=warehouse)
    yield cat
    cat.close()


def pyiceberg_table(py_catalog: Any, name: str = "db.events") -> Any:
    if not py_catalog.namespace_exists(name.split(".")[0]):
        py_catalog.create_namespace(name.split(".")[0])
    tbl = py_catalog.create_table(name, schema=ARROW_SCHEMA)
    tbl.append(ROWS)
    return py_catalog.load_table(name)


def next_metadata_file(tbl: ge.Table) -> str:
    """A new metadata file beside the current one: the same metadata, last-updated-ms bumped."""
    obj = metadata_to_json(tbl.metadata)
    obj["last-updated-ms"] = tbl.metadata.last_updated_ms + 1
    current = tbl.io.resolve(tbl.metadata_location)
    path = (
        Path(current.removeprefix("file://").removeprefix("file:")).parent
        / f"00099-{uuid.uuid4()}.metadata.json"
    )
    path.write_text(json.dumps(obj))
    return f"file://{path}"


def test_pyiceberg_table_loads_here(py_catalog: Any, catalog: SqlCatalog) -> None:
    py_tbl = pyiceberg_table(py_catalog)
    tbl = catalog.load_table("db.events")
    assert tbl.metadata_location == py_tbl.metadata_location
    assert tbl.identifier == ("db", "events") and tbl.catalog is catalog
    assert schema_to_json(tbl.schema())["fields"] == json.loads(py_tbl.schema().model_dump_json())["fields"]
    assert tbl.metadata.current_snapshot_id == py_tbl.metadata.current_snapshot_id
    assert tbl.metadata.table_uuid == str(py_tbl.metadata.table_uuid)
    assert tbl.location == py_tbl.location()
    assert catalog.list_tables("db") == [("db", "events")] and catalog.table_exists("db.events")
    assert not catalog.table_exists("db.nope")


def test_commit_here_is_seen_by_pyiceberg(py_catalog: Any, catalog: SqlCatalog, uri: str) -> None:
    py_tbl = pyiceberg_table(py_catalog)
    tbl = catalog.load_table(("db", "events"))
    new = next_metadata_file(tbl)
    assert catalog.commit_metadata("db.events", tbl.metadata_location, new) == new
    seen = py_catalog.load_table("db.events")
    assert seen.metadata_location == new
    assert seen.metadata.last_updated_ms == py_tbl.metadata.last_updated_ms + 1
    with catalog.engine.connect() as conn:
        row = conn.execute(
            sa.text("SELECT metadata_location, previous_metadata_location, iceberg_type FROM iceberg_tables")
        ).one()
    assert tuple(row) == (new, py_tbl.metadata_location, "TABLE")
    assert tbl.refresh().metadata_location == new
    # PyIceberg commits on top of ours, and we see that too
    seen.append(ROWS)
    assert tbl.refresh().metadata_location == py_catalog.load_table("db.events").metadata_location
    assert len(tbl.metadata.snapshots) == 2


def test_stale_expected_location_is_a_conflict(py_catalog: Any, catalog: SqlCatalog) -> None:
    pyiceberg_table(py_catalog)
    tbl = catalog.load_table("db.events")
    base = tbl.metadata_location
    first, second = next_metadata_file(tbl), next_metadata_file(tbl)
    catalog.commit_metadata("db.events", base, first)
    with pytest.raises(CommitConflict, match="current metadata is"):
        catalog.commit_metadata("db.events", base, second)
    assert catalog.load_table("db.events").metadata_location == first
    with pytest.raises(NoSuchTable, match=r"db\.missing"):
        catalog.commit_metadata("db.missing", base, second)


def test_concurrent_commits_exactly_one_wins(py_catalog: Any, catalog: SqlCatalog, uri: str) -> None:
    pyiceberg_table(py_catalog)
    base = catalog.load_table("db.events")
    news = [next_metadata_file(base) for _ in range(6)]
    outcomes: list[str] = []
    barrier = threading.Barrier(len(news))

    def commit(new: str) -> None:
        own = SqlCatalog("default", uri=uri)  # one engine (and connection pool) per writer
        barrier.wait()
        try:
            outcomes.append(own.commit_metadata("db.events", base.metadata_location, new))
        except CommitConflict:
            outcomes.append("conflict")
        finally:
            own.close()

    threads = [threading.Thread(target=commit, args=(n,)) for n in news]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    winners = [o for o in outcomes if o != "conflict"]
    assert len(outcomes) == len(news) and len(winners) == 1
    assert py_catalog.load_table("db.events").metadata_location == winners[0]


def test_create_through_commit_and_register(py_catalog: Any, catalog: SqlCatalog) -> None:
    py_tbl = pyiceberg_table(py_catalog)
    location = py_tbl.metadata_location
    assert catalog.commit_metadata("db.copy", None, location) == location
    assert py_catalog.load_table("db.copy").metadata_location == location
    with pytest.raises(CommitConflict, match="created concurrently"):
        catalog.commit_metadata("db.copy", None, location)
    registered = catalog.register_table("db.registered", location)
    assert registered.metadata_location == location
    assert py_catalog.load_table("db.registered").metadata_location == location
    with pytest.raises(TableAlreadyExists):
        catalog.register_table("db.registered", location)
    with pytest.raises(NoSuchNamespace):
        catalog.register_table("nope.t", location)
    with pytest.raises(MetadataError):  # read before registering (Java's registerTable): nothing left
        catalog.register_table("db.typo", location.replace(".metadata.json", "-typo.metadata.json"))
    assert not catalog.table_exists("db.typo") and not py_catalog.table_exists("db.typo")
    assert catalog.register_table("db.typo", location).metadata_location == location
    catalog.drop_table("db.registered")
    assert not py_catalog.table_exists("db.registered")
    with pytest.raises(NoSuchTable):
        catalog.drop_table("db.registered")


def test_lost_connection_while_committing_is_unknown(
    py_catalog: Any, catalog: SqlCatalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    pyiceberg_table(py_catalog)
    tbl = catalog.load_table("db.events")
    new = next_metadata_file(tbl)

    def dropped(self: sa.Connection) -> None:
        raise sa.exc.OperationalError(
            "COMMIT", {}, Exception("server closed the connection"), connection_invalidated=True
        )

    monkeypatch.setattr(sa.Connection, "commit", dropped)
    with pytest.raises(CommitStateUnknown, match="whether it landed is unknown"):
        catalog.commit_metadata("db.events", tbl.metadata_location, new)
    assert Path(new.removeprefix("file://")).exists()


def test_lost_connection_before_the_swap_is_a_plain_failure(
    py_catalog: Any, catalog: SqlCatalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    pyiceberg_table(py_catalog)
    tbl = catalog.load_table("db.events")
    real_execute = sa.Connection.execute

    def dropped(self: sa.Connection, stmt: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(stmt, sa.Update):
            raise sa.exc.OperationalError(
                "UPDATE", {}, Exception("connection reset"), connection_invalidated=True
            )
        return real_execute(self, stmt, *args, **kwargs)

    monkeypatch.setattr(sa.Connection, "execute", dropped)
    with pytest.raises(CatalogError, match="failed before it was applied"):
        catalog.commit_metadata("db.events", tbl.metadata_location, next_metadata_file(tbl))


def test_namespaces_both_ways(py_catalog: Any, catalog: SqlCatalog) -> None:
    catalog.create_namespace("ours", {"owner": "me"})
    catalog.create_namespace(("ours", "nested"))
    py_catalog.create_namespace("theirs")
    py_catalog.create_namespace(("theirs", "deep", "er"))
    assert sorted(py_catalog.list_namespaces()) == [("ours",), ("theirs",)]
    assert py_catalog.list_namespaces("ours") == [("ours", "nested")]
    assert py_catalog.load_namespace_properties("ours") == {"owner": "me"}
    assert py_catalog.load_namespace_properties("ours.nested") == {"exists": "true"}
    assert catalog.list_namespaces() == [("ours",), ("theirs",)]
    assert catalog.list_namespaces("theirs") == [("theirs", "deep")]
    assert catalog.list_namespaces(("theirs", "deep")) == [("theirs", "deep", "er")]
    assert catalog.namespace_exists("theirs.deep") and not catalog.namespace_exists("the")
    assert catalog.load_namespace_properties("theirs") == {"exists": "true"}
    with pytest.raises(NamespaceAlreadyExists):
        catalog.create_namespace("theirs")
    with pytest.raises(NoSuchNamespace):
        catalog.list_tables("nowhere")
    pyiceberg_table(py_catalog, "ours.events")
    with pytest.raises(NamespaceNotEmpty):
        catalog.drop_namespace("ours")
    catalog.drop_namespace(("ours", "nested"))
    assert py_catalog.list_namespaces("ours") == []


def test_like_wildcards_in_namespace_names_are_literal(catalog: SqlCatalog) -> None:
    catalog.create_namespace("a_b")
    assert not catalog.namespace_exists("axb")
    catalog.create_namespace("a%")
    assert catalog.list_namespaces() == [("a%",), ("a_b",)]


def test_views_are_not_tables(catalog: SqlCatalog) -> None:
    catalog.create_namespace("db")
    with catalog.engine.begin() as conn:
        conn.execute(
            sa.text(
                "INSERT INTO iceberg_tables VALUES "
                "('default', 'db', 'v', 'file:///x/v.metadata.json', NULL, 'VIEW')"
            )
        )
    assert catalog.list_tables("db") == []
    assert not catalog.table_exists("db.v")
    with pytest.raises(NoSuchTable):
        catalog.load_table("db.v")


def test_new_catalog_has_pyiceberg_columns(catalog: SqlCatalog) -> None:
    inspector = sa.inspect(catalog.engine)

    def shape(table: str) -> tuple[list[tuple[str, str, bool]], list[str]]:
        columns = [(c["name"], str(c["type"]), bool(c["nullable"])) for c in inspector.get_columns(table)]
        return columns, list(inspector.get_pk_constraint(table)["constrained_columns"])

    assert shape("iceberg_tables") == (
        [
            ("catalog_name", "VARCHAR(255)", False),
            ("table_namespace", "VARCHAR(255)", False),
            ("table_name", "VARCHAR(255)", False),
            ("metadata_location", "VARCHAR(1000)", True),
            ("previous_metadata_location", "VARCHAR(1000)", True),
            ("iceberg_type", "VARCHAR(5)", True),
        ],
        ["catalog_name", "table_namespace", "table_name"],
    )
    assert shape("iceberg_namespace_properties") == (
        [
            ("catalog_name", "VARCHAR(255)", False),
            ("namespace", "VARCHAR(255)", False),
            ("property_key", "VARCHAR(255)", False),
            ("property_value", "VARCHAR(1000)", False),
        ],
        ["catalog_name", "namespace", "property_key"],
    )


def test_a_namespace_location_places_its_tables_as_pyiceberg_does(
    py_catalog: Any, catalog: SqlCatalog, warehouse: str
) -> None:
    where = f"{warehouse}/elsewhere/sales_bucket"
    catalog.create_namespace("sales", {"location": where + "/"})
    catalog.create_namespace("plain")
    ours = catalog.create_table("sales.a", ARROW_SCHEMA)
    theirs = py_catalog.create_table("sales.b", schema=ARROW_SCHEMA)
    assert (ours.location, theirs.location()) == (f"{where}/a", f"{where}/b")
    assert catalog.create_table("plain.c", ARROW_SCHEMA).location == f"{warehouse}/plain/c"
    assert (
        catalog.create_table("sales.d", ARROW_SCHEMA, location=f"{warehouse}/x/d").location
        == f"{warehouse}/x/d"
    )


BAD_IDENTIFIERS = [None, 5, b"db.t", {"db": "t"}, 1.5]
IDENTIFIER_METHODS = [
    "load_table",
    "list_tables",
    "list_namespaces",
    "create_namespace",
    "drop_namespace",
    "drop_table",
    "table_exists",
    "namespace_exists",
    "load_namespace_properties",
]


@pytest.mark.parametrize("method", IDENTIFIER_METHODS)
@pytest.mark.parametrize("identifier", BAD_IDENTIFIERS, ids=repr)
def test_an_identifier_of_the_wrong_type_is_named(tmp_path: Path, method: str, identifier: object) -> None:
    """Every method taking an identifier refuses one that is neither a string nor a sequence of strings
    with a CatalogError naming it (None and 5 raised "'NoneType' object is not iterable"; a dict was read
    as its keys)."""
    cat = ge.load_catalog("c", uri=f"sqlite:///{tmp_path / 'c.db'}", warehouse=str(tmp_path / "wh"))
    cat.create_namespace("db")
    with pytest.raises(CatalogError, match=rf"identifier={re.escape(repr(identifier))}: expected a string"):
        getattr(cat, method)(identifier)


@pytest.mark.parametrize("location", [5, None, b"/tmp/m.metadata.json"], ids=repr)
def test_register_table_needs_a_metadata_location_string(tmp_path: Path, location: object) -> None:
    """A CatalogError naming metadata_location, before anything is read or written (a regex TypeError)."""
    cat = ge.load_catalog("c", uri=f"sqlite:///{tmp_path / 'c.db'}", warehouse=str(tmp_path / "wh"))
    cat.create_namespace("db")
    with pytest.raises(CatalogError, match=rf"metadata_location={re.escape(repr(location))}: expected"):
        cat.register_table("db.x", location)  # type: ignore[arg-type]
    assert cat.list_tables("db") == []


def test_a_database_that_cannot_be_read_is_a_catalog_error(tmp_path: Path) -> None:
    """A uri naming a file that is no database (or a database another job holds locked) fails loading
    the catalog with a CatalogError naming the catalog and its uri, not a SQLAlchemy error."""
    path = tmp_path / "not-a-db.txt"
    path.write_text("not a database\n")
    with pytest.raises(CatalogError, match=rf"SQL catalog 'w' \(sqlite:///{re.escape(str(path))}\): file is"):
        ge.load_catalog("w", uri=f"sqlite:///{path}", warehouse=f"file://{tmp_path}")


def test_a_commit_sqlite_finds_locked_is_not_applied_and_is_a_conflict(tmp_path: Path) -> None:
    """A reader holding SQLite's lock past the busy timeout makes the pointer swap's COMMIT fail: nothing
    was committed, so it is a (retryable) conflict, and the failed transaction is not left on a pooled
    connection (the catalog's next read saw its uncommitted update: a commit that never landed)."""
    db = tmp_path / "catalog.db"
    cat = ge.load_catalog("default", uri=f"sqlite:///{db}", warehouse=f"file://{tmp_path / 'wh'}")
    cat.create_namespace("db")
    tbl = cat.create_table("db.t", pa.schema([pa.field("id", pa.int64())]))
    new = next_metadata_file(tbl)
    reader = sqlite3.connect(db, isolation_level=None)
    reader.execute("BEGIN")
    reader.execute("SELECT * FROM iceberg_tables").fetchall()  # a shared lock: no writer may commit
    with pytest.raises(CommitConflict, match="was not applied: database is locked"):
        cat.commit_metadata("db.t", tbl.metadata_location, new)
    assert cat.current_metadata_location("db.t") == tbl.metadata_location
    reader.execute("COMMIT")
    reader.close()
    assert cat.current_metadata_location("db.t") == tbl.metadata_location
    assert cat.commit_metadata("db.t", tbl.metadata_location, new) == new
    cat.close()


def test_namespaces_differing_only_in_case_are_different(catalog: SqlCatalog) -> None:
    """LIKE is case-insensitive on SQLite: ``Sales`` existed because ``sales.eu`` did."""
    catalog.create_namespace(("sales", "eu"))
    assert not catalog.namespace_exists("Sales")
    assert not catalog.namespace_exists(("Sales", "eu"))
    with pytest.raises(NoSuchNamespace):
        catalog.list_tables("Sales")
    catalog.create_namespace("Sales")
    assert catalog.list_namespaces() == [("Sales",), ("sales",)]
    assert catalog.list_namespaces("Sales") == []
    catalog.drop_namespace("Sales")
    assert catalog.namespace_exists("sales") and not catalog.namespace_exists("Sales")


@pytest.mark.parametrize("properties", [{"owner": None}, {"owner": 1}, {1: "x"}])
def test_namespace_properties_that_are_not_strings_are_named(
    catalog: SqlCatalog, properties: dict[Any, Any]
) -> None:
    with pytest.raises(InvalidProperty, match="namespace n1: property"):
        catalog.create_namespace("n1", properties)
    assert not catalog.namespace_exists("n1")


def test_an_in_memory_catalog_keeps_its_tables_after_a_refused_write(tmp_path: Path) -> None:
    """A refused write's connection was closed to drop its transaction: the one connection of an in-memory
    catalog, and with it every namespace and table."""
    cat = ge.load_catalog("mem", uri="sqlite:///:memory:", warehouse=str(tmp_path / "wh"))
    cat.create_namespace("db")
    tbl = cat.create_table("db.t", pa.schema([pa.field("id", pa.int64())]))
    with pytest.raises(TableAlreadyExists):
        cat.register_table("db.t", tbl.metadata_location)
    with pytest.raises(NamespaceAlreadyExists):
        cat.create_namespace("db")
    assert cat.list_namespaces() == [("db",)] and cat.table_exists("db.t")
    assert cat.current_metadata_location("db.t") == tbl.metadata_location


def _append_rows(tbl: ge.Table, worker: int, rows: int) -> None:
    for i in range(rows):
        tbl.refresh()
        tbl.append(pa.table({"w": pa.array([worker], pa.int32()), "i": pa.array([i], pa.int32())}))


def test_forked_workers_do_not_share_the_parents_connections(catalog: Any) -> None:
    """multiprocessing's default start on Linux forks: a child used the parent's pooled connection, its
    socket shared with its siblings (PostgreSQL: a worker read another's reply, or waited forever)."""
    catalog.create_namespace("db")
    schema = pa.schema([("w", pa.int32()), ("i", pa.int32())])
    tbl = catalog.create_table("db.f", schema, properties={"commit.retry.num-retries": "30"})
    tbl = catalog.load_table("db.f")  # the parent's pool now holds an idle connection
    fork = multiprocessing.get_context("fork")
    workers = [fork.Process(target=_append_rows, args=(tbl, w, 3)) for w in range(3)]
    for p in workers:
        p.start()
    for p in workers:
        p.join(timeout=90)
    hung = [p.pid for p in workers if p.is_alive()]
    for p in workers:
        if p.is_alive():
            p.kill()
    assert not hung and [p.exitcode for p in workers] == [0, 0, 0]
    rows = catalog.load_table("db.f").scan().to_arrow()
    assert sorted(zip(rows["w"].to_pylist(), rows["i"].to_pylist(), strict=True)) == [
        (w, i) for w in range(3) for i in range(3)
    ]
