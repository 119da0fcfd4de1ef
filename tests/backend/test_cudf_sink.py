"""What cuDF's Parquet writer is refused (decided from the schema and the table's write options alone),
and how the adapter drives pylibcudf's writer (checked with recording stand-ins: cuDF needs a GPU; the
GPU tests in tests/execute/test_frame_write.py write with cuDF itself)."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from gpu_engine.backend import cudf_frames, cudf_sink
from gpu_engine.backend.cudf_sink import CudfSink, cudf_encode_unsupported
from gpu_engine.errors import DataFileError
from gpu_engine.io.write_options import WriteOptions

ALL_CODECS = {"ZSTD", "SNAPPY", "LZ4", "NONE"}


def refused(schema: pa.Schema, **props: str) -> str | None:
    options = WriteOptions.from_properties(props)
    return cudf_encode_unsupported(schema, options, lambda name: name in ALL_CODECS)


REQUIRED = pa.field("r", pa.int32(), nullable=False)
OPTIONS = WriteOptions()


def one(t: pa.DataType) -> pa.Schema:
    return pa.schema([pa.field("id", pa.int64()), pa.field("x", t)])


@pytest.mark.parametrize(
    "t",
    [
        pa.int64(), pa.float32(), pa.decimal128(9, 2), pa.decimal128(18, 0), pa.decimal128(36, 3),
        pa.decimal128(38, 10), pa.date32(), pa.timestamp("us"), pa.timestamp("ns", "UTC"), pa.string(),
        pa.struct([pa.field("a", pa.timestamp("us")), pa.field("d", pa.decimal128(38, 2))]),
        pa.list_(pa.field("element", pa.string())),
    ],
    ids=str,
)  # fmt: skip
def test_written_on_the_device(t: pa.DataType) -> None:
    assert refused(one(t)) is None


@pytest.mark.parametrize(
    ("t", "message"),
    [
        (pa.decimal128(20, 2), r"^column 'x' \(decimal128\(20, 2\)\): cuDF writes it in 16 bytes, .* the 9 "),
        (pa.decimal128(35, 0), r"the spec asks for the 15 its precision needs$"),
        (pa.struct([pa.field("p", pa.decimal128(9, 2))]), r"^column 'x\.p' \(decimal128\(9, 2\)\): a narrow"),
        (pa.list_(pa.field("element", pa.date32())), r"^column 'x\.element': a date inside a struct or list"),
        (pa.binary(), r"^column 'x' \(Arrow binary\): cuDF holds no binary"),
        (pa.struct([REQUIRED]), r"^column 'x\.r': a required field inside an optional struct"),
        (pa.struct([pa.field("s", pa.struct([REQUIRED]))]), r"^column 'x\.s\.r': a required"),
        (pa.struct([pa.field("list", pa.struct([REQUIRED]))]), r"^column 'x\.list': libcudf names every"),
    ],
)  # fmt: skip
def test_columns_refused_name_themselves(t: pa.DataType, message: str) -> None:
    why = refused(one(t))
    assert why is not None
    assert re.search(message, why), why


def test_required_fields_written_where_no_struct_null_reaches_them() -> None:
    inner = pa.struct([pa.field("r", pa.int32(), nullable=False), pa.field("o", pa.int32())])
    schema = pa.schema([
        pa.field("s", inner, nullable=False),  # a required struct: its required fields are never null
        pa.field("l", pa.list_(pa.field("element", inner, nullable=False))),  # a list resets the rule
    ])  # fmt: skip
    assert refused(schema) is None


def test_properties_cudf_cannot_follow_name_themselves() -> None:
    schema = one(pa.int32())
    assert refused(schema, **{"write.parquet.compression-level": "3"}) == (
        "table property write.parquet.compression-level=3: cuDF's Parquet writer takes no compression level"
    )
    assert refused(schema, **{"write.parquet.compression-codec": "gzip"}) == (
        "table property write.parquet.compression-codec=gzip: cuDF's Parquet writer has no gzip encoder"
    )
    assert refused(schema, **{"write.parquet.compression-codec": "uncompressed"}) is None
    assert refused(schema, **{"write.parquet.compression-codec": "brotli"}) == (
        "table property write.parquet.compression-codec=brotli: cuDF's Parquet writer has no brotli encoder"
    )
    assert refused(schema, **{"write.parquet.row-group-size-bytes": "1000"}) == (
        "table property write.parquet.row-group-size-bytes=1000: cuDF's Parquet writer takes at least 1024"
    )
    assert refused(schema, **{"write.parquet.page-size-bytes": "512"}) == (
        "table property write.parquet.page-size-bytes=512: cuDF's Parquet writer takes 1024 to 2147483647"
    )
    assert refused(schema, **{"write.parquet.dict-size-bytes": str(2**31)}) == (
        "table property write.parquet.dict-size-bytes=2147483648: cuDF's Parquet writer takes at most "
        "2147483647"
    )
    bloom = refused(schema, **{"write.parquet.bloom-filter-enabled.column.id": "true"})
    assert bloom is not None and bloom.startswith(
        "table property write.parquet.bloom-filter-enabled.column.id: "
    )
    assert bloom.endswith("cuDF's Parquet writer writes no bloom filters")
    assert refused(schema, **{"write.parquet.page-row-limit": "1000"}) == (
        "table property write.parquet.page-row-limit=1000: only cuDF's default (20000) is written through it"
    )
    assert refused(schema, **{"write.parquet.page-row-limit": "20000"}) is None


# -- the writer call, recorded ---------------------------------------------------------------------------


class _Meta:
    def __init__(self, log: list[Any], path: str) -> None:
        self.log, self.path = log, path
        self.children: dict[int, _Meta] = {}

    def set_name(self, name: str) -> None:
        self.log.append((self.path, "name", name))

    def set_nullability(self, nullable: bool) -> None:
        self.log.append((self.path, "nullable", nullable))

    def set_decimal_precision(self, p: int) -> None:
        self.log.append((self.path, "precision", p))

    def set_encoding(self, encoding: str) -> None:
        self.log.append((self.path, "encoding", encoding))

    def child(self, i: int) -> _Meta:
        return self.children.setdefault(i, _Meta(self.log, f"{self.path}/{i}"))


class _Options:
    def __init__(self, log: list[Any]) -> None:
        self.log = log

    def __getattr__(self, name: str) -> Any:
        def record(*args: Any) -> Any:
            self.log.append((name, *args))
            return self

        return record


class _Plc:
    """pylibcudf's writer API as the adapter calls it, every call recorded in ``log``."""

    def __init__(self) -> None:
        self.log: list[Any] = []
        self.fail = False
        plc = self

        class Types:
            class CompressionType:
                ZSTD, SNAPPY = "zstd-enum", "snappy-enum"

            class StatisticsFreq:
                STATISTICS_ROWGROUP = "rowgroup-enum"

            class DictionaryPolicy:
                ADAPTIVE = "adaptive-enum"

            class ColumnEncoding:
                PLAIN = "plain-enum"

            @staticmethod
            def TableInputMetadata(table: Any) -> Any:  # noqa: N802
                meta = type("M", (), {})()
                meta.column_metadata = [_Meta(plc.log, str(i)) for i in range(len(table))]
                return meta

            @staticmethod
            def PartitionInfo(start: int, n: int) -> tuple[int, int]:  # noqa: N802
                return (start, n)

        class Parquet:
            class ParquetWriterOptions:
                @staticmethod
                def builder(sink: Any, table: Any) -> _Options:
                    plc.log.append(("builder", sink, table))
                    return _Options(plc.log)

            @staticmethod
            def write_parquet(options: Any) -> None:
                plc.log.append(("write_parquet",))
                if plc.fail:
                    raise RuntimeError("CUDF failure at: writer_impl.cu: nullability")

            @staticmethod
            def is_supported_write_parquet(codec: Any) -> bool:
                return True

        class Io:
            types = Types
            parquet = Parquet

            @staticmethod
            def SinkInfo(paths: list[str]) -> tuple[str, ...]:  # noqa: N802
                return ("sink", *paths)

        self.io = Io


class _Column:
    def __init__(self, name: str, dtype: Any = "x") -> None:
        self.name, self.dtype = name, dtype

    def astype(self, dtype: Any) -> _Column:
        return _Column(f"{self.name}.astype({dtype})", dtype)

    def __floordiv__(self, n: int) -> _Column:
        return _Column(f"{self.name}//{n}", self.dtype)


class _Frame(dict[str, Any]):
    def to_pylibcudf(self) -> tuple[list[str], dict[str, Any]]:
        return [c.name for c in self.values()], {}

    def memory_usage(self, index: bool = True) -> np.ndarray:
        return np.array([0])  # no bytes: the row group size alone decides


class _Cudf:
    DataFrame = _Frame

    @staticmethod
    def Decimal32Dtype(p: int, s: int) -> str:  # noqa: N802
        return f"decimal32({p},{s})"

    @staticmethod
    def Decimal64Dtype(p: int, s: int) -> str:  # noqa: N802
        return f"decimal64({p},{s})"


def test_the_writer_call(monkeypatch: pytest.MonkeyPatch) -> None:
    plc = _Plc()
    monkeypatch.setattr(cudf_frames, "require", lambda name, what: _Cudf())
    monkeypatch.setattr(cudf_sink, "require", lambda name, what: plc)
    sink = CudfSink()
    schema = pa.schema([
        pa.field("id", pa.int64(), nullable=False),
        pa.field("day", pa.date32()),
        pa.field("price", pa.decimal128(9, 2)),
        pa.field("big", pa.decimal128(38, 4)),
        pa.field("s", pa.struct([pa.field("l", pa.list_(pa.field("element", pa.decimal128(38, 0), False)))])),
        pa.field("x", pa.float64()),
        pa.field("n", pa.struct([
            pa.field("f", pa.float32()), pa.field("l", pa.list_(pa.field("element", pa.float64()))),
        ])),
    ])  # fmt: skip
    frame = _Frame({
        "id": _Column("id"), "day": _Column("day", np.dtype("datetime64[s]")), "price": _Column("price"),
        "big": _Column("big"), "s": _Column("s"), "x": _Column("x"), "n": _Column("n"),
    })  # fmt: skip
    options = WriteOptions.from_properties({"write.parquet.row-group-size-bytes": "100000"})
    sink.encode(frame, schema, ["/a.parquet", "/b.parquet"], [3, 4], options)
    log = plc.log
    table = ["id", "day.astype(int64)//86400.astype(int32)", "price.astype(decimal32(9,2))", "big", "s"]
    table += ["x", "n"]
    described = [entry for entry in log if isinstance(entry[0], str) and entry[0][:1].isdigit()]
    assert described == [
        ("0", "name", "id"), ("0", "nullable", False),
        ("1", "name", "day"), ("1", "nullable", True),
        ("2", "name", "price"), ("2", "nullable", True), ("2", "precision", 9),
        ("3", "name", "big"), ("3", "nullable", True), ("3", "precision", 38),
        ("4", "name", "s"), ("4", "nullable", True),
        ("4/0", "name", "l"), ("4/0", "nullable", True),
        ("4/0/1", "name", "element"), ("4/0/1", "nullable", False), ("4/0/1", "precision", 38),
        # floats PLAIN, nested ones too: libcudf's dictionaries merge -0.0 with 0.0 and NaNs of either sign
        ("5", "name", "x"), ("5", "nullable", True), ("5", "encoding", "plain-enum"),
        ("6", "name", "n"), ("6", "nullable", True),
        ("6/0", "name", "f"), ("6/0", "nullable", True), ("6/0", "encoding", "plain-enum"),
        ("6/1", "name", "l"), ("6/1", "nullable", True),
        ("6/1/1", "name", "element"), ("6/1/1", "nullable", True), ("6/1/1", "encoding", "plain-enum"),
    ]  # fmt: skip
    calls = [entry for entry in log if not (isinstance(entry[0], str) and entry[0][:1].isdigit())]
    assert calls[0] == ("builder", ("sink", "/a.parquet", "/b.parquet"), table)
    assert calls[1][0] == "metadata"
    assert calls[2:] == [
        ("compression", "zstd-enum"),
        ("stats_level", "rowgroup-enum"),
        ("dictionary_policy", "adaptive-enum"),
        ("utc_timestamps", True),  # every timestamp flagged UTC: the footer fix sets the table's flag
        ("write_arrow_schema", False),  # no Arrow schema without field ids for pyarrow to prefer
        ("build",),
        ("set_partitions", [(0, 3), (3, 4)]),
        ("set_row_group_size_bytes", 100000),
        ("set_max_page_size_bytes", 1 << 20),
        ("set_max_dictionary_size", 2 << 20),
        ("write_parquet",),
    ]


def test_a_writer_failure_names_the_files(monkeypatch: pytest.MonkeyPatch) -> None:
    plc = _Plc()
    plc.fail = True
    monkeypatch.setattr(cudf_frames, "require", lambda name, what: _Cudf())
    monkeypatch.setattr(cudf_sink, "require", lambda name, what: plc)
    schema = pa.schema([pa.field("id", pa.int64())])
    with pytest.raises(DataFileError, match=r"^/a\.parquet and 1 more: cuDF's Parquet writer failed: CUDF"):
        CudfSink().encode(
            _Frame(id=_Column("id")), schema, ["/a.parquet", "/b.parquet"], [1, 1], WriteOptions()
        )
