"""Table properties, Iceberg's ``UpdateProperties``: keys set and removed together in one metadata commit,
and the format version upgrade that Iceberg drives through the ``format-version`` key.

.. code-block:: python

    with tbl.update_properties() as p:      # commits when the block ends without an error
        p.set("write.target-file-size-bytes", str(256 << 20))
        p.remove("commit.manifest-merge.enabled")
    tbl.update_properties().set("format-version", "3").commit()   # upgrade v1 -> v2 -> v3

Keys and values are strings. The keys Iceberg reserves for metadata fields (``uuid``, ``snapshot-count``,
``current-snapshot-id``, ...) are refused; ``format-version`` upgrades the table instead of being stored (a
downgrade is refused). The properties gpu-engine reads (write options, metrics modes, commit retries,
manifest merging) are checked when set, so a wrong value fails here, naming the key, rather than in the
next write.

A lost race re-applies the sets and removals on the refreshed properties: concurrent changes to other keys
stay, as in Iceberg Java (which has no conflict check for properties). REST catalogs get ``set-properties``
/ ``remove-properties`` and ``upgrade-format-version``.

An upgrade follows the spec: all v1 metadata and manifests stay valid in v2 (v1 snapshots read with
sequence number 0) and v2 delete files in v3; a v2 table upgraded to v3 starts ``next-row-id`` at 0, its
old snapshots have no row ids (``_row_id`` reads as null), and the first snapshot after the upgrade assigns
``first_row_id`` to every data manifest it carries. A v1 table without a ``table-uuid`` gets one.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ..errors import GpuEngineError, InvalidProperty, UnsupportedFeature, ValidationError
from ..iceberg.metadata import TableMetadata
from ..iceberg.name_mapping import NAME_MAPPING_PROPERTY, parse_name_mapping
from ..iceberg.schema import check_lineage_names
from ..io.locations import location_provider
from ..io.metrics_config import metrics_config
from ..io.position_delete_write import delete_properties
from ..io.write_options import WriteOptions
from ..properties import bool_property, int_property
from .delete_cow import delete_mode
from .expire import GC_ENABLED, MAX_REF_AGE_MS, MAX_SNAPSHOT_AGE_MS, MIN_SNAPSHOTS_TO_KEEP
from .isolation import delete_isolation_level
from .manifest_merge import MergePolicy
from .metadata_commit import MetadataUpdate, RestForm, commit_metadata_change
from .retry import RetryPolicy
from .summary import summary_partition_limit
from .table_update import delete_after_commit, previous_versions_max
from .update import Faults

if TYPE_CHECKING:
    from ..table import Table

FORMAT_VERSION = "format-version"
MAX_FORMAT_VERSION = 3
RESERVED = frozenset(
    {
        "uuid",
        "snapshot-count",
        "current-snapshot-id",
        "current-snapshot-summary",
        "current-snapshot-timestamp-ms",
        "current-schema",
        "default-partition-spec",
        "default-sort-order",
    }
)


class PropertiesUpdate(MetadataUpdate):
    """Properties of ``table`` to set and remove, committed by :meth:`commit` (see the module doc)."""

    def __init__(self, table: Table) -> None:
        self._table = table
        self._base = table.metadata
        self._set: dict[str, str] = {}
        self._remove: set[str] = set()
        self._format_version: int | None = None

    def set(self, key: str, value: str) -> PropertiesUpdate:
        """Set ``key`` to ``value`` (``format-version``: upgrade the table to that version)."""
        if not isinstance(key, str) or not key or not isinstance(value, str):
            raise InvalidProperty(f"set property {key!r}={value!r}: keys and values are non-empty strings")
        if key in self._remove:
            raise InvalidProperty(f"set property {key!r}: it is removed in this update")
        if key == FORMAT_VERSION:
            self._format_version = self._upgrade_to(value)
            return self
        _check_not_reserved(key, "set")
        self._set[key] = value
        return self

    def remove(self, key: str) -> PropertiesUpdate:
        """Remove ``key`` (a key the table does not have is no error)."""
        if key in self._set:
            raise InvalidProperty(f"remove property {key!r}: it is set in this update")
        if key == FORMAT_VERSION:
            raise InvalidProperty(f"remove property {key!r}: a table always has a format version")
        _check_not_reserved(key, "remove")
        self._remove.add(key)
        return self

    def apply(self, base: TableMetadata | None = None) -> TableMetadata:
        """``base`` (default: the metadata the update started from) with the change (not committed)."""
        md = self._base if base is None else base
        # the keys set here (a bad value set before is not ours), at the version this update upgrades to
        version = max(md.format_version, self._format_version or 0)
        check_property_values(replace(md, format_version=version), self._set)
        props = {k: v for k, v in md.properties.items() if k not in self._remove}
        props.update(self._set)
        changed = replace(md, properties=props)
        if self._format_version is not None and self._format_version > md.format_version:
            changed = upgraded(changed, self._format_version)
        return changed

    def commit(self, *, faults: Faults | None = None) -> TableMetadata:
        """Commit the change; the table's metadata after it."""

        def change(base: TableMetadata) -> TableMetadata | None:
            new = self.apply(base)
            return None if new == base else new

        def rest(base: TableMetadata, new: TableMetadata) -> RestForm:
            updates: list[dict[str, Any]] = []
            if new.format_version != base.format_version:
                updates.append({"action": "upgrade-format-version", "format-version": new.format_version})
            # every key asked for, as Java and PyIceberg send them: a difference from the base would
            # leave out what the base already agreed with, and another writer's value would stay
            if self._set:
                updates.append({"action": "set-properties", "updates": dict(self._set)})
            if self._remove:
                updates.append({"action": "remove-properties", "removals": sorted(self._remove)})
            return [], updates

        commit_metadata_change(self._table, change, action="update_properties", faults=faults, rest=rest)
        return self._table.metadata

    def _upgrade_to(self, value: str) -> int:
        where = f"set property {FORMAT_VERSION}={value!r}"
        try:
            version = int(value.strip())
        except ValueError:
            raise InvalidProperty(f"{where}: expected an integer") from None
        current = self._base.format_version
        if version < current:
            raise ValidationError(f"{where}: the table is format version {current}; versions cannot go down")
        if version > MAX_FORMAT_VERSION:
            raise UnsupportedFeature(f"{where}: gpu-engine writes format versions up to {MAX_FORMAT_VERSION}")
        return version


def upgraded(md: TableMetadata, version: int) -> TableMetadata:
    """``md`` as format ``version`` (see the module doc): written with that version's fields."""
    check_lineage_names(md.schema, version)
    return replace(
        md,
        format_version=version,
        table_uuid=md.table_uuid or str(uuid.uuid4()),
        next_row_id=(md.next_row_id or 0) if version >= 3 else None,
        json_keys=None,  # written with the new version's fields
    )


def _check_not_reserved(key: str, action: str) -> None:
    if key in RESERVED:
        raise InvalidProperty(f"{action} property {key!r}: reserved by Iceberg for a metadata field")


def check_commit_properties(props: Mapping[str, str]) -> None:
    """The properties every commit reads (retries, manifest merging, the metadata log, summaries): a bad
    one would leave a table no engine commits to, so ``create_table`` refuses it; writer settings are
    checked when gpu-engine writes (a table may be created here for an engine that writes ORC)."""
    RetryPolicy.from_properties(props)
    MergePolicy.from_properties(props)
    previous_versions_max(props)
    summary_partition_limit(props)


def check_property_values(
    md: TableMetadata, props: Mapping[str, str], *, other_engines: bool = False
) -> None:
    """Read the properties gpu-engine uses from ``props`` (those being set on ``md``): InvalidProperty (or
    UnsupportedFeature) naming the first bad one. ``other_engines``: settings gpu-engine only cannot
    write with (ORC files, a Java location provider: UnsupportedFeature) pass, as a table may be created
    for another engine; malformed values do not."""
    checks: list[Callable[[], object]] = [
        lambda: WriteOptions.from_properties(props),
        lambda: RetryPolicy.from_properties(props),
        lambda: MergePolicy.from_properties(props),
        lambda: metrics_config(md.schema, props),
        lambda: delete_mode(props, md.format_version, md.location),
        lambda: delete_isolation_level(props),
        lambda: previous_versions_max(props),
        lambda: delete_after_commit(props),
        lambda: summary_partition_limit(props),
        lambda: delete_properties(props),
        lambda: _check_expiry_and_mapping(props),
        # locations read several keys together: with the table's others (a data path makes a deprecated
        # key moot)
        lambda: location_provider(md.location, {**md.properties, **props}).new_data_location(
            "check.parquet", None
        ),
    ]
    for check in checks:
        try:
            check()
        except UnsupportedFeature:
            if not other_engines:
                raise


def _check_expiry_and_mapping(props: Mapping[str, str]) -> None:
    """The snapshot expiry settings (positive integers, ``gc.enabled`` true or false) and the name mapping
    (its JSON): each made every later expire_snapshots, or every scan, fail."""
    for key in (MAX_SNAPSHOT_AGE_MS, MIN_SNAPSHOTS_TO_KEEP, MAX_REF_AGE_MS):
        int_property(props, key, 1)
    bool_property(props, GC_ENABLED, True)  # Java reads "0" or "no" as false: refused, not guessed
    if NAME_MAPPING_PROPERTY in props:
        try:
            parse_name_mapping(props[NAME_MAPPING_PROPERTY])
        except GpuEngineError as exc:
            raise InvalidProperty(f"table property {NAME_MAPPING_PROPERTY}: {exc}") from None
