"""Row orderings for compaction's ``sort`` and ``zorder`` strategies (Iceberg rewrite_data_files).

Every sort field becomes one or more uint64 *words* whose unsigned order is the field's order (spec
"Sorting"): a null-flag word (only when the column has nulls; null placement is not reversed by DESC),
then a value word. Signed integers, dates, times and timestamps flip their sign bit; floats map to
IEEE totalOrder keys (``-NaN < -Inf < -x < -0.0 < 0.0 < x < Inf < NaN``, every NaN of one sign alike);
decimals of up to 18 digits use their unscaled value; booleans are 0/1; DESC is the bitwise NOT.
Variable-width values (strings and binary by unsigned bytes, fixed, uuid, wider decimals by value)
become dense ranks. ``np.lexsort`` over the words gives a stable sort; :func:`zorder_indices` instead
interleaves each column's ascending word bit by bit (Morton order) and sorts the interleaved words.

``backend="cuda"`` does the word arithmetic, the interleave and the lexsort with CuPy (one code path,
``xp`` being numpy or cupy). Transforms run through :func:`gpu_engine.transforms.apply` on the same
backend. The dense ranks of variable-width columns are computed by pyarrow on the host in both
backends, then copied to the device with the other words.
"""

from __future__ import annotations

from collections.abc import Sequence
from types import ModuleType
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from .._deps import require
from ..backend.select import choose
from ..errors import SchemaMismatch, UnsupportedFeature, UnsupportedTransform
from ..iceberg import types as it
from ..iceberg.schema import Schema
from ..iceberg.sorting import SortField, SortOrder
from ..transforms import UnknownTransform, apply, parse_transform

Array = Any  # a 1-D uint64 numpy or cupy array
_SIGN64 = 1 << 63
_INTERLEAVE_ROWS = 1 << 15  # rows per interleave block: k * 64 bytes of unpacked bits per row


def sort_indices(
    table: pa.Table, schema: Schema, order: SortOrder, *, backend: str = "cpu"
) -> npt.NDArray[np.int64]:
    """Row indices that put ``table`` (the columns of ``schema``, by name) in ``order``; stable: rows
    that compare equal keep their input order."""
    xp = array_module(backend)
    return _lexsort(normalized_words(table, schema, order.fields, backend=backend), table.num_rows, xp)


def zorder_indices(
    table: pa.Table,
    schema: Schema,
    columns: Sequence[str],
    *,
    backend: str = "cpu",
    prefix: Sequence[SortField] = (),
) -> npt.NDArray[np.int64]:
    """Row indices that put ``table`` in Z-order (Morton order) over ``columns`` (dotted schema names),
    after the fields of ``prefix`` (sorted by those first).

    Each column's ascending word (nulls as word 0, so first) is interleaved MSB-first across the
    columns into ``len(columns)`` words, which are then sorted (stable).
    """
    if isinstance(columns, str) or not columns:
        raise UnsupportedFeature(f"z-order needs a list of one or more columns, got {columns!r}")
    fields = [SortField((_field_id(schema, name),), "identity", "asc", "nulls-first") for name in columns]
    words = normalized_words(table, schema, fields, backend=backend, fold_nulls=True)
    xp = array_module(backend)
    first = normalized_words(table, schema, prefix, backend=backend)
    return _lexsort([*first, *interleave(words, xp)], table.num_rows, xp)


def array_module(backend: str) -> ModuleType:
    """numpy for the CPU backend, cupy for CUDA (resolving "auto" once; CUDA without a device is an error)."""
    if choose(backend).name == "cuda":
        return require("cupy", "ordering rows with backend='cuda'")
    return np


def normalized_words(
    table: pa.Table,
    schema: Schema,
    fields: Sequence[SortField],
    *,
    backend: str = "cpu",
    fold_nulls: bool = False,
) -> list[Array]:
    """The uint64 words of ``fields`` over ``table``'s rows, most significant first; their unsigned
    lexicographic order is the sort order.

    ``fold_nulls`` (for the z-order) gives exactly one word per field: nulls become word 0 (ties with
    the lowest value word) instead of a separate null-flag word.
    """
    xp = array_module(backend)
    out: list[Array] = []
    for f in fields:
        values = _transformed(table, schema, f, backend)
        out.extend(_field_words(values, f, xp, fold_nulls))
    return out


def interleave(words: Sequence[Array], xp: ModuleType) -> list[Array]:
    """Morton interleave: bit ``i`` (from the MSB) of word ``c`` becomes bit ``i * k + c`` of the
    ``64 * k``-bit result, returned as ``k`` uint64 words, most significant first."""
    k = len(words)
    if k <= 1:
        return list(words)
    n = len(words[0])
    shifts = [xp.uint64(56 - 8 * j) for j in range(8)]
    stacked = xp.stack(list(words), axis=1)  # (n, k)
    out = xp.empty((n, k), dtype=xp.uint64)
    for start in range(0, n, _INTERLEAVE_ROWS):
        block = stacked[start : start + _INTERLEAVE_ROWS]
        m = block.shape[0]
        be = xp.stack([(block >> s) & xp.uint64(0xFF) for s in shifts], axis=-1).astype(xp.uint8)
        bits = xp.unpackbits(be.reshape(-1)).reshape(m, k, 64)  # MSB-first bits of each word
        mixed = xp.ascontiguousarray(bits.transpose(0, 2, 1)).reshape(-1)  # bit i of every word, i = 0..63
        packed = xp.packbits(mixed).reshape(m, k, 8).astype(xp.uint64)  # big-endian bytes of each result
        result = xp.zeros((m, k), dtype=xp.uint64)
        for j, s in enumerate(shifts):
            result |= packed[:, :, j] << s
        out[start : start + m] = result
    return [xp.ascontiguousarray(out[:, j]) for j in range(k)]


# -- columns and transforms ------------------------------------------------------------------------


def _field_id(schema: Schema, name: str) -> int:
    fid = schema.ids_by_name.get(name)
    if fid is None:
        raise SchemaMismatch(f"z-order column {name!r} is not in schema {schema.schema_id}")
    return fid


def _transformed(table: pa.Table, schema: Schema, f: SortField, backend: str) -> pa.Array:
    """The values of ``f``'s source column after ``f``'s transform (host Arrow)."""
    if len(f.source_ids) != 1:
        raise UnsupportedTransform(
            f"sort field {f.transform}{list(f.source_ids)}: transforms of several source columns "
            "are not supported"
        )
    transform = parse_transform(f.transform, strict=False)
    if isinstance(transform, UnknownTransform):
        raise UnsupportedTransform(f"sort field over source {f.source_id}: unknown transform {f.transform!r}")
    values, source_type = _source_column(table, schema, f.source_id)
    if isinstance(values.type, pa.BaseExtensionType):  # arrow.uuid: transforms take its storage
        values = values.storage
    return apply(transform, source_type, values, backend=backend)


def _source_column(table: pa.Table, schema: Schema, field_id: int) -> tuple[pa.Array, it.PrimitiveType]:
    """The column of ``field_id`` (a top-level column or a struct field in one) and its Iceberg type."""
    field = schema.by_id.get(field_id)
    if field is None:
        raise SchemaMismatch(f"sort source field id {field_id} is not in schema {schema.schema_id}")
    path = schema.paths_by_id[field_id]
    name = ".".join(path)
    if not isinstance(field.type, it.PrimitiveType):
        raise UnsupportedFeature(
            f"column {name!r} has type {field.type}: only primitive columns can be sorted"
        )
    if path[0] not in table.column_names:
        raise SchemaMismatch(f"column {path[0]!r} is not in the table (columns: {table.column_names})")
    column: pa.Array = table.column(path[0]).combine_chunks()
    for step in path[1:]:
        if not pa.types.is_struct(column.type):
            raise UnsupportedFeature(f"column {name!r} lies inside a list or map: it cannot be sorted by")
        if column.type.get_field_index(step) < 0:
            raise SchemaMismatch(f"column {name!r}: the table's struct has no field {step!r}")
        column = pc.struct_field(column, step)  # a null parent makes the child null
    return column, field.type


# -- words -----------------------------------------------------------------------------------------


def _field_words(values: pa.Array, f: SortField, xp: ModuleType, fold_nulls: bool) -> list[Array]:
    if isinstance(values.type, pa.BaseExtensionType):
        values = values.storage
    if pa.types.is_dictionary(values.type):
        values = values.dictionary_decode()
    n, nulls = len(values), values.null_count
    if nulls == n:  # all null (void, or nothing but nulls): every row ties
        return [xp.zeros(n, dtype=xp.uint64)] if fold_nulls else []
    value = _value_word(values, xp)
    if not f.ascending:
        value = ~value
    if nulls == 0:
        return [value]
    valid = xp.asarray(values.is_valid().to_numpy(zero_copy_only=False))
    value = xp.where(valid, value, xp.uint64(0))  # nulls tie with each other
    if fold_nulls:
        return [value]
    flag = valid if f.nulls_first else ~valid  # the flag word is 0 for the rows that come first
    return [flag.astype(xp.uint64), value]


def _value_word(values: pa.Array, xp: ModuleType) -> Array:
    """Ascending uint64 keys of ``values`` (null slots hold arbitrary keys)."""
    t = values.type
    if pa.types.is_boolean(t):
        return xp.asarray(_host(values.cast(pa.uint8()), 0)).astype(xp.uint64)
    if pa.types.is_floating(t):
        return _float_key(values, xp)
    if pa.types.is_decimal(t) and t.precision <= 18 and t.bit_width == 128:
        return _signed_key(xp.asarray(_decimal_low_words(values)), xp)
    if pa.types.is_unsigned_integer(t):
        return xp.asarray(_host(values.cast(pa.uint64()), 0))
    if pa.types.is_integer(t):
        return _signed_key(xp.asarray(_host(values.cast(pa.int64()), 0)), xp)
    if pa.types.is_date(t) or pa.types.is_time(t) or pa.types.is_timestamp(t) or pa.types.is_duration(t):
        physical = pa.int32() if t.bit_width == 32 else pa.int64()
        return _signed_key(xp.asarray(_host(values.cast(physical).cast(pa.int64()), 0)), xp)
    if _ranked(t):
        return xp.asarray(_dense_rank(values))
    raise UnsupportedFeature(f"values of Arrow type {t} cannot be sorted")


def _ranked(t: pa.DataType) -> bool:
    is_ = pa.types
    return bool(
        is_.is_string(t) or is_.is_large_string(t) or is_.is_string_view(t) or is_.is_binary(t)
        or is_.is_large_binary(t) or is_.is_binary_view(t) or is_.is_fixed_size_binary(t) or is_.is_decimal(t)
    )  # fmt: skip


def _host(values: pa.Array, fill: int) -> npt.NDArray[Any]:
    """The values as a numpy array, nulls replaced by ``fill`` (their keys are masked later)."""
    return np.asarray(values.fill_null(fill).to_numpy(zero_copy_only=False))


def _signed_key(ints: Array, xp: ModuleType) -> Array:
    """int64 values as uint64 keys in the same order (the sign bit flipped)."""
    return ints.astype(xp.int64).view(xp.uint64) ^ xp.uint64(_SIGN64)


def _decimal_low_words(values: pa.Array) -> npt.NDArray[np.int64]:
    """Unscaled values of a decimal128 array whose values fit in 64 bits: the low little-endian half."""
    data = values.buffers()[1]
    words = np.frombuffer(data, dtype="<i8") if data is not None else np.zeros(0, dtype=np.int64)
    return words[2 * values.offset : 2 * (values.offset + len(values)) : 2].astype(np.int64)


def _float_key(values: pa.Array, xp: ModuleType) -> Array:
    """IEEE totalOrder keys, float32 computed on its 32 bits then widened (no float conversion)."""
    if values.type == pa.float16():
        values = values.cast(pa.float32())
    wide = values.type == pa.float64()
    unsigned, width = (xp.uint64, 64) if wide else (xp.uint32, 32)
    floats = _host(values, 0).astype(np.float64 if wide else np.float32)
    bits = xp.asarray(floats).view(unsigned)
    sign = unsigned(1 << (width - 1))
    inf = unsigned(0x7FF0000000000000 if wide else 0x7F800000)
    quiet = unsigned(0x7FF8000000000000 if wide else 0x7FC00000)
    nan = (bits & ~sign) > inf
    bits = xp.where(nan, (bits & sign) | quiet, bits)  # one NaN per sign: NaNs of a sign tie
    key = xp.where((bits & sign) != 0, ~bits, bits | sign)
    return key.astype(xp.uint64)


def _dense_rank(values: pa.Array) -> npt.NDArray[np.uint64]:
    """Dense ranks (1-based) in the spec's order: strings and binary by unsigned bytes, decimals by value."""
    t = values.type
    if pa.types.is_string(t) or pa.types.is_binary(t):
        values = values.cast(pa.binary())  # compare bytes, not characters
    elif pa.types.is_large_string(t) or pa.types.is_string_view(t) or pa.types.is_binary_view(t):
        values = values.cast(pa.large_binary())
    ranks = pc.rank(values, sort_keys="ascending", tiebreaker="dense")
    return np.asarray(ranks.to_numpy(zero_copy_only=False), dtype=np.uint64)


def _lexsort(words: Sequence[Array], n: int, xp: ModuleType) -> npt.NDArray[np.int64]:
    """Stable ascending order of the rows by ``words`` (most significant first)."""
    if not words or n == 0:
        return np.arange(n, dtype=np.int64)
    keys = list(reversed(words))  # lexsort's last key is the primary one
    if xp is np:
        return np.lexsort(keys).astype(np.int64, copy=False)
    keys.insert(0, xp.arange(n, dtype=xp.uint64))  # a total order: stable whatever the device sort is
    order = xp.lexsort(xp.stack(keys))
    return np.asarray(xp.asnumpy(order), dtype=np.int64)
