"""``rewrite_without``: a data file read with its deletes applied, the given positions left out, written as
new files of the current spec (nothing committed); v3 lineage kept in the files but not in their metrics."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from gpu_engine.execute.copy_on_write import rewrite_without
from gpu_engine.iceberg import metadata_columns as mc

from ..commit._support import rows, sql_catalog


@pytest.mark.parametrize("version", [2, 3])
def test_positions_are_dropped_on_top_of_the_deletes(tmp_path: Path, version: int) -> None:
    tbl = sql_catalog(tmp_path).create_table(
        "db.t", rows(0, 0).schema, properties={"format-version": str(version)}
    )
    tbl.append(rows(0, 50))
    tbl.delete("id < 5")  # a DV / position deletes: rows 0-4 are gone already
    (task,) = tbl.scan().plan().tasks
    assert task.deletes
    drop = np.array([3, 10, 11, 49], dtype=np.int64)  # 3 is deleted already
    files = rewrite_without(tbl.metadata, tbl.io, [task], {task.file.path: drop}, backend="cpu")
    assert files and all(f.spec_id == tbl.metadata.default_spec_id for f in files)
    written = pa.concat_tables([pq.read_table(f.path) for f in files])
    want = [i for i in range(50) if i >= 5 and i not in (10, 11, 49)]
    assert sorted(written["id"].to_pylist()) == want
    assert sum(f.record_count for f in files) == len(want)
    lineage = {mc.ROW_ID.field_id, mc.LAST_UPDATED_SEQUENCE_NUMBER.field_id}
    for f in files:
        assert not lineage & set(f.value_counts)  # metadata columns are not table columns
    if version == 3:  # the rows keep the ids they had: first_row_id 0 + position
        ids = dict(zip(written["id"].to_pylist(), written["_row_id"].to_pylist(), strict=True))
        assert ids == {i: i for i in want}
    else:
        assert "_row_id" not in written.column_names


def test_nothing_dropped_copies_every_live_row(tmp_path: Path) -> None:
    tbl = sql_catalog(tmp_path).create_table("db.t", rows(0, 0).schema, properties={"format-version": "2"})
    tbl.append(rows(0, 20))
    (task,) = tbl.scan().plan().tasks
    files = rewrite_without(tbl.metadata, tbl.io, [task], {}, backend="cpu")
    written = pa.concat_tables([pq.read_table(f.path) for f in files])
    assert sorted(written["id"].to_pylist()) == list(range(20))
