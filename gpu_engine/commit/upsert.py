"""Upserts by key, merge-on-read as Flink's upsert mode writes them: one snapshot holds equality deletes of
the new rows' keys and the new rows. An equality delete applies to data files of lower sequence numbers
only (spec "Scan Planning"), so it removes the rows those keys had and not the new ones committed with it:
existing keys are updated, new keys inserted, and nothing is read.

Keys are the ``on`` columns (default: the table's identifier fields); NULL matches NULL, as in every
equality delete. The new rows must not repeat a key. The equality deletes go in the specs
:func:`~.equality_delete.delete_specs` names, so the keys need the partition source columns (a row whose
partition changes is then a new key), unless the table has an unpartitioned spec; validation as for
:mod:`.equality_delete`. On v3 tables updated rows get new row ids: equality deletes cannot carry the old
ones (spec "Row Lineage"). Format version 2 or later.

The snapshot is an ``overwrite``; if it finally fails, every file written is deleted.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

from ..errors import InvalidData, SchemaMismatch, ValidationError
from ..iceberg.content_file import ContentFile
from ..iceberg.metadata import TableMetadata
from ..io.data_input import arrow_table
from ..io.equality_delete_write import write_equality_deletes
from ..io.parquet_write import write_table_data
from .equality_delete import delete_specs, key_columns, key_rows, key_values, same_delete_specs
from .producer import check_committable, commit, delete_files
from .update import CommitResult, Faults, SnapshotUpdate

if TYPE_CHECKING:
    from ..table import Table


@dataclass(frozen=True)
class UpsertResult:
    """An upsert that landed: the rows written (updated or inserted: telling them apart would need a read),
    the data files and equality delete files written, and its commit."""

    rows: int
    files: tuple[ContentFile, ...]
    delete_files: tuple[ContentFile, ...]
    commit: CommitResult

    @property
    def snapshot_id(self) -> int:
        return self.commit.snapshot_id


def upsert(
    table: Table,
    data: pa.Table | pa.RecordBatch,
    on: Sequence[str] | None = None,
    *,
    branch: str = "main",
    backend: str = "auto",
    faults: Faults | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> UpsertResult | None:
    """Update the rows whose ``on`` columns equal a row of ``data`` to that row, insert the others (see the
    module doc); None when ``data`` is empty (nothing committed)."""
    check_committable(table)
    md = table.metadata
    if md.format_version < 2:
        raise ValidationError(
            f"table {md.location}: format version 1 has no equality deletes, which upserts write (upgrade "
            "it: tbl.update_properties().set('format-version', '2'))"
        )
    data = arrow_table(data)
    keys = key_columns(md, data, on, what="data")
    if data.num_rows == 0:
        return None
    _check_unique(md, data, keys)
    ids = [md.schema.find_field(c).field_id for c in keys]
    if faults is not None:
        faults("data")
    written: list[ContentFile] = []
    specs = delete_specs(table, branch, ids)
    try:
        for spec_id in specs:
            written += write_equality_deletes(
                table.io, md.location, md.schema, md.spec_by_id(spec_id), spec_id,
                key_rows(md, data, keys), ids, properties=md.properties, backend=backend,
            )  # fmt: skip
        deletes = tuple(written)
        written += write_table_data(table.io, md, data, backend=backend)
    except BaseException:
        delete_files(table.io, [f.path for f in written], fault=None)
        raise
    files = tuple(written[len(deletes) :])
    update = SnapshotUpdate("overwrite", added=written, validate=same_delete_specs(table, branch, ids, specs))
    result = commit(table, update, branch=branch, faults=faults, sleep=sleep, owned=[f.path for f in written])
    return UpsertResult(data.num_rows, files, deletes, result)


def _check_unique(md: TableMetadata, data: pa.Table, keys: list[str]) -> None:
    """:class:`InvalidData` naming a key that ``data`` holds twice (NULL equal to NULL)."""
    plain = pa.table([_storage(key_values(md, data, k)) for k in keys], names=keys)
    try:
        counts = plain.group_by(keys, use_threads=False).aggregate([([], "count_all")])
    except (pa.ArrowNotImplementedError, pa.ArrowTypeError, pa.ArrowInvalid) as exc:  # run-end encoded...
        types = {k: str(plain[k].type) for k in keys}
        raise SchemaMismatch(
            f"data: key column(s) {types}: Arrow cannot compare these types ({exc}); cast them to the "
            "table's types"
        ) from None
    repeated = counts.filter(pc.greater(counts["count_all"], 1))
    if repeated.num_rows:
        first = {k: repeated[k][0].as_py() for k in keys}
        raise InvalidData(
            f"data: {repeated.num_rows} key(s) of {keys} appear more than once (first: {first} "
            f"{repeated['count_all'][0].as_py()} times); an upsert writes one row per key"
        )


def _storage(column: pa.ChunkedArray) -> pa.ChunkedArray:
    """``column``'s values as Arrow can group them: extension types as their storage, dictionaries decoded
    (grouped by index, a dictionary repeating a value would hide a repeated key)."""
    if isinstance(column.type, pa.BaseExtensionType):
        return _storage(pa.chunked_array([c.storage for c in column.chunks], type=column.type.storage_type))
    if pa.types.is_dictionary(column.type):
        return _storage(
            pa.chunked_array([c.dictionary_decode() for c in column.chunks], column.type.value_type)
        )
    return column
