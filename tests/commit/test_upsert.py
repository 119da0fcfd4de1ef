"""``Table.upsert``: equality deletes of the new rows' keys and the new rows in one snapshot, so existing keys
are updated and new keys inserted; read by our scan and DuckDB (PyIceberg once compacted: it cannot apply
equality deletes); NULL keys, partition evolution, identifier fields, bad input and failures."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from gpu_engine.errors import InvalidData, InvalidOption, SchemaMismatch, UnsupportedFeature, ValidationError
from gpu_engine.table import Table

from ._support import (
    FAST,
    assert_all_readers,
    assert_same_rows,
    keyed_rows,
    raise_at,
    sql_catalog,
    table_files,
)


def make(tmp_path: Path, version: int, spec: list[str] | None = None) -> Table:
    cat = sql_catalog(tmp_path)
    properties = {"format-version": str(version), **FAST}
    return cat.create_table(
        "db.t",
        keyed_rows(0, 0).schema,
        partition_spec=["region"] if spec is None else spec,
        properties=properties,
    )


def upserted(old: pa.Table, new: pa.Table, on: list[str]) -> pa.Table:
    """``old`` with the rows whose key is in ``new`` replaced by ``new``'s rows (new keys added)."""
    keys = {tuple(r[c] for c in on) for r in new.select(on).to_pylist()}
    kept = [r for r in old.to_pylist() if tuple(r[c] for c in on) not in keys]
    return pa.concat_tables([pa.Table.from_pylist(kept, schema=old.schema), new.cast(old.schema)])


def changed(rows: pa.Table) -> pa.Table:
    """``rows`` with new ``s`` and ``score`` values (the keys kept)."""
    rows = rows.set_column(rows.schema.get_field_index("s"), "s", pa.array(["new"] * rows.num_rows))
    scores = pa.array([9.5] * rows.num_rows, pa.float64())
    return rows.set_column(rows.schema.get_field_index("score"), "score", scores)


@pytest.mark.parametrize("version", [2, 3])
def test_existing_keys_are_updated_and_new_keys_inserted(tmp_path: Path, version: int) -> None:
    tbl = make(tmp_path, version)
    old = pa.concat_tables([keyed_rows(0, 40), keyed_rows(40, 40, seed=1)])
    tbl.append(old.slice(0, 40))
    tbl.append(old.slice(40))
    before = tbl.scan().to_arrow()
    lineage = (
        {r["id"]: r["_row_id"] for r in tbl.scan(columns=["id", "_row_id"]).to_arrow().to_pylist()}
        if version == 3
        else {}
    )
    updates = changed(old.take(pa.array([1, 5, 41, 77])))
    new = pa.concat_tables([updates, keyed_rows(500, 6, seed=2)])
    on = ["id", "region"]

    result = tbl.upsert(new, on)
    assert result is not None and result.rows == new.num_rows
    assert result.delete_files and all(f.content == 2 for f in result.delete_files)
    assert result.files and all(f.content == 0 for f in result.files)
    head = tbl.metadata.current_snapshot()
    assert head is not None and (head.summary or {})["operation"] == "overwrite"
    expected = upserted(before, new, on)
    assert expected.num_rows == old.num_rows + 6
    assert_all_readers(tbl, expected, pyiceberg=False)
    if version == 3:  # updated rows are new rows (new ids), the others keep theirs
        after = {r["id"]: r["_row_id"] for r in tbl.scan(columns=["id", "_row_id"]).to_arrow().to_pylist()}
        for i, rid in after.items():
            assert (rid == lineage.get(i)) == (i not in {1, 5, 41, 77} and i < 500)
        assert len(set(after.values())) == len(after)

    tbl.compact(options={"rewrite-all": "true", "remove-dangling-deletes": "true"}, backend="cpu")
    assert_all_readers(tbl, expected)  # PyIceberg too, once the equality deletes are gone


def test_identifier_fields_null_keys_and_spec_evolution(tmp_path: Path) -> None:
    tbl = make(tmp_path, 2, [])
    with tbl.update_schema() as u:
        u.set_identifier_fields("id")
    old = keyed_rows(0, 30)
    tbl.append(old)
    with tbl.update_spec() as u:  # files of both specs; the keys lack region: deletes go in spec 0
        u.add_field("region")
    tbl.append(keyed_rows(30, 30, seed=1))
    before = tbl.scan().to_arrow()
    new = changed(before.filter(pc.is_in(before["id"], pa.array([3, 33, 59]))))
    tbl.upsert(new.combine_chunks().to_batches()[0])  # a record batch, on the identifier fields
    assert_same_rows(tbl.scan().to_arrow(), upserted(before, new, ["id"]), context="identifier upsert")

    # a NULL key matches NULL: an "s"-keyed upsert replaces the rows whose s is NULL
    with_null = tbl.scan().to_arrow()
    assert with_null["s"].null_count > 0
    row = keyed_rows(900, 1, seed=9).set_column(4, "s", pa.array([None], pa.string()))
    tbl.upsert(row, on=["s"])
    assert_same_rows(tbl.scan().to_arrow(), upserted(with_null, row, ["s"]), context="null key")


def test_bad_input_is_refused_and_leaves_nothing(tmp_path: Path) -> None:
    tbl = make(tmp_path, 2)
    tbl.append(keyed_rows(0, 20))
    location, files = tbl.metadata_location, table_files(tbl)
    twice = pa.concat_tables([keyed_rows(0, 2), keyed_rows(0, 2).slice(0, 1)])
    with pytest.raises(InvalidData, match=r"key\(s\) of \['id', 'region'\] appear more than once"):
        tbl.upsert(twice, on=["id", "region"])
    with pytest.raises(UnsupportedFeature, match="Include those columns in the keys"):
        tbl.upsert(keyed_rows(0, 2), on=["id"])  # partitioned by region: the keys need it
    with pytest.raises(SchemaMismatch, match=r"data: no column\(s\) \[.nope.\]"):
        tbl.upsert(keyed_rows(0, 2), on=["nope"])
    with pytest.raises(InvalidOption, match="no identifier fields"):
        tbl.upsert(keyed_rows(0, 2))
    with pytest.raises(SchemaMismatch):
        tbl.upsert(pa.table({"id": [1], "region": ["eu"], "other": [2]}), on=["id", "region"])
    encoded = keyed_rows(0, 2)  # run-end encoded keys: a bare ArrowNotImplementedError named no column
    region = pc.run_end_encode(encoded["region"].combine_chunks())
    with pytest.raises(SchemaMismatch, match=r"key column\(s\) .*'region': 'run_end_encoded"):
        tbl.upsert(
            encoded.set_column(encoded.schema.get_field_index("region"), "region", region),
            on=["id", "region"],
        )
    assert tbl.upsert(keyed_rows(0, 0), on=["id", "region"]) is None
    v1 = make(tmp_path / "v1", 1)
    with pytest.raises(ValidationError, match="format version 1 has no equality deletes"):
        v1.upsert(keyed_rows(0, 2), on=["id", "region"])
    for stage in ("data", "manifest", "manifest-list", "metadata", "swap"):
        _, hook = raise_at(stage, OSError(f"injected at {stage}"))
        with pytest.raises(OSError, match=f"injected at {stage}"):
            tbl.upsert(keyed_rows(0, 2), on=["id", "region"], faults=hook)
    assert tbl.refresh().metadata_location == location
    assert table_files(tbl) == files


def test_a_uuid_key(tmp_path: Path) -> None:
    """Arrow's uuid extension type as the key: the duplicate check groups on its storage (Arrow cannot
    group on extension types), and a repeated uuid is still found."""
    import uuid

    schema = pa.schema([pa.field("u", pa.uuid()), pa.field("v", pa.int32())])

    def rows(ids: list[int], v: int) -> pa.Table:
        raw = pa.array([uuid.UUID(int=i).bytes for i in ids], pa.binary(16))
        return pa.table(
            {"u": pa.ExtensionArray.from_storage(pa.uuid(), raw), "v": pa.array([v] * len(ids), pa.int32())}
        )

    tbl = sql_catalog(tmp_path).create_table("db.t", schema, properties={"format-version": "2", **FAST})
    tbl.append(rows([1, 2], 0))
    tbl.upsert(rows([1, 3], 1), on=["u"])
    got = sorted((uuid.UUID(bytes=r["u"]).int, r["v"]) for r in tbl.scan().to_arrow().to_pylist())
    assert got == [(1, 1), (2, 0), (3, 1)]
    with pytest.raises(InvalidData, match="appear more than once"):
        tbl.upsert(rows([4, 4], 2), on=["u"])


def test_a_key_repeated_through_a_dictionary_is_refused(tmp_path: Path) -> None:
    """Arrow groups dictionary columns by index: a dictionary holding one value twice hid a repeated key
    (two live rows for it after the upsert)."""
    schema = pa.schema([pa.field("k", pa.string()), pa.field("v", pa.int64())])
    tbl = sql_catalog(tmp_path).create_table("db.t", schema, properties={"format-version": "2", **FAST})
    tbl.append(pa.table({"k": ["a", "b"], "v": [1, 2]}))
    keys = pa.DictionaryArray.from_arrays(pa.array([0, 1], pa.int32()), pa.array(["b", "b"]))
    with pytest.raises(InvalidData, match=r"appear more than once \(first: \{'k': 'b'\} 2 times\)"):
        tbl.upsert(pa.table({"k": keys, "v": [20, 21]}), on=["k"])
    assert sorted(tbl.scan().to_arrow().to_pylist(), key=str) == [{"k": "a", "v": 1}, {"k": "b", "v": 2}]


NESTED = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("s", pa.struct([pa.field("k", pa.int64(), nullable=False), pa.field("z", pa.string())])),
    ]
)


def nested(rows: list[tuple[int, int | None, str]]) -> pa.Table:
    """Rows (id, s.k, s.z); s.k None: s is null."""
    return pa.Table.from_pylist(
        [{"id": i, "s": None if k is None else {"k": k, "z": z}} for i, k, z in rows], schema=NESTED
    )


def ids_and_z(tbl: Table) -> list[tuple[int, str | None]]:
    got = tbl.scan(backend="cpu").to_arrow().to_pylist()
    return sorted((r["id"], None if r["s"] is None else r["s"]["z"]) for r in got)


def test_a_nested_identifier_field_keys_upserts(tmp_path: Path) -> None:
    """``s.k`` as the key (the spec allows identifier fields in structs): the data's struct ``s`` holds it;
    the delete files hold ``s`` with ``k`` alone; a key repeated inside the structs is found."""
    schema = NESTED.set(1, NESTED.field("s").with_nullable(False))
    tbl = sql_catalog(tmp_path).create_table("db.t", schema, properties={"format-version": "2", **FAST})
    with tbl.update_schema() as u:
        u.set_identifier_fields("s.k")
    tbl.append(nested([(0, 1, "a"), (1, 2, "b"), (2, 3, "c")]).cast(schema))
    result = tbl.upsert(nested([(10, 1, "new"), (11, 4, "d")]).cast(schema))
    assert result is not None and [f.equality_ids for f in result.delete_files] == [(3,)]
    assert ids_and_z(tbl) == [(1, "b"), (2, "c"), (10, "new"), (11, "d")]
    with pytest.raises(InvalidData, match=r"key\(s\) of \['s.k'\] appear more than once"):
        tbl.upsert(nested([(20, 5, "x"), (21, 5, "y")]).cast(schema))
    tbl.delete_rows(pa.table({"s": pa.array([{"k": 2}, {"k": 4}], pa.struct([pa.field("k", pa.int64())]))}))
    assert ids_and_z(tbl) == [(2, "c"), (10, "new")]


def test_a_nested_key_in_a_null_struct_is_null(tmp_path: Path) -> None:
    """On ``s.k`` of an optional struct: a key whose ``s`` is null deletes the rows whose ``s`` is null
    (``s.k`` reads null there), not those with ``s.k`` set; compaction keeps exactly the rest."""
    tbl = sql_catalog(tmp_path).create_table("db.t", NESTED, properties={"format-version": "2", **FAST})
    tbl.append(nested([(0, 1, "a"), (1, None, ""), (2, 3, "c"), (3, None, "")]))
    keys = nested([(0, None, ""), (0, 3, "ignored")]).select(["s"])
    tbl.delete_rows(keys, on=["s.k"])
    assert ids_and_z(tbl) == [(0, "a")]
    tbl.compact(options={"rewrite-all": "true"}, backend="cpu")
    assert ids_and_z(tbl) == [(0, "a")]
