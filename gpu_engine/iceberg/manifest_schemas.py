"""Avro writer schemas of manifests and manifest lists (spec "Manifests", "Manifest Lists", Appendix A).

Generated per format version (1, 2, 3) and, for manifests, per partition type. Every record field carries
its Iceberg ``field-id``; maps with int keys are arrays of ``key``/``value`` records (logical type ``map``)
whose fields carry the key and value ids; lists carry ``element-id``. Optional fields are unions with
``null`` first and default ``null``. Record names follow the usual convention (``r<id>`` for structs,
``k<key-id>_v<value-id>`` for map entries), so names never clash.

Per version (the spec's tables):

* ``manifest_entry``: v1 ``snapshot_id`` required and no sequence numbers; v2/v3 ``snapshot_id`` (1),
  ``sequence_number`` (3) and ``file_sequence_number`` (4) optional, for inheritance.
* ``data_file``: v1 writes ``block_size_in_bytes`` (105, required) and no ``content`` (134, required from
  v2) nor ``equality_ids`` (135); ``referenced_data_file`` (143) from v2; ``first_row_id`` (142),
  ``content_offset`` (144) and ``content_size_in_bytes`` (145) in v3 only. Deprecated 106/107/111 never.
* ``manifest_file``: v1 has no ``content`` (517) / ``sequence_number`` (515) / ``min_sequence_number``
  (516) and optional counts (504-506, 512-514); v2/v3 require them; ``first_row_id`` (520) in v3 only.
"""

from __future__ import annotations

import math
import re
from typing import Any

from ..errors import ManifestError
from . import serde
from . import types as it

FORMAT_VERSIONS = (1, 2, 3)
AvroSchema = dict[str, Any]

# Presence per format version: "r" required, "o" optional, "" not written.
# (field id, name, Avro type key, presence in v1 v2 v3), in the order Iceberg Java writes them.
# fmt: off
_ENTRY_FIELDS: tuple[tuple[int, str, str, str], ...] = (
    (0, "status", "int", "rrr"),
    (1, "snapshot_id", "long", "roo"),
    (3, "sequence_number", "long", " oo"),
    (4, "file_sequence_number", "long", " oo"),
    (2, "data_file", "data_file", "rrr"),
)
_DATA_FILE_FIELDS: tuple[tuple[int, str, str, str], ...] = (
    (134, "content", "int", " rr"),
    (100, "file_path", "string", "rrr"),
    (101, "file_format", "string", "rrr"),
    (102, "partition", "partition", "rrr"),
    (103, "record_count", "long", "rrr"),
    (104, "file_size_in_bytes", "long", "rrr"),
    (105, "block_size_in_bytes", "long", "r  "),
    (108, "column_sizes", "map:117:118:long", "ooo"),
    (109, "value_counts", "map:119:120:long", "ooo"),
    (110, "null_value_counts", "map:121:122:long", "ooo"),
    (137, "nan_value_counts", "map:138:139:long", "ooo"),
    (125, "lower_bounds", "map:126:127:bytes", "ooo"),
    (128, "upper_bounds", "map:129:130:bytes", "ooo"),
    (131, "key_metadata", "bytes", "ooo"),
    (132, "split_offsets", "list:133:long", "ooo"),
    (135, "equality_ids", "list:136:int", " oo"),
    (140, "sort_order_id", "int", "ooo"),
    (142, "first_row_id", "long", "  o"),
    (143, "referenced_data_file", "string", " oo"),
    (144, "content_offset", "long", "  o"),
    (145, "content_size_in_bytes", "long", "  o"),
)
_LIST_FIELDS: tuple[tuple[int, str, str, str], ...] = (
    (500, "manifest_path", "string", "rrr"),
    (501, "manifest_length", "long", "rrr"),
    (502, "partition_spec_id", "int", "rrr"),
    (517, "content", "int", " rr"),
    (515, "sequence_number", "long", " rr"),
    (516, "min_sequence_number", "long", " rr"),
    (503, "added_snapshot_id", "long", "rrr"),
    (504, "added_files_count", "int", "orr"),
    (505, "existing_files_count", "int", "orr"),
    (506, "deleted_files_count", "int", "orr"),
    (512, "added_rows_count", "long", "orr"),
    (513, "existing_rows_count", "long", "orr"),
    (514, "deleted_rows_count", "long", "orr"),
    (507, "partitions", "summaries", "ooo"),
    (519, "key_metadata", "bytes", "ooo"),
    (520, "first_row_id", "long", "  o"),
)
_SUMMARY_FIELDS: tuple[tuple[int, str, str, str], ...] = (
    (509, "contains_null", "boolean", "rrr"),
    (518, "contains_nan", "boolean", "ooo"),
    (510, "lower_bound", "bytes", "ooo"),
    (511, "upper_bound", "bytes", "ooo"),
)
# fmt: on
DEFAULT_BLOCK_SIZE = 64 * 1024 * 1024  # v1's required block_size_in_bytes, as Iceberg Java writes it


def _check_version(format_version: int) -> None:
    if format_version not in FORMAT_VERSIONS:
        raise ManifestError(f"format version {format_version} has no manifest schema (supported: 1, 2, 3)")


def _field(fid: int, name: str, avro: Any, required: bool) -> AvroSchema:
    if required:
        return {"name": name, "type": avro, "field-id": fid}
    return {"name": name, "type": ["null", avro], "default": None, "field-id": fid}


def _nested(kind: str, partition: AvroSchema | None) -> Any:
    """The Avro type for a type key of the tables above."""
    if kind.startswith("map:"):
        _, key_id, value_id, value = kind.split(":")
        entry = {
            "type": "record",
            "name": f"k{key_id}_v{value_id}",
            "fields": [
                {"name": "key", "type": "int", "field-id": int(key_id)},
                {"name": "value", "type": value, "field-id": int(value_id)},
            ],
        }
        return {"type": "array", "logicalType": "map", "items": entry}
    if kind.startswith("list:"):
        _, element_id, element = kind.split(":")
        return {"type": "array", "items": element, "element-id": int(element_id)}
    if kind == "partition":
        return partition
    if kind == "summaries":
        summary = _record("r508", _SUMMARY_FIELDS, 3, {})
        return {"type": "array", "items": summary, "element-id": 508}
    return kind


def _record(
    name: str, fields: tuple[tuple[int, str, str, str], ...], version: int, nested: dict[str, Any]
) -> AvroSchema:
    out = []
    for fid, fname, kind, presence in fields:
        p = presence[version - 1]
        if p == " ":
            continue
        avro = nested[kind] if kind in nested else _nested(kind, None)
        out.append(_field(fid, fname, avro, p == "r"))
    return {"type": "record", "name": name, "fields": out}


# -- partition tuples -----------------------------------------------------------------------------------

_AVRO_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def avro_field_name(name: str) -> str:
    """``name`` made a valid Avro name: each invalid character becomes ``_x<HEX>`` (a leading digit
    gets a ``_`` prefix). Readers map partition fields by field id, so only the spelling changes."""
    if _AVRO_NAME.fullmatch(name):
        return name
    out = []
    for i, ch in enumerate(name):
        if ch == "_" or (ch.isascii() and ch.isalpha()) or (ch.isascii() and ch.isdigit() and i > 0):
            out.append(ch)
        elif ch.isascii() and ch.isdigit():
            out.append("_" + ch)
        else:
            out.append(f"_x{ord(ch):X}")
    return "".join(out) or "_"


def decimal_bytes(precision: int) -> int:
    """Bytes of the Avro ``fixed`` holding a decimal of ``precision`` digits (Appendix A: the minimum)."""
    n = 1
    while 2 ** (8 * n - 1) < 10**precision:
        n += 1
    return n


def primitive_avro_type(t: it.PrimitiveType, fixed_name: str) -> Any:
    """The Avro type of an Iceberg primitive (Appendix A); ``fixed_name`` names a ``fixed`` if one is made.

    :class:`ManifestError` for types with no place in a partition tuple (geometry, geography, variant).
    """
    name = t.name
    if isinstance(t, it.DecimalType):
        return {
            "type": "fixed",
            "name": fixed_name,
            "size": decimal_bytes(t.precision),
            "logicalType": "decimal",
            "precision": t.precision,
            "scale": t.scale,
        }
    if isinstance(t, it.FixedType):
        return {"type": "fixed", "name": fixed_name, "size": t.length}
    if name == "uuid":
        return {"type": "fixed", "name": fixed_name, "size": 16, "logicalType": "uuid"}
    simple = {
        "boolean": "boolean", "int": "int", "long": "long", "float": "float", "double": "double",
        "string": "string", "binary": "bytes", "unknown": "null",
    }  # fmt: skip
    if name in simple:
        return simple[name]
    if name == "date":
        return {"type": "int", "logicalType": "date"}
    if name == "time":
        return {"type": "long", "logicalType": "time-micros"}
    if name in it.TIMESTAMP_NAMES:
        logical = "timestamp-nanos" if name.endswith("_ns") else "timestamp-micros"
        return {"type": "long", "logicalType": logical, "adjust-to-utc": name in it.ZONED_TIMESTAMP_NAMES}
    raise ManifestError(f"Iceberg type {t} cannot be a partition field's type in a manifest")


def partition_schema(partition_type: it.StructType) -> AvroSchema:
    """The ``partition`` record (field 102): one optional field per partition field, with its field id.

    A field of type ``unknown`` (a transform this engine does not know) is written with Avro type ``null``.
    """
    fields = []
    for f in partition_type.fields:
        if not isinstance(f.type, it.PrimitiveType):
            raise ManifestError(f"partition field {f.name!r} has a non-primitive type {f.type}")
        avro = primitive_avro_type(f.type, f"r102_f{f.field_id}")
        name = avro_field_name(f.name)
        if avro == "null":
            fields.append({"name": name, "type": "null", "default": None, "field-id": f.field_id})
        else:
            fields.append(_field(f.field_id, name, avro, required=False))
    if len({f["name"] for f in fields}) != len(fields):
        raise ManifestError(f"partition field names clash as Avro names: {[f['name'] for f in fields]}")
    return {"type": "record", "name": "r102", "fields": fields}


# -- the file schemas -----------------------------------------------------------------------------------


def manifest_entry_schema(format_version: int, partition_type: it.StructType) -> AvroSchema:
    """The ``manifest_entry`` Avro schema of a manifest of ``format_version`` for ``partition_type``."""
    _check_version(format_version)
    partition = partition_schema(partition_type)
    data_file = _record("r2", _DATA_FILE_FIELDS, format_version, {"partition": partition})
    return _record("manifest_entry", _ENTRY_FIELDS, format_version, {"data_file": data_file})


def manifest_list_schema(format_version: int) -> AvroSchema:
    """The ``manifest_file`` Avro schema of a manifest list of ``format_version``."""
    _check_version(format_version)
    return _record("manifest_file", _LIST_FIELDS, format_version, {})


# -- datums: Python values in the form fastavro writes for these schemas ------------------------------


def map_datum(values: dict[int, Any]) -> list[dict[str, Any]] | None:
    """A metrics map as Avro key/value records, in the dict's order; empty maps are written as null."""
    return [{"key": k, "value": v} for k, v in values.items()] if values else None


def partition_datum(t: it.IcebergType, value: Any) -> Any:
    """A partition value (:mod:`.serde`'s physical form) as fastavro writes it for the field's Avro type:
    decimals as sign-extended ``fixed`` bytes, uuids as their 16 bytes, NaN as the canonical NaN (Avro
    writes floats as Java's ``doubleToLongBits`` / ``floatToIntBits``), the rest unchanged."""
    if value is None:
        return None
    if isinstance(value, float) and math.isnan(value):
        return math.nan
    if isinstance(t, it.DecimalType):
        unscaled = int.from_bytes(serde.to_bytes(t, value), "big", signed=True)
        return unscaled.to_bytes(decimal_bytes(t.precision), "big", signed=True)
    if isinstance(t, it.PrimitiveType) and t.name == "uuid":
        return serde.to_bytes(t, value)
    return value
