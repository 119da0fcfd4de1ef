"""The rows a write is given, checked for what they are before anything is written: an
:class:`~gpu_engine.errors.InvalidData` names the argument, what it is and the kinds a write takes,
instead of a bare ``TypeError`` or ``AttributeError`` from deep in the writer (a dict was iterated as its
keys, a ChunkedArray as its scalars, None raised ``'NoneType' object is not iterable``).

Appends, overwrites and partition overwrites take an Arrow table, record batch, record batch reader or
iterable of record batches (:func:`record_batches`); upserts and equality deletes, which need all their
rows at once, an Arrow table or record batch (:func:`arrow_table`). pandas DataFrames are not taken (the
README documents Arrow input only): the error says how to convert one.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING

import pyarrow as pa

from ..errors import InvalidData

if TYPE_CHECKING:
    from .parquet_write import Data

_STREAM_KINDS = "a pyarrow Table, RecordBatch, RecordBatchReader or an iterable of RecordBatches"
_TABLE_KINDS = "a pyarrow Table or RecordBatch"


def record_batches(data: Data, what: str = "data") -> Iterator[pa.RecordBatch]:
    """The batches of ``data`` (see the module doc); its kind is checked at once (InvalidData naming
    ``what``), each element of an iterable as it comes."""
    if isinstance(data, pa.Table):
        return iter(data.to_batches() or [_empty(data.schema)])
    if isinstance(data, pa.RecordBatch):
        return iter([data])
    if isinstance(data, pa.RecordBatchReader):
        return _or_empty(iter(data), data.schema)
    _refuse_obvious(data, what, _STREAM_KINDS)
    if not isinstance(data, Iterable):
        raise InvalidData(f"{what}: expected {_STREAM_KINDS}, not {_kind(data)}")
    return _or_empty(_checked(data, what), getattr(data, "schema", None))


def _empty(schema: pa.Schema) -> pa.RecordBatch:
    return pa.RecordBatch.from_pylist([], schema=schema)


def _or_empty(batches: Iterator[pa.RecordBatch], schema: object) -> Iterator[pa.RecordBatch]:
    """``batches``; none, one empty batch of ``schema`` when there is one: data without rows is still
    checked against the table's schema (an empty table of other columns had overwritten every row)."""
    seen = False
    for batch in batches:
        seen = True
        yield batch
    if not seen and isinstance(schema, pa.Schema):
        yield _empty(schema)


def _checked(data: Iterable[object], what: str) -> Iterator[pa.RecordBatch]:
    for i, item in enumerate(data):
        if not isinstance(item, pa.RecordBatch):
            hint = " (join tables with pyarrow.concat_tables)" if isinstance(item, pa.Table) else ""
            raise InvalidData(
                f"{what}: item {i} of the {type(data).__name__} is {_kind(item)}: an iterable given as "
                f"data must yield pyarrow RecordBatches{hint}"
            )
        yield item


def arrow_table(data: object, what: str = "data") -> pa.Table:
    """``data`` as an Arrow table (a record batch as a table of one batch); InvalidData naming ``what``
    for anything else."""
    if isinstance(data, pa.Table):
        return data
    if isinstance(data, pa.RecordBatch):
        return pa.Table.from_batches([data])
    _refuse_obvious(data, what, _TABLE_KINDS)
    hint = " (read a reader with reader.read_all())" if isinstance(data, pa.RecordBatchReader) else ""
    raise InvalidData(f"{what}: expected {_TABLE_KINDS}, not {_kind(data)}{hint}")


def _refuse_obvious(data: object, what: str, kinds: str) -> None:
    """InvalidData for the inputs that are iterable but never rows: None, strings, mappings, Arrow
    columns and pandas frames."""
    module = type(data).__module__.split(".")[0]
    if module in ("pandas", "polars"):
        raise InvalidData(
            f"{what}: expected {kinds}, not a {module} {type(data).__name__} (convert it first, e.g. "
            "pyarrow.Table.from_pandas(df, preserve_index=False))"
        )
    if isinstance(data, (pa.ChunkedArray, pa.Array)):
        raise InvalidData(
            f"{what}: expected {kinds}, not a single Arrow column ({type(data).__name__}); "
            "make a table: pyarrow.table({'name': column})"
        )
    if isinstance(data, Mapping):
        raise InvalidData(
            f"{what}: expected {kinds}, not a {type(data).__name__} (make a table: pyarrow.table(mapping))"
        )
    if data is None or isinstance(data, (str, bytes, bytearray)):
        raise InvalidData(f"{what}: expected {kinds}, not {_kind(data)}")


def is_cudf_frame(data: object) -> bool:
    """Whether ``data`` is a cuDF DataFrame (told apart without importing cuDF)."""
    kind = type(data)
    return kind.__name__ == "DataFrame" and kind.__module__.split(".")[0] == "cudf"


def _kind(value: object) -> str:
    if value is None:
        return "None"
    kind = type(value)
    return f"a {kind.__name__}" if kind.__module__ == "builtins" else f"a {kind.__module__}.{kind.__name__}"
