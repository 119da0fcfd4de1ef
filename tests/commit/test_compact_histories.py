"""Generated histories: seeded random sequences of appends, ``Table.delete`` (position deletes on v2, DVs on
v3), ``Table.delete_rows`` (equality deletes) and compactions with random strategies and options, checked
after every operation against a reference model (the multiset of live rows; on v3 also every row's
``_row_id`` and ``_last_updated_sequence_number``, fixed when the row was appended).

Schema evolution is not generated: gpu_engine has no schema-update API (no add-column / update-schema).

The ``gpu``-marked subset runs the same histories with ``backend="cuda"`` (a real device, or numba's CUDA
simulator in ``make test-cudasim``); sort and z-order need CuPy there, so without it they become binpack.
"""

from __future__ import annotations

import math
import random
import struct
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pytest

from gpu_engine._deps import optional
from gpu_engine.catalog.sql import SqlCatalog
from gpu_engine.errors import ValidationError
from gpu_engine.table import Table
from gpu_engine.tasks import FileGroup

from ._compact_support import FAST_RETRIES, Meanwhile, assert_files_consistent, operation
from ._support import sql_catalog

SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("k", pa.string()),
        pa.field("v", pa.float64()),
        pa.field("g", pa.int32()),
    ]
)
NAMES = SCHEMA.names
LINEAGE = ["_row_id", "_last_updated_sequence_number"]
KS = ("a", "b", "c", "é", None)
VS = (math.nan, -math.nan, -0.0, 0.0, math.inf, -math.inf, None)

Row = dict[str, Any]
Pred = Callable[[Row], bool]

# -- predicates with the engine's semantics (gpu_engine.expressions.tree) ------------------------------------

_OPS: dict[str, Callable[[Any, Any], bool]] = {
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
    "=": lambda a, b: a == b,
    "!=": lambda a, b: a != b,
}
_NEGATED = {"<": ">=", "<=": ">", ">": "<=", ">=": "<", "=": "!=", "!=": "="}


def _cmp(col: str, op: str, lit: Any) -> Pred:
    def pred(r: Row) -> bool:
        x = r[col]
        if x is None:
            return False  # a comparison with null does not match
        if isinstance(x, float) and math.isnan(x):
            return op == "!="  # NaN matches only !=
        return _OPS[op](x, lit)

    return pred


def _in(col: str, lits: list[Any], negated: bool) -> Pred:
    def pred(r: Row) -> bool:
        x = r[col]
        if x is None:
            return False
        if isinstance(x, float) and math.isnan(x):
            return negated
        return (x in lits) != negated

    return pred


def _lit(v: Any) -> str:
    return f"'{v}'" if isinstance(v, str) else repr(v)


@dataclass(frozen=True)
class Filter:
    sql: str
    pred: Pred
    negation: Filter | None = None  # the filter ``not (sql)`` means (Iceberg's negation table)


def _atom(rng: random.Random, top: int) -> Filter:
    kind = rng.randrange(6)
    lit: Any
    if kind == 0:
        col, lit = "id", rng.randrange(0, top + 1)
    elif kind == 1:
        col, lit = "k", rng.choice(["a", "b", "c", "é"])
    elif kind == 2:
        col, lit = "v", rng.choice([0, 0.5, -1.5, 2])
    else:
        col, lit = "", None
    if col:
        op = rng.choice(list(_OPS))
        neg = Filter(f"{col} {_NEGATED[op]} {_lit(lit)}", _cmp(col, _NEGATED[op], lit))
        return Filter(f"{col} {op} {_lit(lit)}", _cmp(col, op, lit), neg)
    if kind == 3:
        ids = sorted(rng.sample(range(top + 1), min(4, top + 1)))
        text = ", ".join(map(str, ids))
        neg = Filter(f"id not in ({text})", _in("id", ids, True))
        return Filter(f"id in ({text})", _in("id", ids, False), neg)
    if kind == 4:
        col = rng.choice(["k", "v"])
        neg = Filter(f"{col} is not null", lambda r: r[col] is not None)
        return Filter(f"{col} is null", lambda r: r[col] is None, neg)

    def is_nan(r: Row) -> bool:
        return isinstance(r["v"], float) and math.isnan(r["v"])

    return Filter("v is nan", is_nan, Filter("v is not nan", lambda r: not is_nan(r)))


def random_filter(rng: random.Random, top: int) -> Filter:
    a = _atom(rng, top)
    shape = rng.randrange(5)
    if shape <= 1:
        return a
    b = _atom(rng, top)
    if shape == 2:
        return Filter(f"{a.sql} and {b.sql}", lambda r: a.pred(r) and b.pred(r))
    if shape == 3:
        return Filter(f"({a.sql}) or ({b.sql})", lambda r: a.pred(r) or b.pred(r))
    assert a.negation is not None and b.negation is not None
    na, nb = a.negation, b.negation  # not (a and b) = (not a) or (not b)
    return Filter(f"not ({a.sql} and {b.sql})", lambda r: na.pred(r) or nb.pred(r))


# -- the reference model ------------------------------------------------------------------------------------


def _canon(v: Any) -> Any:
    return ("f", struct.unpack("<q", struct.pack("<d", v))[0]) if isinstance(v, float) else v


def _key(r: Row, names: list[str]) -> tuple[Any, ...]:
    return tuple(_canon(r[n]) for n in names)


@dataclass
class Model:
    """The live rows, and on v3 the lineage each row got when it was appended."""

    rows: list[Row] = field(default_factory=list)
    lineage: dict[int, tuple[int, int]] = field(default_factory=dict)
    next_id: int = 0


@dataclass
class History:
    seed: int
    cat: SqlCatalog
    tbl: Table
    name: str
    version: int
    partitioned: bool
    backend: str
    rng: random.Random
    model: Model = field(default_factory=Model)
    log: list[str] = field(default_factory=list)
    last_append: tuple[int, int] = (0, 0)  # (first id, sequence number) of the last append

    # operations

    def append(self, tbl: Table | None = None) -> None:
        n = self.rng.randrange(1, 30)
        start = self.model.next_id
        self.model.next_id += n
        rows = [
            {
                "id": start + i,
                "k": self.rng.choice(KS),
                "v": self.rng.choice(VS) if self.rng.random() < 0.3 else self.rng.randrange(-8, 8) / 4,
                "g": self.rng.randrange(3),
            }
            for i in range(n)
        ]
        self.log.append(f"append {n} rows (ids {start}..{start + n - 1})")
        result = (tbl or self.tbl).append(pa.Table.from_pylist(rows, schema=SCHEMA), backend=self.backend)
        self.model.rows += rows
        self.last_append = (start, result.commit.sequence_number)

    def delete(self, tbl: Table | None = None) -> None:
        f = random_filter(self.rng, self.model.next_id)
        self.log.append(f"delete where {f.sql}")
        result = (tbl or self.tbl).delete(f.sql, backend=self.backend)
        before = len(self.model.rows)
        self.model.rows = [r for r in self.model.rows if not f.pred(r)]
        assert result.deleted_rows == before - len(self.model.rows), self.log

    def delete_rows(self, tbl: Table | None = None) -> None:
        on = self.rng.choice([["id"], ["k"], ["id", "k"]])
        if self.partitioned:
            on = [*on, "g"]  # equality deletes are partition-scoped: the keys carry the partition column
        live = self.model.rows
        picked = self.rng.sample(live, min(len(live), self.rng.randrange(1, 6)))
        keys = [{c: r[c] for c in on} for r in picked]
        keys.append({c: {"id": 10**9, "k": "zz", "g": 2}[c] for c in on})  # matches nothing
        if "k" in on and self.rng.random() < 0.3:
            keys.append({c: None if c == "k" else keys[0][c] for c in on})  # NULL matches NULL
        self.log.append(f"delete_rows on {on}: {keys}")
        table = pa.Table.from_pylist(keys, schema=pa.schema([SCHEMA.field(c) for c in on]))
        (tbl or self.tbl).delete_rows(table, on=on, backend=self.backend)
        gone = {tuple(k[c] for c in on) for k in keys}
        self.model.rows = [r for r in self.model.rows if tuple(r[c] for c in on) not in gone]

    def compact(self) -> None:
        rng = self.rng
        strategy = rng.choice(["binpack", "sort", "zorder"])
        if self.backend == "cuda" and optional("cupy") is None:
            strategy = "binpack"  # ordering on CUDA needs CuPy
        order = {
            "binpack": None,
            "sort": rng.choice(["k DESC NULLS LAST, id", "v, id", "id DESC", "g, v DESC NULLS FIRST"]),
            "zorder": rng.choice(["id, g", "v, k", "g, id"]),
        }[strategy]
        options: dict[str, str] = {}
        if rng.random() < 0.5:
            options["rewrite-all"] = "true"
        else:
            options["min-input-files"] = "2"
        if rng.random() < 0.3:
            options["target-file-size-bytes"] = str(rng.randrange(1500, 6000))
        if rng.random() < 0.3:
            options["max-file-group-size-bytes"] = str(rng.randrange(2000, 20000))
        if rng.random() < 0.3:
            options["partial-progress.enabled"] = "true"
            options["partial-progress.max-commits"] = str(rng.randrange(1, 4))
        seq_kept = rng.random() >= 0.2
        if not seq_kept:
            options["use-starting-sequence-number"] = "false"
        if rng.random() < 0.2:
            options["delete-file-threshold"] = "1"
        where = f"id >= {rng.randrange(self.model.next_id + 1)}" if rng.random() < 0.2 else None
        # sometimes another writer commits while the compaction runs (after its first group)
        meanwhile: list[Callable[[Table], None]] = [self.append]
        if self.version >= 2 and self.model.rows:
            meanwhile += [self.delete, self.delete_rows]
        other = rng.choice(meanwhile) if rng.random() < 0.3 else None
        ran: list[str] = []

        def concurrently(group: FileGroup) -> None:
            assert other is not None
            other(self.cat.load_table(self.name))
            ran.append(other.__name__)

        def may_conflict() -> bool:
            """A row delete on a file being rewritten, or (new sequence numbers) an equality delete."""
            return bool(ran) and (ran[0] == "delete" or (ran[0] == "delete_rows" and not seq_kept))

        hook = None if other is None else Meanwhile(concurrently)
        self.log.append(f"compact {strategy} {order} {options} where {where}")
        try:
            result = self.tbl.compact(
                strategy, sort_order=order, options=options, where=where, backend=self.backend, progress=hook
            )
        except ValidationError:
            assert options.get("partial-progress.enabled") != "true", self.log
            assert may_conflict(), self.log
            self.log.append("compaction failed validation")
            self.tbl.refresh()
            return
        self.tbl.refresh()
        if result.failures:
            assert may_conflict(), (result.failures, self.log)
            assert {f.stage for f in result.failures} == {"validation"}, result.failures
            self.log.append(f"compaction: {len(result.failures)} group(s) failed validation")
        assert not result.groups or result.backend == self.backend
        assert len(result.groups) + len(result.failures) == len(result.plan.groups), self.log
        for c in result.commits:
            assert operation(self.tbl.metadata.snapshot_by_id(c.snapshot_id)) == "replace"

    # the check after every operation

    def check(self) -> None:
        columns = NAMES + (LINEAGE if self.version >= 3 else [])
        scan = self.tbl.scan(columns=columns, backend=self.backend)
        got = scan.to_arrow().to_pylist()
        assert scan.last_run is not None and scan.last_run.backend.name == self.backend
        actual = Counter(_key(r, NAMES) for r in got)
        expected = Counter(_key(r, NAMES) for r in self.model.rows)
        if actual != expected:
            raise AssertionError(
                f"seed {self.seed}: rows differ after {self.log[-1]!r}: only in the table "
                f"{list((actual - expected).elements())[:5]}, only in the model "
                f"{list((expected - actual).elements())[:5]}\nhistory: {self.log}"
            )
        if self.version >= 3:  # rows appended since the last check get their lineage recorded
            lineage = {r["id"]: (r["_row_id"], r["_last_updated_sequence_number"]) for r in got}
            known = self.model.lineage
            new = {i: v for i, v in lineage.items() if i not in known}
            if new:
                first, seq = self.last_append
                assert min(new) >= first and {s for _, s in new.values()} == {seq}, (new, self.log)
                known.update(new)
                assert len({rid for rid, _ in known.values()}) == len(known), "row ids are unique"
            want = {r["id"]: self.model.lineage[r["id"]] for r in self.model.rows}
            assert lineage == want, (self.seed, self.log)


def run_history(
    cat: SqlCatalog, seed: int, backend: str, *, min_ops: int = 3, max_ops: int = 8, name: str = ""
) -> History:
    rng = random.Random(seed)
    version = rng.choice([1, 2, 2, 3, 3, 3]) if backend == "cpu" else rng.choice([2, 3])
    partitioned = rng.random() < 0.4
    # half the histories merge manifests every few commits (Iceberg's default waits for 100)
    merging = {"commit.manifest.min-count-to-merge": str(rng.choice([2, 3]))} if rng.random() < 0.5 else {}
    name = f"db.{name or 'h'}_{backend}_{seed}"
    tbl = cat.create_table(
        name,
        schema=SCHEMA,
        partition_spec=["g"] if partitioned else [],
        properties={"format-version": str(version), **FAST_RETRIES, **merging},
    )
    h = History(seed, cat, tbl, name, version, partitioned, backend, rng)
    ops = rng.randrange(min_ops, max_ops + 1)
    h.append()
    h.check()
    for _ in range(ops - 1):
        choices: list[Callable[[], None]] = [h.append, h.append, h.compact, h.compact]
        if version >= 2 and h.model.rows:
            choices += [h.delete, h.delete, h.delete_rows]
        rng.choice(choices)()
        h.check()
    if not any(entry.startswith("compact") for entry in h.log):  # every history compacts at least once
        tbl.compact(options={"rewrite-all": "true"}, backend=backend)
        h.log.append("final compaction")
        h.check()
    assert_files_consistent(tbl)  # nothing referenced was deleted, no rewrite output left behind
    return h


@pytest.fixture(scope="module")
def catalog(tmp_path_factory: pytest.TempPathFactory) -> SqlCatalog:
    """One catalog for all histories (a table each): creating a SQLite catalog per history costs more
    than a short history's operations."""
    return sql_catalog(tmp_path_factory.mktemp("histories"))


SEEDS = 200


@pytest.mark.parametrize("seed", range(SEEDS))
def test_history(catalog: SqlCatalog, seed: int) -> None:
    run_history(catalog, seed, "cpu")


@pytest.mark.gpu
@pytest.mark.parametrize("seed", range(1000, 1010))
def test_history_cuda(catalog: SqlCatalog, seed: int) -> None:
    run_history(catalog, seed, "cuda", min_ops=6)


def test_histories_cover_every_operation(catalog: SqlCatalog) -> None:
    """The generator reaches every kind of operation (over a few seeds' logs)."""
    seen: Counter[str] = Counter()
    for seed in range(6):
        h = run_history(catalog, seed, "cpu", name="coverage")
        seen.update(entry.split()[0] for entry in h.log)
    assert {"append", "delete", "delete_rows", "compact"} <= set(seen), seen
