"""cuDF frames written as Parquet on the device (:class:`~gpu_engine.execute.frame_sink.FrameSink`).

Encoded by libcudf through pylibcudf's writer options (cuDF 26.10; checked against its source: the
``cudf.DataFrame.to_parquet`` layer adds pandas metadata and writes every timestamp unadjusted), all
files of one :func:`~gpu_engine.execute.frame_write.write_frame` call in one call (one sink per file,
the frame's rows cut by ``PartitionInfo``). Columns are named and given their nullability from the
write schema; decimals are written as INT32 (precision <= 9) or INT64 (<= 18) by casting to cuDF's
32- and 64-bit decimals first, dates (cuDF holds them as seconds) as INT32 days; the footer fixes
(field ids, UTC flags, DATE) follow in :mod:`gpu_engine.io.parquet_footer_schema`. Float and double
columns are written PLAIN: libcudf's dictionaries key floats by value, so -0.0 and 0.0, and NaNs of any
sign or payload, became one entry and rows came back with another row's zero or NaN (seen on an H200 with
cuDF 26.10). A chunk libcudf finds no smaller compressed is stored UNCOMPRESSED (its writer decides per
column chunk). Refused, with the
reason (:func:`cudf_encode_unsupported`): what cuDF cannot hold, a compression level or a codec its
writer lacks, bloom filters, decimals of precision 19 to 35 (cuDF writes 16 bytes, the spec asks for the
fewest) and decimals or dates inside structs and lists (not cast there).

Counts and bounds are reduced on the device (:meth:`CudfSink.leaf_stats`): NaNs turned to nulls and
counted, min and max of the rest, a zero bound's sign found from ``1 / x`` of the zeros.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from .._deps import require
from ..errors import DataFileError
from ..iceberg import types as it
from ..iceberg.manifest_schemas import decimal_bytes
from ..io.column_metrics import LeafStats
from ..io.write_options import PAGE_ROW_LIMIT, WriteOptions
from .cudf_frames import CudfFrames, cudf_unsupported

# the codecs libcudf's Parquet writer encodes (writer_impl.cu's to_parquet_compression: LZ4 as LZ4_RAW);
# also asked of the installed libcudf
_CODECS = {"zstd": "ZSTD", "snappy": "SNAPPY", "lz4": "LZ4", "none": "NONE"}
_KIB, _INT32_MAX = 1024, 2**31 - 1  # libcudf's limits on the row group, page and dictionary sizes
_PER_DAY = {"s": 86_400, "ms": 86_400_000, "us": 86_400_000_000, "ns": 86_400_000_000_000}
_INT_BOUNDS = it.TIMESTAMP_NAMES | {"date"}


def cudf_encode_unsupported(
    schema: pa.Schema, options: WriteOptions, codec_written: Callable[[str], bool]
) -> str | None:
    """Why cuDF cannot write ``schema``'s columns with ``options`` (see the module doc), or None;
    ``codec_written`` says whether the installed libcudf writes a codec (by its pylibcudf name)."""
    why = cudf_unsupported(schema)
    if why is not None:
        return why
    if options.compression_level is not None:
        return (
            f"table property write.parquet.compression-level={options.compression_level}: cuDF's Parquet "
            "writer takes no compression level"
        )
    codec = options.compression_codec
    if codec not in _CODECS or not codec_written(_CODECS[codec]):
        return (
            f"table property write.parquet.compression-codec={codec}: cuDF's Parquet writer has no "
            f"{codec} encoder"
        )
    sizes = [
        ("write.parquet.row-group-size-bytes", options.row_group_size_bytes, _KIB, None),
        ("write.parquet.page-size-bytes", options.page_size_bytes, _KIB, _INT32_MAX),
        ("write.parquet.dict-size-bytes", options.dict_size_bytes, None, _INT32_MAX),
    ]
    if options.page_row_limit != PAGE_ROW_LIMIT:  # cuDF's default; not set through its options here
        return (
            f"table property write.parquet.page-row-limit={options.page_row_limit}: only cuDF's default "
            f"({PAGE_ROW_LIMIT}) is written through it"
        )
    for key, value, low, high in sizes:
        if (low is not None and value < low) or (high is not None and value > high):
            bounds = (
                f"at least {low}"
                if high is None
                else f"at most {high}"
                if low is None
                else f"{low} to {high}"
            )
            return f"table property {key}={value}: cuDF's Parquet writer takes {bounds}"
    if options.bloom_filters:
        column = options.bloom_filters[0][0]
        return (
            f"table property write.parquet.bloom-filter-enabled.column.{column}: cuDF's Parquet writer "
            "writes no bloom filters"
        )
    for f in schema:
        why = _not_encoded(f.type, f.name, top=True, under_null=f.nullable)
        if why is not None:
            return why
    return None


def _not_encoded(t: pa.DataType, path: str, *, top: bool, under_null: bool = False) -> str | None:
    """Why column ``path`` of type ``t`` is not written (``top``: a table column; ``under_null``: inside a
    nullable struct, up to the nearest list)."""
    if pa.types.is_decimal(t):
        size = decimal_bytes(t.precision)
        if t.precision > 18 and size < 16:
            return (
                f"column {path!r} ({t}): cuDF writes it in 16 bytes, the spec asks for the {size} its "
                "precision needs"
            )
        if t.precision <= 18 and not top:
            return f"column {path!r} ({t}): a narrow decimal inside a struct or list (cast at the top only)"
    if pa.types.is_date32(t) and not top:
        return f"column {path!r}: a date inside a struct or list (cuDF has no dates; cast at the top only)"
    if pa.types.is_struct(t):
        if path.rsplit(".", 1)[-1] == "list":
            return f"column {path!r}: libcudf names every field of a struct called 'list' 'element'"
        for i in range(t.num_fields):
            f = t.field(i)
            where = f"{path}.{f.name}"
            if under_null and not f.nullable:
                return (
                    f"column {where!r}: a required field inside an optional struct (libcudf gives it the "
                    "struct's nulls, then refuses to write it required)"
                )
            why = _not_encoded(f.type, where, top=False, under_null=under_null or f.nullable)
            if why is not None:
                return why
    elif pa.types.is_list(t) or pa.types.is_large_list(t):
        return _not_encoded(t.value_type, f"{path}.element", top=False)
    return None


class CudfSink(CudfFrames):
    """cuDF frames that also write Parquet (see the module doc)."""

    def __init__(self) -> None:
        super().__init__()
        self._plc = require("pylibcudf", "writing Parquet with cuDF")

    def encode_unsupported(self, schema: pa.Schema, options: WriteOptions) -> str | None:
        types = self._plc.io.types.CompressionType

        def written(name: str) -> bool:
            return bool(self._plc.io.parquet.is_supported_write_parquet(getattr(types, name)))

        return cudf_encode_unsupported(schema, options, written)

    def encode(
        self, frame: Any, schema: pa.Schema, paths: Sequence[str], rows: Sequence[int], options: WriteOptions
    ) -> None:
        plc = self._plc
        data = {f.name: self._stored(frame[f.name], f.type) for f in schema}
        table, _ = self._cudf.DataFrame(data).to_pylibcudf()
        meta = plc.io.types.TableInputMetadata(table)
        for column, f in zip(meta.column_metadata, schema, strict=True):
            _describe(column, f, plc.io.types.ColumnEncoding.PLAIN)
        built = (
            plc.io.parquet.ParquetWriterOptions.builder(plc.io.SinkInfo(list(paths)), table)
            .metadata(meta)
            .compression(getattr(plc.io.types.CompressionType, _CODECS[options.compression_codec]))
            .stats_level(plc.io.types.StatisticsFreq.STATISTICS_ROWGROUP)
            .dictionary_policy(plc.io.types.DictionaryPolicy.ADAPTIVE)
            .utc_timestamps(True)
            .write_arrow_schema(False)
            .build()
        )
        if len(paths) > 1:
            starts = np.cumsum([0, *rows[:-1]]).tolist()
            built.set_partitions(
                [plc.io.types.PartitionInfo(s, n) for s, n in zip(starts, rows, strict=True)]
            )
        per_row = self.nbytes(frame) / max(1, sum(rows))
        built.set_row_group_size_bytes(options.row_group_bytes(per_row))
        built.set_max_page_size_bytes(options.page_size_bytes)
        built.set_max_dictionary_size(options.dict_size_bytes)
        try:
            plc.io.parquet.write_parquet(built)
        except RuntimeError as exc:  # libcudf's checks (e.g. a null in a required nested field)
            more = f" and {len(paths) - 1} more" if len(paths) > 1 else ""
            raise DataFileError(f"{paths[0]}{more}: cuDF's Parquet writer failed: {exc}") from None

    def _stored(self, column: Any, t: pa.DataType) -> Any:
        """``column`` as its Parquet type is written: dates as int32 days, narrow decimals narrow."""
        if pa.types.is_date32(t):
            unit, _ = np.datetime_data(column.dtype)  # whole days (appends check: times_of_day)
            return (column.astype("int64") // _PER_DAY[unit]).astype("int32")
        if pa.types.is_decimal(t) and t.precision <= 18:
            dtype = self._cudf.Decimal32Dtype if t.precision <= 9 else self._cudf.Decimal64Dtype
            return column.astype(dtype(t.precision, t.scale))
        return column

    def column_names(self, frame: Any) -> list[str]:
        return [str(name) for name in frame.columns]

    def arrow_type(self, column: Any) -> pa.DataType:
        return column.iloc[:0].to_arrow().type

    def times_of_day(self, column: Any) -> bool:
        unit, _ = np.datetime_data(column.dtype)
        return bool((column.astype("int64") % _PER_DAY[unit] != 0).any())

    def nbytes(self, frame: Any) -> int:
        return int(frame.memory_usage(index=False).sum())

    def take(self, frame: Any, rows: np.ndarray) -> Any:
        return frame.take(rows).reset_index(drop=True)

    def slice(self, frame: Any, start: int, n: int) -> Any:
        return frame.iloc[start : start + n]

    def leaf_stats(self, column: Any, t: it.PrimitiveType, bounds: bool) -> LeafStats:
        nulls = int(column.null_count)
        nans = 0
        if t.name in ("float", "double"):
            column = column.nans_to_nulls()
            nans = int(column.null_count) - nulls
        if not bounds or int(column.null_count) == len(column):
            return LeafStats(nulls, nans)
        values = column
        if t.name in _INT_BOUNDS:
            if getattr(values.dtype, "tz", None) is not None:
                values = values.dt.tz_convert(None)  # the stored UTC values (tz_localize converts)
            values = values.astype("int64")
        lower, upper = _scalar(values.min()), _scalar(values.max())
        if t.name == "date":
            per_day = _PER_DAY[np.datetime_data(column.dtype)[0]]
            lower, upper = lower // per_day, upper // per_day
        elif t.name in ("float", "double") and (lower == 0 or upper == 0):
            zeros = column[column == 0]
            negative = int(((1.0 / zeros) < 0).sum())
            if lower == 0:
                lower = -0.0 if negative else 0.0
            if upper == 0:
                upper = -0.0 if negative == len(zeros) else 0.0
        return LeafStats(nulls, nans, lower, upper)


def _scalar(value: Any) -> Any:
    """A reduction's result as a Python value (numpy scalars to int, float, bool)."""
    return value.item() if isinstance(value, np.generic) else value


def _describe(column: Any, f: pa.Field, plain: Any) -> None:
    """Name, nullability and decimal precision of ``f`` (and its children) on pylibcudf's column metadata;
    floats get the ``plain`` encoding (see the module doc)."""
    column.set_name(f.name)
    column.set_nullability(f.nullable)
    t = f.type
    if pa.types.is_floating(t):
        column.set_encoding(plain)
    elif pa.types.is_decimal(t):
        column.set_decimal_precision(t.precision)
    elif pa.types.is_struct(t):
        for i in range(t.num_fields):
            _describe(column.child(i), t.field(i), plain)
    elif pa.types.is_list(t) or pa.types.is_large_list(t):
        _describe(column.child(1), t.value_field, plain)  # child 0: the offsets
