"""Position delete files (spec "Position Delete Files"): Parquet or Avro rows of ``file_path`` (field id
2147483546) and ``pos`` (2147483545), maybe with a ``row`` column (ignored), loaded once into an index
from data file to sorted, unique deleted positions.

Columns are matched by field id when the file carries ids, else by name. Index keys are the recorded
``file_path`` values mapped through the table's :class:`~gpu_engine.io.paths.PathMap` and normalised
(scheme and authority stripped): delete files written as ``hdfs://nn:8020/wh/t/data/f.parquet`` match the
data file ``/wh/t/data/f.parquet``, whatever spelling the manifests use. Work is per file and per distinct
path, never per row in Python. A missing, truncated or malformed file, a NULL ``file_path`` or ``pos``, a
negative position, or a row count other than the manifest's raises
:class:`~gpu_engine.errors.DataFileError` naming the delete file.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..errors import DataFileError, ManifestError, UnsupportedFeature
from ..iceberg.avro_fast import UnsupportedSchema, decode, program_for, read_container
from ..tasks import DeleteFile
from .fileio import FileIO
from .paths import PathMap, normalize

__all__ = ["PATH_FIELD_ID", "POS_FIELD_ID", "PositionDeletes", "load_position_deletes"]

PATH_FIELD_ID = 2147483546
POS_FIELD_ID = 2147483545
_NAMES = {PATH_FIELD_ID: "file_path", POS_FIELD_ID: "pos"}
_THREADED_ROWS = 1 << 20  # a file of more rows is read on pyarrow's threads
_EMPTY: npt.NDArray[np.int64] = np.empty(0, dtype=np.int64)
_EMPTY.flags.writeable = False


@dataclass(frozen=True)
class PositionDeletes:
    """The deleted positions of one position delete file, by normalised data file path."""

    path: str  # the delete file
    by_file: Mapping[str, npt.NDArray[np.int64]]  # normalised data file path -> sorted unique positions

    def positions_for(self, data_path: str) -> npt.NDArray[np.int64]:
        """Sorted unique deleted positions of the data file at ``data_path`` (resolved or recorded; it is
        normalised); an empty array when this file deletes none of its rows."""
        return self.by_file.get(normalize(data_path), _EMPTY)

    @property
    def targets(self) -> frozenset[str]:
        """The normalised paths of the data files this file deletes rows from."""
        return frozenset(self.by_file)

    def __len__(self) -> int:
        return sum(len(v) for v in self.by_file.values())

    def __repr__(self) -> str:
        return f"PositionDeletes({self.path!r}, files={len(self.by_file)}, positions={len(self)})"


def load_position_deletes(io: FileIO, delete_file: DeleteFile) -> PositionDeletes:
    """Read the position delete file ``delete_file`` (its ``path`` already resolved) into an index;
    ``file_path`` values are mapped through ``io.path_map`` before normalising."""
    path = delete_file.path
    if delete_file.kind != "position":
        raise DataFileError(f"{path}: not a position delete file ({delete_file.kind})")
    fmt = delete_file.file_format.upper()
    if fmt == "PARQUET":
        file_paths, positions = _read_parquet(io, path)
    elif fmt == "AVRO":
        file_paths, positions = _read_avro(io, path)
    else:
        raise UnsupportedFeature(
            f"{path}: {delete_file.file_format} position delete files are not supported (Parquet or Avro)"
        )
    if len(positions) != delete_file.record_count:
        raise DataFileError(
            f"{path}: holds {len(positions)} position deletes, its manifest entry says "
            f"{delete_file.record_count}"
        )
    return _index(path, file_paths, positions, io.path_map)


# -- reading -------------------------------------------------------------------------------------------


def _read_parquet(io: FileIO, path: str) -> tuple[pa.ChunkedArray, npt.NDArray[np.int64]]:
    try:
        with io.open_input(path) as f:
            # file_path read as a dictionary: a few distinct paths, no string per row; opened once with
            # the spec's name (a file naming the column otherwise, by field id, is opened again)
            try:
                pf = pq.ParquetFile(f, read_dictionary=[_NAMES[PATH_FIELD_ID]])
            except KeyError:  # pyarrow's word for a file without a column of that name
                pf = pq.ParquetFile(f)
            names = _column_names(path, pf.schema_arrow)
            if names[0] != _NAMES[PATH_FIELD_ID]:
                pf = pq.ParquetFile(f, read_dictionary=[names[0]], metadata=pf.metadata)
            # pyarrow's threads only pay on large files: each of a scan's small files costs more with them
            table = pf.read(columns=list(names), use_threads=pf.metadata.num_rows > _THREADED_ROWS)
    except FileNotFoundError:
        raise DataFileError(f"{path}: position delete file not found") from None
    except (pa.ArrowException, OSError) as exc:
        raise DataFileError(f"{path}: corrupt or truncated Parquet file: {exc}") from None
    return _checked(path, table.column(0), table.column(1))


def _column_names(path: str, schema: pa.Schema) -> tuple[str, str]:
    ids: dict[int, str] = {}
    for f in schema:
        raw = (f.metadata or {}).get(b"PARQUET:field_id")
        if raw is not None:
            ids[int(raw)] = f.name
    return _resolve(path, ids, schema.names)


def _resolve(path: str, ids: Mapping[int, str], names: list[str]) -> tuple[str, str]:
    """The file's names of ``file_path`` and ``pos``: by field id when the file has ids, else by name."""
    found = dict(ids) if ids else {fid: name for fid, name in _NAMES.items() if name in names}
    missing = [f"{_NAMES[fid]} (field id {fid})" for fid in (PATH_FIELD_ID, POS_FIELD_ID) if fid not in found]
    if missing:
        how = "field id" if ids else "name (the file has no field ids)"
        raise DataFileError(f"{path}: not a position delete file: no column {' or '.join(missing)} by {how}")
    return found[PATH_FIELD_ID], found[POS_FIELD_ID]


def _read_avro(io: FileIO, path: str) -> tuple[pa.ChunkedArray, npt.NDArray[np.int64]]:
    try:
        container = read_container(path, io.open_input)
        fields = [f for f in container.avro.schema.get("fields", []) if isinstance(f, dict)]
        ids = {int(f["field-id"]): str(f["name"]) for f in fields if f.get("field-id") is not None}
        path_name, pos_name = _resolve(path, ids, [str(f.get("name")) for f in fields])
        target = pa.struct([pa.field(path_name, pa.string()), pa.field(pos_name, pa.int64())])
        rows = decode(container, program_for(container.avro, target))
    except ManifestError as exc:  # the Avro reader's messages name the file
        raise DataFileError(str(exc)) from None
    except UnsupportedSchema as exc:
        raise DataFileError(f"{path}: file_path/pos cannot be read as string/long: {exc}") from None
    return _checked(path, pa.chunked_array([rows.field(0)]), pa.chunked_array([rows.field(1)]))


def _checked(
    path: str, file_paths: pa.ChunkedArray, positions: pa.ChunkedArray
) -> tuple[pa.ChunkedArray, npt.NDArray[np.int64]]:
    kind = file_paths.type.value_type if pa.types.is_dictionary(file_paths.type) else file_paths.type
    if not (pa.types.is_string(kind) or pa.types.is_large_string(kind)):
        raise DataFileError(f"{path}: file_path column is {file_paths.type}, not a string")
    if not pa.types.is_integer(positions.type):
        raise DataFileError(f"{path}: pos column is {positions.type}, not a long")
    for name, column in (("file_path", file_paths), ("pos", positions)):
        if column.null_count:
            row = int(np.flatnonzero(pc.is_null(column).to_numpy())[0])
            raise DataFileError(
                f"{path}: {column.null_count} NULL {name} value(s) (first at row {row}): "
                f"a position delete must name a data file and a position"
            )
    pos = positions.to_numpy().astype(np.int64, copy=False)
    if len(pos) and pos.min() < 0:
        row = int(np.flatnonzero(pos < 0)[0])
        raise DataFileError(f"{path}: negative position {int(pos[row])} at row {row}")
    return file_paths, pos


# -- the index -----------------------------------------------------------------------------------------


def _index(
    path: str, file_paths: pa.ChunkedArray, pos: npt.NDArray[np.int64], path_map: PathMap
) -> PositionDeletes:
    ids, keys = _key_ids(file_paths, path_map)
    if not _sorted(ids, pos):  # the spec asks writers to sort by file_path, then pos: rarely taken
        ids, pos = _sort(ids, pos, len(keys))
    n = len(pos)
    new_file = np.ones(n, dtype=bool)
    np.not_equal(ids[1:], ids[:-1], out=new_file[1:])
    keep = new_file.copy()
    np.logical_or(keep[1:], pos[1:] != pos[:-1], out=keep[1:])
    if not keep.all():
        ids, pos, new_file = ids[keep], pos[keep], new_file[keep]
    pos.flags.writeable = False
    starts = np.flatnonzero(new_file)
    ends = np.append(starts[1:], len(pos))
    by_file = {keys[ids[s]]: pos[s:e] for s, e in zip(starts.tolist(), ends.tolist(), strict=True)}
    return PositionDeletes(path, by_file)


def _key_ids(file_paths: pa.ChunkedArray, path_map: PathMap) -> tuple[npt.NDArray[np.int64], list[str]]:
    """A key id per row, and the keys: the distinct paths mapped and normalised, in order of first
    appearance (spellings of one file, ``hdfs://nn/x`` and ``/x``, share a key). Python sees each
    distinct path of each chunk once."""
    key_ids: dict[str, int] = {}
    seen: dict[str, int] = {}  # recorded spelling -> key id

    def key_of(recorded: str) -> int:
        found = seen.get(recorded)
        if found is None:
            key = normalize(path_map.apply(recorded))
            found = seen[recorded] = key_ids.setdefault(key, len(key_ids))
        return found

    parts = []
    for chunk in file_paths.chunks:
        encoded = chunk if pa.types.is_dictionary(chunk.type) else pc.dictionary_encode(chunk)
        lookup = np.fromiter((key_of(p) for p in encoded.dictionary.to_pylist()), dtype=np.int64)
        parts.append(lookup[encoded.indices.to_numpy()] if len(lookup) else np.empty(0, dtype=np.int64))
    ids = np.concatenate(parts) if parts else np.empty(0, dtype=np.int64)
    return ids, list(key_ids)


def _sort(
    ids: npt.NDArray[np.int64], pos: npt.NDArray[np.int64], n_keys: int
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Rows ordered by key id, then position: one sort of ``id << bits | pos`` where that fits."""
    bits = int(pos.max()).bit_length() if len(pos) else 0
    if n_keys.bit_length() + bits > 62:
        order = np.lexsort((pos, ids))
        return ids[order], pos[order]
    combined = np.sort((ids << bits) | pos)
    return combined >> bits, combined & ((1 << bits) - 1)


def _sorted(ids: npt.NDArray[np.int64], pos: npt.NDArray[np.int64]) -> bool:
    """Whether rows are ordered by key id, then position."""
    if len(ids) < 2:
        return True
    step = ids[1:] - ids[:-1]
    return bool(np.all(step >= 0)) and bool(np.all((step > 0) | (pos[1:] >= pos[:-1])))
