"""Snapshots and what table metadata records about them (Appendix C): snapshots, refs, snapshot and
metadata logs, statistics and partition-statistics files, encryption keys; JSON both ways.

Every record keeps its unknown JSON keys, and known optional keys written as JSON ``null``, in ``extra``,
so serializing gives back the JSON read. Also home of the typed JSON accessors the metadata parsers
share (``req_int``, ``opt_str``, ...), whose errors name the offending field.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Container, Mapping
from dataclasses import MISSING, dataclass, field, fields, replace
from typing import Any, NoReturn, TypeVar

from ..errors import MetadataError

JsonObject = dict[str, Any]
Extra = tuple[tuple[str, Any], ...]
R = TypeVar("R")

# -- typed JSON access ---------------------------------------------------------------------------------


_KINDS = {type(None): "null", bool: "boolean", int: "integer", float: "number", str: "string", list: "array"}


def json_kind(value: Any) -> str:
    """The JSON type name of a decoded value, for error messages."""
    return "object" if isinstance(value, dict) else _KINDS.get(type(value), type(value).__name__)


def path(where: str, key: str) -> str:
    return f"{where}.{key}" if where else key


def fail_type(where: str, expected: str, value: Any) -> NoReturn:
    raise MetadataError(f"field {where!r} must be {expected}, got {json_kind(value)}")


def as_object(value: Any, where: str) -> JsonObject:
    if not isinstance(value, dict):
        fail_type(where, "a JSON object", value)
    return value


def _required(obj: JsonObject, key: str, where: str) -> Any:
    if key not in obj:
        raise MetadataError(f"missing required field {path(where, key)!r}")
    return obj[key]


def _int(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        fail_type(where, "a JSON integer", value)
    return value


def _str(value: Any, where: str) -> str:
    if not isinstance(value, str):
        fail_type(where, "a JSON string", value)
    return value


def _list(value: Any, where: str) -> list[Any]:
    if not isinstance(value, list):
        fail_type(where, "a JSON array", value)
    return value


def req_int(obj: JsonObject, key: str, where: str) -> int:
    return _int(_required(obj, key, where), path(where, key))


def opt_int(obj: JsonObject, key: str, where: str) -> int | None:
    value = obj.get(key)
    return None if value is None else _int(value, path(where, key))


def req_str(obj: JsonObject, key: str, where: str) -> str:
    return _str(_required(obj, key, where), path(where, key))


def opt_str(obj: JsonObject, key: str, where: str) -> str | None:
    value = obj.get(key)
    return None if value is None else _str(value, path(where, key))


def req_list(obj: JsonObject, key: str, where: str) -> list[Any]:
    return _list(_required(obj, key, where), path(where, key))


def opt_list(obj: JsonObject, key: str, where: str) -> list[Any] | None:
    value = obj.get(key)
    return None if value is None else _list(value, path(where, key))


def opt_object(obj: JsonObject, key: str, where: str) -> JsonObject | None:
    value = obj.get(key)
    return None if value is None else as_object(value, path(where, key))


def int_list(value: list[Any], where: str) -> tuple[int, ...]:
    return tuple(_int(v, f"{where}[{i}]") for i, v in enumerate(value))


def str_list(value: list[Any], where: str) -> tuple[str, ...]:
    return tuple(_str(v, f"{where}[{i}]") for i, v in enumerate(value))


def str_map(value: JsonObject, where: str) -> dict[str, str]:
    """A JSON string-to-string map (properties, summaries): every value must be a JSON string."""
    return {k: _str(v, path(where, k)) for k, v in value.items()}


def objects(obj: JsonObject, key: str, where: str) -> list[tuple[str, JsonObject]]:
    """The objects of an optional JSON array field, each with its path for error messages."""
    items = opt_list(obj, key, where) or []
    return [
        (f"{path(where, key)}[{i}]", as_object(v, f"{path(where, key)}[{i}]")) for i, v in enumerate(items)
    ]


def check_unique(ids: list[int], where: str, key: str) -> None:
    if len(set(ids)) != len(ids):
        raise MetadataError(f"field {where!r} repeats {key} {sorted({i for i in ids if ids.count(i) > 1})}")


def extra_of(obj: JsonObject, known: frozenset[str]) -> Extra:
    """Unknown keys, and known keys written as JSON null, in the order written (kept for round trips)."""
    return tuple((k, v) for k, v in obj.items() if k not in known or v is None)


def with_extra(out: JsonObject, extra: Extra) -> JsonObject:
    for k, v in extra:
        out.setdefault(k, v)
    return out


def put(out: JsonObject, key: str, value: Any) -> None:
    """Write an optional field unless it is unset (``None``)."""
    if value is not None:
        out[key] = value


# -- records: flat JSON objects whose keys are their fields' names -------------------------------------
#
# A record's JSON keys are its compared fields' names with "-" for "_"; a field without a default is
# required; its annotation gives its JSON kind. Fields with compare=False (extra, *_written) are not JSON.


def record_from_json(cls: Callable[..., R], obj: JsonObject, where: str) -> R:
    """Build the record ``cls`` from ``obj``; unknown keys and nulls go to its ``extra``."""
    values: dict[str, Any] = {}
    for key, attr, kind, required in _layout(cls):
        raw = obj.get(key)
        if raw is None and not (required and key in obj):
            if required:
                raise MetadataError(f"missing required field {path(where, key)!r}")
            continue
        values[attr] = _READERS[kind](raw, path(where, key))
    return cls(**values, extra=extra_of(obj, frozenset(k for k, *_ in _layout(cls))))


def record_to_json(record: Any) -> JsonObject:
    out: JsonObject = {}
    for key, attr, kind, _ in _layout(type(record)):
        value = getattr(record, attr)
        if value is not None:
            out[key] = _WRITERS[kind](value)
    return with_extra(out, record.extra)


_LAYOUTS: dict[Any, tuple[tuple[str, str, str, bool], ...]] = {}


def _layout(cls: Any) -> tuple[tuple[str, str, str, bool], ...]:
    """(JSON key, attribute, kind, required) of each JSON field of the record class ``cls``."""
    if cls not in _LAYOUTS:
        _LAYOUTS[cls] = tuple(
            (f.name.replace("_", "-"), f.name, _KIND_OF[str(f.type)], f.default is MISSING)
            for f in fields(cls)
            if f.compare
        )
    return _LAYOUTS[cls]


# -- snapshots -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Snapshot:
    """A snapshot (spec "Snapshots"). v1 snapshots may list ``manifests`` instead of a manifest list and
    may lack ``sequence-number`` (read as 0) and ``summary``; snapshots from before a v3 upgrade lack
    ``first-row-id`` and ``added-rows``."""

    snapshot_id: int
    timestamp_ms: int
    parent_snapshot_id: int | None = None
    sequence_number: int = 0
    manifest_list: str | None = None
    manifests: tuple[str, ...] | None = None
    summary: Mapping[str, str] | None = None  # the JSON summary, "operation" included
    schema_id: int | None = None
    first_row_id: int | None = None
    added_rows: int | None = None
    key_id: str | None = None
    sequence_number_written: bool = field(default=True, compare=False)
    extra: Extra = field(default=(), compare=False)

    @property
    def operation(self) -> str | None:
        return None if self.summary is None else self.summary.get("operation")


def snapshot_from_json(obj: JsonObject, *, format_version: int, where: str = "snapshot") -> Snapshot:
    """A snapshot of a table of ``format_version``: a v2+ snapshot (one with a sequence number) requires
    ``manifest-list`` and ``summary``; a snapshot from before an upgrade keeps its v1 form (no sequence
    number, inline ``manifests``, no summary: Java's SnapshotParser reads both forms in any version)."""
    written_by_v2 = format_version >= 2 and obj.get("sequence-number") not in (None, 0)
    for key in ("manifest-list", "summary") if written_by_v2 else ():
        if key not in obj:
            why = f"required by format version {format_version}"
            raise MetadataError(f"missing required field {path(where, key)!r} ({why})")
    s = record_from_json(Snapshot, obj, where)
    if s.summary is not None and "operation" not in s.summary:
        raise MetadataError(f"missing required field {path(where, 'summary.operation')!r}")
    if (s.manifest_list is None) == (s.manifests is None):
        raise MetadataError(f"{where}: needs exactly one of 'manifest-list' and (v1) 'manifests'")
    if s.first_row_id is not None and s.added_rows is None:
        raise MetadataError(f"missing required field {path(where, 'added-rows')!r} (first-row-id is set)")
    return replace(s, sequence_number_written=obj.get("sequence-number") is not None)


def snapshot_to_json(s: Snapshot) -> JsonObject:
    out = record_to_json(s)
    if not s.sequence_number_written:
        del out["sequence-number"]
    return out


# -- refs ----------------------------------------------------------------------------------------------

MAIN_BRANCH = "main"


@dataclass(frozen=True)
class SnapshotRef:
    """A branch or tag (spec "Snapshot References") with its retention settings."""

    snapshot_id: int
    type: str  # "branch" or "tag"
    min_snapshots_to_keep: int | None = None
    max_snapshot_age_ms: int | None = None
    max_ref_age_ms: int | None = None
    extra: Extra = field(default=(), compare=False)

    @property
    def is_branch(self) -> bool:
        return self.type == "branch"

    @property
    def is_tag(self) -> bool:
        return self.type == "tag"


def ref_from_json(obj: JsonObject, *, where: str = "ref") -> SnapshotRef:
    """A branch or tag; tags take no branch retention settings."""
    ref = record_from_json(SnapshotRef, obj, where)
    if ref.type not in ("branch", "tag"):
        raise MetadataError(f"field {path(where, 'type')!r} must be 'branch' or 'tag', got {ref.type!r}")
    if tag_with_branch_retention(ref):
        raise MetadataError(f"{where}: a tag cannot set min-snapshots-to-keep or max-snapshot-age-ms")
    return ref


def tag_with_branch_retention(ref: SnapshotRef) -> bool:
    """Whether ``ref`` is a tag with a branch-only setting (the spec gives tags ``max-ref-age-ms`` only)."""
    return ref.is_tag and (ref.min_snapshots_to_keep is not None or ref.max_snapshot_age_ms is not None)


NO_SNAPSHOT = -1  # what Java writes for "no current snapshot" in v1 and v2 tables


def table_refs_from_json(
    obj: JsonObject, snapshot_ids: Collection[int]
) -> tuple[int | None, dict[str, SnapshotRef], Extra]:
    """A table's ``current-snapshot-id`` (``-1`` reads as none and is kept in the returned extra) and
    ``refs``, checked: every ref and the current id name a snapshot; ``main`` is a branch at the current."""
    current = opt_int(obj, "current-snapshot-id", "")
    extra: Extra = (("current-snapshot-id", NO_SNAPSHOT),) if current == NO_SNAPSHOT else ()
    current = None if current == NO_SNAPSHOT else current
    if current is not None and current not in snapshot_ids:
        raise MetadataError(
            f"current-snapshot-id {current} is not among the snapshots ({sorted(snapshot_ids)})"
        )
    refs_json = opt_object(obj, "refs", "") or {}
    refs = {n: ref_from_json(as_object(r, f"refs.{n}"), where=f"refs.{n}") for n, r in refs_json.items()}
    check_table_refs(current, refs, snapshot_ids)
    return current, refs, extra


def check_table_refs(
    current: int | None, refs: Mapping[str, SnapshotRef], snapshot_ids: Container[int]
) -> None:
    """Refuse (MetadataError) refs naming a snapshot the table lacks, and a ``main`` that is a tag or is not
    at ``current``: what a reader refuses, and so what a writer must never write."""
    for name, ref in refs.items():
        if ref.snapshot_id not in snapshot_ids:
            raise MetadataError(f"ref {name!r} points at snapshot {ref.snapshot_id}, not among the snapshots")
    main = refs.get(MAIN_BRANCH)
    if main is not None and not main.is_branch:
        raise MetadataError("ref 'main' must be a branch, not a tag")
    if main is not None and main.snapshot_id != current:
        now = "unset" if current is None else current
        raise MetadataError(
            f"the main branch is at snapshot {main.snapshot_id} but current-snapshot-id is {now}"
        )


# -- logs, statistics, encryption keys -----------------------------------------------------------------


@dataclass(frozen=True)
class SnapshotLogEntry:
    """One change of the current snapshot: the metadata's last-updated-ms and the new current id."""

    timestamp_ms: int
    snapshot_id: int
    extra: Extra = field(default=(), compare=False)


@dataclass(frozen=True)
class MetadataLogEntry:
    """A previous metadata file of the table and its last-updated-ms."""

    timestamp_ms: int
    metadata_file: str
    extra: Extra = field(default=(), compare=False)


@dataclass(frozen=True)
class BlobMetadata:
    """A statistics blob in a Puffin file: its type, source snapshot, field ids and properties."""

    type: str
    snapshot_id: int
    sequence_number: int
    fields: tuple[int, ...]
    properties: Mapping[str, str] | None = None
    extra: Extra = field(default=(), compare=False)


@dataclass(frozen=True)
class StatisticsFile:
    """A table statistics (Puffin) file of one snapshot (spec "Table Statistics")."""

    snapshot_id: int
    statistics_path: str
    file_size_in_bytes: int
    file_footer_size_in_bytes: int
    blob_metadata: tuple[BlobMetadata, ...]
    key_metadata: str | None = None  # base64, as written
    extra: Extra = field(default=(), compare=False)


@dataclass(frozen=True)
class PartitionStatisticsFile:
    """A partition statistics file of one snapshot (spec "Partition Statistics")."""

    snapshot_id: int
    statistics_path: str
    file_size_in_bytes: int
    extra: Extra = field(default=(), compare=False)


@dataclass(frozen=True)
class EncryptionKey:
    """A table encryption key (v3, spec "Encryption Keys"); key metadata stays base64 as written."""

    key_id: str
    encrypted_key_metadata: str
    encrypted_by_id: str | None = None
    properties: Mapping[str, str] | None = None
    extra: Extra = field(default=(), compare=False)


def _blobs(value: Any, where: str) -> tuple[BlobMetadata, ...]:
    items = [(f"{where}[{i}]", v) for i, v in enumerate(_list(value, where))]
    return tuple(record_from_json(BlobMetadata, as_object(v, w), w) for w, v in items)


# The JSON kind of each record field annotation, and how each kind reads and writes.
_KIND_OF = {
    "int": "int", "int | None": "int", "str": "str", "str | None": "str", "tuple[int, ...]": "int_list",
    "tuple[str, ...] | None": "str_list", "Mapping[str, str] | None": "str_map",
    "tuple[BlobMetadata, ...]": "blobs",
}  # fmt: skip
_READERS: dict[str, Callable[[Any, str], Any]] = {
    "int": _int,
    "str": _str,
    "str_map": lambda v, w: str_map(as_object(v, w), w),
    "int_list": lambda v, w: int_list(_list(v, w), w),
    "str_list": lambda v, w: str_list(_list(v, w), w),
    "blobs": _blobs,
}
_WRITERS: dict[str, Callable[[Any], Any]] = {
    "int": lambda v: v, "str": lambda v: v, "str_map": dict, "int_list": list, "str_list": list,
    "blobs": lambda v: [record_to_json(b) for b in v],
}  # fmt: skip
