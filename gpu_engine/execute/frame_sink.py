"""Frames written as Parquet data files: what :mod:`.frame_write` needs from a frame library besides
reading (:class:`~.frames.Frames`).

The library encodes a frame's rows (cuDF: on the device, several files in one call) and reduces each
primitive column to its counts and bounds where the rows are (:meth:`FrameSink.leaf_stats`); the
writer sets the Iceberg schema in each footer (field ids, timestamp UTC flags, dates:
:mod:`gpu_engine.io.parquet_footer_schema`), serializes the bounds and records the files. The pyarrow
twin (:class:`~.frames.ArrowFrames`) encodes as cuDF does (no field ids, every timestamp flagged UTC,
dates as plain INT32 days), so the CPU tests go through the same fixes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np
import pyarrow as pa

from ..iceberg import types as it
from ..io.column_metrics import LeafStats
from ..io.write_options import WriteOptions
from .frames import Frames


class FrameSink(Frames, Protocol):
    """A frame library that also writes (see the module doc)."""

    def encode_unsupported(self, schema: pa.Schema, options: WriteOptions) -> str | None:
        """Why the library cannot write columns of ``schema`` with ``options`` as the spec and the table's
        properties ask (naming the column or property), or None."""
        ...

    def encode(
        self, frame: Any, schema: pa.Schema, paths: Sequence[str], rows: Sequence[int], options: WriteOptions
    ) -> None:
        """Write ``frame``'s rows as Parquet files at the local ``paths``: ``rows[i]`` rows in file ``i``,
        in order. Columns are ``schema``'s top-level fields (names, order, nullability; ``frame`` holds
        them as :meth:`cast` makes them), without field ids; codec, row group, page and dictionary sizes
        from ``options``."""
        ...

    def column_names(self, frame: Any) -> list[str]: ...

    def arrow_type(self, column: Any) -> pa.DataType:
        """The Arrow type ``column``'s values convert to (as ``to_arrow`` makes them, uncast)."""
        ...

    def times_of_day(self, column: Any) -> bool:
        """Whether a timestamp column holds a value that is not a midnight (a date column can hold none)."""
        ...

    def nbytes(self, frame: Any) -> int:
        """The bytes ``frame``'s columns take in memory."""
        ...

    def take(self, frame: Any, rows: np.ndarray) -> Any:
        """The rows of ``frame`` at the positions ``rows`` (int64, in that order)."""
        ...

    def slice(self, frame: Any, start: int, n: int) -> Any:
        """Rows ``start`` to ``start + n`` of ``frame``."""
        ...

    def leaf_stats(self, column: Any, t: it.PrimitiveType, bounds: bool) -> LeafStats:
        """The counts of ``column`` (Iceberg type ``t``), its bounds too where ``bounds``."""
        ...
