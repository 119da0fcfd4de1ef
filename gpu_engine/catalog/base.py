"""The catalog interface: where a table's current metadata file is, and the atomic swap of that pointer.

A commit writes a new metadata file, then asks the catalog to move the table's pointer from the
metadata file it was based on (``expected_metadata_location``) to the new one. The swap is a
check-and-put: if the pointer moved in the meantime the commit lost a race (:class:`CommitConflict`,
retry from fresh metadata); if the catalog cannot tell whether the swap landed
(:class:`CommitStateUnknown`), the caller must not delete the new files.
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from ..errors import CatalogError, InvalidProperty, NoSuchNamespace, NoSuchTable, UnsupportedFeature
from ..io.fileio import FileIO, load_file_io, scheme_of
from ..io.paths import PathMap

if TYPE_CHECKING:
    import pyarrow as pa

    from ..iceberg.metadata import TableMetadata
    from ..iceberg.partitioning import PartitionSpec
    from ..iceberg.schema import Schema
    from ..iceberg.sorting import SortOrder
    from ..table import Table

Identifier = tuple[str, ...]
IdentifierLike = str | Sequence[str]


def to_identifier(identifier: IdentifierLike) -> Identifier:
    """``"db.events"`` or ``("db", "events")`` as a tuple (strings split on ``.``, like PyIceberg); a
    CatalogError naming anything else (None, a number, bytes, a mapping). Every catalog method taking a
    table or namespace identifier goes through here."""
    if not isinstance(identifier, (str, list, tuple)):
        raise CatalogError(
            f"identifier={identifier!r}: expected a string such as 'db.events' or a tuple of strings, "
            f"not {type(identifier).__name__}"
        )
    parts = tuple(identifier.split(".")) if isinstance(identifier, str) else tuple(identifier)
    if not all(isinstance(p, str) for p in parts):
        raise CatalogError(f"identifier parts must be strings: {identifier!r}")
    return parts


def table_identifier(identifier: IdentifierLike) -> tuple[Identifier, str]:
    """(namespace, table name) of a table identifier."""
    parts = to_identifier(identifier)
    if not parts or not parts[-1]:
        raise CatalogError(f"empty table identifier: {identifier!r}")
    return parts[:-1], parts[-1]


def check_metadata_location(metadata_location: object) -> str:
    """A ``register_table`` metadata location: a string (CatalogError naming the argument otherwise)."""
    if not isinstance(metadata_location, str):
        raise CatalogError(
            f"metadata_location={metadata_location!r}: expected the path or URI of a metadata JSON file "
            f"(a string), not {type(metadata_location).__name__}"
        )
    return metadata_location


def namespace_to_string(namespace: IdentifierLike) -> str:
    """A namespace as stored by PyIceberg's SqlCatalog and Iceberg's JdbcCatalog: levels joined by ``.``."""
    parts = to_identifier(namespace)
    if not parts:
        raise CatalogError("empty namespace identifier")
    if any(p.strip() == "" for p in parts):
        raise CatalogError(f"namespace {namespace!r} has an empty level")
    return ".".join(p.strip() for p in parts)


def absolute_warehouse(properties: dict[str, str]) -> None:
    """Make a relative local ``warehouse`` (``wh``, ``~/wh``, ``file:wh``) absolute, from the current
    directory (``~`` from the home directory), in
    ``properties``: tables are placed by it, and a relative location stored in their metadata names
    another place from every other directory."""
    warehouse = properties.get("warehouse")
    if not warehouse:
        return
    scheme = scheme_of(warehouse)
    if scheme == "" and not warehouse.startswith("/"):
        properties["warehouse"] = os.path.abspath(os.path.expanduser(warehouse))
    elif scheme == "file" and not warehouse[len("file:") :].startswith("/"):
        properties["warehouse"] = "file://" + os.path.abspath(os.path.expanduser(warehouse[len("file:") :]))


def namespace_properties(namespace: IdentifierLike, properties: Mapping[str, str] | None) -> dict[str, str]:
    """``properties`` of a namespace to create, checked: keys and values are strings (a ``None`` value
    broke the SQL catalog's insert as if the namespace had been created concurrently)."""
    out = dict(properties or {})
    for key, value in out.items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise InvalidProperty(
                f"namespace {namespace_to_string(namespace)}: property {key!r}={value!r}: namespace "
                "property names and values are strings"
            )
    return out


class Catalog(ABC):
    """A named catalog; subclasses store the metadata pointer of each table.

    ``io`` reads and writes metadata files; set ``catalog.io = catalog.io.with_path_map(...)`` (or pass
    ``path_map=`` to :func:`gpu_engine.load_catalog`) when the recorded paths need remapping.
    """

    def __init__(self, name: str, **properties: str) -> None:
        self.name = name
        self.properties: dict[str, str] = dict(properties)
        self.io: FileIO = load_file_io(self.properties)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"

    def with_path_map(self, path_map: PathMap | Mapping[str, str]) -> Catalog:
        """This catalog, its IO remapping recorded paths through ``path_map`` (merged with any map it had)."""
        pm = path_map if isinstance(path_map, PathMap) else PathMap.of(path_map)
        self.io = self.io.with_path_map(self.io.path_map.merged(pm))
        return self

    # -- tables ----------------------------------------------------------------------------------------

    @abstractmethod
    def load_table(self, identifier: IdentifierLike) -> Table:
        """The table's current metadata; :class:`NoSuchTable` if the catalog has no such table."""

    @abstractmethod
    def list_tables(self, namespace: IdentifierLike) -> list[Identifier]:
        """Identifiers of the tables directly in ``namespace``."""

    @abstractmethod
    def drop_table(self, identifier: IdentifierLike) -> None:
        """Remove the table from the catalog (its files are left alone)."""

    @abstractmethod
    def register_table(self, identifier: IdentifierLike, metadata_location: str) -> Table:
        """Add an existing table by its metadata file; :class:`TableAlreadyExists` if the name is taken."""

    def create_table(
        self,
        identifier: IdentifierLike,
        schema: Schema | pa.Schema,
        partition_spec: PartitionSpec | Sequence[str] | None = None,
        properties: Mapping[str, str] | None = None,
        location: str | None = None,
        sort_order: SortOrder | str | Sequence[str] | None = None,
    ) -> Table:
        """Create a table: its first metadata file (format version ``properties["format-version"]``: 1, 2 or
        3, default 2), registered through :meth:`commit_metadata` (or created by the catalog:
        :meth:`create_from`); the table loaded.

        ``schema``: an Iceberg schema, or a pyarrow schema (fresh field ids). ``partition_spec``: strings
        such as ``["day(ts)", "bucket(16, id)", "region"]`` or a spec. ``sort_order``: the table's sort
        order (``"id DESC NULLS LAST, bucket(16, name)"``; default unsorted). ``location``: default
        ``<warehouse>/<namespace>/<name>``. Raises :class:`TableAlreadyExists`, :class:`NoSuchNamespace`,
        :class:`UnsupportedTransform` (a transform that cannot apply to its column), UnsupportedFeature (a
        bad format-version).
        """
        from ..commit.create import create_table

        return create_table(
            self, identifier, schema, partition_spec=partition_spec, properties=properties, location=location,
            sort_order=sort_order,
        )  # fmt: skip

    @abstractmethod
    def commit_metadata(
        self, identifier: IdentifierLike, expected_metadata_location: str | None, new_metadata_location: str
    ) -> str:
        """Atomically point the table at ``new_metadata_location`` if it still points at ``expected``.

        ``expected_metadata_location=None`` creates the table (it must not exist yet). Returns the
        metadata location now current (``new_metadata_location`` for metastore catalogs).

        Raises:
            CommitConflict: the current pointer is not ``expected_metadata_location`` (retryable).
            CommitStateUnknown: the outcome cannot be known; never delete the new metadata file.
            NoSuchTable: ``expected_metadata_location`` is given but the table does not exist.
        """

    def current_metadata_location(self, identifier: IdentifierLike) -> str:
        """Where the table's pointer is now (default: through :meth:`load_table`)."""
        return self.load_table(identifier).metadata_location

    def create_from(
        self, identifier: IdentifierLike, md: TableMetadata, location: str | None
    ) -> Table | None:
        """For :meth:`create_table`: the table created from its first metadata ``md`` by a catalog that
        writes it itself (REST: the server; ``location``: the one asked for, None: the catalog's choice);
        None: the caller writes ``md`` and registers it through :meth:`commit_metadata`."""
        return None

    def require_commits(self) -> None:
        """Raise :class:`UnsupportedFeature` when this catalog cannot commit table changes (checked before
        a write produces any file); catalogs that own their metadata pointer always can."""
        return None

    def require_commits_to(self, table: Table) -> None:
        """:meth:`require_commits`, and that this catalog holds ``table``'s pointer."""
        self.require_commits()

    def reload(self, identifier: IdentifierLike) -> tuple[str, Table | None]:
        """For :meth:`Table.refresh`: where the table's pointer is now, and the table when finding that
        loaded it (a REST load answers with its metadata, config and fresh storage credentials)."""
        return self.current_metadata_location(identifier), None

    def table_exists(self, identifier: IdentifierLike) -> bool:
        try:
            self.load_table(identifier)
        except (NoSuchTable, NoSuchNamespace):
            return False
        return True

    def default_table_location(self, namespace: Identifier, name: str) -> str | None:
        """Where :meth:`create_table` puts a table given no ``location``: ``<warehouse>/<namespace
        levels>/<name>``; None without a warehouse."""
        from .filesystem import join

        warehouse = self.properties.get("warehouse")
        return None if not warehouse else join(warehouse, *namespace, name)

    # -- namespaces ------------------------------------------------------------------------------------

    @abstractmethod
    def create_namespace(
        self, namespace: IdentifierLike, properties: Mapping[str, str] | None = None
    ) -> None:
        """Create ``namespace``; :class:`NamespaceAlreadyExists` if it exists."""

    @abstractmethod
    def list_namespaces(self, namespace: IdentifierLike = ()) -> list[Identifier]:
        """The namespaces directly under ``namespace`` (top level for ``()``)."""

    def namespace_exists(self, namespace: IdentifierLike) -> bool:
        ns = to_identifier(namespace)
        return ns in self.list_namespaces(ns[:-1])

    def load_namespace_properties(self, namespace: IdentifierLike) -> dict[str, str]:
        raise UnsupportedFeature(f"catalog {self.name!r} ({type(self).__name__}) has no namespace properties")

    def drop_namespace(self, namespace: IdentifierLike) -> None:
        raise UnsupportedFeature(f"catalog {self.name!r} ({type(self).__name__}) cannot drop namespaces")

    def close(self) -> None:  # noqa: B027 - optional hook, deliberately not abstract
        """Release connections (no-op by default)."""
