"""cuDF frames for :mod:`gpu_engine.execute.frame_task`: Parquet decoded by cuDF's GPU reader, the rows
kept in device memory.

Column types follow ``cudf.DataFrame.from_arrow`` of the host reader's Arrow types (:meth:`cast` looks
the dtype up from an empty Arrow array of the target type), so a scan decoded here equals
``cudf.DataFrame.from_arrow(scan.to_arrow())`` (also where that has no rows: cuDF keeps no row count
without columns). Local files are read by path (cuDF's own IO, kvikIO where it is set up); files of other
file systems through the table's FileIO (cuDF copies each whole file to the host then). Checked against
cuDF 26.10's source: without ``dataset_kwargs={"partitioning": None}`` a list of paths is read as a Hive
dataset, and several files are read in one call only where their whole Parquet schemas agree
(nullability aside).
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import ExitStack
from typing import Any

import numpy as np
import pyarrow as pa

from .._deps import require
from ..errors import DataFileError
from ..execute.frames import no_columns
from ..io.fileio import FileIO, local_path, on_local_disk


def cudf_unsupported(schema: pa.Schema) -> str | None:
    """The first column of ``schema`` (named by its path) that cuDF cannot hold, and why; None when it
    holds them all. cuDF 26.10's Arrow import has no binary, fixed-size binary, time or map columns (seen
    on an H200: "Unsupported type_id conversion to cudf" for each)."""
    for f in schema:
        why = _unsupported(f.type, f.name)
        if why is not None:
            return why
    return None


def _unsupported(t: pa.DataType, path: str) -> str | None:
    if _no_cudf_type(t):
        return (
            f"column {path!r} (Arrow {t}): cuDF holds no binary, fixed-size binary, time or map columns; "
            "leave it out of the scan's columns or read the rows with to_arrow()"
        )
    if pa.types.is_struct(t):
        for i in range(t.num_fields):
            why = _unsupported(t.field(i).type, f"{path}.{t.field(i).name}")
            if why is not None:
                return why
    elif pa.types.is_list(t) or pa.types.is_large_list(t):
        return _unsupported(t.value_type, f"{path}.element")
    return None


def _no_cudf_type(t: pa.DataType) -> bool:
    if isinstance(t, pa.BaseExtensionType):  # arrow.uuid (what uuid columns are written as): its storage
        t = t.storage_type
    return bool(
        pa.types.is_binary(t)
        or pa.types.is_large_binary(t)
        or pa.types.is_binary_view(t)
        or pa.types.is_fixed_size_binary(t)
        or pa.types.is_time(t)
        or pa.types.is_map(t)
    )


class CudfFrames:
    """Frames as cudf.DataFrame, columns as cudf.Series."""

    name = "cudf"

    def unsupported(self, schema: pa.Schema) -> str | None:
        return cudf_unsupported(schema)

    def __init__(self) -> None:
        self._cudf = require("cudf", "TableScan.to_cudf")
        self._dtypes: dict[pa.DataType, Any] = {}

    def read(self, io: FileIO, sources: Sequence[tuple[str, Sequence[int]]], columns: Sequence[str]) -> Any:
        row_groups = [list(groups) for _, groups in sources]
        paths = [path for path, _ in sources]
        # no Hive partitioning (cuDF would read Iceberg's data/col=value/ directories as columns and group
        # the files by them) and no pandas index (the rows are positions: masks apply by position)
        options = {"dataset_kwargs": {"partitioning": None}, "use_pandas_metadata": False}
        try:
            if all(on_local_disk(io, p) for p in paths):
                local = [local_path(p) for p in paths]
                frame = self._cudf.read_parquet(
                    local, columns=list(columns), row_groups=row_groups, **options
                )
            else:
                with ExitStack() as stack:
                    handles = [stack.enter_context(io.open_input(p)) for p in paths]
                    frame = self._cudf.read_parquet(
                        handles, columns=list(columns), row_groups=row_groups, **options
                    )
        except (OSError, RuntimeError, ValueError) as exc:
            raise DataFileError(f"{', '.join(paths)}: cuDF cannot decode this Parquet data: {exc}") from None
        return frame.reset_index(drop=True)

    def num_rows(self, frame: Any) -> int:
        return len(frame)

    def column(self, frame: Any, name: str) -> Any:
        return frame[name]

    def null_count(self, column: Any) -> int:
        return int(column.null_count)

    def _dtype(self, target: pa.DataType) -> Any:
        if target not in self._dtypes:
            self._dtypes[target] = self._cudf.Series.from_arrow(pa.array([], target)).dtype
        return self._dtypes[target]

    def cast(self, column: Any, target: pa.DataType) -> Any:
        dtype = self._dtype(target)
        if column.dtype == dtype:
            return column
        tz = getattr(dtype, "tz", None)
        if tz is not None and getattr(column.dtype, "tz", None) is None:
            column = column.dt.tz_localize(str(tz))  # stored without UTC adjustment: reinterpreted
            if column.dtype == dtype:
                return column
        return column.astype(dtype)

    def from_arrow(self, array: pa.Array) -> Any:
        return self._cudf.Series.from_arrow(array)

    def to_arrow(self, column: Any, target: pa.DataType) -> pa.Array:
        arr = column.to_arrow()
        if isinstance(arr, pa.ChunkedArray):
            arr = arr.combine_chunks()
        if arr.type == target:
            return arr
        if pa.types.is_timestamp(arr.type) and pa.types.is_timestamp(target) and arr.type.tz != target.tz:
            return arr.view(target)
        return arr.cast(target)

    def mask(self, keep: np.ndarray) -> Any:
        return self._cudf.Series(keep)

    def filter(self, column: Any, mask: Any) -> Any:
        return column[mask.values].reset_index(drop=True)  # by position (a Series mask aligns by label)

    def assemble(self, columns: Sequence[tuple[str, Any]], schema: pa.Schema, num_rows: int) -> Any:
        if not columns:
            return self._cudf.DataFrame.from_arrow(no_columns(num_rows, schema))
        data = {name: col.reset_index(drop=True) for name, col in columns}
        return self._cudf.DataFrame(data)

    def from_arrow_table(self, table: pa.Table) -> Any:
        return self._cudf.DataFrame.from_arrow(table)

    def head(self, frame: Any, n: int) -> Any:
        return frame.head(n)

    def concat(self, frames: Sequence[Any], schema: pa.Schema) -> Any:
        if not len(schema):  # cuDF holds no rows without columns (from_arrow of such a table has none)
            return self._cudf.DataFrame.from_arrow(no_columns(sum(len(f) for f in frames), schema))
        if not frames:
            return self._cudf.DataFrame.from_arrow(schema.empty_table())
        if len(frames) == 1:
            return frames[0]
        return self._cudf.concat(list(frames), ignore_index=True)
