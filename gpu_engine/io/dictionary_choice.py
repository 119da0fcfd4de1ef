"""Which columns of a row group are dictionary-encoded: parquet-mr's fallback, decided up front.

pyarrow dictionary-encodes every column until its dictionary outgrows ``write.parquet.dict-size-bytes``.
parquet-mr (Iceberg Java's writer) also falls back to plain encoding after the first page when the
dictionary does not pay: dictionary plus encoded indices at least as large as the plain values. Columns of
distinct values (ids, timestamps, measurements) then skip a hash pass per value and come out no larger;
for small files, whose dictionaries never reach the size limit, that is most of the encoding time.

Here the choice is made before encoding, from a probe of each top-level primitive column: its first
``_PROBE`` non-null values. A probe without a repeated value says the dictionary cannot pay on them (each
value would cost its plain bytes in the dictionary plus an index); a single repeat keeps the dictionary
(pyarrow's default, and its own size limit). Nested leaves keep pyarrow's default. The choice depends
only on the data, so the files do not depend on how row groups are scheduled.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa
import pyarrow.compute as pc

_PROBE = 2048  # values probed per column


def dictionary_columns(table: pa.Table, leaf_paths: Sequence[str]) -> list[str] | bool:
    """``use_dictionary`` for :func:`pyarrow.parquet.write_table`: True (every column), or the leaf column
    paths (``path_in_schema``) to dictionary-encode, without the top-level columns that fall back."""
    plain = {f.name for f in table.schema if falls_back(table.column(f.name))}
    if not plain:
        return True
    return [p for p in leaf_paths if p not in plain]


def falls_back(column: pa.ChunkedArray | pa.Array) -> bool:
    """Whether the probe of ``column`` holds only distinct values (so it is written plainly)."""
    t = column.type
    if isinstance(t, pa.BaseExtensionType):
        t = t.storage_type
    variable = pa.types.is_string(t) or pa.types.is_large_string(t)
    variable = variable or pa.types.is_binary(t) or pa.types.is_large_binary(t)
    if not variable and _byte_width(t) is None:
        return False  # booleans, nested and null columns: pyarrow's default
    probe = _values(column.slice(0, 2 * _PROBE))[:_PROBE]
    return len(probe) > 1 and int(pc.count_distinct(probe).as_py()) == len(probe)


def _byte_width(t: pa.DataType) -> int | None:
    """Bytes per value of a fixed-width type of whole bytes (None: booleans and non-fixed types)."""
    try:
        bits = int(t.bit_width)
    except ValueError:  # nested, variable-width and null types
        return None
    return bits // 8 if bits >= 8 else None


def _values(column: pa.ChunkedArray | pa.Array) -> pa.Array:
    """The non-null values of ``column`` as one array of its storage type."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    if isinstance(column.type, pa.BaseExtensionType):
        column = column.storage
    return column.drop_null()
