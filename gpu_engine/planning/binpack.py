"""Bin packing for compaction groups and the output file count of a group (Iceberg Java's rules).

Files are packed in the order given into bins of at most ``max_weight`` bytes with one open bin (Java's
``ListPacker(maxGroupSize, lookback=1, largestBinFirst=false)``): a file that does not fit closes the
open bin. A file heavier than ``max_weight`` gets a bin of its own.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

T = TypeVar("T")


def pack(items: Sequence[T], weight: Callable[[T], int], max_weight: int) -> list[list[T]]:
    """``items`` in order, cut into consecutive bins of at most ``max_weight`` (see the module doc)."""
    bins: list[list[T]] = []
    current: list[T] = []
    load = 0
    for item in items:
        w = weight(item)
        if current and load + w > max_weight:
            bins.append(current)
            current, load = [], 0
        current.append(item)
        load += w
    if current:
        bins.append(current)
    return bins


def input_split_size(input_size: int, files: int, target: int, write_max: int) -> int:
    """Input bytes per output file (Java's ``inputSplitSize``): an equal share of ``files``, at least
    ``target`` and at most ``write_max``. When :func:`expected_output_files` rounded up, that is ``target``:
    target-sized files and the remainder in one more (equal files would all fall under ``min_size``, so
    the next compaction would pick them again)."""
    return min(max(input_size // max(files, 1), target), write_max)


def expected_output_files(input_size: int, target: int, min_size: int, write_max: int) -> int:
    """How many files a group of ``input_size`` bytes is written as: the remainder past whole target-sized
    files gets a file of its own only when it is larger than ``min_size``; otherwise it is spread over the
    others, unless that makes their (integer) average ``min(1.1 * target, write_max)`` or more."""
    if input_size < target:
        return 1
    with_remainder = -(-input_size // target)  # exact ceiling (float division rounds past 2**53)
    without_remainder = input_size // target
    if input_size % target > min_size:
        return with_remainder
    # Java compares the integer average (``long`` division) with the double threshold
    if input_size // without_remainder < min(1.1 * target, write_max):
        return without_remainder
    return with_remainder
