"""Path normalisation and remapping for tables whose recorded paths point elsewhere.

Real tables spell one file as ``/x``, ``file:/x``, ``file:///x`` and ``hdfs://host:port/x``; paths are
compared after stripping scheme and authority. A :class:`PathMap` rewrites recorded prefixes to where
the files are now, for single strings and (vectorised) for Arrow string arrays.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from ..errors import InvalidOption

_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*:(//[^/]*)?")
_SCHEME_PATTERN = r"^[A-Za-z][A-Za-z0-9+.\-]*:(//[^/]*)?"


def normalize(path: str) -> str:
    """``path`` without scheme, authority and trailing slash (``hdfs://nn:8020/a``, ``file:/a`` -> ``/a``)."""
    stripped = _SCHEME.sub("", path, count=1)
    if stripped.startswith("//"):  # "file:////a" style: collapse to one leading slash
        stripped = "/" + stripped.lstrip("/")
    return stripped.rstrip("/") if len(stripped) > 1 else stripped


@dataclass(frozen=True)
class PathMap:
    """Prefix rewrites applied to every path read from metadata, manifests and delete files."""

    prefixes: tuple[tuple[str, str], ...] = ()  # (normalised old prefix, new prefix), longest first

    @staticmethod
    def of(mapping: Mapping[str, str]) -> PathMap:
        """The map of ``mapping`` (recorded prefix -> actual prefix, both strings); InvalidOption naming
        ``path_map`` for anything else (a list of pairs, a non-string prefix)."""
        if not isinstance(mapping, Mapping):
            raise InvalidOption(
                f"path_map={mapping!r}: expected a mapping of recorded prefixes to actual ones, "
                f"not {type(mapping).__name__}"
            )
        bad = [(k, v) for k, v in mapping.items() if not isinstance(k, str) or not isinstance(v, str)]
        if bad:
            raise InvalidOption(f"path_map entry {bad[0][0]!r}: {bad[0][1]!r}: prefixes must be strings")
        pairs = {normalize(old): new.rstrip("/") for old, new in mapping.items()}
        return PathMap(tuple(sorted(pairs.items(), key=lambda kv: -len(kv[0]))))

    @staticmethod
    def relocate(recorded_location: str, actual_location: str) -> PathMap:
        """Map a table's recorded ``location`` onto the directory it lives in now."""
        return PathMap.of({recorded_location: actual_location})

    def merged(self, other: PathMap) -> PathMap:
        return PathMap.of(dict(self.prefixes) | dict(other.prefixes))

    def __bool__(self) -> bool:
        return bool(self.prefixes)

    def apply(self, path: str) -> str:
        """``path`` with the longest matching recorded prefix replaced; unchanged when none matches."""
        if not self.prefixes:
            return path
        norm = normalize(path)
        for old, new in self.prefixes:
            if norm == old or norm.startswith(old + "/"):
                return new + norm[len(old) :]
        return path

    def apply_array(self, paths: pa.Array | pa.ChunkedArray) -> pa.Array | pa.ChunkedArray:
        """:meth:`apply` over an Arrow string array, vectorised (nulls stay null)."""
        if not self.prefixes:
            return paths
        norm = pc.replace_substring_regex(paths, pattern=_SCHEME_PATTERN, replacement="", max_replacements=1)
        out = paths
        done = pc.is_null(paths)
        for old, new in self.prefixes:
            hit = pc.and_not(pc.or_(pc.equal(norm, old), pc.starts_with(norm, old + "/")), done)
            hit = pc.fill_null(hit, False)
            swapped = pc.binary_join_element_wise(new, pc.utf8_slice_codeunits(norm, len(old)), "")
            out = pc.if_else(hit, swapped, out)
            done = pc.or_(done, hit)
        return out
