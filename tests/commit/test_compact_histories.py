"""Generated histories: seeded random sequences of appends, ``Table.delete`` (position deletes on v2, DVs on
v3, copy-on-write rewrites on v1 and on tables set to it), ``Table.overwrite`` (those deletes and new rows
in one snapshot), ``Table.dynamic_partition_overwrite`` (the model computes partitions itself: murmur3
buckets, code-point truncation), ``Table.delete_rows`` (equality deletes), ``Table.upsert`` (equality
deletes and rows in one snapshot) and
compactions with random strategies and options, checked after every operation against a reference model
(the multiset of live rows; on v3 also every row's ``_row_id`` and ``_last_updated_sequence_number``, fixed
when the row was appended).

Histories also evolve the schema (extra columns added, with v3 defaults, and deleted; ``k``, ``v``, ``g``
renamed; columns moved; ``g`` promoted to long) and the partition spec (identity ``g``, ``bucket(3, id)`` and
``truncate(1, k)`` fields added and removed), roll main back to an earlier snapshot (the model keeps the
rows of every snapshot it checked, schema changes applied to them too), and append through a branch that is
then fast-forwarded into main, dropped or kept as a side branch (write-audit-publish; main checked unchanged
meanwhile; the branch sometimes compacted before it is published, a kept one later too).

Maintenance runs among the operations: position deletes rewritten (v3: into DVs), equality deletes
converted, manifests rewritten, snapshots expired (keeping the last 1-3 of main, sometimes after tagging an
old snapshot; every snapshot the model saw that is still there, every kept branch and every tag is then
read and must give its rows) and orphan files removed.

The model keeps rows by logical column names; filters, keys and sort orders are written with the current
names. ``delete_rows`` writes its equality deletes in every spec holding live rows (an equality delete of a
partitioned spec applies only to files of that spec), so its keys carry the partition columns of all of
them; the model reads each row's ``_spec_id`` after every operation.

The ``gpu``-marked subset runs the same histories with ``backend="cuda"`` (a real device, or numba's CUDA
simulator in ``make test-cudasim``); sort and z-order need CuPy there, so without it they become binpack.
"""

from __future__ import annotations

import math
import random
import re
import struct
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import mmh3
import pyarrow as pa
import pytest

from gpu_engine._deps import optional
from gpu_engine.catalog.sql import SqlCatalog
from gpu_engine.commit.equality_delete import delete_specs
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
    names: dict[str, str] = field(default_factory=lambda: {n: n for n in NAMES})  # logical -> current
    extras: list[str] = field(default_factory=list)  # logical names of the added columns, in order
    g_long: bool = False
    spec_of: dict[int, int] = field(default_factory=dict)  # row id -> spec id of the file holding it
    evolutions: int = 0
    states: dict[int, list[Row]] = field(default_factory=dict)  # snapshot id -> the model's rows there
    side_refs: dict[str, list[int]] = field(default_factory=dict)  # kept branches and tags -> their ids
    lineages: dict[int, dict[int, tuple[int, int]]] = field(default_factory=dict)  # snapshot id -> lineage

    # names and types

    @property
    def live(self) -> list[str]:
        return [*NAMES, *self.extras]

    def sql(self, text: str) -> str:
        """``text`` (a filter or sort order over logical names) over the current names."""
        return re.sub(r"\b(id|k|v|g)\b", lambda m: self.names[m.group(1)], text)

    def arrow_schema(self, columns: list[str] | None = None) -> pa.Schema:
        types = {
            "id": pa.int64(),
            "k": pa.string(),
            "v": pa.float64(),
            "g": pa.int64() if self.g_long else pa.int32(),
        }
        return pa.schema(
            [
                pa.field(self.names[c], types.get(c, pa.int64()), nullable=c != "id")
                for c in columns or self.live
            ]
        )

    def arrow(self, rows: list[Row], columns: list[str] | None = None) -> pa.Table:
        cols = columns or self.live
        return pa.Table.from_pylist(
            [{self.names[c]: r[c] for c in cols} for r in rows], schema=self.arrow_schema(cols)
        )

    def partition_sources(self) -> list[str]:
        """Logical names of the columns the specs ``delete_rows`` writes in partition by (the default spec
        and those of the live data files, or one unpartitioned spec)."""
        md = self.tbl.refresh().metadata
        logical = {current: name for name, current in self.names.items()}
        specs = [md.spec_by_id(i) for i in delete_specs(self.tbl, "main")]
        fields = [f for s in specs for f in s.fields if f.transform != "void"]
        return list(dict.fromkeys(logical[md.schema.find_field(f.source_id).name] for f in fields))

    # operations

    def new_rows(self) -> list[Row]:
        n = self.rng.randrange(1, 30)
        start = self.model.next_id
        self.model.next_id += n
        return [
            {
                "id": start + i,
                "k": self.rng.choice(KS),
                "v": self.rng.choice(VS) if self.rng.random() < 0.3 else self.rng.randrange(-8, 8) / 4,
                "g": self.rng.randrange(3),
                **{x: self.rng.choice([None, self.rng.randrange(-5, 5)]) for x in self.extras},
            }
            for i in range(n)
        ]

    def append(self, tbl: Table | None = None, *, branch: str = "main") -> None:
        merge = tbl is None and branch == "main" and self.rng.random() < 0.1
        if merge:  # the rows bring a new column: append(merge_schema=True) adds it
            self.evolutions += 1
            x = f"x{self.evolutions}"
            for r in self._all_rows():
                r[x] = None
            self.extras.append(x)
            self.names[x] = x
        rows = self.new_rows()
        start, n = rows[0]["id"], len(rows)
        self.log.append(
            f"append {n} rows (ids {start}..{start + n - 1})"
            + (f" to {branch}" if branch != "main" else "")
            + (f" merging column {self.extras[-1]}" if merge else "")
        )
        result = (tbl or self.tbl).append(
            self.arrow(rows), branch=branch, backend=self.backend, merge_schema=merge
        )
        self.model.rows += rows
        self.last_append = (start, result.commit.sequence_number)

    def partition_of(self, row: Row, spec_id: int) -> tuple[Any, ...]:
        """The partition tuple of ``row`` in spec ``spec_id``, computed here: identity, ``bucket[3]`` of a
        long (murmur3 of its 8 little-endian bytes, as the spec says), ``truncate[1]`` of a string (its
        first code point), void."""
        md = self.tbl.metadata
        logical = {current: name for name, current in self.names.items()}
        out: list[Any] = []
        for f in md.spec_by_id(spec_id).fields:
            value = row[logical[md.schema.find_field(f.source_id).name]]
            if f.transform == "void" or value is None:
                out.append(None)
            elif f.transform == "bucket[3]":
                out.append((mmh3.hash(struct.pack("<q", value), signed=True) & 0x7FFFFFFF) % 3)
            elif f.transform == "truncate[1]":
                out.append(value[:1])
            else:
                assert f.transform == "identity", f
                out.append(value)
        return tuple(out)

    def replace_partitions(self) -> None:
        """A dynamic partition overwrite: the partitions new rows land in (default spec) replaced."""
        rows = self.new_rows()
        self.log.append(f"replace partitions with ids {rows[0]['id']}..{rows[-1]['id']}")
        result = self.tbl.dynamic_partition_overwrite(self.arrow(rows), backend=self.backend)
        assert result is not None
        md = self.tbl.metadata
        replaced = {(f.spec_id, f.partition) for f in result.files}
        assert replaced == {(md.default_spec_id, self.partition_of(r, md.default_spec_id)) for r in rows}
        whole = md.spec.is_unpartitioned

        def gone(r: Row) -> bool:
            spec_id = self.spec_of[r["id"]]
            return whole or (spec_id, self.partition_of(r, spec_id)) in replaced

        self.model.rows = [r for r in self.model.rows if not gone(r)] + rows
        self.last_append = (rows[0]["id"], result.commit.sequence_number)

    def overwrite(self) -> None:
        """The rows matching a random filter replaced by new rows, in one snapshot."""
        f = random_filter(self.rng, self.model.next_id)
        rows = self.new_rows()
        self.log.append(f"overwrite where {self.sql(f.sql)} with ids {rows[0]['id']}..{rows[-1]['id']}")
        result = self.tbl.overwrite(self.arrow(rows), self.sql(f.sql), backend=self.backend)
        before = len(self.model.rows)
        self.model.rows = [r for r in self.model.rows if not f.pred(r)] + rows
        assert result.deleted_rows == before + len(rows) - len(self.model.rows), self.log
        self.last_append = (rows[0]["id"], result.commit.sequence_number)

    def delete(self, tbl: Table | None = None) -> None:
        f = random_filter(self.rng, self.model.next_id)
        self.log.append(f"delete where {self.sql(f.sql)}")
        result = (tbl or self.tbl).delete(self.sql(f.sql), backend=self.backend)
        before = len(self.model.rows)
        self.model.rows = [r for r in self.model.rows if not f.pred(r)]
        assert result.deleted_rows == before - len(self.model.rows), self.log

    def equality_keys(self, on: list[str]) -> list[str]:
        """``on`` with the partition columns of every live spec: equality deletes are partition-scoped,
        unless the table has an unpartitioned spec (global deletes are written in it then)."""
        global_deletes = any(s.is_unpartitioned for s in self.tbl.refresh().metadata.partition_specs)
        if not (global_deletes and self.rng.random() < 0.5):
            on = on + [c for c in self.partition_sources() if c not in on]
        return on

    def upsert(self, tbl: Table | None = None) -> None:
        """Some live rows updated by key (their other columns changed) and new rows inserted, in one
        snapshot of equality deletes and rows; updated rows are new rows for lineage."""
        on = self.equality_keys(["id"])
        picked = self.rng.sample(self.model.rows, min(len(self.model.rows), self.rng.randrange(0, 4)))
        fresh = self.new_rows()
        updates = []
        for r in picked:
            changed = {c: r[c] for c in on}
            changed.update({c: v for c, v in fresh.pop(0).items() if c not in on} if fresh else {})
            updates.append({**r, **{c: v for c, v in changed.items() if c != "id"}, "id": r["id"]})
        data = updates + fresh
        if not data:
            return
        self.log.append(f"upsert on {on}: {len(updates)} updated, {len(fresh)} inserted")
        on_names = [self.names[c] for c in on]
        result = (tbl or self.tbl).upsert(self.arrow(data), on=on_names, backend=self.backend)
        assert result is not None and result.rows == len(data)
        keys = {tuple(r[c] for c in on) for r in data}
        self.model.rows = [r for r in self.model.rows if tuple(r[c] for c in on) not in keys] + data
        for r in updates:
            self.model.lineage.pop(r["id"], None)
        self.last_append = (min(r["id"] for r in data), result.commit.sequence_number)

    def delete_rows(self, tbl: Table | None = None) -> None:
        on = self.equality_keys(self.rng.choice([["id"], ["k"], ["id", "k"]]))
        live = self.model.rows
        picked = self.rng.sample(live, min(len(live), self.rng.randrange(1, 6)))
        keys = [{c: r[c] for c in on} for r in picked]
        keys.append({c: {"id": 10**9, "k": "zz", "g": 2}[c] for c in on})  # matches nothing
        if "k" in on and self.rng.random() < 0.3:
            keys.append({c: None if c == "k" else keys[0][c] for c in on})  # NULL matches NULL
        self.log.append(f"delete_rows on {on}: {keys}")
        (tbl or self.tbl).delete_rows(
            self.arrow(keys, on), on=[self.names[c] for c in on], backend=self.backend
        )
        gone = {tuple(k[c] for c in on) for k in keys}

        def hit(r: Row) -> bool:
            return tuple(r[c] for c in on) in gone

        self.model.rows = [r for r in self.model.rows if not hit(r)]

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
        order = None if order is None else self.sql(order)
        where = f"id >= {rng.randrange(self.model.next_id + 1)}" if rng.random() < 0.2 else None
        # sometimes another writer commits while the compaction runs (after its first group)
        meanwhile: list[Callable[[Table], None]] = [self.append]
        if self.model.rows:
            meanwhile += [self.delete] + ([self.delete_rows, self.upsert] if self.version >= 2 else [])
        other = rng.choice(meanwhile) if rng.random() < 0.3 else None
        ran: list[str] = []

        def concurrently(group: FileGroup) -> None:
            assert other is not None
            other(self.cat.load_table(self.name))
            ran.append(other.__name__)

        md = self.tbl.metadata
        respec = not md.spec.is_unpartitioned and set(self.spec_of.values()) != {md.default_spec_id}

        def may_conflict() -> bool:
            """A row delete on a file being rewritten, or (new sequence numbers, or rows moving into the
            spec of a partition-scoped one) an equality delete."""
            eq = bool(ran) and ran[0] in ("delete_rows", "upsert") and (not seq_kept or respec)
            return bool(ran) and (ran[0] == "delete" or eq)

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

    def evolve_schema(self) -> None:
        self.evolutions += 1
        n, rng, version = self.evolutions, self.rng, self.version
        choices = ["add", "rename", "move"] + ([] if self.g_long else ["promote"])
        kind = "drop" if self.extras and rng.random() < 0.4 else rng.choice(choices)
        with self.tbl.update_schema() as u:
            if kind == "add":
                x = f"x{n}"
                default = rng.randrange(-5, 5) if version >= 3 and rng.random() < 0.5 else None
                u.add_column(x, "long", default=default)
                self.extras.append(x)
                self.names[x] = x
                for r in self._all_rows():
                    r[x] = default
                self.log.append(f"add column {x} long default {default}")
            elif kind == "rename":
                col = rng.choice(["k", "v", "g"])
                new = f"{col}_{n}"
                u.rename_column(self.names[col], new)
                self.log.append(f"rename column {self.names[col]} to {new}")
                self.names[col] = new
            elif kind == "move":
                columns = [f.name for f in self.tbl.metadata.schema.fields]
                col, other = rng.sample(columns, 2)
                if rng.random() < 0.5:
                    u.move_first(col)
                    self.log.append(f"move column {col} first")
                else:
                    u.move_after(col, other)
                    self.log.append(f"move column {col} after {other}")
            elif kind == "drop":
                x = rng.choice(self.extras)
                u.delete_column(self.names[x])
                self.extras.remove(x)
                for r in self._all_rows():
                    del r[x]
                self.log.append(f"delete column {x}")
            else:
                u.update_column(self.names["g"], "long")
                self.g_long = True
                self.log.append("promote g to long")

    def _all_rows(self) -> list[Row]:
        """The live rows and those of every saved snapshot state: a schema change reaches them all."""
        return [*self.model.rows, *(r for rows in self.states.values() for r in rows)]

    def save_state(self) -> None:
        current = self.tbl.metadata.current_snapshot_id
        if current is not None:
            self.states[current] = [dict(r) for r in self.model.rows]
            self.lineages[current] = dict(self.model.lineage)  # an upsert gives updated rows new lineage

    def rollback_targets(self) -> list[int]:
        """The ancestors of main's head (not itself) whose rows the model saw."""
        md = self.tbl.metadata
        out, current = [], md.current_snapshot_id
        while current is not None and current in md.snapshots_by_id:
            current = md.snapshots_by_id[current].parent_snapshot_id
            if current in self.states:
                out.append(current)
        return out

    def publish_through_branch(self) -> None:
        """Write-audit-publish: a branch at main's head gets an append (main does not see it), then is
        fast-forwarded into main or dropped."""
        name = f"wap{len(self.log)}"
        self.tbl.manage_snapshots().create_branch(name).commit()
        before = [dict(r) for r in self.model.rows]
        self.append(branch=name)
        staged = self.model.rows
        self.model.rows = before
        self.check()  # main is untouched
        if self.rng.random() < 0.3:  # the branch is compacted before it is audited
            self.tbl.compact(options={"rewrite-all": "true"}, branch=name, backend=self.backend)
            self.log.append(f"compact {name}")
            self.check()  # main is still untouched
        got = self.tbl.scan(columns=[self.names["id"]], ref=name, backend=self.backend).to_arrow()
        assert sorted(got.column(0).to_pylist()) == sorted(r["id"] for r in staged), self.log
        outcome = self.rng.random()
        if outcome < 0.55:
            self.tbl.manage_snapshots().fast_forward("main", name).remove_branch(name).commit()
            self.model.rows = staged
            self.log.append(f"publish {name}")
        elif outcome < 0.8:
            self.tbl.manage_snapshots().remove_branch(name).commit()
            self.log.append(f"drop {name}")
        else:  # left as a side branch: expiration and orphan removal must keep it readable
            self.side_refs[name] = sorted(r["id"] for r in staged)
            self.log.append(f"keep {name}")

    def compact_side_branch(self) -> None:
        """A kept branch compacted (its rows stay; main is untouched)."""
        name = self.rng.choice([n for n in self.side_refs if self.tbl.metadata.refs[n].is_branch])
        self.tbl.compact(options={"rewrite-all": "true"}, branch=name, backend=self.backend)
        self.log.append(f"compact side branch {name}")
        self.check_side_refs()

    def check_side_refs(self) -> None:
        md = self.tbl.refresh().metadata
        for name, ids in self.side_refs.items():
            assert name in md.refs, (name, self.log)
            got = self.tbl.scan(columns=[self.names["id"]], ref=name, backend=self.backend).to_arrow()
            assert sorted(got.column(0).to_pylist()) == ids, (name, self.log)

    def rollback(self) -> None:
        target = self.rng.choice(self.rollback_targets())
        self.tbl.manage_snapshots().rollback_to(target).commit()
        self.model.rows = [dict(r) for r in self.states[target]]
        self.model.lineage = dict(self.lineages[target])
        self.log.append(f"rollback to snapshot {target}")

    def delete_files(self, kind: str = "delete-files") -> int:
        """The number of delete files (``kind``: or position/equality delete records) main's head has."""
        head = self.tbl.metadata.current_snapshot()
        return 0 if head is None else int((head.summary or {}).get(f"total-{kind}", "0"))

    def rewrite_deletes(self) -> None:
        """Delete-file maintenance (rows unchanged): position deletes compacted (v3: into DVs), or
        equality deletes converted into positions (the kind the table has, or either)."""
        kinds = [k for k in ("position", "equality") if self.delete_files(f"{k}-deletes")]
        if self.rng.choice(kinds or ["position", "equality"]) == "position":
            options = {"rewrite-all": "true"} if self.rng.random() < 0.5 else {"min-input-files": "1"}
            result = self.tbl.rewrite_position_deletes(options=options)
            self.log.append(f"rewrite position deletes {options}: {len(result.removed_delete_files)} removed")
        else:
            result = self.tbl.convert_equality_deletes(backend=self.backend)
            self.log.append(f"convert equality deletes: {len(result.removed_delete_files)} removed")
        if result.commit is not None:
            assert (
                operation(self.tbl.refresh().metadata.snapshot_by_id(result.commit.snapshot_id)) == "replace"
            )

    def rewrite_manifests(self) -> None:
        """Manifests rewritten into target-sized ones clustered by partition (rows unchanged)."""
        target = self.rng.choice([None, 3000, 6000])
        result = self.tbl.rewrite_manifests(target_size_bytes=target)
        self.log.append(f"rewrite manifests to {target}: {len(result.rewritten_manifests)} rewritten")

    def expire(self) -> None:
        """Snapshot expiration keeping the last 1-3 of main (sometimes followed by orphan removal), then
        time travel to every snapshot the model saw that is still there."""
        keep = self.rng.randrange(1, 4)
        if self.states and self.rng.random() < 0.3:  # a tag keeps its snapshot whatever its age
            tagged = self.rng.choice(sorted(self.states))
            name = f"tag{len(self.log)}"
            self.tbl.manage_snapshots().create_tag(name, tagged).commit()
            self.side_refs[name] = sorted(r["id"] for r in self.states[tagged])
            self.log.append(f"tag {tagged} as {name}")
        md = self.tbl.metadata
        head = md.current_snapshot_id
        before = () if head is None else md.ancestor_ids(head)
        heads = {r.snapshot_id for r in md.refs.values()}
        named = [s.snapshot_id for s in md.snapshots if s.snapshot_id not in heads]
        if named and self.rng.random() < 0.3:  # one snapshot by id; nothing is old enough by age
            sid = self.rng.choice(named)
            oldest = min(s.timestamp_ms for s in md.snapshots)
            result = self.tbl.expire_snapshots(older_than=oldest, snapshot_ids=[sid])
            self.log.append(f"expire snapshots by id {sid}")
            assert result.expired_snapshot_ids == (sid,), self.log
        else:
            result = self.tbl.expire_snapshots(older_than=int(time.time() * 1000) + 1, retain_last=keep)
            self.log.append(f"expire snapshots retaining {keep}: {len(result.expired_snapshot_ids)} expired")
            kept = self.tbl.metadata
            assert (() if head is None else kept.ancestor_ids(head)[:keep]) == before[:keep], self.log
        md = self.tbl.refresh().metadata
        assert not set(result.expired_snapshot_ids) & set(md.snapshots_by_id), self.log
        assert md.current_snapshot_id == head, self.log
        for expired in result.expired_snapshot_ids:
            self.states.pop(expired, None)
        if self.rng.random() < 0.5:
            orphans = self.tbl.remove_orphan_files(older_than=int(time.time() * 1000) + 1)
            self.log.append(f"remove orphan files: {len(orphans)}")
        assert_files_consistent(self.tbl)
        self.check_side_refs()
        for snapshot_id, rows in self.states.items():
            assert snapshot_id in md.snapshots_by_id, (snapshot_id, self.log)
            scan = self.tbl.scan(columns=[self.names["id"]], snapshot_id=snapshot_id, backend=self.backend)
            got = Counter(scan.to_arrow().column(0).to_pylist())
            assert got == Counter(r["id"] for r in rows), (snapshot_id, self.log)

    def evolve_spec(self) -> None:
        md = self.tbl.metadata
        fields = [f for f in md.spec.fields if f.transform != "void"]
        candidates = {"g": "g", "bucket[3]": "bucket(3, id)", "truncate[1]": "truncate(1, k)"}
        present = {f.transform.replace("identity", "g") for f in fields}
        missing = [c for c in candidates if c not in present]
        with self.tbl.update_spec() as u:
            if fields and (not missing or self.rng.random() < 0.5):
                name = self.rng.choice(fields).name
                u.remove_field(name)
                self.log.append(f"remove partition field {name}")
            else:
                text = self.sql(candidates[self.rng.choice(missing)])
                u.add_field(text)
                self.log.append(f"add partition field {text}")

    # the check after every operation

    def check(self) -> None:
        columns = [self.names[c] for c in self.live] + ["_spec_id"] + (LINEAGE if self.version >= 3 else [])
        scan = self.tbl.scan(columns=columns, backend=self.backend)
        logical = {current: name for name, current in self.names.items()}
        got = [{logical.get(k, k): v for k, v in r.items()} for r in scan.to_arrow().to_pylist()]
        assert scan.last_run is not None and scan.last_run.backend.name == self.backend
        self.spec_of = {r["id"]: r["_spec_id"] for r in got}
        actual = Counter(_key(r, self.live) for r in got)
        expected = Counter(_key(r, self.live) for r in self.model.rows)
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

    def check_changelog(self, last: int = 4) -> None:
        """The changes the last ``last`` snapshots of main made, by the changelog scan, are the model's rows
        before minus after (DELETE) and the reverse (INSERT); with ``net_changes`` over those snapshots,
        exactly the model's rows at the start minus now, and the reverse."""
        md = self.tbl.metadata
        head = md.current_snapshot_id
        chain = list(reversed(md.ancestor_ids(head))) if head is not None else []
        known = [
            s for s in chain if s in self.states and md.snapshots_by_id[s].parent_snapshot_id in self.states
        ]
        if not known:
            return
        start = md.snapshots_by_id[known[-last:][0]].parent_snapshot_id
        logical = {current: name for name, current in self.names.items()}
        scan = self.tbl.incremental_changelog_scan(
            start, columns=[self.names[c] for c in self.live], backend=self.backend
        )
        changes = [{logical.get(k, k): v for k, v in r.items()} for r in scan.to_arrow().to_pylist()]
        for snapshot_id in chain[chain.index(start) + 1 :] if start in chain else []:
            parent = md.snapshots_by_id[snapshot_id].parent_snapshot_id
            if snapshot_id not in self.states or parent not in self.states:
                continue
            mine = [r for r in changes if r["_commit_snapshot_id"] == snapshot_id]
            deleted = Counter(_key(r, self.live) for r in mine if r["_change_type"] == "DELETE")
            inserted = Counter(_key(r, self.live) for r in mine if r["_change_type"] == "INSERT")
            before = Counter(_key(r, self.live) for r in self.states[parent])
            after = Counter(_key(r, self.live) for r in self.states[snapshot_id])
            context = (self.seed, snapshot_id, self.log)
            assert (deleted - inserted, inserted - deleted) == (before - after, after - before), context
            assert not deleted & inserted, ("carry-overs left", *context)
        if start is None or start not in self.states:
            return
        net = self.tbl.incremental_changelog_scan(
            start, columns=[self.names[c] for c in self.live], backend=self.backend, net_changes=True
        )
        rows = [{logical.get(k, k): v for k, v in r.items()} for r in net.to_arrow().to_pylist()]
        deleted = Counter(_key(r, self.live) for r in rows if r["_change_type"] == "DELETE")
        inserted = Counter(_key(r, self.live) for r in rows if r["_change_type"] == "INSERT")
        at_start = Counter(_key(r, self.live) for r in self.states[start])
        now = Counter(_key(r, self.live) for r in self.model.rows)
        assert (deleted, inserted) == (at_start - now, now - at_start), (self.seed, "net changes", self.log)


def run_history(
    cat: SqlCatalog, seed: int, backend: str, *, min_ops: int = 3, max_ops: int = 8, name: str = ""
) -> History:
    rng = random.Random(seed)
    version = rng.choice([1, 2, 2, 3, 3, 3]) if backend == "cpu" else rng.choice([2, 3])
    partitioned = rng.random() < 0.4
    # half the histories merge manifests every few commits (Iceberg's default waits for 100); some v2/v3
    # tables delete copy-on-write (v1 tables always do)
    props = {"commit.manifest.min-count-to-merge": str(rng.choice([2, 3]))} if rng.random() < 0.5 else {}
    if version >= 2 and rng.random() < 0.3:
        props["write.delete.mode"] = "copy-on-write"
    name = f"db.{name or 'h'}_{backend}_{seed}"
    tbl = cat.create_table(
        name,
        schema=SCHEMA,
        partition_spec=["g"] if partitioned else [],
        properties={"format-version": str(version), **FAST_RETRIES, **props},
    )
    h = History(seed, cat, tbl, name, version, partitioned, backend, rng)
    ops = rng.randrange(min_ops, max_ops + 1)
    h.append()
    h.check()
    h.save_state()
    for _ in range(ops - 1):
        choices: list[Callable[[], None]] = [
            h.append,
            h.append,
            h.compact,
            h.compact,
            h.evolve_schema,
            h.evolve_spec,
        ]
        choices += [h.evolve_schema] if h.extras else []  # added columns get dropped too
        if h.model.rows:  # copy-on-write on v1 tables and some others
            choices += [h.delete, h.delete, h.overwrite, h.replace_partitions]
            choices += [h.delete_rows, h.upsert] if version >= 2 else []
        if h.delete_files():
            choices += [h.rewrite_deletes] * 3
        if len(h.tbl.metadata.snapshots) > 1:
            choices += [h.expire, h.rewrite_manifests]
        if any(h.tbl.metadata.refs[n].is_branch for n in h.side_refs):
            choices += [h.compact_side_branch]
        choices += [h.rollback] if h.rollback_targets() else []
        choices += [h.publish_through_branch] if h.tbl.metadata.current_snapshot_id is not None else []
        rng.choice(choices)()
        h.check()
        h.save_state()
    if not any(entry.startswith("compact") for entry in h.log):  # every history compacts at least once
        tbl.compact(options={"rewrite-all": "true"}, backend=backend)
        h.log.append("final compaction")
        h.check()
    h.check_changelog()
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
    """The generator reaches every kind of operation (over a few longer histories' logs)."""
    seen: Counter[str] = Counter()
    for seed in range(40):
        h = run_history(catalog, seed, "cpu", name="coverage", max_ops=12)
        seen.update(entry.split()[0] for entry in h.log)
        seen.update(" ".join(entry.split()[:2]) for entry in h.log)
        seen.update("compact branch" for entry in h.log if entry.startswith("compact wap"))
        seen.update("merging" for entry in h.log if " merging column " in entry)
        seen.update("expire by id" for entry in h.log if entry.startswith("expire snapshots by id"))
    operations = {
        "append",
        "delete",
        "delete_rows",
        "compact",
        "rollback",
        "publish",
        "drop",
        "compact branch",
        "overwrite",
        "replace partitions",
        "upsert",
        "keep",
        "tag",
        "compact side",
        "merging",
    }
    maintenance = {
        "expire snapshots",
        "expire by id",
        "remove orphan",
        "rewrite position",
        "convert equality",
        "rewrite manifests",
    }
    assert operations | maintenance <= set(seen), seen
    evolution = {
        "add column",
        "rename column",
        "move column",
        "promote g",
        "add partition",
        "remove partition",
    }
    assert evolution <= set(seen), seen
