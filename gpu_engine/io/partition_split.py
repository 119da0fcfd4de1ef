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
import math
import uuid
from collections.abc import Iterator
from decimal import ROUND_HALF_EVEN, Decimal
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import UnsupportedFeature
from ..iceberg import types as it
from ..iceberg.partitioning import PartitionSpec
from ..iceberg.schema import Schema
from ..transforms import apply
from .arrow_conform import physical_array

_URL_SAFE = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-*_")


def split_by_partition(
    batch: pa.RecordBatch, schema: Schema, spec: PartitionSpec, backend: str
) -> Iterator[tuple[tuple[Any, ...], pa.RecordBatch]]:
    """The rows of ``batch`` by partition tuple (physical values in spec field order), first seen first;
    each partition's rows keep their order in ``batch``.

    The key columns are computed once and encoded as one dense group id per row (first seen first). When
    every group's rows are one contiguous run (input clustered by partition, as sorted data is) the groups
    are zero-copy slices of ``batch``; otherwise one stable sort by group id and one ``take`` reorder the
    batch and the groups are slices of that."""
    if batch.num_rows == 0:
        return
    keys: dict[int, pa.Array] = {}
    for i, f in enumerate(spec.fields):
        if len(f.source_ids) != 1:
            raise UnsupportedFeature(f"partition field {f.name!r}: multi-argument transforms are not written")
        if f.transform != "void":
            source = schema.find_field(f.source_id)
            if source.type == it.UNKNOWN:  # always null (not stored): a null partition value, as void's
                continue
            if not isinstance(source.type, it.PrimitiveType):
                raise UnsupportedFeature(
                    f"partition field {f.name!r}: source {source.name!r} is not primitive"
                )
            arr = batch.column(schema.paths_by_id[f.source_id][0])
            for name in schema.paths_by_id[f.source_id][1:]:
                arr = arr.flatten()[arr.type.get_field_index(name)]  # a null struct: a null source
            if isinstance(arr.type, pa.BaseExtensionType):  # uuid is written as arrow.uuid
                arr = arr.storage
            keys[i] = physical_array(apply(f.transform, source.type, arr, backend=backend))
    if not keys:
        yield (None,) * len(spec.fields), batch
        return
    ptype = spec.partition_type(schema)
    codes, groups = _group_ids(list(keys.values()))
    if groups == 1:
        yield _values(ptype, keys, 0), batch
        return
    bounds = np.flatnonzero(codes[1:] != codes[:-1]) + 1
    if len(bounds) + 1 == groups:  # one run per group, in first-seen order
        starts = np.concatenate([[0], bounds]).tolist()
        ends = [*starts[1:], batch.num_rows]
        for start, end in zip(starts, ends, strict=True):
            yield _values(ptype, keys, start), batch.slice(start, end - start)
        return
    order = pc.sort_indices(pa.array(codes))  # stable: a group's rows keep their order
    ordered = batch.take(order)
    first = order.to_numpy()
    offsets = np.concatenate([[0], np.cumsum(np.bincount(codes, minlength=groups))]).tolist()
    for g in range(groups):
        start, end = offsets[g], offsets[g + 1]
        yield _values(ptype, keys, int(first[start])), ordered.slice(start, end - start)


def _group_ids(columns: list[pa.Array]) -> tuple[np.ndarray[Any, Any], int]:
    """A dense integer id per row of the key ``columns`` (rows with equal values in every column share one;
    null is a value; ids numbered in order of first appearance) and the number of ids."""
    encoded = pc.dictionary_encode(columns[0], null_encoding="encode")
    codes, count = encoded.indices.to_numpy(), len(encoded.dictionary)
    for col in columns[1:]:
        encoded = pc.dictionary_encode(col, null_encoding="encode")
        ids, size = encoded.indices.to_numpy(), len(encoded.dictionary)
        combined = codes.astype(np.int64) * size + ids  # < rows**2: no overflow
        encoded = pc.dictionary_encode(pa.array(combined))
        codes, count = encoded.indices.to_numpy(), len(encoded.dictionary)
    return codes, count


def _values(ptype: it.StructType, keys: dict[int, pa.Array], row: int) -> tuple[Any, ...]:
    """The partition tuple of ``row`` (None for void fields and fields of unknown columns)."""
    return tuple(
        _python(f.type, keys[i][row].as_py()) if i in keys else None for i, f in enumerate(ptype.fields)
    )


def _python(t: it.IcebergType, value: Any) -> Any:
    return uuid.UUID(bytes=value) if t == it.UUID and isinstance(value, bytes) else value


def partition_path(spec: PartitionSpec, schema: Schema, values: tuple[Any, ...]) -> str:
    """``name=value/...`` with human-readable values, URL-encoded as Iceberg's partitionToPath."""
    ptype = spec.partition_type(schema)
    parts = []
    for f, pf, value in zip(spec.fields, ptype.fields, values, strict=True):
        parts.append(f"{_url_encode(f.name)}={_url_encode(human_string(f.transform, pf.type, value))}")
    return "/".join(parts)


def _url_encode(text: str) -> str:
    return "".join(
        chr(b) if b in _URL_SAFE else "+" if b == 0x20 else f"%{b:02X}" for b in text.encode("utf-8")
    )


def human_string(transform: str, t: it.IcebergType, value: Any) -> str:
    """Iceberg's Transform.toHumanString of a physical partition value (``t``: the transform's result
    type); ``"null"`` for None, as Java. Dates and times of any year (proleptic Gregorian, as
    ``java.time``): hours and days as Java's ``TransformUtil`` (``%04d`` years), timestamps as its
    ``DateTimeUtil`` (ISO_LOCAL_DATE_TIME, ``+00:00`` with a zone; years ``+10000``, ``-0001``), times as
    ``LocalTime.toString()``."""
    if value is None:
        return "null"
    name = transform.split("[", 1)[0]
    if name in ("year", "month"):
        y, m = divmod(value * 12 if name == "year" else value, 12)
        return f"{1970 + y:04d}" if name == "year" else f"{1970 + y:04d}-{m + 1:02d}"
    if name == "hour":
        days, hour = divmod(value, 24)
        y, m, d = civil_from_days(days)
        return f"{y:04d}-{m:02d}-{d:02d}-{hour:02d}"
    kind = t.name if isinstance(t, it.PrimitiveType) else ""
    if kind == "date":
        y, m, d = civil_from_days(value)
        return f"{y:04d}-{m:02d}-{d:02d}"
    if kind == "time" or kind in it.TIMESTAMP_NAMES:
        secs, frac = divmod(value * (1 if kind.endswith("_ns") else 1000), 1_000_000_000)
        days, secs = divmod(secs, 86_400)
        hm = f"{secs // 3600:02d}:{secs // 60 % 60:02d}"
        if kind == "time":  # LocalTime.toString: seconds when not zero, the fraction in groups of three
            digits = 3 if frac % 1_000_000 == 0 else (6 if frac % 1000 == 0 else 9)
            fraction = f".{frac // 10 ** (9 - digits):0{digits}d}" if frac else ""
            return hm + (f":{secs % 60:02d}{fraction}" if secs % 60 or frac else "")
        # DateTimeUtil's ISO_LOCAL_DATE_TIME: seconds always, the fraction without trailing zeros
        fraction = f".{frac:09d}".rstrip("0") if frac else ""
        y, m, d = civil_from_days(days)
        year = f"+{y}" if y > 9999 else (f"-{-y:04d}" if y < 0 else f"{y:04d}")
        text = f"{year}-{m:02d}-{d:02d}T{hm}:{secs % 60:02d}{fraction}"
        return text + ("+00:00" if kind in it.ZONED_TIMESTAMP_NAMES else "")
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, bytes):  # a uuid from a manifest: its bytes, shown as Java shows a UUID
        return str(uuid.UUID(bytes=value)) if kind == "uuid" else base64.b64encode(value).decode()
    if isinstance(value, float):
        return _java_float(value, kind == "float")
    return str(value)


def civil_from_days(days: int) -> tuple[int, int, int]:
    """(year, month, day) of ``days`` since 1970-01-01 in the proleptic Gregorian calendar, any year
    (Python's ``datetime`` stops at years 1 and 9999)."""
    z = days + 719_468
    era = z // 146_097
    doe = z - era * 146_097
    yoe = (doe - doe // 1460 + doe // 36_524 - doe // 146_096) // 365
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    d = doy - (153 * mp + 2) // 5 + 1
    m = mp + 3 if mp < 10 else mp - 9
    return yoe + era * 400 + (m <= 2), m, d


def _java_float(value: float, single: bool) -> str:
    if math.isnan(value) or math.isinf(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    x = np.float32(value) if single else np.float64(value)
    if value == 0 or 1e-3 <= abs(value) < 1e7:
        return np.format_float_positional(x, unique=True, trim="0")
    text = np.format_float_scientific(x, unique=True, trim="0", exp_digits=1)
    if len(text.split("e")[0].lstrip("-").replace(".", "").rstrip("0")) == 1:  # one digit: Java may print two
        text = _closer_two_digits(x, text)
    return text.replace("e+", "E").replace("e", "E")


def _closer_two_digits(x: np.floating[Any], shortest: str) -> str:
    """Java's Double/Float.toString (JDK 19 on): where the shortest decimal that reads back as ``x`` has
    one digit, the closest to ``x`` of the one- and two-digit decimals that do (``Double.MIN_VALUE``:
    ``4.9E-324``, not ``5E-324``); numpy's ``shortest`` otherwise."""
    exact = Decimal(float(x))  # a float32 is exact in a float64
    two = exact.quantize(Decimal(1).scaleb(exact.adjusted() - 1), rounding=ROUND_HALF_EVEN)
    one = Decimal(shortest.replace("e", "E"))
    if type(x)(str(two)) != x or abs(two - exact) >= abs(one - exact):
        return shortest
    digits = f"{abs(two).scaleb(-two.adjusted()):.1f}"  # d.d
    return f"{'-' if two < 0 else ''}{digits}e{two.adjusted()}"


def partition_key(values: tuple[Any, ...]) -> tuple[Any, ...]:
    """A partition tuple as a dict key equal for the tuples Iceberg Java's partition keys find equal."""
    return tuple(map(_same_value, values))


def _same_value(value: Any) -> Any:
    """A dict key equal for equal partition values: every NaN one value, -0.0 and 0.0 two (as Iceberg
    Java's partition keys; identity-partition readers take the value from the partition tuple)."""
    if isinstance(value, float):
        return ("nan",) if math.isnan(value) else ("float", value, math.copysign(1.0, value))
    return value
