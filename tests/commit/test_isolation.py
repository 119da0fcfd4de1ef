"""Serializable validation of deletes and overwrites: data files appended since the plan conflict when
they may hold matching rows, judged from the manifests those appends wrote, so a file appended and then
compacted away meanwhile still conflicts (its rows live on in the compaction's output)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from gpu_engine.errors import ValidationError

from ._support import assert_all_readers, once_at, region_table, rows


def _in_region(t: pa.Table, region: str) -> pa.Table:
    return t.set_column(t.schema.get_field_index("region"), "region", pa.array([region] * t.num_rows))


@pytest.mark.parametrize("mode", ["merge-on-read", "copy-on-write"])
def test_rows_appended_then_compacted_meanwhile_still_conflict(tmp_path: Path, mode: str) -> None:
    tbl = region_table(tmp_path, 2, **{"write.delete.mode": mode})
    data = rows(0, 40)
    tbl.append(data)
    other = tbl.catalog.load_table(tbl.identifier)  # type: ignore[union-attr]
    late = _in_region(rows(100, 10, seed=9), "zz")

    def append_then_compact() -> None:
        other.append(late)
        other.compact(where="region = 'zz'", options={"rewrite-all": "true"})

    with pytest.raises(ValidationError, match="may hold rows matching this delete's filter"):
        tbl.delete("id < 5 or id >= 100", faults=once_at("manifest", append_then_compact))
    assert_all_readers(tbl.refresh(), pa.concat_tables([data, late]))


def test_appended_files_that_cannot_match_do_not_conflict(tmp_path: Path) -> None:
    tbl = region_table(tmp_path, 2)
    data = rows(0, 40)
    tbl.append(data)
    other = tbl.catalog.load_table(tbl.identifier)  # type: ignore[union-attr]
    late = _in_region(rows(100, 10, seed=9), "zz")
    result = tbl.delete("id < 5", faults=once_at("manifest", lambda: other.append(late)))
    assert result.commit is not None and result.commit.attempts == 2  # retried, validated, committed
    kept = data.filter(pc.invert(pc.less(data["id"], 5)))
    assert_all_readers(tbl.refresh(), pa.concat_tables([kept, late]))
