"""Avro writer schemas compiled into flat programs for the columnar decoder in :mod:`.avro_fast`.

A program is an int32 array of opcodes with inline operands. The compiler walks the writer schema alongside
a target Arrow type: record fields the target names are decoded into output *slots* (regions of an int64
arena for integers, float bits and offsets, or of a uint8 arena for bytes and 0/1 flags), every other field
is parsed and skipped. Shapes: ``[null, T]`` unions (validity flags; a null fills its value slots),
``array<T>`` into lists, Iceberg's ``array<record{key, value}>`` into Arrow maps (optionally keeping only
the keys of a filter), records into structs. The compiler rejects (:class:`UnsupportedSchema`, with the
reason) what it does not cover: enums, native Avro maps, unions of several non-null types, recursive types,
arrays of items that can take zero bytes, and any Avro/Arrow type pair fastavro + ``pa.array`` would not
convert the same way.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from ..errors import UnsupportedFeature
from . import avro_vm as vm
from .avro_schema import PRIMITIVES, avro_names, key_value, min_size

#   UNION null_index branches valid else_pc: a null jumps to else_pc (the fills), a value runs on
#   JUMP pc | FILL_I s, FILL_B s n, FILL_OFF so sd, FILL_LIST so l: the value of a null
#   ARR_BEGIN l end_pc skip ... item ... ITEM l, ARR_NEXT l body_pc skip, ARR_END l so: any array
#   KEY filter s skip_pc: a map key; a key the filter drops jumps to code skipping its value
#   MAP_KV l filter so sk kind sv vo vd, LIST_INT l so s wide: a whole int-keyed map / int array in one op
DENSE_KEYS = 1 << 16  # filter keys below this are looked up in a table, others by binary search


class UnsupportedSchema(UnsupportedFeature):
    """A writer schema (or schema/target pair) the fast decoder does not handle; the message says why."""


@dataclass(frozen=True)
class Node:
    """How to build one Arrow array from the slots after a run.

    kind: int64 int32 float32 float64 bool var fixed list map struct null absent (a target field the
    writer schema lacks: all null). slots: the value slot; (offsets, data) for var; (offsets,) for list/map.
    """

    kind: str
    type: pa.DataType
    slots: tuple[int, ...] = ()
    valid: int = -1  # bytes slot of 0/1 validity flags; -1: never null
    list_id: int = -1
    children: tuple[Node, ...] = ()


@dataclass(frozen=True)
class Program:
    code: npt.NDArray[np.int32]
    slot_kind: npt.NDArray[np.int64]  # vm.INTS or vm.BYTES_ARENA
    per_record: npt.NDArray[np.int64]  # exact units per top-level record (0: sized by estimate and growth)
    offsets: tuple[int, ...]  # slots of offsets, which start with one 0
    n_lists: int
    filter_dense: npt.NDArray[np.uint8]  # per filter: 0/1 by key for keys in [0, DENSE_KEYS), concatenated
    filter_keys: npt.NDArray[np.int64]  # per filter: its other keys, sorted, concatenated
    filter_tab: npt.NDArray[np.int64]  # per filter: (dense start, dense size, keys start, keys count)
    root: Node
    min_record_size: int
    hint: npt.NDArray[np.float64]  # units per record of each slot, the most seen so far (sizes new arenas)


@dataclass
class _Compiler:
    named: dict[str, dict[str, Any]]
    key_filters: Mapping[tuple[str, ...], Sequence[int]]
    code: list[int] = field(default_factory=list)
    kinds: list[int] = field(default_factory=list)
    per_record: list[int] = field(default_factory=list)
    offsets: list[int] = field(default_factory=list)
    n_lists: int = 0
    filters: list[tuple[int, ...]] = field(default_factory=list)
    path: list[str] = field(default_factory=list)
    visiting: list[int] = field(default_factory=list)

    def emit(self, op: int, *args: int) -> int:
        assert len(args) == vm.OPERANDS[op], op
        self.code += [op, *args]
        return len(self.code) - len(args) - 1

    def patch(self, at: int, operand: int, value: int) -> None:
        self.code[at + 1 + operand] = value

    def slot(self, kind: int, depth: int, units: int = 1, offsets: bool = False) -> int:
        self.kinds.append(kind)
        self.per_record.append(units if depth == 0 else 0)
        if offsets:
            self.offsets.append(len(self.kinds) - 1)
        return len(self.kinds) - 1

    def new_list(self) -> int:
        self.n_lists += 1
        return self.n_lists - 1

    def filter_id(self) -> int:
        keys = self.key_filters.get(tuple(self.path))
        if keys is None:
            return -1
        self.filters.append(tuple(sorted(set(keys))))
        return len(self.filters) - 1

    # -- types ------------------------------------------------------------------------------------------

    def deref(self, avro: Any) -> Any:
        while True:
            if isinstance(avro, str) and avro in self.named:
                avro = self.named[avro]
            elif isinstance(avro, dict) and isinstance(avro.get("type"), dict | list):
                avro = avro["type"]
            elif isinstance(avro, dict) and avro.get("type") in self.named and avro["type"] not in PRIMITIVES:
                avro = self.named[avro["type"]]
            else:
                return avro

    def value(self, avro: Any, target: pa.DataType | None, depth: int) -> Node | None:
        """Emit code reading one value of ``avro``; build ``target`` from it (None: skip it)."""
        avro = self.deref(avro)
        if isinstance(avro, list):
            return self.union(avro, target, depth)
        kind = avro if isinstance(avro, str) else avro.get("type")
        if kind == "record":
            if id(avro) in self.visiting:
                raise UnsupportedSchema(f"recursive record {avro.get('name')!r}")
            self.visiting.append(id(avro))
            try:
                return self.record(avro, target, depth)
            finally:
                self.visiting.pop()
        if kind == "array":
            return self.array(avro, target, depth)
        if kind == "fixed":
            return self.fixed(int(avro["size"]), target, depth)
        if kind in PRIMITIVES:
            return self.primitive(str(kind), target, depth)
        raise UnsupportedSchema(f"Avro type {str(kind)[:80]!r} is not supported")

    def primitive(self, kind: str, target: pa.DataType | None, depth: int) -> Node | None:
        if kind == "null":
            if target is None or pa.types.is_null(target):
                return None if target is None else Node("null", target)
            raise UnsupportedSchema(f"Avro null read as {target}")
        if target is None:
            op = {
                "boolean": vm.BOOL,
                "int": vm.LONG,
                "long": vm.LONG,
                "float": vm.FLOAT,
                "double": vm.DOUBLE,
            }.get(kind, vm.BYTES)
            self.emit(op, *([-1] * vm.OPERANDS[op]))
            return None
        if kind in ("int", "long") and (target == pa.int64() or target == pa.int32()):
            wide = target == pa.int64()
            self.emit(vm.LONG if wide else vm.INT, self.slot(vm.INTS, depth))
            return Node("int64" if wide else "int32", target, (self.code[-1],))
        simple = {
            ("float", pa.float32()): (vm.FLOAT, "float32"),
            ("double", pa.float64()): (vm.DOUBLE, "float64"),
        }
        if (kind, target) in simple:
            op, node_kind = simple[(kind, target)]
            s = self.slot(vm.INTS, depth)
            self.emit(op, s)
            return Node(node_kind, target, (s,))
        if kind == "boolean" and target == pa.bool_():
            s = self.slot(vm.BYTES_ARENA, depth)
            self.emit(vm.BOOL, s)
            return Node("bool", target, (s,))
        if kind in ("string", "bytes") and (target == pa.string() or target == pa.binary()):
            so, sd = self.slot(vm.INTS, depth, offsets=True), self.slot(vm.BYTES_ARENA, depth, units=0)
            self.emit(vm.BYTES, so, sd)
            return Node("var", target, (so, sd))
        raise UnsupportedSchema(f"Avro {kind} read as {target}")

    def fixed(self, size: int, target: pa.DataType | None, depth: int) -> Node | None:
        if target is None:
            self.emit(vm.FIXED, size, -1)
            return None
        if pa.types.is_fixed_size_binary(target) and target.byte_width == size:
            s = self.slot(vm.BYTES_ARENA, depth, units=size)
            self.emit(vm.FIXED, size, s)
            return Node("fixed", target, (s,))
        if target == pa.binary():
            so, sd = self.slot(vm.INTS, depth, offsets=True), self.slot(vm.BYTES_ARENA, depth, units=size)
            self.emit(vm.FIXED_VAR, size, so, sd)
            return Node("var", target, (so, sd))
        raise UnsupportedSchema(f"Avro fixed[{size}] read as {target}")

    def union(self, branches: list[Any], target: pa.DataType | None, depth: int) -> Node | None:
        resolved = [self.deref(b) for b in branches]
        nulls = [
            i
            for i, b in enumerate(resolved)
            if b == "null" or (isinstance(b, dict) and b.get("type") == "null")
        ]
        others = [b for i, b in enumerate(branches) if i not in nulls]
        if len(others) > 1 or len(nulls) > 1:
            raise UnsupportedSchema(f"union of {len(branches)} types {str(branches)[:120]}")
        null_index = nulls[0] if nulls else -1
        if not others:  # ["null"]
            self.emit(vm.UNION, null_index, len(branches), -1, 0)
            self.patch(len(self.code) - 5, 3, len(self.code))
            return self.primitive("null", target, depth)
        if target is None or not nulls:
            at = self.emit(vm.UNION, null_index, len(branches), -1, 0)
            node = self.value(others[0], target, depth)
            self.patch(at, 3, len(self.code))
            return node
        valid = self.slot(vm.BYTES_ARENA, depth)
        at = self.emit(vm.UNION, null_index, len(branches), valid, 0)
        node = self.value(others[0], target, depth)
        assert node is not None
        jump = self.emit(vm.JUMP, 0)
        self.patch(at, 3, len(self.code))
        self.fill(node)
        self.patch(jump, 0, len(self.code))
        return replace(node, valid=valid)

    def fill(self, node: Node) -> None:
        """Code writing a null ``node`` (run on the null branch of a union)."""
        if node.valid >= 0:
            self.emit(vm.FILL_B, node.valid, 1)
        if node.kind in ("int64", "int32", "float32", "float64"):
            self.emit(vm.FILL_I, node.slots[0])
        elif node.kind == "bool":
            self.emit(vm.FILL_B, node.slots[0], 1)
        elif node.kind == "var":
            self.emit(vm.FILL_OFF, *node.slots)
        elif node.kind == "fixed":
            self.emit(vm.FILL_B, node.slots[0], node.type.byte_width)
        elif node.kind in ("list", "map"):
            self.emit(vm.FILL_LIST, node.slots[0], node.list_id)
        elif node.kind == "struct":
            for child in node.children:
                self.fill(child)

    def record(self, avro: dict[str, Any], target: pa.DataType | None, depth: int) -> Node | None:
        fields = avro.get("fields", [])
        if target is not None and not pa.types.is_struct(target):
            raise UnsupportedSchema(f"Avro record {avro.get('name')!r} read as {target}")
        built: dict[str, Node] = {}
        for f in fields:
            name = str(f["name"])
            index = -1 if target is None else target.get_field_index(name)
            self.path.append(name)
            node = self.value(
                f["type"], None if target is None or index < 0 else target.field(index).type, depth
            )
            self.path.pop()
            if node is not None:
                built[name] = node
        if target is None:
            return None
        children = tuple(built.get(f.name) or Node("absent", f.type) for f in target)
        return Node("struct", target, children=children)

    def array(self, avro: dict[str, Any], target: pa.DataType | None, depth: int) -> Node | None:
        items = self.deref(avro.get("items"))
        if min_size(items, self.named) == 0:
            raise UnsupportedSchema(f"array of items that can take zero bytes: {str(items)[:80]}")
        kv = key_value(items)
        if target is None and kv is not None and _kv_kind(kv, None, None) is not None:
            self.emit(vm.MAP_KV, self.new_list(), -1, -1, -1, _kv_kind(kv, None, None) or 0, -1, -1, -1)
            return None
        if target is not None and pa.types.is_map(target):
            return self.map(items, kv, target, depth)
        if target is not None and not pa.types.is_list(target):
            raise UnsupportedSchema(f"Avro array read as {target}")
        item_type = None if target is None else target.value_type
        lst = self.new_list()
        so = -1 if target is None else self.slot(vm.INTS, depth, offsets=True)
        if items in ("int", "long") and item_type in (None, pa.int32(), pa.int64()):
            s = -1 if item_type is None else self.slot(vm.INTS, depth + 1)
            self.emit(vm.LIST_INT, lst, so, s, int(item_type != pa.int32()))
            item = None if item_type is None else Node(str(item_type), item_type, (s,))
        else:
            begin = self.emit(vm.ARR_BEGIN, lst, 0, int(target is None))
            item = self.value(items, item_type, depth + 1)
            if target is not None:
                self.emit(vm.ITEM, lst)
            self.emit(vm.ARR_NEXT, lst, begin + 4, int(target is None))
            self.patch(begin, 1, len(self.code))
            self.emit(vm.ARR_END, lst, so)
        if target is None:
            return None
        assert item is not None
        return Node("list", target, (so,), list_id=lst, children=(item,))

    def map(self, items: Any, kv: tuple[Any, Any] | None, target: pa.MapType, depth: int) -> Node:
        if kv is None or self.deref(kv[0]) not in ("int", "long") or target.key_type != pa.int32():
            raise UnsupportedSchema(f"Avro array of {str(items)[:80]} read as {target}")
        lst, flt = self.new_list(), self.filter_id()
        so, sk = self.slot(vm.INTS, depth, offsets=True), self.slot(vm.INTS, depth + 1)
        key = Node("int32", pa.int32(), (sk,))
        vk = _kv_kind(kv, self.deref(kv[1]), target.item_type)
        if vk is not None:
            if vk == vm.VK_BYTES:
                sv, vo, vd = (
                    -1,
                    self.slot(vm.INTS, depth + 1, offsets=True),
                    self.slot(vm.BYTES_ARENA, depth + 1, 0),
                )
                value = Node("var", target.item_type, (vo, vd))
            else:
                sv, vo, vd = self.slot(vm.INTS, depth + 1), -1, -1
                value = Node(str(target.item_type), target.item_type, (sv,))
            self.emit(vm.MAP_KV, lst, flt, so, sk, vk, sv, vo, vd)
            return Node("map", target, (so,), list_id=lst, children=(key, value))
        begin = self.emit(vm.ARR_BEGIN, lst, 0, 0)
        key_op = self.emit(vm.KEY, flt, sk, 0)
        built = self.value(kv[1], target.item_type, depth + 1)
        assert built is not None
        self.emit(vm.ITEM, lst)
        jump = self.emit(vm.JUMP, 0)
        self.patch(key_op, 2, len(self.code))
        self.value(kv[1], None, depth + 1)
        self.patch(jump, 0, len(self.code))
        self.emit(vm.ARR_NEXT, lst, begin + 4, 0)
        self.patch(begin, 1, len(self.code))
        self.emit(vm.ARR_END, lst, so)
        return Node("map", target, (so,), list_id=lst, children=(key, built))


def _kv_kind(kv: tuple[Any, Any], value: Any, target: pa.DataType | None) -> int | None:
    """The vm.MAP_KV value kind for an int/long key and a non-union value (None: the generic path)."""
    if kv[0] not in ("int", "long"):
        return None
    value = kv[1] if value is None else value
    if value in ("int", "long") and target in (None, pa.int64(), pa.int32()):
        return vm.VK_INT if target == pa.int32() else vm.VK_LONG
    if value in ("bytes", "string") and target in (None, pa.binary(), pa.string()):
        return vm.VK_BYTES
    return None


def compile_program(
    schema: Any, target: pa.StructType, key_filters: Mapping[tuple[str, ...], Sequence[int]] | None = None
) -> Program:
    """Compile a writer ``schema`` (a record) read as ``target``, or raise :class:`UnsupportedSchema`.

    ``key_filters``: Avro field-name paths of map fields whose entries are kept only for these keys.
    """
    named = dict(avro_names(schema))
    comp = _Compiler(named, key_filters or {})
    root = comp.deref(schema)
    if not isinstance(root, dict) or root.get("type") != "record":
        raise UnsupportedSchema("the writer schema is not a record")
    node = comp.value(root, target, 0)
    comp.emit(vm.HALT)
    size = min_size(root, named)
    if size == 0:
        raise UnsupportedSchema("records can take zero bytes")
    assert node is not None
    tab = np.zeros(4 * len(comp.filters), dtype=np.int64)
    dense: list[npt.NDArray[np.uint8]] = []
    sparse: list[int] = []
    for i, keys in enumerate(comp.filters):
        small = [k for k in keys if 0 <= k < DENSE_KEYS]
        flags = np.zeros(max(small, default=-1) + 1, dtype=np.uint8)
        flags[small] = 1
        tab[4 * i : 4 * i + 4] = (sum(len(d) for d in dense), len(flags), len(sparse), len(keys) - len(small))
        dense.append(flags)
        sparse += [k for k in keys if not 0 <= k < DENSE_KEYS]
    return Program(
        np.array(comp.code, dtype=np.int32),
        np.array(comp.kinds, dtype=np.int64),
        np.array(comp.per_record, dtype=np.int64),
        tuple(comp.offsets),
        comp.n_lists,
        np.concatenate(dense) if dense else np.zeros(0, dtype=np.uint8),
        np.array(sparse, dtype=np.int64),
        tab,
        node,
        size,
        np.where(np.array(comp.kinds) == vm.INTS, 2.0, 16.0) if comp.kinds else np.zeros(0),
    )
