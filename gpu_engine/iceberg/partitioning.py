"""Partition specs: fields (single or multi-argument transforms), JSON forms of v1-v3, partition types."""

from __future__ import annotations

import math
import struct
import uuid
from dataclasses import dataclass, field
from typing import Any

from ..errors import InvalidType
from ..transforms.spec import Transform, parse_transform
from . import types as it
from .schema import Schema

PartitionKey = tuple[int, tuple[Any, ...]]


def partition_key(spec_id: int, values: tuple[Any, ...]) -> PartitionKey:
    """A hashable key equal exactly when spec ids and partition values are equal per the spec: floats by
    their bits, NaN canonical, so all NaNs are one partition and -0.0 and 0.0 two ("Scan Planning",
    note 3)."""
    return spec_id, tuple(map(value_key, values))


def value_key(value: Any) -> Any:
    """One partition value as :func:`partition_key` compares it: a uuid as its 16 bytes (writers hold
    ``uuid.UUID``, manifests give the bytes: an identity(uuid) partition was two partitions, and a dynamic
    partition overwrite kept the rows it replaced)."""
    if isinstance(value, float):
        return ("f64", struct.pack("<d", math.nan if value != value else value))
    if isinstance(value, uuid.UUID):
        return value.bytes
    return value


V1_FIRST_PARTITION_FIELD_ID = 1000  # the reference implementation's v1 assignment
_FIELD_KEYS = {"source-id", "source-ids", "field-id", "name", "transform"}


@dataclass(frozen=True)
class PartitionField:
    """One partition field; ``transform`` is the metadata's string in Iceberg's spelling (lower case;
    unknown transforms kept as written)."""

    source_ids: tuple[int, ...]
    field_id: int
    name: str
    transform: str
    extra: tuple[tuple[str, Any], ...] = field(default=(), compare=False)

    @property
    def source_id(self) -> int:
        return self.source_ids[0]

    @property
    def parsed(self) -> Transform:
        """The transform, an :class:`~gpu_engine.transforms.UnknownTransform` when not understood."""
        return parse_transform(self.transform, strict=False)


@dataclass(frozen=True)
class PartitionSpec:
    spec_id: int
    fields: tuple[PartitionField, ...] = ()

    @property
    def is_unpartitioned(self) -> bool:
        """True when no field partitions data (no fields, or only void transforms)."""
        return all(f.transform == "void" for f in self.fields)

    def partition_type(self, schema: Schema) -> it.StructType:
        """The partition tuple's struct: each field's transform result type over its source type.

        Unknown transforms, and sources missing from ``schema`` (dropped columns), yield ``unknown``.
        """
        out = []
        for f in self.fields:
            result: it.IcebergType = it.UNKNOWN
            source = schema.by_id.get(f.source_id)
            transform = f.parsed
            source_type = source.type if source is not None and len(f.source_ids) == 1 else None
            if isinstance(source_type, it.PrimitiveType) and transform.can_transform(source_type):
                result = transform.result_type(source_type)
            out.append(it.NestedField(f.field_id, f.name, result, required=False))
        return it.StructType(tuple(out))


def field_from_json(obj: dict[str, Any], default_field_id: int) -> PartitionField:
    if "source-ids" in obj:
        sources = tuple(int(i) for i in obj["source-ids"])
    elif "source-id" in obj:
        sources = (int(obj["source-id"]),)
    else:
        raise InvalidType(f"partition field lacks source-id/source-ids: {obj!r}")
    try:
        return PartitionField(
            source_ids=sources,
            field_id=int(obj.get("field-id", default_field_id)),
            name=str(obj["name"]),
            # in Iceberg's spelling: Java parses transforms in any case ("IDENTITY") and writes them
            # lower-case; every comparison here ("identity", "void") then holds
            transform=str(parse_transform(str(obj["transform"]), strict=False)),
            extra=tuple((k, v) for k, v in obj.items() if k not in _FIELD_KEYS),
        )
    except KeyError as exc:
        raise InvalidType(f"partition field lacks {exc.args[0]!r}: {obj!r}") from None


def spec_from_json(obj: dict[str, Any] | list[Any], spec_id: int = 0) -> PartitionSpec:
    """A spec from the object form (``spec-id`` + ``fields``) or v1's bare field list."""
    if isinstance(obj, list):
        fields_json, sid = obj, spec_id
    else:
        fields_json, sid = obj.get("fields", []), int(obj.get("spec-id", spec_id))
    fields = tuple(field_from_json(f, V1_FIRST_PARTITION_FIELD_ID + i) for i, f in enumerate(fields_json))
    return PartitionSpec(sid, fields)


def field_to_json(f: PartitionField) -> dict[str, Any]:
    out: dict[str, Any] = {"name": f.name, "transform": f.transform}
    if len(f.source_ids) == 1:
        out["source-id"] = f.source_ids[0]
    else:
        out["source-ids"] = list(f.source_ids)
    out["field-id"] = f.field_id
    out.update(dict(f.extra))
    return out


def spec_to_json(spec: PartitionSpec) -> dict[str, Any]:
    return {"spec-id": spec.spec_id, "fields": [field_to_json(f) for f in spec.fields]}
