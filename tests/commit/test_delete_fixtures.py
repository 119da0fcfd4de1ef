"""Every real fixture table, copied, gets a row delete: merge-on-read (v2, v3) and copy-on-write (every
version). The filter ``c = v`` takes the first top-level int, long or string column ``c`` of the current
schema and the value ``v`` of its first non-null row; afterwards our scan gives exactly the rows before
less those where ``c = v``. Copy-on-write rewrites real files (every type, schema evolution, name-mapped
and Hive-written files, equality deletes) through our writer: no delete file applies to a new file, and
the commit is an ``overwrite`` (``delete`` when the matched files were emptied)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from gpu_engine.iceberg import types as it
from gpu_engine.table import Table

from ..execute.oracles import assert_same_rows
from ..execute.test_fixture_scans import ENGINE_CANNOT
from ..planning._support import FIXTURES, MISSING, SHARED, inventory_paths
from ._fixture_copy import committable_copy, tree_state
from .test_compact_fixtures import COMPACT_CANNOT

TABLES = inventory_paths()
_KEYS = (it.INT, it.LONG, it.STRING)


def key_filter(tbl: Table, before: pa.Table) -> tuple[str, pa.ChunkedArray] | None:
    """``c = v`` for the first int/long/string column with a non-null value, and the rows it matches."""
    for f in tbl.schema().fields:
        if f.type not in _KEYS or f.name not in before.column_names:
            continue
        values = before[f.name].drop_null()
        if not len(values) or not f.name.isidentifier():
            continue
        v = values[0].as_py()
        literal = f"'{v}'" if isinstance(v, str) else str(v)
        if isinstance(v, str) and "'" in v:
            continue
        return f"{f.name} = {literal}", pc.fill_null(pc.equal(before[f.name], v), False)
    return None


@pytest.mark.parametrize("mode", ["merge-on-read", "copy-on-write"])
@pytest.mark.parametrize("rel", TABLES)
def test_a_delete_keeps_every_other_row(rel: str, mode: str, tmp_path: Path) -> None:
    if rel == MISSING:
        pytest.fail(f"fixtures not found at {FIXTURES}")
    if rel in ENGINE_CANNOT or (mode == "copy-on-write" and rel in COMPACT_CANNOT):
        pytest.skip("the engine refuses to read or rewrite this table (tested where refused)")
    fixture_state = tree_state(SHARED / rel)
    tbl = committable_copy(rel, tmp_path / "table")
    if tbl.metadata.current_snapshot_id is None:
        pytest.skip("no current snapshot")
    if mode == "merge-on-read" and tbl.metadata.format_version < 2:
        pytest.skip("format version 1 has no delete files")
    before = tbl.scan().to_arrow()
    found = key_filter(tbl, before)
    if found is None:
        pytest.skip("no int, long or string column with a value")
    text, matched = found
    tbl.update_properties().set("write.delete.mode", mode).commit()

    result = tbl.delete(text, backend="cpu")
    assert result.deleted_rows == pc.sum(matched.cast(pa.int64())).as_py() > 0, text
    assert_same_rows(tbl.scan().to_arrow(), before.filter(pc.invert(matched)), context=f"{rel}: {text}")
    head = tbl.metadata.current_snapshot()
    assert head is not None
    if mode == "copy-on-write":
        assert (head.summary or {})["operation"] == ("overwrite" if result.added else "delete")
        new = {f.path for f in result.added}
        tasks = tbl.scan().plan().tasks
        assert new <= {t.file.path for t in tasks}
        assert not [d.path for t in tasks if t.file.path in new for d in t.deletes]
    else:
        assert (head.summary or {})["operation"] == "delete"
    assert tree_state(SHARED / rel) == fixture_state
