"""The delete index against the spec's scope rules, on hand-made files."""

from __future__ import annotations

from gpu_engine.iceberg.partitioning import partition_key
from gpu_engine.planning.deletes import DeleteIndex
from gpu_engine.tasks import EQUALITY_DELETES, POSITION_DELETES, DataFile, DeleteFile

UNPARTITIONED = frozenset({0})


def data(
    path: str = "/t/data/a.parquet", seq: int = 5, spec: int = 1, part: tuple[object, ...] = (1,)
) -> DataFile:
    return DataFile(path, "PARQUET", spec, part, 100, 1000, seq)


def delete(
    kind: str,
    seq: int,
    *,
    spec: int = 1,
    part: tuple[object, ...] = (1,),
    ref: str | None = None,
    name: str = "d",
) -> DeleteFile:
    content = EQUALITY_DELETES if kind == "eq" else POSITION_DELETES
    fmt = "PUFFIN" if kind == "dv" else "PARQUET"
    return DeleteFile(
        f"/t/data/{name}",
        fmt,
        content,
        spec,
        part,
        1,
        10,
        seq,
        (1,) if kind == "eq" else (),
        ref,
        4 if kind == "dv" else None,
        40 if kind == "dv" else None,
    )


def applied(deletes: list[DeleteFile], file: DataFile) -> set[str]:
    return {d.path.rsplit("/", 1)[1] for d in DeleteIndex.build(deletes, UNPARTITIONED).for_data_file(file)}


def test_position_deletes_apply_at_equal_or_later_sequence_numbers() -> None:
    deletes = [delete("pos", 4, name="older"), delete("pos", 5, name="same"), delete("pos", 6, name="newer")]
    assert applied(deletes, data(seq=5)) == {"same", "newer"}


def test_equality_deletes_apply_only_to_strictly_older_data() -> None:
    deletes = [delete("eq", 5, name="same"), delete("eq", 6, name="newer")]
    assert applied(deletes, data(seq=5)) == {"newer"}


def test_partition_scoping_by_spec_and_values() -> None:
    deletes = [
        delete("pos", 9, part=(2,), name="other-value"),
        delete("pos", 9, spec=2, name="other-spec"),
        delete("eq", 9, part=(2,), name="eq-other-value"),
        delete("eq", 9, spec=0, part=(), name="global-eq"),
        delete("pos", 9, spec=0, part=(), name="unpartitioned-pos"),
    ]
    assert applied(deletes, data()) == {"global-eq"}


def test_referenced_data_file_limits_position_deletes_and_paths_are_normalised() -> None:
    deletes = [
        delete("pos", 9, ref="hdfs://nn:8020/t/data/a.parquet", name="mine"),
        delete("pos", 9, ref="/t/data/b.parquet", name="theirs"),
    ]
    assert applied(deletes, data(path="file:/t/data/a.parquet")) == {"mine"}


def test_a_deletion_vector_supersedes_position_delete_files() -> None:
    deletes = [
        delete("pos", 7, name="pos"),
        delete("dv", 8, ref="/t/data/a.parquet", name="dv"),
        delete("eq", 9, name="eq"),
    ]
    assert applied(deletes, data()) == {"dv", "eq"}
    older_dv = [delete("pos", 7, name="pos"), delete("dv", 4, ref="/t/data/a.parquet", name="dv")]
    assert applied(older_dv, data()) == {"pos"}  # a DV older than the data file does not apply


def test_deletion_vector_needs_the_same_partition() -> None:
    dv = delete("dv", 8, part=(2,), ref="/t/data/a.parquet", name="dv")
    assert applied([dv], data()) == set()


def test_float_partition_values_compare_by_bits() -> None:
    nan = float("nan")
    assert partition_key(1, (nan,)) == partition_key(1, (nan,))
    assert partition_key(1, (0.0,)) != partition_key(1, (-0.0,))
    deletes = [delete("eq", 9, part=(nan,), name="nan")]
    assert applied(deletes, data(part=(nan,))) == {"nan"}
