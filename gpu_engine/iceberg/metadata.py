"""Table metadata (spec "Table Metadata", Appendix C) for format versions 1-3: a frozen model, lossless
JSON both ways, gzip detection, snapshot selection (current, by id, by ref, as of a time).

Reading follows the spec for each version, and the reference implementation where the spec leaves a gap
(v1 without the lists, ``-1`` for "no current snapshot"). Nothing malformed is fixed up: bad input raises
:class:`MetadataError` naming the file and the field. Serializing a parsed file gives back the JSON read.
"""

from __future__ import annotations

import gzip
import json
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, TypeVar

from ..errors import MetadataError, SnapshotNotFound
from . import snapshots as sn
from .partitioning import PartitionSpec, field_to_json, spec_from_json, spec_to_json
from .schema import Schema, schema_from_json, schema_to_json
from .snapshots import JsonObject, Snapshot, SnapshotRef
from .sorting import UNSORTED, SortOrder, sort_order_to_json, table_sort_orders_from_json

T = TypeVar("T")
SUPPORTED_FORMAT_VERSIONS = (1, 2, 3)
GZIP_MAGIC = b"\x1f\x8b"
V1_LAST_PARTITION_ID = 999  # the reference implementation's value before the first partition field

_COMMON = ("format-version", "location", "last-updated-ms", "last-column-id")
_V2 = (
    "table-uuid", "last-sequence-number", "schemas", "current-schema-id", "partition-specs",
    "default-spec-id", "last-partition-id", "sort-orders", "default-sort-order-id",
)  # fmt: skip
REQUIRED_FIELDS = {1: _COMMON, 2: (*_COMMON, *_V2), 3: (*_COMMON, *_V2, "next-row-id")}
# Lists of flat records, by JSON key (the attribute is the key with "_" for "-").
_RECORD_LISTS: dict[str, Any] = {
    "statistics": sn.StatisticsFile,
    "partition-statistics": sn.PartitionStatisticsFile,
    "snapshot-log": sn.SnapshotLogEntry,
    "metadata-log": sn.MetadataLogEntry,
    "encryption-keys": sn.EncryptionKey,
}
# Every key this model reads, in the order the reference implementation writes them.
KNOWN_FIELDS = (
    "format-version", "table-uuid", "location", "last-sequence-number", "last-updated-ms", "last-column-id",
    "schema", "current-schema-id", "schemas", "partition-spec", "default-spec-id", "partition-specs",
    "last-partition-id", "default-sort-order-id", "sort-orders", "properties", "current-snapshot-id", "refs",
    "snapshots", "statistics", "partition-statistics", "snapshot-log", "metadata-log", "next-row-id",
    "encryption-keys",
)  # fmt: skip
_KNOWN = frozenset(KNOWN_FIELDS)
# The keys written for metadata built in code (``json_keys=None``), as the reference implementation does.
_WRITTEN_BY_DEFAULT: dict[int, frozenset[str]] = {
    1: _KNOWN - {"last-sequence-number", "next-row-id", "encryption-keys"},
    2: _KNOWN - {"schema", "partition-spec", "next-row-id", "encryption-keys"},
    3: _KNOWN - {"schema", "partition-spec", "encryption-keys"},
}


@dataclass(frozen=True)
class TableMetadata:
    """Every field of the spec's table metadata for v1-v3; see the accessors for the derived views.

    ``snapshot_refs`` is the ``refs`` map as written; :attr:`refs` adds the implied ``main`` branch.
    ``json_keys`` lists the keys read (``None`` for metadata built in code). ``extra`` keeps, as raw JSON,
    unknown keys, known keys written as ``null`` or ``-1``, and v1's deprecated ``schema`` and
    ``partition-spec`` where they disagree with the current schema and default spec.
    """

    format_version: int
    location: str
    last_updated_ms: int
    last_column_id: int
    schemas: tuple[Schema, ...]
    current_schema_id: int
    partition_specs: tuple[PartitionSpec, ...]
    default_spec_id: int
    last_partition_id: int
    table_uuid: str | None = None
    last_sequence_number: int = 0
    properties: Mapping[str, str] = field(default_factory=dict)
    current_snapshot_id: int | None = None
    snapshots: tuple[Snapshot, ...] = ()
    snapshot_log: tuple[sn.SnapshotLogEntry, ...] = ()
    metadata_log: tuple[sn.MetadataLogEntry, ...] = ()
    sort_orders: tuple[SortOrder, ...] = (UNSORTED,)
    default_sort_order_id: int = 0
    snapshot_refs: Mapping[str, SnapshotRef] = field(default_factory=dict)
    statistics: tuple[sn.StatisticsFile, ...] = ()
    partition_statistics: tuple[sn.PartitionStatisticsFile, ...] = ()
    next_row_id: int | None = None
    encryption_keys: tuple[sn.EncryptionKey, ...] = ()
    json_keys: tuple[str, ...] | None = field(default=None, compare=False, repr=False)
    extra: sn.Extra = field(default=(), compare=False, repr=False)

    # -- schemas, specs, sort orders --

    @cached_property
    def schemas_by_id(self) -> dict[int, Schema]:
        return {s.schema_id: s for s in self.schemas}

    @property
    def schema(self) -> Schema:
        """The current schema."""
        return self.schema_by_id(self.current_schema_id)

    def schema_by_id(self, schema_id: int) -> Schema:
        return _lookup(self.schemas_by_id, schema_id, "schema", self.location)

    @cached_property
    def specs(self) -> dict[int, PartitionSpec]:
        return {s.spec_id: s for s in self.partition_specs}

    @property
    def spec(self) -> PartitionSpec:
        """The default partition spec."""
        return self.spec_by_id(self.default_spec_id)

    def spec_by_id(self, spec_id: int) -> PartitionSpec:
        return _lookup(self.specs, spec_id, "partition spec", self.location)

    def schema_for_spec(self, spec: PartitionSpec) -> Schema:
        """The schema to type ``spec``'s partition tuples with: the current schema, or, when a column the
        spec uses was dropped since, the newest schema that still has every one (files written under an old
        spec keep their partition values after its source column is dropped)."""
        sources = {i for f in spec.fields for i in f.source_ids}
        for schema in (self.schema, *reversed(self.schemas)):
            if sources <= schema.by_id.keys():
                return schema
        return self.schema

    @cached_property
    def sort_orders_by_id(self) -> dict[int, SortOrder]:
        return {o.order_id: o for o in self.sort_orders}

    @property
    def sort_order(self) -> SortOrder:
        """The default sort order."""
        return _lookup(self.sort_orders_by_id, self.default_sort_order_id, "sort order", self.location)

    # -- snapshots --

    @cached_property
    def snapshots_by_id(self) -> dict[int, Snapshot]:
        return {s.snapshot_id: s for s in self.snapshots}

    @cached_property
    def refs(self) -> dict[str, SnapshotRef]:
        """Branches and tags; a ``main`` branch at the current snapshot is implied when not written."""
        refs = dict(self.snapshot_refs)
        if sn.MAIN_BRANCH not in refs and self.current_snapshot_id is not None:
            refs[sn.MAIN_BRANCH] = SnapshotRef(self.current_snapshot_id, "branch")
        return refs

    def current_snapshot(self) -> Snapshot | None:
        """The current snapshot; ``None`` for a table without one."""
        return None if self.current_snapshot_id is None else self.snapshot_by_id(self.current_snapshot_id)

    def ancestor_ids(self, snapshot_id: int) -> tuple[int, ...]:
        """``snapshot_id`` and its ancestors still in the table, newest first (a missing parent ends it)."""
        out: list[int] = []
        current: int | None = snapshot_id
        while current is not None and current in self.snapshots_by_id and current not in out:
            out.append(current)
            current = self.snapshots_by_id[current].parent_snapshot_id
        return tuple(out)

    def snapshot_by_id(self, snapshot_id: int) -> Snapshot:
        if snapshot_id not in self.snapshots_by_id:
            known = sorted(self.snapshots_by_id)
            raise SnapshotNotFound(f"table {self.location}: no snapshot with id {snapshot_id} (ids: {known})")
        return self.snapshots_by_id[snapshot_id]

    def snapshot_for_ref(self, name: str) -> Snapshot:
        """The snapshot a branch (its head) or tag points at."""
        if name not in self.refs:
            known = sorted(self.refs)
            raise SnapshotNotFound(f"table {self.location}: no branch or tag named {name!r} (refs: {known})")
        return self.snapshot_by_id(self.refs[name].snapshot_id)

    def snapshot_as_of(self, timestamp_ms: int) -> Snapshot:
        """The table's current snapshot at ``timestamp_ms``: the last ``snapshot-log`` entry at or before it.

        As the spec's time-travel notes and Iceberg Java (``SnapshotUtil.snapshotIdAsOfTime``) do: the log
        records each change of the current snapshot with the metadata's timestamp, so rollbacks count.
        """
        chosen = next((e for e in reversed(self.snapshot_log) if e.timestamp_ms <= timestamp_ms), None)
        if chosen is None:
            first = f"; the log starts at {self.snapshot_log[0].timestamp_ms}" if self.snapshot_log else ""
            raise SnapshotNotFound(
                f"table {self.location}: no snapshot at or before timestamp {timestamp_ms} in its "
                f"snapshot-log ({len(self.snapshot_log)} entries{first})"
            )
        if chosen.snapshot_id not in self.snapshots_by_id:
            raise SnapshotNotFound(
                f"table {self.location}: snapshot {chosen.snapshot_id}, current at {timestamp_ms} by its "
                "snapshot-log, is no longer in the metadata (expired)"
            )
        return self.snapshots_by_id[chosen.snapshot_id]


def _lookup(index: Mapping[int, T], key: int, what: str, location: str) -> T:
    if key not in index:
        raise MetadataError(f"table {location}: no {what} with id {key} ({what} ids: {sorted(index)})")
    return index[key]


# -- parsing -------------------------------------------------------------------------------------------


def parse_metadata(data: bytes, *, source: str) -> TableMetadata:
    """Parse a metadata file's bytes: gzip-compressed (detected by its magic bytes) or plain JSON."""
    if data[:2] == GZIP_MAGIC:
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as exc:
            raise MetadataError(f"{source}: corrupt gzip-compressed metadata: {exc}") from exc
    if not data.strip():
        raise MetadataError(f"{source}: empty metadata file")
    try:
        obj = json.loads(data.decode("utf-8"), parse_constant=_reject_constant)
    except UnicodeDecodeError as exc:
        raise MetadataError(f"{source}: metadata is not UTF-8 text: {exc}") from exc
    except ValueError as exc:  # JSONDecodeError says where: "Expecting value: line 1 column 1 (char 0)"
        raise MetadataError(f"{source}: invalid JSON: {exc}") from exc
    return metadata_from_json(obj, source=source)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value")


def metadata_from_json(obj: dict[str, Any], *, source: str) -> TableMetadata:
    """The model of a decoded metadata JSON object; ``source`` (the file) is named in every error."""
    try:
        return _from_json(obj)
    except MetadataError as exc:
        raise MetadataError(f"{source}: {exc}") from exc


def _from_json(obj: Any) -> TableMetadata:
    obj = sn.as_object(obj, "table metadata")
    fv = sn.req_int(obj, "format-version", "")
    if fv not in SUPPORTED_FORMAT_VERSIONS:
        raise MetadataError(f"unsupported format-version {fv} (this reader supports 1, 2 and 3)")
    for key in REQUIRED_FIELDS[fv]:
        if obj.get(key) is None:
            state = "is null" if key in obj else "is missing"
            raise MetadataError(f"required field {key!r} {state} (required by format version {fv})")
    schemas, current_schema_id, legacy_schema = _schemas(obj)
    specs, default_spec_id, legacy_spec = _specs(obj)
    orders, default_order_id = table_sort_orders_from_json(obj)
    snaps = tuple(
        sn.snapshot_from_json(o, format_version=fv, where=w) for w, o in sn.objects(obj, "snapshots", "")
    )
    ids = [s.snapshot_id for s in snaps]
    sn.check_unique(ids, "snapshots", "snapshot-id")
    last_sequence_number = sn.opt_int(obj, "last-sequence-number", "") or 0
    for s in snaps if fv >= 2 else ():  # Java's TableMetadata: a commit would reuse a sequence number
        if s.sequence_number > last_sequence_number:
            raise MetadataError(
                f"snapshot {s.snapshot_id} has sequence-number {s.sequence_number}, greater than "
                f"last-sequence-number {last_sequence_number}"
            )
    current, refs, extra = sn.table_refs_from_json(obj, ids)
    last_partition_id = sn.opt_int(obj, "last-partition-id", "")
    if last_partition_id is None:  # v1: the highest partition field id, as the reference implementation
        last_partition_id = max((f.field_id for s in specs for f in s.fields), default=V1_LAST_PARTITION_ID)
    props = sn.opt_object(obj, "properties", "")
    records: dict[str, Any] = {
        key.replace("-", "_"): tuple(sn.record_from_json(cls, o, w) for w, o in sn.objects(obj, key, ""))
        for key, cls in _RECORD_LISTS.items()
    }
    for key in ("snapshot-log", "metadata-log"):
        _check_time_order(key, records[key.replace("-", "_")])
    return TableMetadata(
        format_version=fv,
        location=sn.req_str(obj, "location", ""),
        last_updated_ms=sn.req_int(obj, "last-updated-ms", ""),
        last_column_id=sn.req_int(obj, "last-column-id", ""),
        schemas=schemas,
        current_schema_id=current_schema_id,
        partition_specs=specs,
        default_spec_id=default_spec_id,
        last_partition_id=last_partition_id,
        table_uuid=sn.opt_str(obj, "table-uuid", ""),
        last_sequence_number=last_sequence_number,
        properties={} if props is None else sn.str_map(props, "properties"),
        current_snapshot_id=current,
        snapshots=snaps,
        sort_orders=orders,
        default_sort_order_id=default_order_id,
        snapshot_refs=refs,
        next_row_id=sn.opt_int(obj, "next-row-id", ""),
        json_keys=tuple(obj),
        extra=sn.extra_of(obj, _KNOWN) + extra + legacy_schema + legacy_spec,
        **records,
    )


_CLOCK_SKEW_MS = 60_000  # Java's TableMetadata allows a minute


def _check_time_order(key: str, entries: tuple[Any, ...]) -> None:
    """Refuse a log whose entries go back in time by more than a minute, as Java's ``TableMetadata``
    does ("Expected sorted snapshot log entries"): time travel takes the last entry at or before a time."""
    for i in range(1, len(entries)):
        before, at = entries[i - 1].timestamp_ms, entries[i].timestamp_ms
        if at - before < -_CLOCK_SKEW_MS:
            raise MetadataError(
                f"{key} is out of time order: entry {i} ({at}) is more than a minute before entry {i - 1} "
                f"({before})"
            )


def _wrap(where: str, fn: Any, *args: Any) -> Any:
    """Call an existing parser (schemas, partition specs), naming ``where`` if it rejects its input."""
    try:
        return fn(*args)
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise MetadataError(f"field {where!r} is malformed: {exc}") from exc


def _schemas(obj: JsonObject) -> tuple[tuple[Schema, ...], int, sn.Extra]:
    schemas = tuple(_wrap(w, schema_from_json, o) for w, o in sn.objects(obj, "schemas", ""))
    legacy_json = sn.opt_object(obj, "schema", "")
    legacy = None if legacy_json is None else _wrap("schema", schema_from_json, legacy_json)
    if legacy is None and not schemas:
        raise MetadataError("needs 'schemas' (or v1 'schema'), has neither")
    current_id = sn.opt_int(obj, "current-schema-id", "")
    if current_id is None:
        if legacy is None:
            raise MetadataError("required field 'current-schema-id' is missing")
        current_id = legacy.schema_id  # v1: the "schema" field is the current schema
    schemas = schemas or (legacy,)
    sn.check_unique([s.schema_id for s in schemas], "schemas", "schema-id")
    by_id = {s.schema_id: s for s in schemas}
    if current_id not in by_id:
        raise MetadataError(f"current-schema-id {current_id} is not among the schemas (ids {sorted(by_id)})")
    if legacy_json is None or schema_to_json(by_id[current_id]) == legacy_json:
        return schemas, current_id, ()
    return schemas, current_id, (("schema", legacy_json),)  # disagrees with "schemas": kept as written


def _specs(obj: JsonObject) -> tuple[tuple[PartitionSpec, ...], int, sn.Extra]:
    specs = tuple(
        _wrap(w, spec_from_json, _spec_object(o, w)) for w, o in sn.objects(obj, "partition-specs", "")
    )
    legacy_json = sn.opt_list(obj, "partition-spec", "")
    if legacy_json is None and not specs:
        raise MetadataError("needs 'partition-specs' (or v1 'partition-spec'), has neither")
    default_id = sn.opt_int(obj, "default-spec-id", "")
    if specs and default_id is None:
        raise MetadataError("required field 'default-spec-id' is missing (partition-specs is set)")
    if legacy_json is not None and not specs:  # v1: the only spec, id 0 (Java ignores default-spec-id)
        legacy = _spec_object({"spec-id": 0, "fields": legacy_json}, "partition-spec")
        specs, default_id = (_wrap("partition-spec", spec_from_json, legacy),), 0
    default_id = specs[0].spec_id if default_id is None else default_id
    sn.check_unique([s.spec_id for s in specs], "partition-specs", "spec-id")
    by_id = {s.spec_id: s for s in specs}
    if default_id not in by_id:
        raise MetadataError(
            f"default-spec-id {default_id} is not among the partition-specs ({sorted(by_id)})"
        )
    if legacy_json is None or [field_to_json(f) for f in by_id[default_id].fields] == legacy_json:
        return specs, default_id, ()
    return specs, default_id, (("partition-spec", legacy_json),)  # disagrees with the default spec


def _spec_object(o: JsonObject, where: str) -> JsonObject:
    """Check the JSON types of a spec (the partitioning parser converts values without checking)."""
    sn.opt_int(o, "spec-id", where)
    sn.req_list(o, "fields", where)
    for w, f in sn.objects(o, "fields", where):
        sn.opt_int(f, "source-id", w)
        sn.int_list(sn.opt_list(f, "source-ids", w) or [], sn.path(w, "source-ids"))
        sn.opt_int(f, "field-id", w)
        sn.req_str(f, "name", w)
        sn.req_str(f, "transform", w)
    return o


# -- serialization -------------------------------------------------------------------------------------


def metadata_to_json(md: TableMetadata) -> dict[str, Any]:
    """The JSON object of ``md``; for parsed metadata, equal to the JSON it was parsed from."""
    fv = md.format_version
    null_or_sentinel = {k for k, _ in md.extra}
    present = _WRITTEN_BY_DEFAULT[fv] if md.json_keys is None else frozenset(md.json_keys) - null_or_sentinel
    out: JsonObject = {"format-version": fv}
    sn.put(out, "table-uuid", md.table_uuid)
    out["location"] = md.location
    if fv >= 2 or "last-sequence-number" in present:
        out["last-sequence-number"] = md.last_sequence_number
    out["last-updated-ms"] = md.last_updated_ms
    out["last-column-id"] = md.last_column_id
    if "schema" in present:
        out["schema"] = schema_to_json(md.schema)
    out["current-schema-id"] = md.current_schema_id
    out["schemas"] = [schema_to_json(s) for s in md.schemas]
    if "partition-spec" in present:
        out["partition-spec"] = [field_to_json(f) for f in md.spec.fields]
    out["default-spec-id"] = md.default_spec_id
    out["partition-specs"] = [spec_to_json(s) for s in md.partition_specs]
    out["last-partition-id"] = md.last_partition_id
    out["default-sort-order-id"] = md.default_sort_order_id
    out["sort-orders"] = [sort_order_to_json(o) for o in md.sort_orders]
    if fv == 1:  # v1 lists are optional: left out when not read and still implied by the legacy fields
        for keys in _v1_implied(md):
            for key in keys:
                if key not in present:
                    del out[key]
    _put_listed(out, present, "properties", dict(md.properties))
    if md.current_snapshot_id is not None:
        out["current-snapshot-id"] = md.current_snapshot_id
    elif md.json_keys is None:
        out["current-snapshot-id"] = sn.NO_SNAPSHOT if fv < 3 else None
    _put_listed(out, present, "refs", {n: sn.record_to_json(r) for n, r in md.snapshot_refs.items()})
    _put_listed(out, present, "snapshots", [sn.snapshot_to_json(s) for s in md.snapshots])
    sn.put(out, "next-row-id", md.next_row_id)
    for key in _RECORD_LISTS:
        _put_listed(out, present, key, [sn.record_to_json(r) for r in getattr(md, key.replace("-", "_"))])
    sn.with_extra(out, md.extra)
    if md.json_keys is None:
        return out
    order = {k: i for i, k in enumerate(md.json_keys)}  # keys in the order read, new ones after
    return dict(sorted(out.items(), key=lambda kv: order.get(kv[0], len(order))))


def _v1_implied(md: TableMetadata) -> list[tuple[str, ...]]:
    """The groups of v1's optional keys whose content a reader derives from the legacy ``schema`` and
    ``partition-spec`` alone (one schema, one spec of id 0, no sort order). Others must be written: a
    schema, spec or sort order added by a commit lives there only (Java always writes them)."""
    out: list[tuple[str, ...]] = []
    if len(md.schemas) == 1 and md.schemas[0].schema_id == md.current_schema_id:
        out.append(("current-schema-id", "schemas"))
    spec_ids = [f.field_id for s in md.partition_specs for f in s.fields]
    if (
        len(md.partition_specs) == 1
        and md.default_spec_id == md.partition_specs[0].spec_id == 0
        and md.last_partition_id == max(spec_ids, default=V1_LAST_PARTITION_ID)
    ):
        out.append(("default-spec-id", "partition-specs", "last-partition-id"))
    if md.default_sort_order_id == UNSORTED.order_id and all(o.is_unsorted for o in md.sort_orders):
        out.append(("default-sort-order-id", "sort-orders"))
    return out


def _put_listed(
    out: JsonObject, present: frozenset[str], key: str, value: dict[str, Any] | list[Any]
) -> None:
    """Write an optional collection when it was written before, or now has content."""
    if key in present or value:
        out[key] = value
