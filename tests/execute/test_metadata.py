"""Metadata columns (gpu_engine.execute.metadata): the row-lineage columns of many files made at once are
those made file by file."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpu_engine.execute.metadata import lineage_column, metadata_column
from gpu_engine.iceberg import metadata_columns as mc
from gpu_engine.iceberg.types import NestedField
from gpu_engine.tasks import DataFile


@st.composite
def batches(draw: st.DrawFn) -> tuple[list[DataFile], list[np.ndarray], pa.Array | None]:
    files, pos = [], []
    for i in range(draw(st.integers(0, 6))):
        n = draw(st.integers(0, 8))
        first_row_id = draw(st.one_of(st.none(), st.integers(0, 2**40)))
        seq = draw(st.one_of(st.none(), st.integers(0, 50)))
        files.append(DataFile(f"f{i}.parquet", "PARQUET", 0, (), 100, 1000, seq, first_row_id=first_row_id))
        pos.append(
            np.array(sorted(draw(st.sets(st.integers(0, 99), min_size=n, max_size=n))), dtype=np.int64)
        )
    total = sum(len(p) for p in pos)
    stored = draw(
        st.one_of(
            st.none(),
            st.lists(st.one_of(st.none(), st.integers(0, 2**40)), min_size=total, max_size=total).map(
                lambda v: pa.array(v, pa.int64())
            ),
        )
    )
    return files, pos, stored


@pytest.mark.parametrize("field", mc.LINEAGE, ids=lambda f: f.name)
@settings(max_examples=150, deadline=None)
@given(batch=batches())
def test_lineage_of_many_files_at_once_is_that_of_each_file(
    field: NestedField, batch: tuple[list[DataFile], list[np.ndarray], pa.Array | None]
) -> None:
    files, pos, stored = batch
    expected, offset = [], 0
    for f, p in zip(files, pos, strict=True):
        own = None if stored is None else stored.slice(offset, len(p))
        offset += len(p)
        expected += metadata_column(field, f, p, stored=own).to_pylist()
    got = lineage_column(field, files, pos, stored)
    assert got.type == pa.int64() and got.to_pylist() == expected


def test_a_column_that_is_not_lineage_is_refused() -> None:
    with pytest.raises(KeyError, match="_pos is not a row-lineage column"):
        lineage_column(mc.POS, [], [], None)
