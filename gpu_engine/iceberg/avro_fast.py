"""A columnar Avro decoder: object container files straight into Arrow arrays (used for manifests).

Python parses the container (magic, metadata, sync marker: the same checks and messages as
:func:`~gpu_engine.iceberg.manifest_list.read_avro`) and walks its blocks, checking every sync marker and
decompressing (null, deflate, bzip2, xz; snappy needs ``cramjam``, zstandard ``zstandard``, lz4 ``lz4``).
The writer schema, matched against the wanted Arrow type, is compiled once into a program
(:mod:`.avro_program`, cached by schema), and one nogil call of the interpreter (:mod:`.avro_vm`) decodes
every record of every block into Arrow-layout buffers. The Arrow arrays are views of those buffers
(``pa.Array.from_buffers``), validated in full (offsets, UTF-8) before they are returned. Python works per
file and per block, never per record. Any corrupt input raises :class:`~gpu_engine.errors.ManifestError`
naming the file, the block and the offset.
"""

from __future__ import annotations

import bz2
import importlib
import lzma
import zlib
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import ManifestError
from . import avro_program as ap
from . import avro_vm as vm
from .avro_blocks import block_layout
from .avro_program import Node, Program, UnsupportedSchema
from .manifest_list import _SYNC_SIZE, AvroContents, OpenInput, read_header

__all__ = ["Container", "UnsupportedSchema", "decode", "filter_map_keys", "program_for", "read_container"]


@dataclass(frozen=True)
class Container:
    """An Avro object container file, its blocks decompressed (``avro.records`` is empty)."""

    avro: AvroContents
    codec: str
    data: npt.NDArray[np.uint8]  # the blocks' bytes (for the null codec, the whole file)
    starts: npt.NDArray[np.int64]  # each block's first and past-the-end byte in ``data``
    ends: npt.NDArray[np.int64]
    counts: npt.NDArray[np.int64]  # records per block

    @property
    def n_records(self) -> int:
        return int(self.counts.sum())


def read_container(path: str, open_input: OpenInput) -> Container:
    """Read and check an Avro object container file, or raise :class:`ManifestError` naming ``path``."""
    header = read_header(path, open_input)
    decompress = _decompressor(path, header.codec)
    avro = AvroContents(path, header.schema_json, header.schema, header.user_metadata, [])
    try:
        data, starts, ends, counts = _blocks(header.data, header.header_end, decompress)
    except ValueError as exc:
        raise ManifestError(f"{path}: corrupt or truncated Avro data: {exc}") from None
    return Container(avro, header.codec, data, starts, ends, counts)


def _blocks(
    raw: bytes, header_end: int, decompress: Callable[[bytes], bytes] | None
) -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Decompressed payload bytes and each block's (start, end, record count) within them."""
    buf = np.frombuffer(raw, dtype=np.uint8)
    starts, sizes, counts = block_layout(buf, header_end + _SYNC_SIZE)
    if decompress is None:
        return buf, starts, starts + sizes, counts
    parts: list[bytes] = []
    for block, (start, size) in enumerate(zip(starts.tolist(), sizes.tolist(), strict=True)):
        try:
            parts.append(decompress(raw[start : start + size]))
        except Exception as exc:  # zlib.error, lzma.LZMAError, OSError, the codec packages' own errors
            raise ValueError(f"block {block} does not decompress: {type(exc).__name__}: {exc}") from None
    lengths = np.fromiter((len(p) for p in parts), dtype=np.int64, count=len(parts))
    ends = np.cumsum(lengths)
    data = np.frombuffer(b"".join(parts), dtype=np.uint8) if parts else np.empty(0, np.uint8)
    return data, ends - lengths, ends, counts


# -- codecs --------------------------------------------------------------------------------------------


def _optional(path: str, codec: str, module: str, package: str) -> Any:
    try:
        return importlib.import_module(module)
    except ImportError:
        raise ManifestError(
            f"{path}: Avro codec {codec!r} needs the Python package {package!r} (pip install {package})"
        ) from None


def _decompressor(path: str, codec: str) -> Callable[[bytes], bytes] | None:
    """None for the null codec (blocks are read in place)."""
    if codec == "null":
        return None
    if codec == "deflate":
        return lambda b: zlib.decompress(b, -15)
    if codec == "bzip2":
        return bz2.decompress
    if codec == "xz":
        return lzma.decompress
    if codec == "snappy":
        snappy = _optional(path, codec, "cramjam", "cramjam").snappy

        def unsnappy(b: bytes) -> bytes:
            out = bytes(snappy.decompress_raw(b[:-4]))
            if len(b) < 4 or zlib.crc32(out) != int.from_bytes(b[-4:], "big"):
                raise ValueError("snappy block CRC32 mismatch")
            return out

        return unsnappy
    if codec == "zstandard":
        zstd = _optional(path, codec, "zstandard", "zstandard")

        def unzstd(b: bytes) -> bytes:
            out = []
            while b:
                d = zstd.ZstdDecompressor().decompressobj()
                out.append(d.decompress(b))
                if not d.eof:
                    raise ValueError("truncated zstandard frame")
                b = d.unused_data
            return b"".join(out)

        return unzstd
    if codec == "lz4":
        lz4_block = _optional(path, codec, "lz4.block", "lz4")
        return lambda b: bytes(lz4_block.decompress(b))
    raise ManifestError(f"{path}: unsupported Avro codec {codec!r}")


# -- programs and decoding -----------------------------------------------------------------------------

_Key = tuple[str, pa.DataType, tuple[tuple[tuple[str, ...], tuple[int, ...]], ...]]
_PROGRAMS: dict[_Key, Program | UnsupportedSchema] = {}


def program_for(
    avro: AvroContents,
    target: pa.StructType,
    key_filters: Mapping[tuple[str, ...], Collection[int]] | None = None,
) -> Program:
    """The compiled program reading ``avro``'s records as ``target`` (cached by schema JSON, target and
    filters; rejections too); raises :class:`UnsupportedSchema` with the reason."""
    filters = tuple(sorted((path, tuple(sorted(set(keys)))) for path, keys in (key_filters or {}).items()))
    key = (avro.schema_json, target, filters)
    found = _PROGRAMS.get(key)
    if found is None:
        try:
            found = ap.compile_program(avro.schema, target, dict(filters))
        except UnsupportedSchema as exc:
            found = exc
        if len(_PROGRAMS) > 256:
            _PROGRAMS.clear()
        _PROGRAMS[key] = found
    if isinstance(found, UnsupportedSchema):
        raise UnsupportedSchema(str(found))
    return found


def decode(container: Container, program: Program) -> pa.StructArray:
    """Every record of ``container`` as one struct array of ``program.root.type``."""
    n = container.n_records
    short = np.flatnonzero(container.counts * program.min_record_size > container.ends - container.starts)
    if len(short):  # checked before sizing the output by the counts
        b = int(short[0])
        raise ManifestError(
            f"{container.avro.path}: corrupt or truncated Avro data: block {b} claims {container.counts[b]} "
            f"records in {container.ends[b] - container.starts[b]} bytes (a record takes at least "
            f"{program.min_record_size})"
        )
    kinds = program.slot_kind
    st = np.zeros((5, len(kinds)), dtype=np.int64)
    st[vm.KIND] = kinds
    st[vm.PER] = program.per_record
    span = int(container.ends[-1] - container.starts[0]) if len(container.starts) else 0
    est = np.minimum(program.hint * n, span).astype(np.int64) + 256  # use seen per record (<= 1 per byte)
    st[vm.CAP] = np.where(program.per_record > 0, program.per_record * n, est)
    offsets = list(program.offsets)
    st[vm.CAP, offsets] += 1
    arenas: list[Any] = []
    for k, dtype in ((vm.INTS, np.int64), (vm.BYTES_ARENA, np.uint8)):
        mine = kinds == k
        caps = np.where(mine, st[vm.CAP], 0)
        st[vm.BASE] = np.where(mine, np.cumsum(caps) - caps, st[vm.BASE])
        arenas.append(np.empty(int(caps.sum()), dtype=dtype))
    ints, byts = arenas
    ints[st[vm.BASE, offsets]] = 0
    st[vm.POS, offsets] = 1
    starts, ends = container.starts, container.ends
    ctx = np.array([starts[0] if len(starts) else 0, span], dtype=np.int64)
    ls = np.zeros((2, max(1, program.n_lists)), dtype=np.int64)
    saved = np.zeros(len(kinds) + ls.shape[1], dtype=np.int64)
    want, err = np.zeros(len(kinds), dtype=np.int64), np.zeros(4, dtype=np.int64)
    first = 0
    while True:
        vm._run(
            container.data, starts, ends, container.counts, first, program.code, program.filter_dense,
            program.filter_keys, program.filter_tab, ints, byts, st, ls, saved, want, ctx, err,
        )  # fmt: skip
        if err[0] != vm.E_GROW:
            break
        first = int(err[1])  # resume there, on the grown arenas
        ints = _relayout(ints, st, want, vm.INTS)
        byts = _relayout(byts, st, want, vm.BYTES_ARENA)
        err[:] = 0
    if err[0]:
        code, block, offset, _ = (int(x) for x in err)
        raise ManifestError(
            f"{container.avro.path}: corrupt or truncated Avro data: {vm.ERRORS.get(code, code)} "
            f"(block {block}, byte {offset} of its {container.codec} data)"
        )
    if n:  # remember how much the estimated slots took (racing updates from threads are harmless)
        np.maximum(program.hint, st[vm.POS] * 1.1 / n, out=program.hint)
    array = _build(program.root, n, ints, byts, st)
    array.validate(full=True)
    return array


def _relayout(arena: Any, st: npt.NDArray[np.int64], want: Any, k: int) -> Any:
    """A copy of arena ``k`` with each slot's capacity raised to ``want``, the values kept."""
    mine = np.flatnonzero(st[vm.KIND] == k)
    caps = np.maximum(want[mine], st[vm.CAP, mine])
    if (caps == st[vm.CAP, mine]).all():
        return arena
    bases = np.cumsum(caps) - caps
    out = np.empty(int(caps.sum()), dtype=arena.dtype)
    for i, base in zip(mine.tolist(), bases.tolist(), strict=True):
        old, used = int(st[vm.BASE, i]), int(st[vm.POS, i])
        out[base : base + used] = arena[old : old + used]
    st[vm.BASE, mine] = bases
    st[vm.CAP, mine] = caps
    return out


def _region(arena: npt.NDArray[Any], st: npt.NDArray[np.int64], s: int, length: int) -> npt.NDArray[Any]:
    if st[vm.POS, s] != length:
        raise RuntimeError(f"avro_fast: slot {s} holds {st[vm.POS, s]} values, expected {length}")
    base = int(st[vm.BASE, s])
    return arena[base : base + length]


def _flags(flags: npt.NDArray[np.uint8]) -> pa.Buffer:
    return pa.py_buffer(np.packbits(flags, bitorder="little"))


def _build(node: Node, n: int, ints: Any, byts: Any, st: npt.NDArray[np.int64]) -> Any:
    """The Arrow array of ``node`` (``n`` rows) from its slots."""
    kind, t = node.kind, node.type
    if kind in ("absent", "null"):
        return pa.nulls(n, t)
    validity, nulls = None, 0
    if node.valid >= 0:
        flags = _region(byts, st, node.valid, n)
        nulls = n - int(np.count_nonzero(flags))
        validity = _flags(flags) if nulls else None
    children: Sequence[pa.Array] = ()
    if kind == "struct":
        children = [_build(c, n, ints, byts, st) for c in node.children]
        buffers = [validity]
    elif kind in ("var", "list", "map"):
        offsets = _region(ints, st, node.slots[0], n + 1)
        if offsets[-1] > 2**31 - 1:
            raise ValueError(f"a column of {offsets[-1]} values or bytes is too large for 32-bit offsets")
        buffers = [validity, pa.py_buffer(offsets.astype(np.int32))]
        size = int(offsets[-1])
        if kind == "var":
            buffers.append(pa.py_buffer(_region(byts, st, node.slots[1], size)))
        elif kind == "list":
            children = [_build(node.children[0], size, ints, byts, st)]
        else:
            key, value = (_build(c, size, ints, byts, st) for c in node.children)
            children = [pa.StructArray.from_arrays([key, value], fields=[t.key_field, t.item_field])]
    elif kind == "fixed":
        buffers = [validity, pa.py_buffer(_region(byts, st, node.slots[0], n * t.byte_width))]
    elif kind == "bool":
        buffers = [validity, _flags(_region(byts, st, node.slots[0], n))]
    else:
        values = _region(ints, st, node.slots[0], n)
        if kind == "int32":
            values = values.astype(np.int32)
        elif kind == "float32":
            values = values.astype(np.uint32)
        buffers = [validity, pa.py_buffer(values)]
    return pa.Array.from_buffers(t, n, buffers, null_count=nulls, children=children or None)


def filter_map_keys(values: pa.Array, keep: Collection[int]) -> pa.Array:
    """``values`` (a map<int32, _> array) with only the entries whose key is in ``keep``."""
    if not isinstance(values, pa.MapArray):
        return values
    offsets = values.offsets.to_numpy()
    keys, items = values.keys, values.items
    mask = pc.is_in(keys, value_set=pa.array(sorted(keep), pa.int32())).to_numpy(zero_copy_only=False)
    kept = np.concatenate([[0], np.cumsum(mask)])[offsets - offsets[0]].astype(np.int32)
    valid = values.is_null() if values.null_count else None
    return pa.MapArray.from_arrays(kept, keys.filter(mask), items.filter(mask), type=values.type, mask=valid)
