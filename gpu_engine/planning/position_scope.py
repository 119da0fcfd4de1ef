"""Which data files a position delete file can hold rows for, from the metrics of its ``file_path``
column (Iceberg Java's ``ContentFileUtil.referencedDataFile`` and ``canContainPosDeletesForFile``):

- equal lower and upper bounds name its one data file (a file-scoped delete);
- otherwise the bounds are a range of paths: a data file of the partition whose path lies outside it
  has no row there, and the delete file is not attached to it.

Bounds are recorded paths; data files are planned under the table's path map. A bound is compared only
when the map leaves it alone (no map) or rewrites its prefix as it rewrites the data files' paths; one a
relocation leaves untouched (say, truncated inside the recorded prefix) rules nothing out.

Paths compare as written (Java's rule): normalising scheme and authority away does not keep their order
(a truncated ``file://0`` becomes ``/0``). Reads match a delete's ``file_path`` to a data file across
spellings (``file:/x``, ``file:///x``, ``/x``), so a data file outside the bounds is ruled out only when
both bounds are spelled as its path is (same scheme and authority): then so is every path between them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import pyarrow as pa

from ..io.paths import PathMap, normalize
from ..io.position_deletes import PATH_FIELD_ID
from ..tasks import POSITION_DELETES
from .pruning import lookup


@dataclass(frozen=True, slots=True)
class PathScope:
    """``target``: the one data file (mapped like recorded paths); ``lower``/``upper``: the mapped range
    of paths otherwise, as written; all None when unknown."""

    target: str | None = None
    lower: str | None = None
    upper: str | None = None
    # the scheme and authority both bounds are spelled with (see :func:`path_head`); None when they differ
    heads: str | None = field(init=False, default=None, compare=False)

    def __post_init__(self) -> None:
        if self.lower is not None and self.upper is not None:
            head = path_head(self.lower)
            object.__setattr__(self, "heads", head if head == path_head(self.upper) else None)

    def may_hold(self, path: str, head: str | Literal[False] | None = False) -> bool:
        """Whether rows for the data file at ``path`` (mapped, as written) may be in the delete file (for
        files of its partition; the target, when set, is matched by the index itself). ``head``:
        :func:`path_head` of ``path`` where the caller knows it (one data file against many delete files)."""
        lower, upper = self.lower, self.upper
        if (lower is None or lower <= path) and (upper is None or path <= upper):
            return True
        if lower is None or upper is None:
            return True  # paths below (or above) one bound may be other spellings of this one
        heads = self.heads
        return heads is None or (path_head(path) if head is False else head) != heads


def path_head(path: str) -> str | None:
    """The scheme and authority of ``path`` as written (``file://``, ``s3://bucket``, ``""``); None when
    normalising changes more than that prefix."""
    rest = normalize(path)
    return path[: len(path) - len(rest)] if path.endswith(rest) else None


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
            out.append(range_scope(lo, hi, path_map))
    return out


def range_scope(lower: bytes | None, upper: bytes | None, path_map: PathMap) -> PathScope:
    """The :class:`PathScope` of ``file_path`` bounds (Appendix D bytes) read under ``path_map``."""
    return PathScope(lower=_bound(lower, path_map), upper=_bound(upper, path_map))


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
    return mapped
