"""SQL catalog on the tables shared by PyIceberg's SqlCatalog and Iceberg Java's JdbcCatalog.

``iceberg_tables``: catalog_name VARCHAR(255), table_namespace VARCHAR(255), table_name VARCHAR(255)
(primary key, in that order, all NOT NULL), metadata_location VARCHAR(1000) NULL,
previous_metadata_location VARCHAR(1000) NULL, and in the "V1" schema iceberg_type VARCHAR(5) NULL
(``'TABLE'`` or ``'VIEW'``; NULL rows are tables written before views existed).
``iceberg_namespace_properties``: catalog_name, namespace, property_key VARCHAR(255) (primary key),
property_value VARCHAR(1000). A namespace is stored as its levels joined by ``.``; a namespace exists if
it, or a namespace below it, has a property row or a table; an empty one is created with ``exists=true``.

Catalogs without ``iceberg_type`` (PyIceberg < 0.10 / JdbcCatalog V0) are read and written without it;
``schema_version=v1`` adds the column, as PyIceberg does. New catalogs are created with it. Rows of type
``VIEW`` are never treated as tables.

Commit is the JdbcCatalog check-and-put: ``UPDATE iceberg_tables SET metadata_location=:new,
previous_metadata_location=:old WHERE catalog_name=… AND table_namespace=… AND table_name=… AND
metadata_location=:old``; no row updated means the pointer moved (:class:`CommitConflict`). A failure
while committing the transaction leaves the outcome unknown (:class:`CommitStateUnknown`), but for
SQLite's busy COMMIT (another connection held its lock past the busy timeout: nothing was written, a
:class:`CommitConflict`, retried); a failed transaction is rolled back on its database connection before
that connection goes back to the pool.
"""

from __future__ import annotations

import contextlib
import os
import re
import threading
from collections.abc import Iterator, Mapping
from typing import Any

import sqlalchemy as sa
from sqlalchemy import exc as sa_exc

from ..errors import (
    CatalogError,
    CommitConflict,
    CommitStateUnknown,
    NamespaceAlreadyExists,
    NamespaceNotEmpty,
    NoSuchNamespace,
    NoSuchTable,
    TableAlreadyExists,
)
from ..table import Table, read_table
from .base import (
    Catalog,
    Identifier,
    IdentifierLike,
    absolute_warehouse,
    check_metadata_location,
    namespace_properties,
    namespace_to_string,
    table_identifier,
    to_identifier,
)
from .filesystem import join

TABLE_RECORD_TYPE = "TABLE"
_sql_metadata = sa.MetaData()
ICEBERG_TABLES = sa.Table(
    "iceberg_tables",
    _sql_metadata,
    sa.Column("catalog_name", sa.String(255), primary_key=True, nullable=False),
    sa.Column("table_namespace", sa.String(255), primary_key=True, nullable=False),
    sa.Column("table_name", sa.String(255), primary_key=True, nullable=False),
    sa.Column("metadata_location", sa.String(1000), nullable=True),
    sa.Column("previous_metadata_location", sa.String(1000), nullable=True),
    sa.Column("iceberg_type", sa.String(5), nullable=True),
)
NAMESPACE_PROPERTIES = sa.Table(
    "iceberg_namespace_properties",
    _sql_metadata,
    sa.Column("catalog_name", sa.String(255), primary_key=True, nullable=False),
    sa.Column("namespace", sa.String(255), primary_key=True, nullable=False),
    sa.Column("property_key", sa.String(255), primary_key=True, nullable=False),
    sa.Column("property_value", sa.String(1000), nullable=False),
)
_T = ICEBERG_TABLES.c
_N = NAMESPACE_PROPERTIES.c
_DRIVER_PACKAGES = {"psycopg": "'psycopg[binary]'", "psycopg2": "psycopg2-binary"}


_SQLITE_BUSY = re.compile(r"database is locked|database table is locked|database is busy")


def _truthy(value: str | None, default: bool) -> bool:
    return default if value is None else value.strip().lower() in ("1", "true", "yes", "on", "y", "t")


def _below(column: sa.ColumnElement[str], namespace: str) -> sa.ColumnElement[bool]:
    """Whether ``column`` names a namespace below ``namespace``: a LIKE on the prefix (escape character
    ``!``, as PyIceberg/Java; an index can serve it) and the prefix compared exactly (SQLite's LIKE
    ignores case: ``Sales`` existed where ``sales.eu`` did)."""
    prefix = namespace + "."
    pattern = namespace.replace("!", "!!").replace("_", "!_").replace("%", "!%") + ".%"
    return sa.and_(column.like(pattern, escape="!"), sa.func.substr(column, 1, len(prefix)) == prefix)


class SqlCatalog(Catalog):
    """PyIceberg/JDBC-compatible SQL catalog: ``uri="sqlite:///path/catalog.db"`` or a PostgreSQL URL."""

    def __init__(self, name: str, **properties: str) -> None:
        super().__init__(name, **properties)
        absolute_warehouse(self.properties)
        uri = self.properties.get("uri")
        if not uri:
            raise CatalogError(
                f"SQL catalog {name!r} needs uri= (sqlite:///path/catalog.db or postgresql://...)"
            )
        self.uri = uri
        if uri.startswith("sqlite:///") and uri != "sqlite:///:memory:":
            directory = os.path.dirname(uri[len("sqlite:///") :])
            if directory:
                os.makedirs(directory, exist_ok=True)
        # SQLite in memory is a database per connection, and SQLAlchemy's default pool gives each thread its
        # own: another thread saw an empty catalog. One connection for all, used by one thread at a time.
        in_memory = self._in_memory = uri in ("sqlite://", "sqlite:///:memory:")
        self._turn: contextlib.AbstractContextManager[Any] = (
            threading.RLock() if in_memory else contextlib.nullcontext()
        )
        shared: dict[str, Any] = {}
        if in_memory:
            shared = {"poolclass": sa.pool.StaticPool, "connect_args": {"check_same_thread": False}}
        try:
            self.engine = sa.create_engine(
                uri, pool_pre_ping=_truthy(self.properties.get("pool_pre_ping"), False), **shared
            )
        except ImportError as e:
            driver = e.name or "the database driver of this URL"
            package = _DRIVER_PACKAGES.get(driver, driver)
            raise CatalogError(
                f"SQL catalog {name!r}: {uri.split(':', 1)[0]} needs the {driver} driver: "
                f"pip install {package}"
            ) from e
        except sa_exc.ArgumentError as e:
            raise CatalogError(f"SQL catalog {name!r}: invalid uri: {e}") from e
        self._pid = os.getpid()
        self._v1 = self._init_tables()

    def _table(self, identifier: IdentifierLike) -> tuple[Identifier, str]:
        namespace, name = table_identifier(identifier)
        if not namespace:
            raise CatalogError(
                f"SQL catalog {self.name!r}: table {identifier!r} has no namespace (name it NAMESPACE.TABLE)"
            )
        return namespace, name

    def _where(self) -> str:
        return self.engine.url.render_as_string(hide_password=True)

    @contextlib.contextmanager
    def _connect(self) -> Iterator[sa.Connection]:
        with self._turn:
            if self._pid != os.getpid() and not self._in_memory:
                # a forked child (multiprocessing's default on Linux): the pooled connections are the
                # parent's, their sockets shared with every sibling; SQLAlchemy's recipe leaves them to the
                # parent and opens the child's own (an in-memory database lives in its one connection: the
                # child's copy is its own)
                self.engine.dispose(close=False)
                self._pid = os.getpid()
            try:
                conn = self.engine.connect()
            except sa_exc.DBAPIError as e:
                raise CatalogError(
                    f"SQL catalog {self.name!r}: cannot connect to {self._where()}: {e.orig}"
                ) from e
            with conn:
                yield conn

    def _init_tables(self) -> bool:
        """Create the catalog tables if absent; True if ``iceberg_tables`` has the ``iceberg_type`` column.
        :class:`CatalogError` where the database cannot be read (locked, not a database)."""
        with self._connect() as conn:
            try:
                return self._init_tables_in(conn)
            except sa_exc.DBAPIError as e:
                raise CatalogError(f"SQL catalog {self.name!r} ({self._where()}): {e.orig}") from e

    def _init_tables_in(self, conn: sa.Connection) -> bool:
        inspector = sa.inspect(conn)
        if not inspector.has_table(ICEBERG_TABLES.name) or not inspector.has_table(NAMESPACE_PROPERTIES.name):
            if not _truthy(self.properties.get("init_catalog_tables"), True):
                raise CatalogError(
                    f"SQL catalog {self.name!r}: {self._where()} has no iceberg_tables and "
                    "init_catalog_tables is false"
                )
            try:
                _sql_metadata.create_all(conn, checkfirst=True)
                conn.commit()
            except sa_exc.DBAPIError:  # another process created them first
                conn.rollback()
                inspector = sa.inspect(conn)
                if not inspector.has_table(ICEBERG_TABLES.name):
                    raise
        columns = {c["name"].lower() for c in sa.inspect(conn).get_columns(ICEBERG_TABLES.name)}
        if "iceberg_type" in columns:
            return True
        if self.properties.get("schema_version", "v0") == "v1":
            conn.execute(sa.text("ALTER TABLE iceberg_tables ADD COLUMN iceberg_type VARCHAR(5)"))
            conn.commit()
            return True
        return False

    def _tables_filter(self, namespace: str, name: str | None = None) -> list[sa.ColumnElement[bool]]:
        conds: list[sa.ColumnElement[bool]] = [_T.catalog_name == self.name, _T.table_namespace == namespace]
        if name is not None:
            conds.append(_T.table_name == name)
        if self._v1:
            conds.append(sa.or_(_T.iceberg_type == TABLE_RECORD_TYPE, _T.iceberg_type.is_(None)))
        return conds

    def _fetch(self, stmt: sa.Executable) -> list[tuple[Any, ...]]:
        with self._connect() as conn:
            try:
                return [tuple(row) for row in conn.execute(stmt)]
            except sa_exc.DBAPIError as e:
                raise CatalogError(f"SQL catalog {self.name!r} ({self._where()}): {e.orig}") from e

    def _write(self, stmt: sa.Executable) -> int:
        """Execute and commit ``stmt``; its row count. IntegrityError passes through to the caller."""
        with self._connect() as conn:
            try:
                count = conn.execute(stmt).rowcount
                conn.commit()
                return int(count)
            except sa_exc.IntegrityError:
                self._abandon(conn, None)
                raise
            except sa_exc.DBAPIError as e:
                self._abandon(conn, e)
                raise CatalogError(f"SQL catalog {self.name!r} ({self._where()}): {e.orig}") from e

    def _abandon(self, conn: sa.Connection, error: sa_exc.DBAPIError | None) -> bool:
        """Roll the failed transaction back on the database connection itself (SQLite keeps a transaction
        whose COMMIT failed as busy open, and SQLAlchemy took it for ended: the next read on that pooled
        connection saw its uncommitted update); a connection that cannot be rolled back is closed, but
        never an in-memory catalog's one connection (closing it drops the catalog). Whether ``error``
        says nothing was committed (SQLite's busy COMMIT: the lock it needed was not taken)."""
        try:
            conn.connection.dbapi_connection.rollback()  # type: ignore[union-attr]
        except Exception:
            if not self._in_memory:
                with contextlib.suppress(Exception):
                    conn.invalidate()
        return (
            self.engine.dialect.name == "sqlite"
            and isinstance(error, sa_exc.OperationalError)
            and _SQLITE_BUSY.search(str(error.orig)) is not None
        )

    # -- tables ----------------------------------------------------------------------------------------

    def current_metadata_location(self, identifier: IdentifierLike) -> str:
        namespace, name = self._table(identifier)
        ns = namespace_to_string(namespace)
        stmt = sa.select(_T.metadata_location).where(*self._tables_filter(ns, name))
        rows = self._fetch(stmt)
        location = rows[0][0] if rows else None
        if not location:
            raise NoSuchTable(f"table {ns}.{name} does not exist in SQL catalog {self.name!r}")
        return str(location)

    def load_table(self, identifier: IdentifierLike) -> Table:
        location = self.current_metadata_location(identifier)
        return read_table(to_identifier(identifier), location, io=self.io, catalog=self)

    def table_exists(self, identifier: IdentifierLike) -> bool:
        namespace, name = self._table(identifier)
        stmt = sa.select(sa.literal(1)).where(*self._tables_filter(namespace_to_string(namespace), name))
        return bool(self._fetch(stmt.limit(1)))

    def list_tables(self, namespace: IdentifierLike) -> list[Identifier]:
        ns = to_identifier(namespace)
        if ns and not self.namespace_exists(ns):
            raise NoSuchNamespace(f"namespace {'.'.join(ns)} does not exist in SQL catalog {self.name!r}")
        stmt = sa.select(_T.table_namespace, _T.table_name).where(
            *self._tables_filter(namespace_to_string(ns))
        )
        return [(*to_identifier(row[0]), row[1]) for row in self._fetch(stmt)]

    def _row(self, namespace: str, name: str, location: str) -> dict[str, Any]:
        row = {
            "catalog_name": self.name,
            "table_namespace": namespace,
            "table_name": name,
            "metadata_location": location,
            "previous_metadata_location": None,
        }
        if self._v1:
            row["iceberg_type"] = TABLE_RECORD_TYPE
        return row

    def register_table(self, identifier: IdentifierLike, metadata_location: str) -> Table:
        metadata_location = check_metadata_location(metadata_location)
        namespace, name = self._table(identifier)
        ns = namespace_to_string(namespace)
        if not self.namespace_exists(namespace):
            raise NoSuchNamespace(f"namespace {ns} does not exist in SQL catalog {self.name!r}")
        # read first (Java's registerTable): a file that cannot be read registers nothing
        table = read_table(to_identifier(identifier), metadata_location, io=self.io, catalog=self)
        try:
            self._write(sa.insert(ICEBERG_TABLES).values(**self._row(ns, name, metadata_location)))
        except sa_exc.IntegrityError as e:
            raise TableAlreadyExists(f"table {ns}.{name} already exists in SQL catalog {self.name!r}") from e
        return table

    def drop_table(self, identifier: IdentifierLike) -> None:
        namespace, name = self._table(identifier)
        ns = namespace_to_string(namespace)
        if self._write(sa.delete(ICEBERG_TABLES).where(*self._tables_filter(ns, name))) < 1:
            raise NoSuchTable(f"table {ns}.{name} does not exist in SQL catalog {self.name!r}")

    def _insert_table(self, what: str, row: dict[str, Any]) -> None:
        """Register a new table: a conflict when it exists; a failure of the transaction's commit leaves
        the outcome unknown (the row may be there)."""
        with self._connect() as conn:
            try:
                conn.execute(sa.insert(ICEBERG_TABLES).values(**row))
            except sa_exc.IntegrityError as e:
                raise CommitConflict(f"cannot create {what}: it was created concurrently") from e
            except sa_exc.DBAPIError as e:
                raise CatalogError(f"cannot create {what}: {e.orig}") from e
            try:
                conn.commit()
            except sa_exc.IntegrityError as e:
                raise CommitConflict(f"cannot create {what}: it was created concurrently") from e
            except sa_exc.DBAPIError as e:
                if self._abandon(conn, e):
                    raise CommitConflict(f"cannot create {what} now: {e.orig}") from e
                raise CommitStateUnknown(
                    f"create {what}: committing its row failed ({e.orig}); whether it exists is unknown"
                ) from e

    def commit_metadata(
        self, identifier: IdentifierLike, expected_metadata_location: str | None, new_metadata_location: str
    ) -> str:
        namespace, name = self._table(identifier)
        ns = namespace_to_string(namespace)
        what = f"table {ns}.{name} in SQL catalog {self.name!r}"
        if expected_metadata_location is None:
            self._insert_table(what, self._row(ns, name, new_metadata_location))
            return new_metadata_location
        conds = [*self._tables_filter(ns, name), _T.metadata_location == expected_metadata_location]
        update = (
            sa.update(ICEBERG_TABLES)
            .where(*conds)
            .values(
                metadata_location=new_metadata_location, previous_metadata_location=expected_metadata_location
            )
        )
        with self._connect() as conn:
            try:
                if not self.engine.dialect.supports_sane_rowcount:
                    locked = conn.execute(sa.select(_T.table_name).where(*conds).with_for_update()).first()
                    updated = 0 if locked is None else max(conn.execute(update).rowcount, 1)
                else:
                    updated = conn.execute(update).rowcount
            except sa_exc.DBAPIError as e:
                # not committed: the transaction is rolled back with the connection
                if isinstance(e, sa_exc.OperationalError) and not e.connection_invalidated:
                    raise CommitConflict(f"commit to {what} could not take its lock: {e.orig}") from e
                raise CatalogError(f"commit to {what} failed before it was applied: {e.orig}") from e
            if updated != 1:
                conn.rollback()
            else:
                try:
                    conn.commit()
                except sa_exc.DBAPIError as e:
                    if self._abandon(conn, e):
                        raise CommitConflict(f"commit to {what} was not applied: {e.orig}") from e
                    raise CommitStateUnknown(
                        f"commit to {what} ({expected_metadata_location} -> {new_metadata_location}) "
                        "was sent,"
                        f" but committing failed ({e.orig}); whether it landed is unknown"
                    ) from e
                return new_metadata_location
        current = self._current_or_none(ns, name)
        if current is None:
            raise NoSuchTable(f"{what} does not exist")
        raise CommitConflict(
            f"{what} moved on: current metadata is {current}, "
            f"the commit expected {expected_metadata_location}"
        )

    def _current_or_none(self, ns: str, name: str) -> str | None:
        rows = self._fetch(sa.select(_T.metadata_location).where(*self._tables_filter(ns, name)))
        return str(rows[0][0]) if rows else None

    # -- namespaces ------------------------------------------------------------------------------------

    def namespace_exists(self, namespace: IdentifierLike) -> bool:
        ns = namespace_to_string(namespace)
        in_tables = sa.select(sa.literal(1)).where(
            _T.catalog_name == self.name, sa.or_(_T.table_namespace == ns, _below(_T.table_namespace, ns))
        )
        in_props = sa.select(sa.literal(1)).where(
            _N.catalog_name == self.name, sa.or_(_N.namespace == ns, _below(_N.namespace, ns))
        )
        return bool(self._fetch(in_tables.limit(1))) or bool(self._fetch(in_props.limit(1)))

    def create_namespace(
        self, namespace: IdentifierLike, properties: Mapping[str, str] | None = None
    ) -> None:
        ns = namespace_to_string(namespace)
        if self.namespace_exists(namespace):
            raise NamespaceAlreadyExists(f"namespace {ns} already exists in SQL catalog {self.name!r}")
        props = namespace_properties(namespace, properties) or {"exists": "true"}
        rows = [
            {"catalog_name": self.name, "namespace": ns, "property_key": k, "property_value": v}
            for k, v in props.items()
        ]
        try:
            self._write(sa.insert(NAMESPACE_PROPERTIES).values(rows))
        except sa_exc.IntegrityError as e:
            raise NamespaceAlreadyExists(f"namespace {ns} was created concurrently in {self.name!r}") from e

    def list_namespaces(self, namespace: IdentifierLike = ()) -> list[Identifier]:
        parent = to_identifier(namespace)
        if parent and not self.namespace_exists(parent):
            raise NoSuchNamespace(f"namespace {'.'.join(parent)} does not exist in SQL catalog {self.name!r}")
        tables = sa.select(_T.table_namespace.label("ns")).where(_T.catalog_name == self.name)
        props = sa.select(_N.namespace.label("ns")).where(_N.catalog_name == self.name)
        if parent:
            ns = namespace_to_string(parent)
            tables = tables.where(_below(_T.table_namespace, ns))
            props = props.where(_below(_N.namespace, ns))
        level = len(parent) + 1
        found = {to_identifier(str(row[0])) for row in self._fetch(sa.union(tables, props))}
        return sorted({ns[:level] for ns in found if len(ns) >= level and ns[: level - 1] == parent})

    def default_table_location(self, namespace: Identifier, name: str) -> str | None:
        """``<namespace location>/<name>`` where the namespace has a ``location`` property (as PyIceberg
        places tables in such a namespace), else under the warehouse."""
        if namespace:
            location = self.load_namespace_properties(namespace).get("location")
            if location:
                return join(location, name)
        return super().default_table_location(namespace, name)

    def load_namespace_properties(self, namespace: IdentifierLike) -> dict[str, str]:
        ns = namespace_to_string(namespace)
        if not self.namespace_exists(namespace):
            raise NoSuchNamespace(f"namespace {ns} does not exist in SQL catalog {self.name!r}")
        stmt = sa.select(_N.property_key, _N.property_value).where(
            _N.catalog_name == self.name, _N.namespace == ns
        )
        return {str(k): str(v) for k, v in self._fetch(stmt)}

    def drop_namespace(self, namespace: IdentifierLike) -> None:
        ns = namespace_to_string(namespace)
        if not self.namespace_exists(namespace):
            raise NoSuchNamespace(f"namespace {ns} does not exist in SQL catalog {self.name!r}")
        if tables := self.list_tables(namespace):
            raise NamespaceNotEmpty(f"namespace {ns} in {self.name!r} still holds {len(tables)} table(s)")
        self._write(sa.delete(NAMESPACE_PROPERTIES).where(_N.catalog_name == self.name, _N.namespace == ns))

    def close(self) -> None:
        self.engine.dispose()
