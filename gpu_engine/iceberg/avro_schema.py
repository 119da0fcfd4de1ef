"""Avro writer schemas as parsed JSON: named types, record fields, sizes, and Iceberg types of primitives.

Shared by manifest lists and manifests (:mod:`.manifests`) and the fast decoder's compiler
(:mod:`.avro_program`).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ..errors import ManifestError
from . import types as it


def avro_names(schema: Any) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every named Avro type (record, fixed, enum) in ``schema``, by short and full name."""
    if isinstance(schema, list):
        for s in schema:
            yield from avro_names(s)
    elif isinstance(schema, dict):
        kind = schema.get("type")
        if kind in ("record", "fixed", "enum") and "name" in schema:
            yield str(schema["name"]), schema
            if schema.get("namespace"):
                yield f"{schema['namespace']}.{schema['name']}", schema
        children = [f.get("type") for f in schema.get("fields", [])] if kind == "record" else []
        children += [schema.get("items"), schema.get("values")] + (
            [kind] if not isinstance(kind, str) else []
        )
        for child in children:
            yield from avro_names(child)


def field_type(record: dict[str, Any], name: str) -> Any:
    return next(f["type"] for f in record["fields"] if f["name"] == name)


def resolve_named(avro_type: Any, named: dict[str, dict[str, Any]]) -> Any:
    if isinstance(avro_type, list):
        branches = [
            b for b in avro_type if b != "null" and not (isinstance(b, dict) and b.get("type") == "null")
        ]
        if len(branches) != 1:
            return avro_type
        avro_type = branches[0]
    if isinstance(avro_type, str) and avro_type in named:
        return named[avro_type]
    if isinstance(avro_type, dict) and isinstance(avro_type.get("type"), (dict, list)):
        return resolve_named(avro_type["type"], named)
    return avro_type


def record_type(path: str, avro_type: Any, named: dict[str, dict[str, Any]], what: str) -> dict[str, Any]:
    resolved = resolve_named(avro_type, named)
    if not isinstance(resolved, dict) or resolved.get("type") != "record":
        raise ManifestError(f"{path}: {what} is not an Avro record: {str(avro_type)[:200]}")
    return resolved


# (Avro type, logicalType, adjust-to-utc) -> Iceberg type; decimal, fixed and uuid are handled apart
_AVRO_TYPES: dict[tuple[str, str | None, bool], it.PrimitiveType] = {
    ("boolean", None, False): it.BOOLEAN, ("int", None, False): it.INT, ("int", "date", False): it.DATE,
    ("long", None, False): it.LONG, ("long", "time-micros", False): it.TIME,
    ("long", "timestamp-micros", False): it.TIMESTAMP, ("long", "timestamp-micros", True): it.TIMESTAMPTZ,
    ("long", "local-timestamp-micros", False): it.TIMESTAMP,
    ("long", "timestamp-nanos", False): it.TIMESTAMP_NS, ("long", "timestamp-nanos", True): it.TIMESTAMPTZ_NS,
    ("long", "local-timestamp-nanos", False): it.TIMESTAMP_NS, ("float", None, False): it.FLOAT,
    ("double", None, False): it.DOUBLE, ("string", None, False): it.STRING, ("bytes", None, False): it.BINARY,
    ("null", None, False): it.UNKNOWN,
}  # fmt: skip


def iceberg_type(path: str, name: str, avro_type: Any, named: dict[str, dict[str, Any]]) -> it.PrimitiveType:
    t = resolve_named(avro_type, named)
    t = {"type": t} if isinstance(t, str) else t
    if isinstance(t, dict) and isinstance(t.get("type"), str):
        kind, logical = t["type"], t.get("logicalType")
        if kind in ("fixed", "bytes") and logical == "decimal":
            return it.decimal(int(t["precision"]), int(t.get("scale", 0)))
        if kind == "fixed":
            return it.UUID if logical == "uuid" and int(t["size"]) == 16 else it.fixed(int(t["size"]))
        utc = bool(t.get("adjust-to-utc", False)) and logical in ("timestamp-micros", "timestamp-nanos")
        found = _AVRO_TYPES.get((kind, logical, utc)) or _AVRO_TYPES.get((kind, None, False))
        if found is not None:
            return found
    raise ManifestError(
        f"{path}: partition field {name!r} has a non-primitive Avro type {str(avro_type)[:200]}"
    )


PRIMITIVES = ("null", "boolean", "int", "long", "float", "double", "bytes", "string")
_MIN_SIZE = {"null": 0, "boolean": 1, "int": 1, "long": 1, "float": 4, "double": 8, "bytes": 1, "string": 1}


def min_size(avro: Any, named: dict[str, dict[str, Any]], depth: int = 0) -> int:
    """The fewest bytes a value of ``avro`` can take (unions and arrays take at least one)."""
    if isinstance(avro, str) and avro in named:
        avro = named[avro]
    if isinstance(avro, list):
        return 1
    kind = avro if isinstance(avro, str) else avro.get("type")
    if isinstance(kind, dict | list) or (isinstance(kind, str) and kind in named and kind not in PRIMITIVES):
        return min_size(kind, named, depth)
    if kind == "record":
        return 0 if depth > 32 else sum(min_size(f["type"], named, depth + 1) for f in avro.get("fields", []))
    if kind == "fixed":
        return int(avro.get("size", 0))
    return _MIN_SIZE.get(str(kind), 1)


def key_value(items: Any) -> tuple[Any, Any] | None:
    """(key type, value type) of Iceberg's map encoding: a record of exactly ``key`` then ``value``."""
    if not isinstance(items, dict) or items.get("type") != "record":
        return None
    fields = items.get("fields", [])
    if [f.get("name") for f in fields] != ["key", "value"]:
        return None
    return fields[0]["type"], fields[1]["type"]
