"""Which data files a position delete file can hold rows for, from the metrics of its ``file_path``
column (Iceberg Java's ``ContentFileUtil.referencedDataFile`` and ``canContainPosDeletesForFile``):

- equal lower and upper bounds name its one data file (a file-scoped delete);
- otherwise the bounds are a range of paths: a data file of the partition whose path lies outside it
  has no row there, and the delete file is not attached to it.

Bounds are recorded paths; data files are planned under the table's path map. A bound is compared only
when the map leaves it alone (no map) or rewrites its prefix as it rewrites the data files' paths; one a
relocation leaves untouched (say, truncated inside the recorded prefix) rules nothing out.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

from ..io.paths import PathMap, normalize
from ..io.position_deletes import PATH_FIELD_ID
from ..tasks import POSITION_DELETES
from .pruning import lookup


@dataclass(frozen=True, slots=True)
class PathScope:
    """``target``: the one data file (mapped like recorded paths); ``lower``/``upper``: the normalised,
    mapped range of paths otherwise; all None when unknown."""

    target: str | None = None
    lower: str | None = None
    upper: str | None = None

    def may_hold(self, normalized_path: str) -> bool:
        """Whether rows for the data file at ``normalized_path`` may be in the delete file (for files of
        its partition; the target, when set, is matched by the index itself)."""
        if self.lower is not None and normalized_path < self.lower:
            return False
        return not (self.upper is not None and normalized_path > self.upper)


UNSCOPED = PathScope()


def path_scopes(entries: pa.Table, path_map: PathMap) -> list[PathScope]:
    """Per delete manifest entry, its :class:`PathScope` (:data:`UNSCOPED` for other content)."""
    lower = lookup(entries, "lower_bounds", PATH_FIELD_ID).to_pylist()
    upper = lookup(entries, "upper_bounds", PATH_FIELD_ID).to_pylist()
    content = entries.column("content").to_pylist()
    out: list[PathScope] = []
    for kind, lo, hi in zip(content, lower, upper, strict=True):
        if kind != POSITION_DELETES:
            out.append(UNSCOPED)
        elif lo is not None and lo == hi:
            out.append(PathScope(target=path_map.apply(lo.decode("utf-8", "replace"))))
        else:
            out.append(PathScope(lower=_bound(lo, path_map), upper=_bound(hi, path_map)))
    return out


def _bound(raw: bytes | None, path_map: PathMap) -> str | None:
    if raw is None:
        return None
    try:
        recorded = raw.decode("utf-8")
    except UnicodeDecodeError:
        return None
    mapped = path_map.apply(recorded)
    if path_map and mapped == recorded:
        return None  # outside the relocated prefix: not comparable with the mapped data paths
    return normalize(mapped)
