"""Iceberg types: primitives with their string forms (``"decimal(9,2)"``, ``"fixed[16]"``), the v3
parameterized geospatial types, nested struct/list/map types, their JSON form (Appendix C) and the
Arrow mapping of primitives."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from ..errors import InvalidType


@dataclass(frozen=True)
class PrimitiveType:
    """A primitive type named as in the spec's JSON serialization (Appendix C)."""

    name: str

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True)
class DecimalType(PrimitiveType):
    precision: int
    scale: int

    def __str__(self) -> str:
        return f"decimal({self.precision}, {self.scale})"


@dataclass(frozen=True)
class FixedType(PrimitiveType):
    length: int

    def __str__(self) -> str:
        return f"fixed[{self.length}]"


@dataclass(frozen=True)
class GeometryType(PrimitiveType):
    crs: str = "OGC:CRS84"

    def __str__(self) -> str:
        return f"geometry({self.crs})"


@dataclass(frozen=True)
class GeographyType(PrimitiveType):
    crs: str = "OGC:CRS84"
    algorithm: str = "spherical"

    def __str__(self) -> str:
        return f"geography({self.crs}, {self.algorithm})"


UNKNOWN = PrimitiveType("unknown")
INT_RANGE = (-(2**31), 2**31 - 1)  # the values of ``int`` (32-bit signed), inclusive
LONG_RANGE = (-(2**63), 2**63 - 1)  # the values of ``long`` (64-bit signed): also ids and counts
VARIANT = PrimitiveType("variant")
BOOLEAN = PrimitiveType("boolean")
INT = PrimitiveType("int")
LONG = PrimitiveType("long")
FLOAT = PrimitiveType("float")
DOUBLE = PrimitiveType("double")
DATE = PrimitiveType("date")
TIME = PrimitiveType("time")
TIMESTAMP = PrimitiveType("timestamp")
TIMESTAMPTZ = PrimitiveType("timestamptz")
TIMESTAMP_NS = PrimitiveType("timestamp_ns")
TIMESTAMPTZ_NS = PrimitiveType("timestamptz_ns")
TIMESTAMP_NAMES = frozenset({"timestamp", "timestamptz", "timestamp_ns", "timestamptz_ns"})
ZONED_TIMESTAMP_NAMES = frozenset({"timestamptz", "timestamptz_ns"})  # instants: adjusted to UTC
STRING = PrimitiveType("string")
UUID = PrimitiveType("uuid")
BINARY = PrimitiveType("binary")

_SIMPLE = {
    t.name: t
    for t in (
        UNKNOWN,
        BOOLEAN,
        INT,
        LONG,
        FLOAT,
        DOUBLE,
        DATE,
        TIME,
        TIMESTAMP,
        TIMESTAMPTZ,
        TIMESTAMP_NS,
        TIMESTAMPTZ_NS,
        STRING,
        UUID,
        BINARY,
        VARIANT,
    )
}
_DEFAULT_GEO = {"geometry": GeometryType("geometry"), "geography": GeographyType("geography")}
_DECIMAL = re.compile(r"decimal\(\s*(\d+)\s*,\s*(\d+)\s*\)")
_FIXED = re.compile(r"fixed\[\s*(\d+)\s*\]")
_GEOMETRY = re.compile(r"geometry\(\s*([^,()]+?)\s*\)")
_GEOGRAPHY = re.compile(r"geography\(\s*([^,()]+?)\s*(?:,\s*([a-z]+)\s*)?\)")
MAX_DECIMAL_PRECISION = 38


def decimal(precision: int, scale: int) -> DecimalType:
    if not 0 < precision <= MAX_DECIMAL_PRECISION or not 0 <= scale <= precision:
        raise InvalidType(
            f"decimal({precision}, {scale}): need 0 < precision <= 38 and 0 <= scale <= precision"
        )
    return DecimalType("decimal", precision, scale)


def fixed(length: int) -> FixedType:
    if length <= 0:
        raise InvalidType(f"fixed[{length}]: length must be positive")
    return FixedType("fixed", length)


def parse_type(text: str) -> PrimitiveType:
    """Parse a primitive type string as Iceberg writes it (``"decimal(9,2)"``, ``"fixed[16]"``)."""
    raw = text.strip()
    s = raw.lower()
    if s in _SIMPLE:
        return _SIMPLE[s]
    if s in _DEFAULT_GEO:
        return _DEFAULT_GEO[s]
    if m := _DECIMAL.fullmatch(s):
        return decimal(int(m.group(1)), int(m.group(2)))
    if m := _FIXED.fullmatch(s):
        return fixed(int(m.group(1)))
    if m := _GEOMETRY.fullmatch(raw):  # a CRS keeps its case
        return GeometryType("geometry", m.group(1))
    if m := _GEOGRAPHY.fullmatch(raw):
        return GeographyType("geography", m.group(1), (m.group(2) or "spherical").lower())
    raise InvalidType(f"unknown Iceberg primitive type {text!r}")


def to_arrow(t: PrimitiveType) -> pa.DataType:
    """The Arrow type Iceberg readers use for primitive ``t`` (Appendix A's Parquet mapping, as Arrow)."""
    if isinstance(t, (GeometryType, GeographyType)) or t == VARIANT:
        raise InvalidType(f"Iceberg type {t} has no flat Arrow mapping here")
    if isinstance(t, DecimalType):
        return pa.decimal128(t.precision, t.scale)
    if isinstance(t, FixedType):
        return pa.binary(t.length)
    return _ARROW[t.name]


_ARROW: dict[str, pa.DataType] = {
    "unknown": pa.null(),
    "boolean": pa.bool_(),
    "int": pa.int32(),
    "long": pa.int64(),
    "float": pa.float32(),
    "double": pa.float64(),
    "date": pa.date32(),
    "time": pa.time64("us"),
    "timestamp": pa.timestamp("us"),
    "timestamptz": pa.timestamp("us", tz="UTC"),
    "timestamp_ns": pa.timestamp("ns"),
    "timestamptz_ns": pa.timestamp("ns", tz="UTC"),
    "string": pa.large_string(),
    "uuid": pa.binary(16),
    "binary": pa.large_binary(),
}


# -- nested types ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class NestedField:
    """A struct field, list element or map key/value: id, name, type, requiredness, docs and defaults.

    Defaults hold the JSON single-value form (Appendix D) as read, so they serialize back unchanged.
    """

    field_id: int
    name: str
    type: IcebergType
    required: bool = False
    doc: str | None = None
    initial_default: Any = None
    write_default: Any = None
    has_initial_default: bool = False
    has_write_default: bool = False
    extra: tuple[tuple[str, Any], ...] = field(default=(), compare=False)  # unknown JSON keys, kept


@dataclass(frozen=True)
class StructType:
    fields: tuple[NestedField, ...]

    def __str__(self) -> str:
        return "struct<" + ", ".join(f"{f.field_id}: {f.name}: {f.type}" for f in self.fields) + ">"


@dataclass(frozen=True)
class ListType:
    element_id: int
    element: IcebergType
    element_required: bool = False

    def __str__(self) -> str:
        return f"list<{self.element}>"


@dataclass(frozen=True)
class MapType:
    key_id: int
    key: IcebergType
    value_id: int
    value: IcebergType
    value_required: bool = False

    def __str__(self) -> str:
        return f"map<{self.key}, {self.value}>"


IcebergType = PrimitiveType | StructType | ListType | MapType
_FIELD_KEYS = {"id", "name", "type", "required", "doc", "initial-default", "write-default"}


def type_from_json(obj: Any) -> IcebergType:
    """Parse a type as Appendix C serializes it (a string or a struct/list/map object)."""
    if isinstance(obj, str):
        return parse_type(obj)
    if not isinstance(obj, dict) or "type" not in obj:
        raise InvalidType(f"malformed Iceberg type JSON: {obj!r}")
    kind = obj["type"]
    try:
        if kind == "struct":
            return StructType(tuple(field_from_json(f) for f in obj["fields"]))
        if kind == "list":
            return ListType(
                int(obj["element-id"]), type_from_json(obj["element"]), bool(obj["element-required"])
            )
        if kind == "map":
            return MapType(
                int(obj["key-id"]),
                type_from_json(obj["key"]),
                int(obj["value-id"]),
                type_from_json(obj["value"]),
                bool(obj["value-required"]),
            )
    except KeyError as exc:
        raise InvalidType(f"Iceberg {kind} type JSON lacks {exc.args[0]!r}: {obj!r}") from None
    raise InvalidType(f"unknown Iceberg nested type {kind!r}")


def field_from_json(obj: dict[str, Any]) -> NestedField:
    try:
        return NestedField(
            field_id=int(obj["id"]),
            name=str(obj["name"]),
            type=type_from_json(obj["type"]),
            required=bool(obj["required"]),
            doc=obj.get("doc"),
            initial_default=obj.get("initial-default"),
            write_default=obj.get("write-default"),
            has_initial_default="initial-default" in obj,
            has_write_default="write-default" in obj,
            extra=tuple((k, v) for k, v in obj.items() if k not in _FIELD_KEYS),
        )
    except KeyError as exc:
        raise InvalidType(f"Iceberg struct field JSON lacks {exc.args[0]!r}: {obj!r}") from None


def type_to_json(t: IcebergType) -> Any:
    if isinstance(t, StructType):
        return {"type": "struct", "fields": [field_to_json(f) for f in t.fields]}
    if isinstance(t, ListType):
        return {
            "type": "list",
            "element-id": t.element_id,
            "element": type_to_json(t.element),
            "element-required": t.element_required,
        }
    if isinstance(t, MapType):
        return {
            "type": "map",
            "key-id": t.key_id,
            "key": type_to_json(t.key),
            "value-id": t.value_id,
            "value": type_to_json(t.value),
            "value-required": t.value_required,
        }
    return str(t)  # decimals as "decimal(P, S)", the form Iceberg Java and PyIceberg write


def field_to_json(f: NestedField) -> dict[str, Any]:
    out: dict[str, Any] = {
        "id": f.field_id,
        "name": f.name,
        "required": f.required,
        "type": type_to_json(f.type),
    }
    if f.doc is not None:
        out["doc"] = f.doc
    if f.has_initial_default:
        out["initial-default"] = f.initial_default
    if f.has_write_default:
        out["write-default"] = f.write_default
    out.update(dict(f.extra))
    return out


def can_promote(old: IcebergType, new: IcebergType, format_version: int) -> bool:
    """True when a field of type ``old`` may become ``new`` (spec "Schema Evolution": int to long, float to
    double, decimal precision widened at the same scale; v3 also date to timestamp / timestamp_ns and
    unknown to any type). A type promotes to itself."""
    if old == new:
        return True
    if not isinstance(old, PrimitiveType) or not isinstance(new, PrimitiveType):
        return False
    if (old, new) in ((INT, LONG), (FLOAT, DOUBLE)):
        return True
    if isinstance(old, DecimalType) and isinstance(new, DecimalType):
        return new.scale == old.scale and new.precision > old.precision
    if format_version >= 3:
        return old == UNKNOWN or (old == DATE and new in (TIMESTAMP, TIMESTAMP_NS))
    return False
