"""Rows split by partition tuple, and the partition path of a tuple (Iceberg's partitionToPath).

:func:`split_by_partition` computes each partition field's transform with
:func:`gpu_engine.transforms.apply` on the chosen backend and groups the rows by the resulting tuple.
Tuple values are Iceberg physical values of the transform result type (as
:mod:`gpu_engine.iceberg.serde`): ``int`` for year/month/day/hour/bucket, the source's physical value
for identity and truncate (``int`` days, micros or nanos for dates, times and timestamps,
:class:`uuid.UUID`, :class:`~decimal.Decimal`, ``bytes``, ``str``), None for null and void.
"""

from __future__ import annotations

import base64
import datetime as dt
import math
import uuid
from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa

from ..errors import UnsupportedFeature
from ..iceberg import types as it
from ..iceberg.partitioning import PartitionSpec
from ..iceberg.schema import Schema
from ..transforms import apply
from .arrow_conform import physical_array

_URL_SAFE = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-*_")
_EPOCH = dt.datetime(1970, 1, 1)


def split_by_partition(
    batch: pa.RecordBatch, schema: Schema, spec: PartitionSpec, backend: str
) -> Iterator[tuple[tuple[Any, ...], pa.RecordBatch]]:
    """The rows of ``batch`` by partition tuple (physical values in spec field order), first seen first."""
    if batch.num_rows == 0:
        return
    keys: dict[str, pa.Array] = {}
    for i, f in enumerate(spec.fields):
        if len(f.source_ids) != 1:
            raise UnsupportedFeature(f"partition field {f.name!r}: multi-argument transforms are not written")
        if f.transform != "void":
            source = schema.find_field(f.source_id)
            if not isinstance(source.type, it.PrimitiveType):
                raise UnsupportedFeature(
                    f"partition field {f.name!r}: source {source.name!r} is not primitive"
                )
            arr = batch.column(schema.paths_by_id[f.source_id][0])
            for name in schema.paths_by_id[f.source_id][1:]:
                arr = arr.flatten()[arr.type.get_field_index(name)]  # a null struct: a null source
            keys[str(i)] = physical_array(apply(f.transform, source.type, arr, backend=backend))
    if not keys:
        yield (None,) * len(spec.fields), batch
        return
    rows = pa.array(np.arange(batch.num_rows, dtype=np.int64))
    groups = (
        pa.table({**keys, "_rows": rows})
        .group_by(list(keys), use_threads=False)
        .aggregate([("_rows", "list")])
    )
    ptype = spec.partition_type(schema)
    for g in range(groups.num_rows):
        values = tuple(
            _python(ptype.fields[i].type, groups.column(str(i))[g].as_py()) if str(i) in keys else None
            for i in range(len(spec.fields))
        )
        take = groups.column("_rows_list")[g].values
        yield values, batch if len(take) == batch.num_rows else batch.take(take)


def _python(t: it.IcebergType, value: Any) -> Any:
    return uuid.UUID(bytes=value) if t == it.UUID and isinstance(value, bytes) else value


def partition_path(spec: PartitionSpec, schema: Schema, values: tuple[Any, ...]) -> str:
    """``name=value/...`` with human-readable values, URL-encoded as Iceberg's partitionToPath."""
    ptype = spec.partition_type(schema)
    parts = []
    for f, pf, value in zip(spec.fields, ptype.fields, values, strict=True):
        parts.append(f"{_url_encode(f.name)}={_url_encode(_human(f.transform, pf.type, value))}")
    return "/".join(parts)


def _url_encode(text: str) -> str:
    return "".join(
        chr(b) if b in _URL_SAFE else "+" if b == 0x20 else f"%{b:02X}" for b in text.encode("utf-8")
    )


def _human(transform: str, t: it.IcebergType, value: Any) -> str:
    """Iceberg's Transform.toHumanString of a physical partition value."""
    if value is None:
        return "null"
    name = transform.split("[", 1)[0]
    if name in ("year", "month", "hour"):
        months = value * 12 if name == "year" else value
        if name == "hour":
            return (_EPOCH + dt.timedelta(hours=value)).strftime("%Y-%m-%d-%H")
        y, m = divmod(months, 12)
        return f"{1970 + y:04d}" if name == "year" else f"{1970 + y:04d}-{m + 1:02d}"
    kind = t.name if isinstance(t, it.PrimitiveType) else ""
    try:
        if kind == "date":
            return (_EPOCH + dt.timedelta(days=value)).date().isoformat()
        if kind in ("time", "timestamp", "timestamptz", "timestamp_ns", "timestamptz_ns"):
            nanos = value * (1 if kind.endswith("_ns") else 1000)
            secs, frac = divmod(nanos, 1_000_000_000)
            moment = _EPOCH + dt.timedelta(seconds=secs)
            text = moment.strftime("%H:%M" if kind == "time" else "%Y-%m-%dT%H:%M")
            if moment.second or frac:
                text += f":{moment.second:02d}"
            if frac:
                text += (
                    f".{frac // 1_000_000:03d}"
                    if frac % 1_000_000 == 0
                    else (f".{frac // 1000:06d}" if frac % 1000 == 0 else f".{frac:09d}")
                )
            return text + ("Z" if kind.startswith("timestamptz") else "")
    except OverflowError:
        return str(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    if isinstance(value, float):
        return _java_float(value, kind == "float")
    return str(value)


def _java_float(value: float, single: bool) -> str:
    if math.isnan(value) or math.isinf(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    x = np.float32(value) if single else np.float64(value)
    if value == 0 or 1e-3 <= abs(value) < 1e7:
        return np.format_float_positional(x, unique=True, trim="0")
    return (
        np.format_float_scientific(x, unique=True, trim="0", exp_digits=1)
        .replace("e+", "E")
        .replace("e", "E")
    )
