"""Carry-over removal against a pure-Python multiset reference on random rows with duplicates (the sort
path) and without (the group-by path), nulls, NaNs of both signs, -0.0 and 0.0, strings, decimals and
structs, lists and maps."""

from __future__ import annotations

import math
import random
import struct
from collections import Counter
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest

from gpu_engine.execute.carry_over import _matched_by_join, cancel_carry_overs

FLOATS = (0.0, -0.0, 1.5, math.nan, -math.nan, math.inf, None)
SCHEMA = pa.schema(
    [
        ("i", pa.int64()),
        ("f", pa.float64()),
        ("s", pa.string()),
        ("d", pa.decimal128(6, 2)),
        ("st", pa.struct([("a", pa.int32()), ("g", pa.float32())])),
        ("tag", pa.string()),  # not compared: tells the rows apart
    ]
)


def _canon(v: Any) -> Any:
    if isinstance(v, float):
        return ("float", struct.pack("<d", v))
    if isinstance(v, dict):
        return tuple(sorted((k, _canon(x)) for k, x in v.items()))
    return v


def _random_rows(rng: random.Random, n: int, side: str) -> pa.Table:
    rows = []
    for j in range(n):
        st = (
            None
            if rng.random() < 0.2
            else {"a": rng.choice([1, 2, None]), "g": rng.choice([0.5, -0.0, 0.0, None])}
        )
        rows.append(
            {
                "i": rng.choice([1, 2, None]),
                "f": rng.choice(FLOATS),
                "s": rng.choice(["x", "y", None]),
                "d": rng.choice([Decimal("1.00"), Decimal("-2.50"), None]),
                "st": st,
                "tag": f"{side}{j}",
            }
        )
    return pa.Table.from_pylist(rows, schema=SCHEMA)


def _reference(deleted: pa.Table, inserted: pa.Table, names: list[str]) -> tuple[Counter[Any], Counter[Any]]:
    def key(r: dict[str, Any]) -> tuple[Any, ...]:
        return tuple(_canon(r[n]) for n in names)

    d = Counter(key(r) for r in deleted.to_pylist())
    i = Counter(key(r) for r in inserted.to_pylist())
    return d - i, i - d


@pytest.mark.parametrize("seed", range(40))
def test_matches_the_multiset_reference(seed: int) -> None:
    rng = random.Random(seed)
    deleted = _random_rows(rng, rng.randrange(0, 60), "d")
    inserted = _random_rows(rng, rng.randrange(0, 60), "i")
    names = rng.sample(["i", "f", "s", "d", "st"], rng.randrange(1, 6))
    kept_d, kept_i = cancel_carry_overs(deleted, inserted, names)
    want_d, want_i = _reference(deleted, inserted, names)
    got_d, got_i = (
        _reference(kept_d, kept_i.slice(0, 0), names)[0],
        _reference(kept_i, kept_d.slice(0, 0), names)[0],
    )
    assert (got_d, got_i) == (want_d, want_i)
    for kept, source in ((kept_d, deleted), (kept_i, inserted)):  # survivors are original rows, in order
        tags = kept["tag"].to_pylist()
        order = {t: k for k, t in enumerate(source["tag"].to_pylist())}
        assert [order[t] for t in tags] == sorted(order[t] for t in tags)


def test_floats_compare_by_bits() -> None:
    t = pa.table({"f": pa.array([-0.0, math.nan], pa.float64())})
    u = pa.table({"f": pa.array([0.0, math.nan], pa.float64())})
    d, i = cancel_carry_overs(t, u, ["f"])
    assert [struct.pack("<d", v) for v in d["f"].to_pylist()] == [struct.pack("<d", -0.0)]
    assert [struct.pack("<d", v) for v in i["f"].to_pylist()] == [struct.pack("<d", 0.0)]


NESTED = pa.schema(
    [
        ("xs", pa.list_(pa.float64())),
        ("ls", pa.large_list(pa.struct([("a", pa.int32()), ("t", pa.list_(pa.string()))]))),
        ("m", pa.map_(pa.string(), pa.list_(pa.int64()))),
        ("tag", pa.string()),
    ]
)


def _random_nested(rng: random.Random, n: int, side: str) -> pa.Table:
    def maybe(make: Any) -> Any:
        return None if rng.random() < 0.15 else make()

    rows = [
        {
            "xs": maybe(lambda: [rng.choice(FLOATS) for _ in range(rng.randrange(3))]),
            "ls": maybe(
                lambda: [
                    maybe(lambda: {"a": rng.choice([1, None]), "t": maybe(lambda: ["x"] * rng.randrange(2))})
                    for _ in range(rng.randrange(3))
                ]
            ),
            "m": maybe(
                lambda: [(k, maybe(lambda: [rng.choice([1, 2])])) for k in rng.sample("ab", rng.randrange(3))]
            ),
            "tag": f"{side}{j}",
        }
        for j in range(n)
    ]
    return pa.Table.from_pylist(rows, schema=NESTED)


def _canon_nested(v: Any) -> Any:
    if isinstance(v, list):  # lists, and maps as their entries in stored order
        return ("list", tuple(_canon_nested(x) for x in v))
    if isinstance(v, tuple):
        return tuple(_canon_nested(x) for x in v)
    if isinstance(v, dict):
        return tuple(sorted((k, _canon_nested(x)) for k, x in v.items()))
    return _canon(v)


@pytest.mark.parametrize("seed", range(30))
def test_lists_and_maps_compare_element_by_element(seed: int) -> None:
    """Against the multiset reference: [] differs from null, [null] from [], NaN bits and -0.0 count,
    maps compare their entries in stored order; both matching paths (a side repeating a row or not)."""
    rng = random.Random(seed)
    deleted = _random_nested(rng, rng.randrange(1, 40), "d")
    carried = deleted.take(sorted(rng.sample(range(deleted.num_rows), deleted.num_rows // 2)))
    inserted = pa.concat_tables([carried, _random_nested(rng, rng.randrange(0, 20), "i")])
    names = rng.sample(["xs", "ls", "m"], rng.randrange(1, 4))

    def counts(table: pa.Table) -> Counter[Any]:
        return Counter(tuple(_canon_nested(r[n]) for n in names) for r in table.to_pylist())

    kept_d, kept_i = cancel_carry_overs(deleted, inserted, names)
    d, i = counts(deleted), counts(inserted)
    assert (counts(kept_d), counts(kept_i)) == (d - i, i - d)


def test_the_same_map_entries_in_another_order_are_another_value() -> None:
    one = pa.array([[("a", 1), ("b", 2)]], pa.map_(pa.string(), pa.int64()))
    other = pa.array([[("b", 2), ("a", 1)]], pa.map_(pa.string(), pa.int64()))
    d, i = cancel_carry_overs(pa.table({"m": one}), pa.table({"m": other}), ["m"])
    assert d.num_rows == i.num_rows == 1
    d, i = cancel_carry_overs(pa.table({"m": one}), pa.table({"m": one}), ["m"])
    assert d.num_rows == i.num_rows == 0


@pytest.mark.parametrize("seed", range(20))
def test_rows_without_repeats_match_by_hash_like_the_reference(seed: int) -> None:
    """The common case (no side repeats a row: a rewritten file's rows) takes the group-by path; it must
    agree with the reference too, large strings, nulls, NaNs and -0.0 included."""
    rng = random.Random(seed)
    base = _random_rows(rng, 80, "b")
    base = base.append_column(
        "u", pa.array([None if i % 7 == 0 else f"u{i}" for i in range(80)], pa.large_string())
    )
    base = base.append_column("n", pa.array(range(80), pa.int64()))  # unique: no side repeats a row
    deleted = base.take(sorted(rng.sample(range(80), 40)))
    inserted = base.take(sorted(rng.sample(range(80), 30)))
    names = ["n", *rng.sample(["i", "f", "s", "d", "st", "u"], rng.randrange(1, 7))]
    assert _matched_by_join(deleted, inserted, names) is not None
    kept_d, kept_i = cancel_carry_overs(deleted, inserted, names)
    want_d, want_i = _reference(deleted, inserted, names)
    assert _reference(kept_d, kept_d.slice(0, 0), names)[0] == want_d
    assert _reference(kept_i, kept_i.slice(0, 0), names)[0] == want_i


def test_repeated_rows_fall_back_to_the_sort() -> None:
    t = pa.table({"x": pa.array([1, 1, 2], pa.int64())})
    assert _matched_by_join(t, t.slice(0, 1), ["x"]) is None
    d, i = cancel_carry_overs(t, t.slice(0, 1), ["x"])
    assert d["x"].to_pylist() == [1, 2] and i.num_rows == 0
