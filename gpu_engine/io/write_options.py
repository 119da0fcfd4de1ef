"""The write settings of a table's properties, by Iceberg's names and defaults (Java's Parquet.java and
TableProperties): target file, row group, page and dictionary sizes, rows a page, codec and level, bloom
filters. An
unknown or out-of-range value is an InvalidProperty naming the key."""

from __future__ import annotations

import inspect
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from ..errors import InvalidProperty, UnsupportedFeature
from ..properties import bool_property, int_property

_CODECS = {"zstd": "zstd", "gzip": "gzip", "snappy": "snappy", "lz4": "lz4", "brotli": "brotli"}
_CODECS |= {"uncompressed": "none", "none": "none", "lz4_raw": "lz4"}  # pyarrow writes LZ4_RAW for "lz4"
_JAVA_ONLY_CODECS = ("lzo",)  # Java's CompressionCodecName, no pyarrow writer
_LEVELLED = ("zstd", "gzip", "brotli")  # Java's Parquet.java sets a level for these codecs only
PAGE_ROW_LIMIT = 20_000  # Java's (parquet-mr's) default rows a page, and pyarrow's and cuDF's
_PYARROW_PAGE_ROWS = "max_rows_per_page" in inspect.signature(pq.ParquetWriter.__init__).parameters


@dataclass(frozen=True)
class WriteOptions:
    """The write settings of Iceberg's table properties (their names and defaults)."""

    target_file_size_bytes: int = 512 << 20  # write.target-file-size-bytes
    row_group_size_bytes: int = 128 << 20  # write.parquet.row-group-size-bytes
    # write.parquet.row-group-check-min-record-count: Java's writer checks a row group's size first after
    # this many rows, so a group (but a partition's last) holds at least that many, however small the size
    row_group_min_rows: int = 100
    page_size_bytes: int = 1 << 20  # write.parquet.page-size-bytes
    dict_size_bytes: int = 2 << 20  # write.parquet.dict-size-bytes
    page_row_limit: int = PAGE_ROW_LIMIT  # write.parquet.page-row-limit
    compression_codec: str = "zstd"  # write.parquet.compression-codec
    compression_level: int | None = None  # write.parquet.compression-level
    # write.parquet.bloom-filter-enabled.column.<name> / -fpp.column.<name> (default 0.01): (name, fpp)
    bloom_filters: tuple[tuple[str, float], ...] = ()
    bloom_filter_max_bytes: int = 1 << 20  # write.parquet.bloom-filter-max-bytes

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> WriteOptions:
        fmt = props.get("write.format.default", "parquet").strip().lower()
        if fmt != "parquet":
            raise UnsupportedFeature(f"table property write.format.default={fmt!r}: only parquet is written")
        codec = props.get("write.parquet.compression-codec", "zstd")
        if codec.strip().lower() in _JAVA_ONLY_CODECS:
            raise UnsupportedFeature(  # a valid setting of another engine's table: refused when written
                f"table property write.parquet.compression-codec={codec!r}: Parquet's "
                f"{codec.strip().upper()} codec is not written here (pyarrow has no writer for it)"
            )
        if codec.strip().lower() not in _CODECS:
            raise InvalidProperty(
                f"table property write.parquet.compression-codec={codec!r}: expected one of {sorted(_CODECS)}"
            )
        name = _CODECS[codec.strip().lower()]
        return cls(
            int_property(props, "write.target-file-size-bytes", cls.target_file_size_bytes),
            int_property(props, "write.parquet.row-group-size-bytes", cls.row_group_size_bytes),
            int_property(props, "write.parquet.row-group-check-min-record-count", cls.row_group_min_rows),
            int_property(props, "write.parquet.page-size-bytes", cls.page_size_bytes),
            int_property(props, "write.parquet.dict-size-bytes", cls.dict_size_bytes),
            int_property(props, "write.parquet.page-row-limit", cls.page_row_limit),
            name,
            _level(props, name),
            _bloom_filters(props),
            int_property(props, "write.parquet.bloom-filter-max-bytes", cls.bloom_filter_max_bytes),
        )

    def bloom_ndv(self, rows: int, fpp: float) -> int:
        """The distinct values to size a bloom filter of a row group of ``rows`` rows for: its rows, but
        no more than a filter of ``write.parquet.bloom-filter-max-bytes`` holds at ``fpp`` (as parquet-mr
        caps it; pyarrow sizes a filter for the values it is told, up to a power of two of bytes: 2 million
        rows made a 4 MiB filter where 1 MiB was the most)."""
        cap = 1 << max(5, self.bloom_filter_max_bytes.bit_length() - 1)  # the largest power of two in it
        per_byte = -math.log(1.0 - fpp ** (1.0 / 8.0))  # distinct values a byte holds (Arrow's sizing)
        return max(1, min(rows, math.floor(cap * per_byte) - 1))

    def row_group_rows(self, bytes_per_row: float) -> int:
        """Rows of a row group of rows of ``bytes_per_row``: the row group size's worth, but no fewer than
        ``row_group_min_rows`` (Java's writer looks at a group's size first after that many rows)."""
        fits = (
            int(self.row_group_size_bytes / bytes_per_row) if bytes_per_row > 0 else self.row_group_min_rows
        )
        return max(self.row_group_min_rows, fits, 1)

    def row_group_bytes(self, bytes_per_row: float) -> int:
        """Bytes of a row group of rows of ``bytes_per_row``: the row group size, or ``row_group_min_rows``
        rows' worth where that is more (:meth:`row_group_rows`)."""
        return max(self.row_group_size_bytes, math.ceil(self.row_group_min_rows * bytes_per_row))

    def page_options(self) -> dict[str, Any]:
        """pyarrow's page settings: size, dictionary size and (pyarrow 23 on) rows a page; with an older
        pyarrow, a page row limit other than the default is an :class:`UnsupportedFeature` (its pages are
        cut by size only)."""
        out: dict[str, Any] = {
            "data_page_size": self.page_size_bytes,
            "dictionary_pagesize_limit": self.dict_size_bytes,
        }
        if _PYARROW_PAGE_ROWS:
            out["max_rows_per_page"] = self.page_row_limit
        elif self.page_row_limit != PAGE_ROW_LIMIT:
            raise UnsupportedFeature(
                f"table property write.parquet.page-row-limit={self.page_row_limit}: pyarrow "
                f"{pa.__version__} cannot limit the rows of a page (pyarrow 23 or later can)"
            )
        return out

    def parquet_writer_options(self) -> dict[str, Any]:
        """The :class:`pyarrow.parquet.ParquetWriter` keyword arguments of these settings."""
        return {
            "version": "2.6",
            "compression": self.compression_codec,
            "compression_level": self.compression_level,
            **self.page_options(),
            "store_decimal_as_integer": True,
            "write_page_checksum": True,
        }


_BLOOM = "write.parquet.bloom-filter-enabled.column."
_BLOOM_FPP = "write.parquet.bloom-filter-fpp.column."


def _bloom_filters(props: Mapping[str, str]) -> tuple[tuple[str, float], ...]:
    """The columns to write bloom filters for, with their false-positive probability (Java's
    Parquet.WriteBuilder; default fpp 0.01)."""
    fpps = {key[len(_BLOOM_FPP) :]: _fpp(key, props[key]) for key in props if key.startswith(_BLOOM_FPP)}
    enabled = [key[len(_BLOOM) :] for key in sorted(props) if key.startswith(_BLOOM)]
    return tuple(
        (column, fpps.get(column, 0.01)) for column in enabled if bool_property(props, _BLOOM + column, False)
    )


def _fpp(key: str, raw: str) -> float:
    try:
        fpp = float(raw)
    except ValueError:
        fpp = math.nan
    if not 0.0 < fpp < 1.0:
        raise InvalidProperty(f"table property {key}={raw!r}: expected a number in (0, 1)")
    return fpp


def _level(props: Mapping[str, str], codec: str) -> int | None:
    """``write.parquet.compression-level`` for ``codec``: ignored for codecs without levels, as Java's
    Parquet.java (a level set for zstd stays when the codec changes); InvalidProperty out of the codec's
    range (a gzip level of 99 failed every write inside zlib)."""
    key = "write.parquet.compression-level"
    if props.get(key) is None or codec not in _LEVELLED:
        return None
    level = int_property(props, key, 0, minimum=None)
    low, high = pa.Codec.minimum_compression_level(codec), pa.Codec.maximum_compression_level(codec)
    if not low <= level <= high:
        raise InvalidProperty(f"table property {key}={props[key]!r}: {codec} levels are {low} to {high}")
    return level
