"""Column projection (spec "Column Projection"): a Parquet file's columns resolved by field id against a
requested Iceberg schema, at every depth (struct fields, list elements, map keys and values).

:func:`project` decides once per file which top-level file columns to read and how each requested field
is produced; :meth:`Projection.apply` turns a batch read with those columns into a RecordBatch of exactly
``to_arrow_schema(requested)``. Field ids come from the file's ``PARQUET:field_id`` metadata; a file
without any takes them from the table's name mapping. A requested field absent from the file is, in
order: the given constant (identity partition value), its ``initial-default``, or null; a required field
with neither is a :class:`SchemaMismatch`. ``unknown`` fields are always null. File columns holding nulls
for a required field are a :class:`DataFileError`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from ..errors import DataFileError, SchemaMismatch, UnsupportedFeature
from ..iceberg import types as it
from ..iceberg.name_mapping import MappedField, NameMapping
from ..iceberg.partitioning import PartitionSpec
from ..iceberg.schema import Schema
from . import parquet_types
from .arrow_nested import struct_array
from .arrow_schema import Make, constant_maker, default_maker, field_id_of, to_arrow_schema, to_arrow_type

Conv = Callable[[pa.Array, pa.Array | None], pa.Array]  # (file array, INT96 seconds companion) -> output


@dataclass
class _Node:
    """One file field with its (file or mapped) field id, children and position among the leaf columns."""

    field: pa.Field
    field_id: int | None
    path: str
    children: list[_Node]
    leaf: int  # first leaf column index (depth-first, as the Parquet schema orders its columns)
    leaves: int
    physical: str | None = None  # Parquet physical type of a leaf


@dataclass(frozen=True)
class LeafColumn:
    """A requested primitive read from one Parquet leaf column through structs only (for statistics)."""

    index: int
    file_type: pa.DataType
    physical_type: str
    type: it.PrimitiveType


@dataclass(frozen=True)
class ColumnRead:
    """How one requested top-level field is produced: read from a file column or made (constant)."""

    field: it.NestedField  # the requested field
    column: str | None  # file column name, None for a constant
    read: Conv | None
    make: Make | None
    where: str
    file_type: pa.DataType | None = None  # pyarrow's type of the file column
    physical: str | None = None  # its Parquet physical type, for a primitive column of known leaves

    @property
    def required(self) -> bool:
        return self.column is not None and self.field.required


@dataclass(frozen=True)
class Projection:
    path: str
    schema: pa.Schema  # exactly to_arrow_schema(requested)
    columns: tuple[str, ...]  # top-level file columns to read
    int96_columns: tuple[str, ...]  # those holding INT96 leaves: pass their seconds decoding to apply
    int96_unit: str  # the unit to decode INT96 in ("us", or "ns" when a *_ns field reads one)
    leaves: Mapping[int, LeafColumn]
    reads: tuple[ColumnRead, ...] = field(repr=False)

    def apply(
        self, data: pa.RecordBatch | pa.Table, seconds: pa.RecordBatch | pa.Table | None = None
    ) -> pa.RecordBatch:
        """``data`` (read with :attr:`columns`) as a batch of :attr:`schema`; ``seconds``: the
        :attr:`int96_columns` of the same rows decoded with INT96 unit ``"s"``."""
        n = data.num_rows
        arrays = []
        for top in self.reads:
            if top.read is None:
                assert top.make is not None
                arrays.append(top.make(n))
                continue
            assert top.column is not None
            arr = _column(data, top.column)
            sec = (
                _column(seconds, top.column)
                if seconds is not None and top.column in self.int96_columns
                else None
            )
            out = top.read(arr, sec)
            if top.required and out.null_count:
                raise DataFileError(f"{top.where}: holds nulls for a required field")
            arrays.append(out)
        if not arrays:  # no columns (metadata columns only): from_arrays would lose the row count
            return _no_columns(n, self.schema)
        return pa.RecordBatch.from_arrays(arrays, schema=self.schema)


def _no_columns(n: int, schema: pa.Schema) -> pa.RecordBatch:
    """A batch of ``n`` rows and no columns (``schema`` has no fields)."""
    return pa.record_batch([pa.nulls(n)], names=["_"]).select([]).replace_schema_metadata(schema.metadata)


def _column(data: pa.RecordBatch | pa.Table, name: str) -> pa.Array:
    col = data.column(name)
    return col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col


# -- file fields and their ids ----------------------------------------------------------------------------


def _has_ids(fields: Sequence[pa.Field]) -> bool:
    return any(field_id_of(f) is not None or _has_ids(_arrow_children(f.type)) for f in fields)


def _arrow_children(t: pa.DataType) -> list[pa.Field]:
    if pa.types.is_struct(t):
        return [t.field(i) for i in range(t.num_fields)]
    if pa.types.is_map(t):
        return [t.key_field, t.item_field]
    if _is_list(t):
        return [t.value_field]
    return []


def _nodes(
    fields: Sequence[pa.Field],
    prefix: str,
    first_leaf: int,
    parent: pa.DataType | None,
    scope: MappedField | NameMapping | None,
    mapped_ids: bool,
) -> list[_Node]:
    """File fields as nodes; ids from ``PARQUET:field_id`` or, with ``mapped_ids``, from the name mapping."""
    out, leaf = [], first_leaf
    for i, f in enumerate(fields):
        mapped = _mapped_child(scope, f, parent, i) if mapped_ids and scope is not None else None
        fid = (mapped.field_id if mapped else None) if mapped_ids else field_id_of(f)
        path = f"{prefix}{f.name}"
        children = _nodes(_arrow_children(f.type), path + ".", leaf, f.type, mapped, mapped_ids)
        leaves = sum(c.leaves for c in children) if children else 1
        out.append(_Node(f, fid, path, children, leaf, leaves))
        leaf += leaves
    return out


def _mapped_child(
    scope: MappedField | NameMapping, f: pa.Field, parent: pa.DataType | None, i: int
) -> MappedField | None:
    if parent is not None and pa.types.is_map(parent):
        return scope.child(("key", "value")[i]) or scope.child(f.name)
    if parent is not None and not pa.types.is_struct(parent):  # list element, whatever the file calls it
        return scope.child("element") or scope.child(f.name)
    return scope.child(f.name)


def _set_physical(nodes: list[_Node], physical: Sequence[str]) -> None:
    for node in nodes:
        if node.children:
            _set_physical(node.children, physical)
        else:
            node.physical = physical[node.leaf]


# -- projection -------------------------------------------------------------------------------------------


def project(
    path: str,
    file_schema: pa.Schema,
    requested: Schema | it.StructType,
    *,
    physical_types: Sequence[str] | None = None,
    name_mapping: NameMapping | None = None,
    constants: Mapping[int, Any] | None = None,
) -> Projection:
    """Resolve ``file_schema`` (pyarrow's Arrow schema of the file) against ``requested``.

    ``physical_types``: the Parquet physical type of each leaf column (``ParquetSchema`` order), which
    finds INT96 timestamps and enables statistics; ``constants``: values for field ids absent from the file.
    """
    fields = list(file_schema)
    if _has_ids(fields):
        nodes = _nodes(fields, "", 0, None, None, False)
    elif name_mapping is not None:
        nodes = _nodes(fields, "", 0, None, name_mapping, True)
    elif fields and any(f.type != it.UNKNOWN for f in requested.fields):
        raise SchemaMismatch(
            f"{path}: the file has no field ids and the table has no name mapping "
            "(schema.name-mapping.default) to assign them"
        )
    else:
        nodes = []
    leaf_count = sum(n.leaves for n in nodes)
    known_leaves = physical_types is not None and len(physical_types) == leaf_count
    if known_leaves:
        assert physical_types is not None
        _set_physical(nodes, physical_types)
    elif physical_types is not None and "INT96" in physical_types:
        raise UnsupportedFeature(f"{path}: cannot match the file's INT96 columns to pyarrow's schema")
    ctx = _Context(path, dict(constants or {}), {}, [])
    by_id = _index(nodes, path)
    tops: list[ColumnRead] = []
    columns: list[str] = []
    int96: list[str] = []
    for f in requested.fields:
        node = by_id.get(f.field_id) if f.type != it.UNKNOWN else None
        if node is None:
            tops.append(ColumnRead(f, None, None, ctx.absent(f), ""))
            continue
        if sum(1 for n in nodes if n.field.name == node.field.name) > 1:
            raise DataFileError(f"{path}: several top-level columns are named {node.field.name!r}")
        where = f"{path}: column {node.path!r} (field id {f.field_id})"
        before = len(ctx.int96)
        read = ctx.resolve(f.type, node, where, struct_path=known_leaves)
        physical = node.physical if known_leaves and not node.children else None
        tops.append(ColumnRead(f, node.field.name, read, None, where, node.field.type, physical))
        columns.append(node.field.name)
        if len(ctx.int96) > before:
            int96.append(node.field.name)
    unit = "ns" if any(name.endswith("_ns") for name in ctx.int96) else "us"
    return Projection(
        path, to_arrow_schema(requested), tuple(columns), tuple(int96), unit, ctx.leaves, tuple(tops)
    )


def _index(nodes: Sequence[_Node], path: str) -> dict[int, _Node]:
    out: dict[int, _Node] = {}
    for node in nodes:
        if node.field_id is None:
            continue
        if node.field_id in out:
            raise DataFileError(
                f"{path}: columns {out[node.field_id].path!r} and {node.path!r} "
                f"share field id {node.field_id}"
            )
        out[node.field_id] = node
    return out


@dataclass
class _Context:
    path: str
    constants: dict[int, Any]
    leaves: dict[int, LeafColumn]
    int96: list[str]  # Iceberg type names that INT96 leaves are read as

    def resolve(self, t: it.IcebergType, node: _Node, where: str, *, struct_path: bool = False) -> Conv:
        ft = node.field.type
        if isinstance(t, it.StructType) and pa.types.is_struct(ft):
            return self._struct(t, node, where, struct_path)
        if isinstance(t, it.ListType) and _is_list(ft):
            element = self._only_child(node, 0, t.element_id, where)
            return _list(t, self.resolve(t.element, element, f"{where} element"), where)
        if isinstance(t, it.MapType) and pa.types.is_map(ft):
            key = self.resolve(t.key, self._only_child(node, 0, t.key_id, where), f"{where} key")
            value = self.resolve(t.value, self._only_child(node, 1, t.value_id, where), f"{where} value")
            return _map(t, key, value, where)
        if t == it.VARIANT:
            return _variant(node, where)
        if isinstance(t, it.PrimitiveType) and not node.children:
            is_int96 = node.physical == "INT96"
            if is_int96:
                self.int96.append(t.name)
            if struct_path and node.physical is not None and node.field_id is not None:
                self.leaves[node.field_id] = LeafColumn(node.leaf, ft, node.physical, t)
            return parquet_types.converter(ft, t, where, int96=is_int96)
        raise SchemaMismatch(f"{where}: file column of type {ft} cannot be read as Iceberg {t}")

    def _only_child(self, node: _Node, i: int, field_id: int, where: str) -> _Node:
        child = node.children[i]
        if child.field_id is not None and child.field_id != field_id:
            raise SchemaMismatch(
                f"{where}: file child {child.path!r} has field id {child.field_id}, expected {field_id}"
            )
        return child

    def _struct(self, t: it.StructType, node: _Node, where: str, struct_path: bool) -> Conv:
        by_id = _index(node.children, self.path)
        parts: list[_Part] = []
        for f in t.fields:
            child = by_id.get(f.field_id) if f.type != it.UNKNOWN else None
            if child is None:
                parts.append(_Part(None, None, self.absent(f), False))
                continue
            sub = f"{self.path}: column {child.path!r} (field id {f.field_id})"
            conv = self.resolve(f.type, child, sub, struct_path=struct_path)
            parts.append(_Part(node.children.index(child), conv, None, f.required))
        return _struct_conv(t, parts, where)

    def absent(self, f: it.NestedField) -> Make:
        """The column of a field the file does not hold: constant, initial-default or null."""
        if f.field_id in self.constants:
            return constant_maker(f.type, self.constants[f.field_id])
        return default_maker(f, self.path)


def identity_constants(spec: PartitionSpec, partition: Sequence[Any]) -> dict[int, Any]:
    """Source field id -> value of the identity partition fields of a data file (its ``partition`` tuple,
    physical values): what "Column Projection" returns for those fields when the file lacks them."""
    return {
        f.source_id: value
        for f, value in zip(spec.fields, partition, strict=False)
        if str(f.transform) == "identity"
    }


# -- nested conversions -----------------------------------------------------------------------------------


def _mask(arr: pa.Array) -> pa.Array | None:
    return arr.is_null() if arr.null_count else None


@dataclass(frozen=True)
class _Part:
    """How one field of a struct is produced: read from file child ``index`` or made as a constant."""

    index: int | None
    conv: Conv | None
    make: Make | None
    required: bool


def _struct_conv(t: it.StructType, parts: Sequence[_Part], where: str) -> Conv:
    fields = list(to_arrow_type(t))

    def run(arr: pa.Array, sec: pa.Array | None) -> pa.Array:
        children = []
        for part, f in zip(parts, fields, strict=True):
            if part.conv is None or part.index is None:
                assert part.make is not None
                children.append(part.make(len(arr)))
                continue
            child = part.conv(arr.field(part.index), None if sec is None else sec.field(part.index))
            if (
                part.required
                and child.null_count
                and pc.any(pc.and_(child.is_null(), arr.is_valid())).as_py()
            ):
                raise DataFileError(f"{where}: field {f.name!r} is required but holds nulls")
            children.append(child)
        return struct_array(children, fields, len(arr), _mask(arr))

    return run


def _is_list(t: pa.DataType) -> bool:
    return bool(pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t))


def _flat(arr: pa.Array) -> tuple[pa.Array, pa.Array]:
    """Offsets from 0 (int32) and the values they index, for a possibly sliced list or map array."""
    if pa.types.is_fixed_size_list(arr.type):
        arr = arr.cast(pa.list_(arr.type.value_field))
    offsets = arr.offsets
    start, end = offsets[0].as_py(), offsets[-1].as_py()
    if end > 2**31 - 1 + start:
        raise UnsupportedFeature(f"a batch holds more than 2**31 list elements ({end - start})")
    return pc.subtract(offsets, start).cast(pa.int32()), arr.values.slice(start, end - start)


def _list(t: it.ListType, element: Conv, where: str) -> Conv:
    target = to_arrow_type(t)

    def run(arr: pa.Array, sec: pa.Array | None) -> pa.Array:
        offsets, values = _flat(arr)
        out = element(values, None if sec is None else _flat(sec)[1])
        if t.element_required and out.null_count:
            raise DataFileError(f"{where}: list elements are required but some are null")
        return pa.ListArray.from_arrays(offsets, out, type=target, mask=_mask(arr))

    return run


def _map(t: it.MapType, key: Conv, value: Conv, where: str) -> Conv:
    target = to_arrow_type(t)

    def run(arr: pa.Array, sec: pa.Array | None) -> pa.Array:
        offsets, entries = _flat(arr)
        sec_entries = None if sec is None else _flat(sec)[1]
        keys = key(entries.field(0), None if sec_entries is None else sec_entries.field(0))
        items = value(entries.field(1), None if sec_entries is None else sec_entries.field(1))
        if keys.null_count or (t.value_required and items.null_count):
            raise DataFileError(f"{where}: map keys{' or values' if t.value_required else ''} hold nulls")
        return pa.MapArray.from_arrays(offsets, keys, items, type=target, mask=_mask(arr))

    return run


def _variant(node: _Node, where: str) -> Conv:
    names = [c.field.name for c in node.children]
    if not pa.types.is_struct(node.field.type) or "metadata" not in names or "value" not in names:
        raise SchemaMismatch(f"{where}: file column of type {node.field.type} is not an Iceberg variant")
    if "typed_value" in names:
        raise UnsupportedFeature(f"{where}: shredded variant columns are not supported yet")
    target = to_arrow_type(it.VARIANT)
    m, v = names.index("metadata"), names.index("value")

    def run(arr: pa.Array, _: pa.Array | None) -> pa.Array:
        children = [parquet_types.plain(arr.field(i)).cast(pa.large_binary()) for i in (m, v)]
        return pa.StructArray.from_arrays(children, fields=list(target), mask=_mask(arr))

    return run
