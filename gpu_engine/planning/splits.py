"""Split large data files into read ranges on row-group boundaries (``split_offsets``)."""

from __future__ import annotations

import itertools

from ..tasks import DataFile


def split_ranges(data: DataFile, target_size: int) -> list[tuple[int, int]]:
    """(start, length) byte ranges covering ``data``, each made of whole row groups and at least
    ``target_size`` long where the row groups allow; one range for files without usable offsets."""
    size = data.file_size_in_bytes
    offsets = data.split_offsets
    if not offsets or size <= target_size or not _usable(offsets, size):
        return [(0, size)]
    ranges: list[tuple[int, int]] = []
    start = 0
    boundaries = [*offsets[1:], size]
    for end in boundaries:
        if end - start >= target_size or end == size:
            ranges.append((start, end - start))
            start = end
    return ranges


def row_group_ranges(data: DataFile, start: int, length: int) -> list[tuple[int, int]]:
    """``[start, start + length)`` cut where each row group after the first starts: one range per row
    group. The reader gives a row group to the range holding its first byte, so together the ranges read
    each row group of the original range once, even where the recorded offsets are off. The range itself
    for files without usable offsets."""
    offsets = data.split_offsets
    if not offsets or not _usable(offsets, data.file_size_in_bytes):
        return [(start, length)]
    cuts = [start, *(o for o in offsets[1:] if start < o < start + length), start + length]
    return [(a, b - a) for a, b in itertools.pairwise(cuts)]


def _usable(offsets: tuple[int, ...], size: int) -> bool:
    """Offsets must increase and lie inside the file (some writers record garbage; then read whole)."""
    return all(0 <= a < b for a, b in itertools.pairwise(offsets)) and offsets[-1] < size
