"""gpu_engine.spark.changes: a table's changelog as a DataFrame, one Spark task per snapshot, equal to the
single-process changelog (merge-on-read deletes, an upsert paired into updates, carry-overs removed)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from gpu_engine.errors import GpuEngineError
from gpu_engine.spark import changes
from gpu_engine.spark.scan import spark_arrow_schema

from ..commit._support import keyed_rows, region_table
from ..execute.oracles import assert_same_rows


def test_changes_equal_the_local_changelog(spark: Any, tmp_path: Path) -> None:
    tbl = region_table(tmp_path, 3)
    tbl.append(keyed_rows(0, 30))
    start = tbl.metadata.current_snapshot_id
    tbl.delete("id < 4")
    tbl.append(keyed_rows(30, 10, seed=1))
    row = tbl.scan(filter="id = 12").to_arrow()
    tbl.upsert(
        row.set_column(row.schema.get_field_index("score"), "score", pa.array([7.5])), on=["id", "region"]
    )
    for kwargs in ({}, {"compute_updates": True, "identifier_columns": ["id"]}):
        local = tbl.incremental_changelog_scan(start, **kwargs).to_arrow()  # type: ignore[arg-type]
        frame = changes(spark, tbl, start, backend="cpu", **kwargs)  # type: ignore[arg-type]
        distributed = frame.toArrow()
        assert distributed.num_rows == local.num_rows > 0
        assert_same_rows(
            distributed, local.cast(spark_arrow_schema(local.schema)), context=f"spark changes {kwargs}"
        )
    kinds = set(
        changes(spark, tbl, start, backend="cpu", compute_updates=True, identifier_columns=["id"])
        .toArrow()["_change_type"]
        .to_pylist()
    )
    assert kinds == {"DELETE", "INSERT", "UPDATE_BEFORE", "UPDATE_AFTER"}


class _NoSpark:
    """A Spark session any use of which fails the test: the arguments must be refused on the driver."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"spark.{name} was used before the arguments were checked")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"compute_updates": True, "identifier_columns": ["nope"]}, r"identifier columns \['nope'\]"),
        (
            {"compute_updates": True, "identifier_columns": ["id"], "columns": ["score"]},
            r"identifier columns \['id'\] are not among",
        ),
        ({"identifier_columns": ["id"]}, r"only used with compute_updates"),
    ],
)
def test_bad_identifier_columns_fail_on_the_driver(
    tmp_path: Path, kwargs: dict[str, Any], message: str
) -> None:
    """As spark.scan checks its columns first: no Spark job is built for update keys that would fail in
    every executor task."""
    tbl = region_table(tmp_path, 2)
    tbl.append(keyed_rows(0, 10))
    with pytest.raises(GpuEngineError, match=message):
        changes(_NoSpark(), tbl, None, **kwargs)
