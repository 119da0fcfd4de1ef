"""New tables: the first metadata (format version 1, 2 or 3) and its registration in a catalog.

The metadata: a fresh ``table-uuid``; the schema as schema 0 (an Arrow schema gets fresh field ids, an
Iceberg schema keeps its own) with ``last-column-id`` its highest field id; partition spec 0 (field ids
from 1000, ``last-partition-id`` the highest, 999 when unpartitioned); sort order 0 (unsorted), and order 1
the default when one is given; no snapshots; ``last-sequence-number`` 0 and, in v3, ``next-row-id`` 0.
``format-version`` is taken out of the properties (default 2). Types new in v3 (``timestamp_ns``,
``unknown``, ``variant``, geospatial) need v3.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

import pyarrow as pa

from ..errors import (
    CatalogError,
    CommitConflict,
    CommitStateUnknown,
    GpuEngineError,
    InvalidProperty,
    NoSuchNamespace,
    NoSuchTable,
    TableAlreadyExists,
    UnsupportedFeature,
)
from ..iceberg.metadata import SUPPORTED_FORMAT_VERSIONS, TableMetadata
from ..iceberg.partitioning import V1_FIRST_PARTITION_FIELD_ID, PartitionSpec
from ..iceberg.schema import (
    Schema,
    check_format_version,
    check_lineage_names,
    check_new_schema,
    unstored_struct,
)
from ..iceberg.sorting import UNSORTED, SortOrder
from ..io.fileio import scheme_of
from ..io.metrics_config import check_metrics_columns
from .producer import is_file_system_catalog
from .properties_update import check_commit_properties, check_property_values
from .schema_from_arrow import schema_from_arrow
from .spec_parse import check_sort_fields, parse_partition_spec, parse_sort_order
from .table_update import metadata_path, write_metadata

if TYPE_CHECKING:
    from ..catalog.base import Catalog, IdentifierLike
    from ..table import Table

FORMAT_VERSION = "format-version"
DEFAULT_FORMAT_VERSION = 2


def new_table_metadata(
    schema: Schema | pa.Schema,
    *,
    location: str,
    partition_spec: PartitionSpec | Sequence[str] | None = None,
    properties: Mapping[str, str] | None = None,
    sort_order: SortOrder | str | Sequence[str] | None = None,
) -> TableMetadata:
    """The first metadata of a new table (see the module doc)."""
    props = dict(properties or {})
    version = _format_version(props.pop(FORMAT_VERSION, str(DEFAULT_FORMAT_VERSION)))
    iceberg_schema = schema_from_arrow(schema) if isinstance(schema, pa.Schema) else schema
    if not isinstance(iceberg_schema, Schema):
        raise UnsupportedFeature(f"schema must be an Iceberg Schema or a pyarrow Schema, not {type(schema)}")
    iceberg_schema = replace(iceberg_schema, schema_id=0, schema_id_written=True)
    check_format_version(iceberg_schema, version)
    check_new_schema(iceberg_schema, version)
    empty = unstored_struct(iceberg_schema)
    if empty is not None:
        raise UnsupportedFeature(
            f"struct column {empty!r} has no field a data file can store (none, or only unknown ones): "
            "Parquet has no empty group, so the table could not be written"
        )
    check_lineage_names(iceberg_schema, version)
    if partition_spec is None:
        spec = PartitionSpec(0)
    elif isinstance(partition_spec, PartitionSpec):
        spec = partition_spec
    else:
        spec = parse_partition_spec(partition_spec, iceberg_schema)
    if sort_order is None or isinstance(sort_order, SortOrder):
        order = sort_order if sort_order is not None and not sort_order.is_unsorted else UNSORTED
        if not order.is_unsorted:
            order = replace(order, order_id=1, fields=check_sort_fields(order.fields, iceberg_schema))
    else:
        order = parse_sort_order(sort_order, iceberg_schema) if sort_order else UNSORTED
    return TableMetadata(
        format_version=version,
        location=location.rstrip("/"),
        last_updated_ms=int(time.time() * 1000),
        last_column_id=iceberg_schema.highest_field_id,
        schemas=(iceberg_schema,),
        current_schema_id=0,
        partition_specs=(spec,),
        default_spec_id=spec.spec_id,
        last_partition_id=max((f.field_id for f in spec.fields), default=V1_FIRST_PARTITION_FIELD_ID - 1),
        table_uuid=str(uuid.uuid4()),
        properties=props,
        sort_orders=(UNSORTED,) if order.is_unsorted else (UNSORTED, order),
        default_sort_order_id=order.order_id,
        next_row_id=0 if version >= 3 else None,
    )


def _format_version(raw: str) -> int:
    try:
        version = int(str(raw).strip())
    except ValueError:
        version = -1
    if version not in SUPPORTED_FORMAT_VERSIONS:
        raise UnsupportedFeature(f"property format-version={raw!r}: expected 1, 2 or 3")
    return version


def _relative(location: str) -> bool:
    """A plain path or ``file:`` URI that is not absolute (``t``, ``file:t``)."""
    scheme = scheme_of(location)
    if scheme == "file":
        location = location[len("file:") :]
    return scheme in ("", "file") and not location.startswith("/")


def create_table(
    catalog: Catalog,
    identifier: IdentifierLike,
    schema: Schema | pa.Schema,
    *,
    partition_spec: PartitionSpec | Sequence[str] | None = None,
    properties: Mapping[str, str] | None = None,
    location: str | None = None,
    sort_order: SortOrder | str | Sequence[str] | None = None,
) -> Table:
    """Create the table in ``catalog``: write its first metadata file and register it (see the module doc).

    ``location`` defaults to the catalog's :meth:`~gpu_engine.catalog.base.Catalog.default_table_location`
    (for a file-system catalog, the table directory, the only location it accepts).
    """
    from ..catalog.base import table_identifier

    namespace, name = table_identifier(identifier)
    shown = ".".join((*namespace, name))
    if location is not None and (not isinstance(location, str) or not location):
        raise UnsupportedFeature(f"create table {shown}: location {location!r} must be a non-empty string")
    if location is not None and _relative(location):
        raise UnsupportedFeature(  # stored as given, it named another place from every other directory
            f"create table {shown}: location {location!r} is a relative path: give an absolute path or a URI"
        )
    bad = [(k, v) for k, v in (properties or {}).items() if not isinstance(k, str) or not isinstance(v, str)]
    if bad:  # written into the metadata JSON as they are: the table could not be loaded again
        raise InvalidProperty(f"create table {shown}: property {bad[0]!r}: keys and values are strings")
    if catalog.table_exists(identifier):
        raise TableAlreadyExists(f"table {shown} already exists in catalog {catalog.name!r}")
    if namespace and not catalog.namespace_exists(namespace):
        raise NoSuchNamespace(f"namespace {'.'.join(namespace)} does not exist in catalog {catalog.name!r}")
    file_system = is_file_system_catalog(catalog)
    requested = location
    default = catalog.default_table_location(namespace, name)
    location = default if location is None else location
    if file_system and requested is not None and requested.rstrip("/") != (default or "").rstrip("/"):
        raise UnsupportedFeature(
            f"a file-system catalog keeps table {shown} in {default}; it cannot be created at {requested}"
        )
    md = new_table_metadata(
        schema,
        location=location or "catalog:/",
        partition_spec=partition_spec,
        properties=properties,
        sort_order=sort_order,
    )  # fmt: skip  (the placeholder location: a catalog that chooses it, else an error below)
    check_commit_properties(md.properties)
    check_property_values(md, md.properties, other_engines=True)  # malformed values, as set() refuses them
    check_metrics_columns(md.schema, md.properties)
    created = catalog.create_from(identifier, md, requested)
    if created is not None:
        return created
    if location is None:
        raise CatalogError(f"catalog {catalog.name!r} has no warehouse: create_table needs location=")
    if _relative(location):  # the catalog's default (a REST server chooses its own, above)
        raise UnsupportedFeature(
            f"create table {shown}: its default location {location!r} is a relative path (the warehouse "
            f"of catalog {catalog.name!r}, or its namespace's location, is): configure an absolute path or a "
            "URI, or give location="
        )
    path = metadata_path(md, None, file_system_table=file_system)
    write_metadata(catalog.io, path, md)
    try:
        catalog.commit_metadata(identifier, None, path)
    except CommitStateUnknown:
        raise
    except CommitConflict as exc:
        catalog.io.delete(catalog.io.resolve(path), missing_ok=True)
        raise TableAlreadyExists(f"table {shown} was created concurrently in {catalog.name!r}") from exc
    except GpuEngineError:  # the catalog's own error: it did not register the table
        catalog.io.delete(catalog.io.resolve(path), missing_ok=True)
        raise
    except Exception as exc:  # anything else: ask the catalog (Java's checkCommitStatus); an interruption
        registered = _registered(catalog, identifier, path)  # passes through, the file kept
        if registered is None:
            raise CommitStateUnknown(  # the catalog may point at the file, so it stays
                f"create table {shown}: registering {path} in catalog {catalog.name!r} failed with "
                f"{type(exc).__name__}: {exc}; whether the table exists is unknown"
            ) from exc
        if not registered:
            catalog.io.delete(catalog.io.resolve(path), missing_ok=True)
            raise
    return catalog.load_table(identifier)


def _registered(catalog: Catalog, identifier: IdentifierLike, path: str) -> bool | None:
    """Whether the catalog's table ``identifier`` is the metadata file ``path`` (None: cannot tell)."""
    try:
        current = catalog.current_metadata_location(identifier)
    except NoSuchTable:
        return False
    except Exception:
        return None
    return catalog.io.resolve(current) == catalog.io.resolve(path)
