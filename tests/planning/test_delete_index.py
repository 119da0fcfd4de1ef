"""The delete index against the spec's scope rules on generated cases: sequence-number ties, DVs that
supersede position deletes, referenced_data_file spelled with other schemes, partition evolution,
global (unpartitioned) equality deletes, and float partition values compared by their bits."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from gpu_engine.io.paths import normalize
from gpu_engine.planning.deletes import DeleteIndex
from gpu_engine.tasks import DataFile, DeleteFile

from ._support import Entry, spec_deletes

# spec 0: identity(string); spec 1: unpartitioned; spec 2: identity(double); spec 3: identity(string) again
UNPARTITIONED = frozenset({1})
PARTITIONS: dict[int, list[tuple[object, ...]]] = {
    0: [("a",), ("b",), (None,)],
    1: [()],
    2: [(0.0,), (-0.0,), (math.nan,), (1.5,)],
    3: [("a",), ("b",)],
}
PATHS = [f"/wh/t/data/f{i}.parquet" for i in range(6)]
SPELLINGS = ["{}", "file:{}", "file://{}", "hdfs://nn:8020{}", "s3://bucket{}"]


@st.composite
def partitioned(draw: st.DrawFn) -> tuple[int, tuple[object, ...]]:
    spec = draw(st.sampled_from(sorted(PARTITIONS)))
    return spec, draw(st.sampled_from(PARTITIONS[spec]))


@st.composite
def data_files(draw: st.DrawFn) -> list[DataFile]:
    paths = draw(st.lists(st.sampled_from(PATHS), min_size=1, max_size=6, unique=True))
    out = []
    for path in paths:
        spec, partition = draw(partitioned())
        seq = draw(st.integers(0, 4))
        out.append(DataFile(path, "PARQUET", spec, partition, 10, 100, seq))
    return out


@st.composite
def delete_files(draw: st.DrawFn, targets: list[str]) -> list[DeleteFile]:
    out = []
    for i in range(draw(st.integers(0, 8))):
        kind = draw(st.sampled_from(["dv", "pos", "pos-ref", "eq"]))
        spec, partition = draw(partitioned())
        seq = draw(st.integers(0, 4))
        ref = None
        if kind in ("dv", "pos-ref"):
            target = draw(st.sampled_from([*targets, "/wh/t/data/gone.parquet"]))
            ref = draw(st.sampled_from(SPELLINGS)).format(target)
        if kind == "dv":
            out.append(
                DeleteFile(
                    "/wh/t/data/dvs.puffin", "PUFFIN", 1, spec, partition, 3, 500, seq,
                    referenced_data_file=ref, content_offset=4 + 40 * i, content_size_in_bytes=40,
                )
            )  # fmt: skip
        elif kind == "eq":
            out.append(
                DeleteFile(f"/wh/t/data/eq{i}.parquet", "PARQUET", 2, spec, partition, 1, 50, seq, (1,))
            )
        else:
            path = f"/wh/t/data/pos{i}.parquet"
            out.append(DeleteFile(path, "PARQUET", 1, spec, partition, 1, 50, seq, referenced_data_file=ref))
    return out


def _entry(f: DataFile | DeleteFile) -> Entry:
    if isinstance(f, DataFile):
        return Entry(normalize(f.path), 0, f.file_format, f.spec_id, f.partition, f.data_sequence_number or 0,
                     None, None, None, None)  # fmt: skip
    ref = None if f.referenced_data_file is None else normalize(f.referenced_data_file)
    return Entry(normalize(f.path), f.content, f.file_format, f.spec_id, f.partition, f.data_sequence_number,
                 ref, f.content_offset, None, None)  # fmt: skip


@st.composite
def cases(draw: st.DrawFn) -> tuple[list[DataFile], list[DeleteFile]]:
    data = draw(data_files())
    return data, draw(delete_files([d.path for d in data]))


@settings(max_examples=200)
@given(cases())
def test_delete_index_follows_the_scope_rules(case: tuple[list[DataFile], list[DeleteFile]]) -> None:
    data, deletes = case
    index = DeleteIndex.build(deletes, UNPARTITIONED)
    expected = spec_deletes([*map(_entry, data), *map(_entry, deletes)], UNPARTITIONED)
    for d in data:
        got = [(normalize(x.path), x.content_offset) for x in index.for_data_file(d)]
        assert len(got) == len(set(got)), f"{d}: a delete listed twice"
        assert set(got) == expected[normalize(d.path)], d


def _dv(ref: str, seq: int, partition: tuple[object, ...] = ("a",), offset: int = 4) -> DeleteFile:
    return DeleteFile("/p.puffin", "PUFFIN", 1, 0, partition, 1, 9, seq, referenced_data_file=ref,
                      content_offset=offset, content_size_in_bytes=9)  # fmt: skip


def test_examples_by_hand() -> None:
    data = DataFile("/wh/d.parquet", "PARQUET", 0, ("a",), 10, 100, 2)
    pos = DeleteFile("/wh/pos.parquet", "PARQUET", 1, 0, ("a",), 1, 9, 2)  # same commit: applies
    old_pos = DeleteFile("/wh/old.parquet", "PARQUET", 1, 0, ("a",), 1, 9, 1)  # older than the data
    eq_same = DeleteFile("/wh/eq2.parquet", "PARQUET", 2, 0, ("a",), 1, 9, 2, (1,))  # same seq: not
    eq_new = DeleteFile("/wh/eq3.parquet", "PARQUET", 2, 0, ("a",), 1, 9, 3, (1,))
    eq_global = DeleteFile("/wh/eqg.parquet", "PARQUET", 2, 1, (), 1, 9, 3, (1,))
    eq_other = DeleteFile("/wh/eqb.parquet", "PARQUET", 2, 0, ("b",), 1, 9, 3, (1,))
    eq_other_spec = DeleteFile("/wh/eqs.parquet", "PARQUET", 2, 3, ("a",), 1, 9, 3, (1,))
    index = DeleteIndex.build(
        [pos, old_pos, eq_same, eq_new, eq_global, eq_other, eq_other_spec], UNPARTITIONED
    )
    assert set(index.for_data_file(data)) == {pos, eq_new, eq_global}
    # a DV for the file (spelled with a scheme) supersedes the position delete files
    dv = _dv("hdfs://nn:8020/wh/d.parquet", 2)
    index = DeleteIndex.build([pos, dv, eq_new], UNPARTITIONED)
    assert set(index.for_data_file(data)) == {dv, eq_new}
    # ... but not an older DV, nor one for another partition
    index = DeleteIndex.build([pos, _dv("/wh/d.parquet", 1), _dv("/wh/d.parquet", 5, ("b",))], UNPARTITIONED)
    assert set(index.for_data_file(data)) == {pos}
    # -0.0 and 0.0 are different partition values; NaNs are one
    neg = DataFile("/wh/n.parquet", "PARQUET", 2, (-0.0,), 1, 1, 0)
    nan = DataFile("/wh/nan.parquet", "PARQUET", 2, (math.nan,), 1, 1, 0)
    zero_eq = DeleteFile("/wh/z.parquet", "PARQUET", 2, 2, (0.0,), 1, 9, 3, (1,))
    nan_eq = DeleteFile("/wh/nn.parquet", "PARQUET", 2, 2, (float("nan"),), 1, 9, 3, (1,))
    index = DeleteIndex.build([zero_eq, nan_eq], UNPARTITIONED)
    assert index.for_data_file(neg) == () and index.for_data_file(nan) == (nan_eq,)
