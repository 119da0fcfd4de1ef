"""The partition clustering a repartitioning rewrite adds to its strategy (Java's
``SortOrderUtil.buildSortOrder`` for sort and zorder, a range distribution for binpack)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pyarrow as pa
import pytest

from gpu_engine.commit.spec_parse import parse_sort_order
from gpu_engine.execute.clustering import clustered
from gpu_engine.iceberg.sorting import SortField
from gpu_engine.table import Table
from gpu_engine.tasks import FileGroup, RewriteStrategy

from ..commit._support import sql_catalog

SCHEMA = pa.schema([("id", pa.int64()), ("ts", pa.timestamp("us")), ("name", pa.string())])


def table(tmp_path: Path, spec: list[str], version: int = 2) -> Table:
    tbl = sql_catalog(tmp_path).create_table("db.t", SCHEMA, properties={"format-version": str(version)})
    with tbl.update_spec() as u:
        for field in spec:
            u.add_field(field)
    return tbl


def group(tbl: Table, spec_id: int | None) -> FileGroup:
    return FileGroup(0, spec_id, (), (), (), tbl.metadata.spec.spec_id, 1, 1 << 20, 1 << 20)


def cluster(tbl: Table, strategy: RewriteStrategy, spec_id: int | None = None) -> list[tuple[str, str]]:
    names = tbl.metadata.schema.names_by_id
    return [
        (f.transform, names[f.source_id])
        for f in clustered(tbl.metadata, group(tbl, spec_id), strategy).cluster
    ]


def sort(tbl: Table, text: str) -> RewriteStrategy:
    return RewriteStrategy("sort", sort_order=parse_sort_order(text, tbl.metadata.schema))


SPEC = ["bucket(8, id)", "day(ts)", "truncate(2, name)"]
REQUIRED = [("bucket[8]", "id"), ("day", "ts"), ("truncate[2]", "name")]


def test_binpack_and_zorder_cluster_by_every_partition_field(tmp_path: Path) -> None:
    tbl = table(tmp_path, SPEC)
    assert cluster(tbl, RewriteStrategy()) == REQUIRED
    assert cluster(tbl, RewriteStrategy("zorder", zorder_columns=("id", "ts"))) == REQUIRED


def test_files_of_the_output_spec_are_not_clustered(tmp_path: Path) -> None:
    tbl = table(tmp_path, SPEC)
    assert cluster(tbl, RewriteStrategy(), spec_id=tbl.metadata.spec.spec_id) == []
    assert cluster(tbl, sort(tbl, "id"), spec_id=tbl.metadata.spec.spec_id) == []


@pytest.mark.parametrize(
    ("order", "required"),
    [
        ("id", REQUIRED),  # the order clusters none of them
        ("bucket(8, id), day(ts), truncate(2, name), id", []),  # it starts with all of them
        ("bucket(8, id) DESC, id", REQUIRED[1:]),  # direction does not matter
        ("day(ts), bucket(8, id)", [REQUIRED[2]]),  # in any order, as a prefix
        ("bucket(8, id), ts, truncate(2, name)", [REQUIRED[2]]),  # identity clusters day(ts), then stops
        ("bucket(8, id), hour(ts)", [REQUIRED[2]]),  # a finer time clusters a coarser one
        ("bucket(8, id), month(ts)", REQUIRED[1:]),  # a coarser one does not
        ("name, bucket(8, id)", [REQUIRED[0], REQUIRED[1]]),  # identity clusters truncate, then stops
        ("bucket(4, id)", REQUIRED),  # another bucket count clusters nothing
    ],
)
def test_sort_orders_get_the_partition_fields_they_do_not_start_with(
    tmp_path: Path, order: str, required: list[tuple[str, str]]
) -> None:
    tbl = table(tmp_path, SPEC)
    assert cluster(tbl, sort(tbl, order)) == required


def test_void_fields_and_an_unpartitioned_spec_need_no_clustering(tmp_path: Path) -> None:
    tbl = table(tmp_path, [], version=1)
    assert cluster(tbl, RewriteStrategy()) == []
    with tbl.update_spec() as u:
        u.add_field("bucket(8, id)")
    with tbl.update_spec() as u:
        u.remove_field("id_bucket_8")  # v1: kept as a void field
    assert [f.transform for f in tbl.metadata.spec.fields] == ["void"]
    assert cluster(tbl, RewriteStrategy()) == []


def test_a_clustered_strategy_orders_rows_and_a_plan_strategy_does_not() -> None:
    assert not RewriteStrategy().orders_rows
    field = SortField((1,), "identity", "asc", "nulls-first")
    assert replace(RewriteStrategy(), cluster=(field,)).orders_rows
    assert str(replace(RewriteStrategy(), cluster=(field,))) == "binpack"


def test_a_backend_that_cannot_order_writes_a_binpack_unclustered_saying_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """CUDA without CuPy: the binpack asked for no order, and runs as before (a sort there fails)."""
    from gpu_engine.errors import BackendUnavailable
    from gpu_engine.execute import clustering

    def no_cupy(backend: str) -> None:
        raise BackendUnavailable(f"ordering rows with backend={backend!r} needs the 'cupy' package")

    monkeypatch.setattr(clustering, "array_module", no_cupy)
    tbl = table(tmp_path, SPEC)
    with caplog.at_level("WARNING", logger="gpu_engine.execute"):
        unclustered = clustered(tbl.metadata, group(tbl, None), RewriteStrategy(), "cuda")
    assert unclustered.cluster == () and not unclustered.orders_rows
    assert "group 0: rows written unclustered by partition: ordering rows with backend='cuda'" in caplog.text
    assert cluster(tbl, sort(tbl, "id")) == REQUIRED  # a sort still orders (and fails without CuPy)
