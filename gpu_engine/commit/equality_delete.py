"""Equality deletes by key: :func:`delete_rows` writes equality delete files of key rows as a ``delete``
snapshot (upserts write them too, :mod:`.upsert`).

Keys are the ``on`` columns (default: the table's identifier fields, :func:`key_columns`); NULL matches NULL.
A nested key (``s.k``) is read from the input's struct ``s``, written as that struct holding the keys alone.
An equality delete of a partitioned spec applies only to data files of that spec, so the deletes are
written in every spec that holds live rows (:func:`specs_for_deletes`), and the keys need those specs'
partition source columns unless the table has an unpartitioned spec to write global deletes in. The commit
fails validation when files of a spec the deletes were not written in were committed meanwhile
(:func:`same_delete_specs`): their rows would escape the keys.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Sequence
from typing import TYPE_CHECKING, cast

import pyarrow as pa
import pyarrow.compute as pc

from ..errors import InvalidOption, SchemaMismatch, ValidationError
from ..iceberg import types as it
from ..iceberg.content_file import ContentFile
from ..iceberg.metadata import TableMetadata
from ..io.data_input import arrow_table
from ..io.equality_delete_write import equality_delete_schema, write_equality_deletes
from ..io.fileio import FileIO
from .delete import DeleteResult
from .entries import snapshot_manifests
from .producer import check_committable, commit, delete_files
from .table_update import parent_of
from .update import Faults, SnapshotUpdate, Validation

if TYPE_CHECKING:
    from ..table import Table


def delete_rows(
    table: Table,
    keys: pa.Table,
    on: Sequence[str] | None = None,
    *,
    branch: str = "main",
    backend: str = "auto",
    faults: Faults | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> DeleteResult:
    """Delete the rows whose ``on`` columns (default: the table's identifier fields) equal a row of ``keys``
    (NULL matches NULL), as equality delete files in the specs :func:`delete_specs` names (the keys need the
    partition columns of each, unless the table has an unpartitioned spec to write global deletes in); rows
    added later with the same key are not deleted. ``deleted_rows`` counts the keys (the rows they match are
    not counted)."""
    check_committable(table)
    md = table.metadata
    if md.format_version < 2:
        raise ValidationError(
            f"table {md.location}: format version 1 has no equality deletes (upgrade it: "
            "tbl.update_properties().set('format-version', '2'))"
        )
    keys = arrow_table(keys, "keys")
    on = key_columns(md, keys, on, what="keys")
    ids = [md.schema.find_field(c).field_id for c in on]
    if keys.num_rows == 0:
        return DeleteResult(0)
    files: list[ContentFile] = []
    specs = delete_specs(table, branch, ids)
    try:
        for spec_id in specs:
            files += write_equality_deletes(
                table.io, md.location, md.schema, md.spec_by_id(spec_id), spec_id,
                key_rows(md, keys, on), ids, properties=md.properties, backend=backend,
            )  # fmt: skip
    except BaseException:
        delete_files(table.io, [f.path for f in files], fault=None)
        raise
    update = SnapshotUpdate("delete", added=files, validate=same_delete_specs(table, branch, ids, specs))
    result = commit(table, update, branch=branch, faults=faults, sleep=sleep, owned=[f.path for f in files])
    return DeleteResult(keys.num_rows, tuple(files), commit=result)


def key_columns(md: TableMetadata, rows: pa.Table, on: Sequence[str] | None, *, what: str) -> list[str]:
    """The key columns ``on`` of an equality delete or upsert (default: the table's identifier fields),
    checked distinct and present in ``rows`` (called ``what`` in errors); a nested key (``s.k``) is found
    in ``rows`` as the field ``k`` of the struct column ``s``."""
    if on is None:
        on = [md.schema.names_by_id[i] for i in md.schema.identifier_field_ids]
        if not on:
            raise InvalidOption(f"on: table {md.location} has no identifier fields; name the key columns")
    keys = list(on)
    if not keys or len(set(keys)) != len(keys):
        raise InvalidOption(f"on: one or more distinct column names, not {keys}")
    missing = [c for c in keys if _arrow_path(rows.schema, _path(md, c)) is None]  # (or not in the table)
    if missing:
        raise SchemaMismatch(f"{what}: no column(s) {missing} (columns: {rows.column_names})")
    return keys


def key_values(md: TableMetadata, rows: pa.Table, key: str) -> pa.ChunkedArray:
    """The values of the key column ``key`` of ``rows`` (null where a struct leading to it is null)."""
    column = rows.column(_path(md, key)[0])
    for index in cast(list[int], _arrow_path(rows.schema, _path(md, key)))[1:]:
        column = pc.struct_field(column, [index])
    return column


def key_rows(md: TableMetadata, rows: pa.Table, keys: Sequence[str]) -> pa.Table:
    """The columns of equality delete rows for ``keys`` from ``rows``: top-level keys as they are, nested
    ones within their structs, holding only the key fields (and the structs' nulls)."""
    ids = [md.schema.find_field(c).field_id for c in keys]
    fields = equality_delete_schema(md.schema, ids).fields
    return pa.table([_keep(rows.column(f.name), f) for f in fields], names=[f.name for f in fields])


def _keep(column: pa.ChunkedArray, f: it.NestedField) -> pa.ChunkedArray:
    if not isinstance(f.type, it.StructType):
        return column
    return pa.chunked_array([_keep_struct(c, f.type) for c in column.chunks or [column.combine_chunks()]])


def _keep_struct(values: pa.Array, struct: it.StructType) -> pa.Array:
    children = []
    for c in struct.fields:
        child = pc.struct_field(values, [values.type.get_field_index(c.name)])
        children.append(_keep_struct(child, c.type) if isinstance(c.type, it.StructType) else child)
    pairs = zip(struct.fields, children, strict=True)
    fields = [values.type.field(c.name).with_type(v.type) for c, v in pairs]
    mask = values.is_null() if values.null_count else None
    return pa.StructArray.from_arrays(children, fields=fields, mask=mask)


def _path(md: TableMetadata, key: str) -> tuple[str, ...]:
    fid = md.schema.ids_by_name.get(key)
    return (key,) if fid is None else tuple(md.schema.paths_by_id[fid])


def _arrow_path(schema: pa.Schema, path: tuple[str, ...]) -> list[int] | None:
    """The indexes of ``path`` through ``schema``'s columns and struct fields; None where it is missing."""
    if schema.get_field_index(path[0]) < 0:
        return None
    out = [schema.get_field_index(path[0])]
    at = schema.field(path[0]).type
    for step in path[1:]:
        if not pa.types.is_struct(at) or at.get_field_index(step) < 0:
            return None
        out.append(at.get_field_index(step))
        at = at.field(step).type
    return out


def same_delete_specs(table: Table, branch: str, key_ids: Collection[int], written: list[int]) -> Validation:
    """The check of an equality delete's commit: the specs it must be written in (:func:`delete_specs`) are
    still ``written`` on the refreshed table, else rows of a spec added meanwhile would escape it."""

    def validate(base: TableMetadata) -> None:
        if any(base.spec_by_id(s).is_unpartitioned for s in written):
            return  # a global delete: it reaches the data files of every spec
        missing = sorted(_live_data_specs(base, table.io, branch) - set(written))
        if missing:  # (a spec made the default meanwhile, holding no data yet, is no conflict)
            raise ValidationError(
                f"table {base.location}: data files of partition spec(s) {missing} were committed after "
                f"this equality delete was written in spec(s) {written}; its keys would not reach their rows"
            )

    return validate


def delete_specs(table: Table, branch: str, key_ids: Collection[int] | None = None) -> list[int]:
    """:func:`specs_for_deletes` of the table's current metadata."""
    return specs_for_deletes(table.metadata, table.io, branch, key_ids)


def specs_for_deletes(
    md: TableMetadata, io: FileIO, branch: str, key_ids: Collection[int] | None = None
) -> list[int]:
    """The specs equality deletes are written in so that they reach every live row: an equality delete of a
    partitioned spec applies only to data files of that spec (spec "Scan Planning"), one of an unpartitioned
    spec to every data file. The default spec when it is unpartitioned; else an unpartitioned spec of the
    live data files; else the default spec and each spec of the live data files (after partition evolution,
    files of older specs would be missed), unless the keys (field ids ``key_ids``) lack a partition column
    of one of them and the table has an unpartitioned spec: then that one."""
    if md.spec.is_unpartitioned:
        return [md.default_spec_id]
    specs = sorted({md.default_spec_id, *_live_data_specs(md, io, branch)})
    unpartitioned = [s for s in specs if md.spec_by_id(s).is_unpartitioned]
    if unpartitioned:
        return unpartitioned[:1]
    sources = {
        i for s in specs for f in md.spec_by_id(s).fields if f.transform != "void" for i in f.source_ids
    }
    global_specs = [s.spec_id for s in md.partition_specs if s.is_unpartitioned]
    if key_ids is not None and not sources <= set(key_ids) and global_specs:
        return global_specs[:1]
    return specs


def _live_data_specs(md: TableMetadata, io: FileIO, branch: str) -> set[int]:
    """The specs of the data files live at the head of ``branch`` (by its manifests' counts)."""
    parent = parent_of(md, branch)
    manifests = () if parent is None else snapshot_manifests(io, parent)
    return {
        m.partition_spec_id if m.partition_spec_id is not None else 0
        for m in manifests
        if m.content == 0 and (m.added_files_count != 0 or m.existing_files_count != 0)
    }
