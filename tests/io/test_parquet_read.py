"""ParquetSource against independent references: pyarrow's own reads of the parquet-testing files and of
every live data file of the fixture tables, documented values, and hand-built multi-row-group files."""

from __future__ import annotations

import itertools
import math
import re
import uuid
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from gpu_engine.errors import DataFileError, SchemaMismatch, UnsupportedFeature
from gpu_engine.iceberg import types as it
from gpu_engine.iceberg.name_mapping import MappedField, NameMapping, name_mapping_of
from gpu_engine.iceberg.schema import Schema
from gpu_engine.io.arrow_schema import field_id_of, to_arrow_schema
from gpu_engine.io.fileio import LocalFileIO
from gpu_engine.io.parquet_projection import identity_constants
from gpu_engine.io.parquet_read import ParquetSource
from tests.planning._support import FIXTURES, inventory_paths, load

PT = FIXTURES / "parquet-testing"
IO = LocalFileIO()

# files pyarrow itself cannot read: a clean typed error, never a crash
PYARROW_CANNOT_READ = {
    # Presto map with optional keys: "Map keys must be annotated as required"
    "incorrect_map_schema.parquet": DataFileError,
    # a >2 GB string chunk: "Nested data conversions not implemented for chunked array outputs"
    "large_string_map.brotli.parquet": UnsupportedFeature,
}
CORRUPT_CHECKSUM = {"datapage_v1-corrupt-checksum.parquet", "rle-dict-uncompressed-corrupt-checksum.parquet"}
SPECIAL = {"int96_from_spark.parquet"}  # pyarrow misdecodes its last value: see test_int96_from_spark
READABLE_BAD_DATA = {"ARROW-GH-43605.parquet"}  # bit-width 0 dictionary indices: valid since the Arrow fix


def _data_files() -> list[str]:
    names = [p.relative_to(PT / "data").as_posix() for p in sorted((PT / "data").rglob("*.parquet"))]
    return names or ["<fixtures missing>"]


# -- a test helper: Iceberg schema + name mapping for a pyarrow schema (Appendix A, read backwards) -------


def infer_schema(schema: pa.Schema) -> tuple[Schema, NameMapping]:
    """Iceberg types for pyarrow's types, ids from the file where it has them, else fresh ones."""
    ids = itertools.count(10_000)

    def primitive(t: pa.DataType) -> it.PrimitiveType:
        if isinstance(t, pa.BaseExtensionType):
            if t.extension_name == "arrow.uuid":
                return it.UUID
            t = t.storage_type
        if pa.types.is_dictionary(t):
            t = t.value_type
        simple = [
            (pa.types.is_null, it.UNKNOWN),
            (pa.types.is_boolean, it.BOOLEAN),
            (pa.types.is_date, it.DATE),
            (pa.types.is_time, it.TIME),
            (lambda x: pa.types.is_string(x) or pa.types.is_large_string(x), it.STRING),
            (lambda x: pa.types.is_binary(x) or pa.types.is_large_binary(x), it.BINARY),
        ]
        for test, iceberg in simple:
            if test(t):
                return iceberg
        if pa.types.is_integer(t):
            small = t.bit_width < 32 or (t.bit_width == 32 and pa.types.is_signed_integer(t))
            return it.INT if small else it.LONG
        if pa.types.is_floating(t):
            return it.DOUBLE if t.bit_width == 64 else it.FLOAT
        if pa.types.is_decimal(t):
            return it.decimal(t.precision, t.scale)
        if pa.types.is_timestamp(t):
            return it.parse_type(("timestamptz" if t.tz else "timestamp") + ("_ns" if t.unit == "ns" else ""))
        if pa.types.is_fixed_size_binary(t):
            return it.fixed(t.byte_width)
        raise AssertionError(f"no Iceberg type for {t}")

    def convert(f: pa.Field, name: str) -> tuple[it.NestedField, MappedField]:
        fid = field_id_of(f)
        fid = next(ids) if fid is None else fid
        t = f.type
        kids: tuple[MappedField, ...] = ()
        iceberg: it.IcebergType
        if pa.types.is_struct(t):
            pairs = [convert(t.field(i), t.field(i).name) for i in range(t.num_fields)]
            iceberg, kids = it.StructType(tuple(p[0] for p in pairs)), tuple(p[1] for p in pairs)
        elif pa.types.is_map(t):
            (k, km), (v, vm) = convert(t.key_field, "key"), convert(t.item_field, "value")
            iceberg, kids = it.MapType(k.field_id, k.type, v.field_id, v.type, v.required), (km, vm)
        elif pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
            e, em = convert(t.value_field, "element")
            iceberg, kids = it.ListType(e.field_id, e.type, e.required), (em,)
        else:
            iceberg = primitive(t)
        required = not f.nullable and iceberg != it.UNKNOWN
        return it.NestedField(fid, f.name, iceberg, required), MappedField((name,), fid, kids)

    pairs = [convert(f, f.name) for f in schema]
    return Schema(tuple(p[0] for p in pairs)), NameMapping(tuple(p[1] for p in pairs))


def _mirror(t: pa.DataType) -> pa.DataType:
    """``t`` with temporal leaves as integers (to compare without datetime conversions)."""
    if pa.types.is_timestamp(t) or pa.types.is_time64(t):
        return pa.int64()
    if pa.types.is_time32(t) or pa.types.is_date32(t):
        return pa.int32()
    if pa.types.is_struct(t):
        return pa.struct([f.with_type(_mirror(f.type)) for f in t])
    if pa.types.is_map(t):
        return pa.map_(
            t.key_field.with_type(_mirror(t.key_type)), t.item_field.with_type(_mirror(t.item_type))
        )
    if pa.types.is_list(t):
        return pa.list_(t.value_field.with_type(_mirror(t.value_type)))
    return t


def _nan(v: Any) -> Any:
    if isinstance(v, float) and math.isnan(v):
        return "NaN"
    if isinstance(v, uuid.UUID):
        return v.bytes
    if isinstance(v, (list, tuple)):
        return type(v)(_nan(x) for x in v)
    if isinstance(v, dict):
        return {k: _nan(x) for k, x in v.items()}
    return v


def _py(col: pa.Array | pa.ChunkedArray, t: pa.DataType) -> list[Any]:
    """Values of ``col`` after pyarrow's own cast to ``t``, temporal values as integers, NaN comparable."""
    arr = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    return list(_nan(arr.cast(t).cast(_mirror(t)).to_pylist()))


class Incomparable(Exception):
    pass


def _matches(ours: Any, file: Any) -> bool:
    """``ours`` equals the file's value on every struct field the file has (added fields aside)."""
    if isinstance(file, dict):
        if not isinstance(ours, dict) or not set(file) <= set(ours):
            raise Incomparable
        return all(_matches(ours[k], v) for k, v in file.items())
    if isinstance(file, (list, tuple)):
        if not isinstance(ours, (list, tuple)) or len(ours) != len(file):
            return False
        return all(_matches(a, b) for a, b in zip(ours, file, strict=True))
    return bool(ours == file)


def read_all(src: ParquetSource, schema: Schema, **kw: Any) -> pa.Table:
    batches = [fb.batch for fb in src.batches(schema, **kw)]
    return pa.Table.from_batches(batches, schema=to_arrow_schema(schema))


# -- 1. parquet-testing ----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", _data_files())
def test_parquet_testing_file_matches_pyarrow(name: str) -> None:
    path = PT / "data" / name
    assert path.is_file(), f"fixture missing: {path}"
    base = path.name
    if base in SPECIAL:
        return
    if base in PYARROW_CANNOT_READ or base in CORRUPT_CHECKSUM:
        error = PYARROW_CANNOT_READ.get(base, DataFileError)
        with pytest.raises(error, match=re.escape(base)), ParquetSource.open(IO, str(path)) as src:
            schema, mapping = infer_schema(src.arrow_schema)
            read_all(src, schema, name_mapping=mapping)
        return
    with ParquetSource.open(IO, str(path)) as src:
        schema, mapping = infer_schema(src.arrow_schema)
        ours = read_all(src, schema, name_mapping=mapping, batch_size=997)
    expected = pq.read_table(path)
    assert ours.num_rows == expected.num_rows
    assert ours.schema.names == expected.schema.names
    for i, f in enumerate(ours.schema):
        assert _py(ours.column(i), f.type) == _py(expected.column(i), f.type), f"{name}: column {f.name}"


def test_legacy_encodings_are_covered() -> None:
    """The inferred schemas really exercise the legacy forms the brief lists (guards the helper)."""
    seen = {}
    for name in ("int32_decimal", "int64_decimal", "fixed_length_decimal_legacy", "byte_array_decimal"):
        seen[name] = pq.ParquetFile(PT / "data" / f"{name}.parquet").schema.column(0).physical_type
    assert seen == {
        "int32_decimal": "INT32",
        "int64_decimal": "INT64",
        "fixed_length_decimal_legacy": "FIXED_LEN_BYTE_ARRAY",
        "byte_array_decimal": "BYTE_ARRAY",
    }
    with ParquetSource.open(IO, str(PT / "data" / "old_list_structure.parquet")) as src:
        schema, mapping = infer_schema(src.arrow_schema)
        assert read_all(src, schema, name_mapping=mapping).to_pylist() == [{"a": [[1, 2], [3, 4]]}]
    with ParquetSource.open(IO, str(PT / "data" / "nested_maps.snappy.parquet")) as src:
        schema, mapping = infer_schema(src.arrow_schema)
        first = read_all(src, schema, name_mapping=mapping).to_pylist()[0]
        assert first["a"] == [("a", [(1, True), (2, False)])] and first["b"] == 1


def test_int96_from_spark() -> None:
    """Values from int96_from_spark.md (micros); the sixth (year 290000) pyarrow misdecodes: clean error."""
    documented = [1704141296123456, 1704070800000000, 253402225200000000, 1735599600000000, None]
    with ParquetSource.open(IO, str(PT / "data" / "int96_from_spark.parquet")) as src:
        schema, mapping = infer_schema(src.arrow_schema)
        assert schema.fields[0].type == it.TIMESTAMP
        batches = src.batches(schema, name_mapping=mapping, batch_size=5)
        first = next(batches).batch.column(0)
        assert first.cast(pa.int64()).to_pylist() == documented
        with pytest.raises(DataFileError, match=r"int96_from_spark.parquet: column 'a'.*INT96"):
            next(batches)


@pytest.mark.parametrize("name", sorted(p.name for p in (PT / "bad_data").glob("*.parquet")) or ["missing"])
def test_bad_data_is_a_clean_error(name: str) -> None:
    path = PT / "bad_data" / name
    assert path.is_file(), f"fixture missing: {path}"
    if name in READABLE_BAD_DATA:
        with ParquetSource.open(IO, str(path)) as src:
            schema, mapping = infer_schema(src.arrow_schema)
            ours = read_all(src, schema, name_mapping=mapping)
        expected = pq.read_table(path)
        assert [_py(c, f.type) for c, f in zip(ours.columns, ours.schema, strict=True)] == [
            _py(c, f.type) for c, f in zip(expected.columns, ours.schema, strict=True)
        ]
        return
    with pytest.raises(DataFileError, match=re.escape(name)), ParquetSource.open(IO, str(path)) as src:
        schema, mapping = infer_schema(src.arrow_schema)
        read_all(src, schema, name_mapping=mapping)


@pytest.mark.parametrize("path", sorted(PT.glob("data/*.parquet.encrypted")), ids=lambda p: p.name)
def test_encrypted_files_are_refused(path: Path) -> None:
    error = (UnsupportedFeature, DataFileError)
    with pytest.raises(error, match=re.escape(path.name)), ParquetSource.open(IO, str(path)) as src:
        schema, mapping = infer_schema(src.arrow_schema)
        read_all(src, schema, name_mapping=mapping)


def test_missing_truncated_and_foreign_files(tmp_path: Path) -> None:
    with pytest.raises(DataFileError, match=r"nope\.parquet"):
        ParquetSource.open(IO, str(tmp_path / "nope.parquet"))
    whole = (PT / "data" / "alltypes_plain.parquet").read_bytes()
    for i, data in enumerate([whole[: len(whole) // 2], whole[:-3], b"not parquet at all", b""]):
        bad = tmp_path / f"bad{i}.parquet"
        bad.write_bytes(data)
        with pytest.raises(DataFileError, match=f"bad{i}.parquet"):
            ParquetSource.open(IO, str(bad))


# -- 4. the fixture tables' live data files ---------------------------------------------------------------

# tables whose data files cannot be read, with the reason
EXPECTED_FAILURES = {
    "fixtures/impala/iceberg_test/hadoop_catalog/ice/airports_parquet": (
        SchemaMismatch,  # Hive-written, no field ids, and the table has no schema.name-mapping.default
        "no field ids",
    ),
    "fixtures/impala/iceberg_test/iceberg_migrated_complex_test": (
        DataFileError,  # pyarrow: "Logical type Null cannot be applied to group node"
        "Null cannot be applied",
    ),
}


def _file_ids(src: ParquetSource, mapping: NameMapping | None) -> dict[str, int | None]:
    schema = src.arrow_schema
    if any(field_id_of(f) is not None for f in schema):
        return {f.name: field_id_of(f) for f in schema}
    return {f.name: mapping.id_of(f.name) if mapping else None for f in schema}


@pytest.mark.parametrize("rel", inventory_paths())
def test_fixture_table_data_files(rel: str) -> None:
    tbl = load(rel)
    plan = tbl.scan().plan()
    mapping = name_mapping_of(tbl.properties)
    compared = 0
    for task in plan.tasks:
        constants = identity_constants(tbl.metadata.specs[task.file.spec_id], task.file.partition)
        if rel in EXPECTED_FAILURES:
            error, text = EXPECTED_FAILURES[rel]
            with pytest.raises(error, match=text), ParquetSource.open(tbl.io, task.file.path) as src:
                read_all(src, plan.schema, name_mapping=mapping, constants=constants)
            continue
        with ParquetSource.open(tbl.io, task.file.path) as src:
            ours = read_all(src, plan.schema, name_mapping=mapping, constants=constants)
            by_id = {fid: name for name, fid in _file_ids(src, mapping).items() if fid is not None}
        expected = pq.read_table(task.file.path)
        assert ours.num_rows == expected.num_rows == task.file.record_count
        for i, f in enumerate(plan.schema.fields):
            out = ours.column(i)
            if f.field_id in by_id:  # the file column with this field id (renames included)
                want = expected.column(by_id[f.field_id])
                try:
                    same = _matches(_py(out, out.type), _py(want, want.type))
                except Incomparable:  # a nested field was renamed since the file was written
                    continue
                assert same, f"{task.file.path}: column {f.name}"
                compared += 1
            elif f.field_id in constants:  # identity partition source absent from the file
                value = constants[f.field_id]
                value = value.bytes if isinstance(value, uuid.UUID) else value
                assert set(out.cast(_mirror(out.type)).to_pylist()) == {value}, f"{task.file.path}: {f.name}"
                compared += 1
    if plan.tasks and rel not in EXPECTED_FAILURES:
        assert compared > 0, f"{rel}: no column compared"


# -- 3. row groups: byte ranges, positions, pruning -------------------------------------------------------

ROWS, GROUP = 400, 50
PRUNE_SCHEMA = Schema(
    (
        it.NestedField(1, "pos", it.LONG, required=True),
        it.NestedField(2, "i", it.INT),
        it.NestedField(3, "s", it.STRING),
        it.NestedField(4, "d", it.DOUBLE),
        it.NestedField(5, "dt", it.DATE),
        it.NestedField(6, "ts", it.TIMESTAMP),
        it.NestedField(7, "dec", it.decimal(9, 2)),
        it.NestedField(8, "st", it.StructType((it.NestedField(9, "x", it.LONG),))),
    )
)


def _multi_group_file(tmp: Path) -> str:
    """Row groups of 50 rows: ``pos`` = row position; other columns sorted within a group, with nulls/NaNs."""
    import random

    rnd = random.Random(7)
    cols: dict[str, list[Any]] = {n: [] for n in ("pos", "i", "s", "d", "dt", "ts", "dec", "st")}
    for g in range(ROWS // GROUP):
        base = (
            [rnd.randrange(-999, 999) for _ in range(GROUP)]
            if g % 3
            else list(range(g * 1000, g * 1000 + GROUP))
        )
        base.sort()
        for k, v in enumerate(base):
            null = g == 5 or (k % 7 == 0 and g % 2)
            cols["pos"].append(g * GROUP + k)
            cols["i"].append(None if null else v)
            cols["s"].append(None if null else f"k{v:+05d}")
            cols["d"].append(math.nan if g == 4 and k % 2 else (None if null else v / 4))
            cols["dt"].append(None if null else v + 19000)
            cols["ts"].append(None if null else v * 3_600_000_000)
            cols["dec"].append(None if null else Decimal(v).scaleb(-2))
            cols["st"].append(None if g == 6 and k < 10 else {"x": None if null else v * 2})
    table = pa.Table.from_pydict(cols, schema=to_arrow_schema(PRUNE_SCHEMA))
    path = tmp / "groups.parquet"
    pq.write_table(table, path, row_group_size=GROUP, use_dictionary=["s"])
    return str(path)


def test_row_groups_in_byte_ranges_and_positions(tmp_path: Path) -> None:
    path = _multi_group_file(tmp_path)
    with ParquetSource.open(IO, path) as src:
        n = src.metadata.num_row_groups
        assert n == ROWS // GROUP
        assert src.row_groups_in(0, None) == list(range(n))
        assert src.row_groups_in(0, 5) == [0]  # the first row group starts right after the 4-byte magic
        assert src.row_groups_in(5, None) == list(range(1, n))
        size = Path(path).stat().st_size
        cuts = sorted({0, size, *(int(size * f) for f in (0.13, 0.31, 0.5, 0.77))})
        parts = [src.row_groups_in(a, b - a) for a, b in itertools.pairwise(cuts)]
        assert sorted(itertools.chain.from_iterable(parts)) == list(
            range(n)
        )  # every row group in exactly one split
        for groups in ([3, 5], [7], [0, 6]):
            for fb in src.batches(PRUNE_SCHEMA, row_groups=groups, batch_size=16):
                assert fb.batch.column("pos").to_pylist() == list(
                    range(fb.first_pos, fb.first_pos + fb.batch.num_rows)
                )
            got = [
                p
                for fb in src.batches(PRUNE_SCHEMA, row_groups=groups)
                for p in fb.batch.column("pos").to_pylist()
            ]
            assert got == [p for g in groups for p in range(g * GROUP, (g + 1) * GROUP)]
        absent = Schema((it.NestedField(99, "z", it.INT),))  # no file column to read: rows still counted
        got_rows = [
            (fb.first_pos, fb.batch.num_rows) for fb in src.batches(absent, batch_size=30, row_groups=[0, 3])
        ]
        assert got_rows == [(0, 30), (30, 20), (150, 30), (180, 20)]
        with pytest.raises(DataFileError, match="no row group 8"):
            list(src.batches(PRUNE_SCHEMA, row_groups=[8]))


def test_pruning_skips_row_groups_statistics_exclude(tmp_path: Path) -> None:
    from gpu_engine.expressions import and_, equal_to, greater_than, is_null, less_than, starts_with

    with ParquetSource.open(IO, _multi_group_file(tmp_path)) as src:

        def groups(expr: Any) -> list[int]:
            return sorted({fb.first_pos // GROUP for fb in src.batches(PRUNE_SCHEMA, residual=expr)})

        assert groups(less_than("pos", 50)) == [0]
        assert groups(and_(greater_than("pos", 120), less_than("pos", 160))) == [2, 3]
        assert groups(equal_to("i", 3004)) == [3]  # group 3 holds 3000..3049, groups 1, 2, 4, 7 |v| < 1000
        prefixed = groups(starts_with("s", "k+30"))  # random groups span "k+0..." to "k-0...": kept
        assert 3 in prefixed and not {0, 5, 6} & set(prefixed)
        assert 5 in groups(is_null("i")) and 0 not in groups(is_null("i"))
        assert groups(equal_to("st.x", 6008)) == [3]


def _predicates() -> Any:
    from hypothesis import strategies as st

    from gpu_engine.expressions import builders as b

    values = {
        "pos": st.integers(-5, ROWS + 5),
        "i": st.integers(-1100, 7100),
        "s": st.integers(-1100, 7100).map(lambda v: f"k{v:+05d}"),
        "d": st.floats(-300, 1800),
        "dt": st.integers(17900, 26100),
        "ts": st.integers(-1100, 7100).map(lambda v: v * 3_600_000_000 + 1),
        "dec": st.integers(-110000, 710000).map(lambda v: Decimal(v).scaleb(-4)),
        "st.x": st.integers(-2200, 14200),
    }
    binary = [
        b.less_than,
        b.less_than_or_equal,
        b.greater_than,
        b.greater_than_or_equal,
        b.equal_to,
        b.not_equal_to,
    ]

    @st.composite
    def one(draw: Any) -> Any:
        col = draw(st.sampled_from(sorted(values)))
        kind = draw(st.sampled_from(["cmp", "in", "notin", "null", "notnull", "prefix", "nan"]))
        if kind == "null":
            return b.is_null(col)
        if kind == "notnull":
            return b.not_null(col)
        if kind == "nan" and col == "d":
            return draw(st.sampled_from([b.is_nan, b.not_nan]))(col)
        if kind == "prefix" and col == "s":
            return draw(st.sampled_from([b.starts_with, b.not_starts_with]))(
                col, draw(values["s"])[: draw(st.integers(1, 5))]
            )
        if kind in ("in", "notin"):
            items = draw(st.lists(values[col], min_size=1, max_size=4))
            return (b.is_in if kind == "in" else b.not_in)(col, items)
        return draw(st.sampled_from(binary))(col, draw(values[col]))

    return st.builds(
        lambda p, q, how: p if how == 0 else (p & q if how == 1 else p | q), one(), one(), st.integers(0, 2)
    )


def test_pruning_never_drops_a_matching_row(tmp_path: Path) -> None:
    from hypothesis import HealthCheck, given, settings

    from gpu_engine.expressions import bind, evaluate

    path = _multi_group_file(tmp_path)
    src = ParquetSource.open(IO, path)
    everything = read_all(src, PRUNE_SCHEMA)

    @settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(_predicates())
    def check(expr: Any) -> None:
        bound = bind(expr, PRUNE_SCHEMA)
        names = {9: ("st", "x")}
        want = everything.filter(evaluate(bound, everything, names)).column("pos").to_pylist()
        kept = read_all(src, PRUNE_SCHEMA, residual=expr)
        got = kept.filter(evaluate(bound, kept, names)).column("pos").to_pylist()
        assert got == want, str(expr)

    try:
        check()
    finally:
        src.close()
