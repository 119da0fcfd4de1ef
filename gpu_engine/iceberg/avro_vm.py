"""The interpreter of :mod:`.avro_program` programs: numba-compiled (nogil), one call per file.

It runs the program once per record of every (decompressed) block, writing Arrow-layout buffers into slots
of an int64 and a uint8 arena. A full slot stops the run at its block's start with the capacities it wants
(:func:`_want`); the caller grows the arenas and resumes there (no reallocation inside the loop). Every read
is bounds-checked against its block's end; corrupt data stops the run with an error code, block and offset
in ``err``. Every loop consumes input, so corrupt data cannot hang it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar, cast

import numpy as np
from numba import njit

F = TypeVar("F", bound=Callable[..., Any])


def _jit(fn: F, **options: Any) -> F:
    return cast(F, njit(cache=True, nogil=True, **options)(fn))


def _inline(fn: F) -> F:  # a helper of _run, inlined at numba's IR level (no call, no array refcounting)
    return _jit(fn, inline="always")


# the instruction set, documented in avro_program (here because numba's cache is keyed by this file)
# fmt: off
(HALT, LONG, INT, FLOAT, DOUBLE, BOOL, BYTES, FIXED, FIXED_VAR, UNION, JUMP, FILL_I, FILL_B, FILL_OFF,
 FILL_LIST, ARR_BEGIN, ARR_NEXT, ARR_END, ITEM, KEY, MAP_KV, LIST_INT) = range(22)
OPERANDS = (0, 1, 1, 1, 1, 1, 2, 2, 3, 4, 1, 1, 2, 2, 2, 3, 3, 2, 1, 3, 8, 4)  # by opcode
# fmt: on
INTS, BYTES_ARENA = 0, 1  # slot kinds: the arena a slot lives in
VK_LONG, VK_INT, VK_BYTES = 0, 1, 2  # MAP_KV value kinds
# rows of the slot state table; error codes (a negative position returned by the readers is -code)
BASE, CAP, POS, KIND, PER = range(5)
COUNT, REM = range(2)
E_TRUNC, E_VARINT, E_LENGTH, E_UNION, E_INT, E_COUNT, E_TRAILING, E_OPCODE, E_GROW = range(1, 10)
ERRORS = {
    E_TRUNC: "data ends inside a value",
    E_VARINT: "malformed variable-length number (over 10 bytes)",
    E_LENGTH: "negative length or count",
    E_UNION: "union branch index out of range",
    E_INT: "int value out of the 32-bit range",
    E_COUNT: "item count larger than the bytes left in the block",
    E_TRAILING: "bytes left over after the block's records",
    E_OPCODE: "internal error: bad opcode",
    E_GROW: "an output slot is full",
}
_MASK63 = 0x7FFFFFFFFFFFFFFF
_I32_MIN, _I32_MAX = -(2**31), 2**31 - 1


@_inline
def _varint(data: Any, p: int, end: int) -> tuple[int, int]:
    """A zigzag varint at ``p``: (value, next position), or (0, -E_TRUNC / -E_VARINT).

    As Java's and fastavro's readers: a tenth byte's bits past bit 63 wrap (are dropped); an eleventh
    byte is an error (Java's "Invalid long encoding"; fastavro's compiled reader goes on shifting).
    """
    acc = 0
    shift = 0
    while True:
        if p >= end:
            return 0, -E_TRUNC
        b: Any = np.int64(data[p])  # not int(): numba types int(uint8) as uint64
        p += 1
        acc |= (b & 0x7F) << shift
        if b < 0x80:
            return ((acc >> 1) & _MASK63) ^ -(acc & 1), p
        shift += 7
        if shift > 63:
            return 0, -E_VARINT


@_inline
def _count(data: Any, p: int, end: int, skip: bool) -> tuple[int, int]:
    """The item count of the next array block (0: the array ends), jumping over sized blocks when ``skip``."""
    while True:
        c, p = _varint(data, p, end)
        if p < 0 or c == 0:
            return 0, p
        if c < 0:
            c = -c
            size, p = _varint(data, p, end)
            if p < 0:
                return 0, p
            if c < 0 or size < 0:
                return 0, -E_LENGTH
            if skip:
                if size > end - p:
                    return 0, -E_TRUNC
                p += size
                continue
        if c > end - p:  # every item takes at least one byte (the compiler checks)
            return 0, -E_COUNT
        return c, p


@_inline
def _member(dense: Any, keys: Any, tab: Any, f: int, key: int) -> bool:
    """Whether ``key`` is in filter ``f``: a table lookup for small keys, else a binary search."""
    if 0 <= key < tab[4 * f + 1]:
        return bool(dense[tab[4 * f] + key] != 0)
    lo = tab[4 * f + 2]
    stop = lo + tab[4 * f + 3]
    hi = stop
    while lo < hi:
        mid = (lo + hi) >> 1
        if keys[mid] < key:
            lo = mid + 1
        else:
            hi = mid
    return bool(lo < stop and keys[lo] == key)


@_jit
def _want(st: Any, want: Any, s: int, need: int, done: int, total: int) -> None:
    """Capacities with room for ``need`` more in slot ``s``; estimated slots extrapolated to the input."""
    scale = total / max(1, done)
    want[:] = st[CAP]
    for i in range(st.shape[1]):
        if i == s or st[PER, i] == 0:
            grown = min(np.int64(st[POS, i] * scale * 1.25) + 256, total + 256)
            if i == s:
                grown = max(grown, 2 * st[CAP, i], st[POS, i] + need)
            want[i] = max(want[i], grown)


@_inline
def _put_i(ints: Any, st: Any, s: int, v: int) -> bool:
    q = st[POS, s]
    if q >= st[CAP, s]:
        return False
    ints[st[BASE, s] + q] = v
    st[POS, s] = q + 1
    return True


@_inline
def _put_b(byts: Any, st: Any, s: int, data: Any, src: int, n: int) -> bool:
    q = st[POS, s]
    if q + n > st[CAP, s]:
        return False
    at = st[BASE, s] + q
    for i in range(n):
        byts[at + i] = data[src + i]
    st[POS, s] = q + n
    return True


@_inline
def _put_flag(byts: Any, st: Any, s: int, v: int, n: int) -> bool:
    q = st[POS, s]
    if q + n > st[CAP, s]:
        return False
    at = st[BASE, s] + q
    for i in range(n):
        byts[at + i] = v
    st[POS, s] = q + n
    return True


@_inline
def _le(data: Any, p: int, n: int) -> Any:
    v: Any = 0
    for i in range(n):
        v |= np.int64(data[p + i]) << (8 * i)
    return v


@_jit
def _run(
    data: Any, starts: Any, ends: Any, counts: Any, first: int, code: Any, dense: Any, keys: Any, tab: Any,
    ints: Any, byts: Any, st: Any, ls: Any, saved: Any, want: Any, ctx: Any, err: Any,
) -> None:  # fmt: skip
    """Run ``code`` once per record of blocks ``first``...; on failure ``err`` = (code, block, offset, pc).

    When a slot is full: E_GROW, with ``want`` the new capacities of the slots and their state restored to
    the start of block ``err[1]``, from which the caller resumes on the grown arenas.
    """
    ns = st.shape[1]
    for blk in range(first, len(starts)):
        p, end = starts[blk], ends[blk]
        saved[:ns] = st[POS]
        saved[ns:] = ls[COUNT]
        if counts[blk] > end - p:
            err[0], err[1], err[2], err[3] = E_COUNT, blk, 0, -1
            return
        for _ in range(counts[blk]):
            pc = 0
            while True:
                op = code[pc]
                e, g, need = 0, -1, 1
                if op == HALT:
                    break
                if op in (LONG, INT):
                    v, q = _varint(data, p, end)
                    if q < 0:
                        e = -q
                    elif op == INT and (v < _I32_MIN or v > _I32_MAX):
                        e = E_INT
                    elif code[pc + 1] >= 0 and not _put_i(ints, st, code[pc + 1], v):
                        g = code[pc + 1]
                    else:
                        p = q
                        pc += 2
                elif op == UNION:
                    v, q = _varint(data, p, end)
                    if q < 0:
                        e = -q
                    elif v < 0 or v >= code[pc + 2]:
                        e = E_UNION
                    elif code[pc + 3] >= 0 and not _put_flag(byts, st, code[pc + 3], v != code[pc + 1], 1):
                        g = code[pc + 3]
                    else:
                        p = q
                        pc = code[pc + 4] if v == code[pc + 1] else pc + 5
                elif op in (MAP_KV, LIST_INT):
                    # the whole array in one op, slot cursors in locals: (key,) value or (offsets, bytes)
                    lst = code[pc + 1]
                    is_map = op == MAP_KV
                    f, so = (code[pc + 2], code[pc + 3]) if is_map else (-1, code[pc + 2])
                    sk, vk = (code[pc + 4], code[pc + 5]) if is_map else (-1, VK_LONG)
                    sv = (code[pc + 7] if vk == VK_BYTES else code[pc + 6]) if is_map else code[pc + 3]
                    sd = code[pc + 8] if is_map else -1
                    narrow = vk == VK_INT if is_map else code[pc + 4] == 0
                    skip = sv < 0
                    kb, kq, kc = (st[BASE, sk], st[POS, sk], st[CAP, sk]) if sk >= 0 else (0, 0, 0)
                    vb, vq, vc = (st[BASE, sv], st[POS, sv], st[CAP, sv]) if sv >= 0 else (0, 0, 0)
                    db, dq, dc = (st[BASE, sd], st[POS, sd], st[CAP, sd]) if sd >= 0 else (0, 0, 0)
                    items = ls[COUNT, lst]
                    fd, fn = (tab[4 * f], tab[4 * f + 1]) if f >= 0 else (0, 0)
                    while e == 0 and g < 0:
                        c, q = _count(data, p, end, skip)
                        if q < 0:
                            e = -q
                            break
                        p = q
                        if c == 0:
                            break
                        for _i in range(c):
                            k = 0
                            if is_map:
                                k, q = _varint(data, p, end)
                                if q < 0 or (not skip and (k < _I32_MIN or k > _I32_MAX)):
                                    e = -q if q < 0 else E_INT
                                    break
                                p = q
                            keep = not skip and (
                                f < 0
                                or (dense[fd + k] != 0 if 0 <= k < fn else _member(dense, keys, tab, f, k))
                            )
                            if vk == VK_BYTES:
                                n, q = _varint(data, p, end)
                                if q < 0 or n < 0 or n > end - q:
                                    e = -q if q < 0 else (E_LENGTH if n < 0 else E_TRUNC)
                                    break
                                if keep:
                                    if dq + n > dc or vq >= vc:
                                        g, need = (sd, n) if dq + n > dc else (sv, 1)
                                        break
                                    for i in range(n):
                                        byts[db + dq + i] = data[q + i]
                                    dq += n
                                    ints[vb + vq] = dq
                                    vq += 1
                                p = q + n
                            else:
                                v, q = _varint(data, p, end)
                                if q < 0 or (narrow and not skip and (v < _I32_MIN or v > _I32_MAX)):
                                    e = -q if q < 0 else E_INT
                                    break
                                p = q
                                if keep:
                                    if vq >= vc:
                                        g = sv
                                        break
                                    ints[vb + vq] = v
                                    vq += 1
                            if keep:
                                if is_map:
                                    if kq >= kc:
                                        g = sk
                                        break
                                    ints[kb + kq] = k
                                    kq += 1
                                items += 1
                    if not skip:
                        st[POS, sv] = vq
                        ls[COUNT, lst] = items
                        if sk >= 0:
                            st[POS, sk] = kq
                        if sd >= 0:
                            st[POS, sd] = dq
                    if e == 0 and g < 0:
                        if so >= 0 and not _put_i(ints, st, so, items):
                            g = so
                        pc += 9 if is_map else 5
                elif op in (BYTES, FIXED, FIXED_VAR):
                    n, q, so, sd = code[pc + 1], p, -1, code[pc + 2]
                    if op == BYTES:
                        n, q = _varint(data, p, end)
                        so, sd = code[pc + 1], code[pc + 2]
                    elif op == FIXED_VAR:
                        so, sd = code[pc + 2], code[pc + 3]
                    if q < 0 or n < 0 or n > end - q:
                        e = -q if q < 0 else (E_LENGTH if n < 0 else E_TRUNC)
                    elif sd >= 0 and not _put_b(byts, st, sd, data, q, n):
                        g, need = sd, n
                    elif sd >= 0 and so >= 0 and not _put_i(ints, st, so, st[POS, sd]):
                        g = so
                    else:
                        p = q + n
                        pc += 4 if op == FIXED_VAR else 3
                elif op in (FLOAT, DOUBLE, BOOL):
                    n = 4 if op == FLOAT else (8 if op == DOUBLE else 1)
                    s = code[pc + 1]
                    if n > end - p:
                        e = E_TRUNC
                    elif s >= 0 and not (
                        _put_flag(byts, st, s, data[p] != 0, 1)
                        if op == BOOL
                        else _put_i(ints, st, s, _le(data, p, n))
                    ):
                        g = s
                    else:
                        p += n
                        pc += 2
                elif op == JUMP:
                    pc = code[pc + 1]
                elif op in (FILL_I, FILL_OFF, FILL_LIST):
                    v = 0
                    if op == FILL_OFF:
                        v = st[POS, code[pc + 2]]
                    elif op == FILL_LIST:
                        v = ls[COUNT, code[pc + 2]]
                    if not _put_i(ints, st, code[pc + 1], v):
                        g = code[pc + 1]
                    else:
                        pc += 2 if op == FILL_I else 3
                elif op == FILL_B:
                    if not _put_flag(byts, st, code[pc + 1], 0, code[pc + 2]):
                        g, need = code[pc + 1], code[pc + 2]
                    else:
                        pc += 3
                elif op in (ARR_BEGIN, ARR_NEXT):
                    lst = code[pc + 1]
                    if op == ARR_NEXT and ls[REM, lst] > 1:
                        ls[REM, lst] -= 1
                        pc = code[pc + 2]
                    else:
                        c, q = _count(data, p, end, code[pc + 3] != 0)
                        if q < 0:
                            e = -q
                        else:
                            p = q
                            ls[REM, lst] = c
                            if c == 0:
                                pc = code[pc + 2] if op == ARR_BEGIN else pc + 4
                            else:
                                pc = pc + 4 if op == ARR_BEGIN else code[pc + 2]
                elif op == ARR_END:
                    so = code[pc + 2]
                    if so >= 0 and not _put_i(ints, st, so, ls[COUNT, code[pc + 1]]):
                        g = so
                    else:
                        pc += 3
                elif op == ITEM:
                    ls[COUNT, code[pc + 1]] += 1
                    pc += 2
                elif op == KEY:
                    k, q = _varint(data, p, end)
                    if q < 0 or k < _I32_MIN or k > _I32_MAX:
                        e = -q if q < 0 else E_INT
                    elif code[pc + 1] >= 0 and not _member(dense, keys, tab, code[pc + 1], k):
                        p = q
                        pc = code[pc + 3]
                    elif not _put_i(ints, st, code[pc + 2], k):
                        g = code[pc + 2]
                    else:
                        p = q
                        pc += 4
                else:
                    e = E_OPCODE
                if g >= 0:
                    _want(st, want, g, need, p - ctx[0], ctx[1])
                    st[POS] = saved[:ns]
                    ls[COUNT] = saved[ns:]
                    err[0], err[1], err[2], err[3] = E_GROW, blk, st[KIND, g], g
                    return
                if e != 0:
                    err[0], err[1], err[2], err[3] = e, blk, p - starts[blk], pc
                    return
        if p != end:
            err[0], err[1], err[2], err[3] = E_TRAILING, blk, p - starts[blk], -1
            return
