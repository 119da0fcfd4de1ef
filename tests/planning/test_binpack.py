"""pack (Java's ListPacker(maxGroupSize, lookback=1, largestBinFirst=false)) and expected_output_files
(Java's SizeBasedFileRewritePlanner.expectedOutputFiles) and input_split_size (its inputSplitSize), on
hand-computed cases."""

from __future__ import annotations

from itertools import pairwise

from hypothesis import given
from hypothesis import strategies as st

from gpu_engine.planning.binpack import expected_output_files, input_split_size, pack


def weights(items: list[int], max_weight: int) -> list[list[int]]:
    """Pack plain integers, each its own weight."""
    return pack(items, lambda w: w, max_weight)


# -- pack --------------------------------------------------------------------------------------------------


def test_pack_nothing() -> None:
    assert weights([], 10) == []


def test_pack_keeps_order() -> None:
    items = [("a", 3), ("b", 3), ("c", 3), ("d", 3), ("e", 3)]
    bins = pack(items, lambda item: item[1], 7)
    assert [[name for name, _ in b] for b in bins] == [["a", "b"], ["c", "d"], ["e"]]


def test_pack_exact_fits_share_a_bin() -> None:
    assert weights([2, 3, 5], 5) == [[2, 3], [5]]
    assert weights([5, 5], 10) == [[5, 5]]
    assert weights([4, 6, 1], 10) == [[4, 6], [1]]


def test_pack_one_over_closes_the_bin() -> None:
    assert weights([5, 6], 10) == [[5], [6]]


def test_heavier_than_max_alone() -> None:
    assert weights([1, 20, 1], 10) == [[1], [20], [1]]
    assert weights([20, 1, 1], 10) == [[20], [1, 1]]
    assert weights([20, 30], 10) == [[20], [30]]
    assert weights([1, 1, 20], 10) == [[1, 1], [20]]


def test_one_open_bin_no_lookback() -> None:
    # first-fit with lookback would put 4 with 6; Java's lookback of 1 has closed that bin already
    assert weights([6, 5, 4], 10) == [[6], [5, 4]]


def test_zero_weights_share_a_bin() -> None:
    assert weights([0, 0, 0], 1) == [[0, 0, 0]]


@given(st.lists(st.integers(min_value=0, max_value=50), max_size=30), st.integers(min_value=1, max_value=60))
def test_pack_invariants(items: list[int], max_weight: int) -> None:
    bins = weights(items, max_weight)
    assert [w for b in bins for w in b] == items  # order kept, nothing lost
    assert all(b for b in bins)
    for b in bins:
        assert len(b) == 1 or sum(b) <= max_weight  # only a lone item may be over
    for prev, nxt in pairwise(bins):
        assert sum(prev) + nxt[0] > max_weight  # a bin closes only when the next item does not fit


# -- expected_output_files ---------------------------------------------------------------------------------
# target 100, min 75 (0.75x), max 180 (1.8x): write_max = 100 + (180 - 100) / 2 = 140, so the spread
# threshold is min(1.1 * 100, 140) = 110.00000000000001 (1.1 * 100 in doubles).


def outputs(input_size: int, target: int = 100, min_size: int = 75, write_max: int = 140) -> int:
    return expected_output_files(input_size, target, min_size, write_max)


def test_input_below_target_is_one_file() -> None:
    assert outputs(0) == 1
    assert outputs(1) == 1
    assert outputs(99) == 1


def test_exact_multiples() -> None:
    assert outputs(100) == 1
    assert outputs(300) == 3
    assert outputs(1100) == 11


def test_remainder_larger_than_min_gets_its_own_file() -> None:
    assert outputs(176) == 2  # remainder 76 > 75: ceil(1.76)
    assert outputs(180) == 2
    assert outputs(1099) == 11  # remainder 99


def test_remainder_at_min_is_spread_when_the_average_stays_small() -> None:
    assert outputs(1075) == 10  # remainder 75 (not > 75); 1075 // 10 = 107 < 110
    assert outputs(1050) == 10  # remainder 50; average 105
    assert outputs(1010) == 10


def test_remainder_not_spread_when_the_average_gets_too_large() -> None:
    assert outputs(175) == 2  # remainder 75; one file of 175 >= 110: keep the remainder file
    assert outputs(150) == 2  # remainder 50; average 150
    assert outputs(111) == 2  # remainder 11; average 111 >= 110.00000000000001
    assert outputs(222) == 3  # remainder 22; average 111


def test_average_is_an_integer_division_as_in_java() -> None:
    # 221 // 2 = 110 < 110.00000000000001: Java's long average spreads the remainder; the exact average
    # 110.5 would not
    assert outputs(221) == 2
    assert outputs(220) == 2  # 110 < 110.00000000000001: 1.1 * 100 rounds up in doubles
    # target 1001: threshold 1.1 * 1001 = 1101.1; 2203 // 2 = 1101 < 1101.1 <= 1101.5
    assert outputs(2203, target=1001, min_size=750, write_max=1401) == 2
    assert outputs(2201, target=1000, min_size=750, write_max=1400) == 3  # 1.1 * 1000 is exactly 1100.0


def test_write_max_below_ten_percent_over_target() -> None:
    # target 100, max 110: write_max = 105, threshold min(110, 105) = 105
    assert outputs(1040, write_max=105) == 10  # average 104 < 105
    assert outputs(1050, write_max=105) == 11  # average 105, not < 105
    assert outputs(1060, write_max=105) == 11


def test_min_zero_always_keeps_a_remainder() -> None:
    assert outputs(101, min_size=0) == 2
    assert outputs(100, min_size=0) == 1


def test_java_doc_example_ten_point_one_gib() -> None:
    gib = 1 << 30
    target, min_size, write_max = gib, int(gib * 0.75), int(gib + (int(gib * 1.8) - gib) * 0.5)
    input_size = 10 * gib + gib // 10  # 10.1 GiB: remainder 0.1 GiB <= min; average 1.01 GiB < 1.1 GiB
    assert outputs(input_size, target, min_size, write_max) == 10
    assert outputs(10 * gib + gib // 5 * 4, target, min_size, write_max) == 11  # remainder 0.8 > 0.75


def test_ceiling_is_exact_past_float_precision() -> None:
    # 2**55 + 3 is not a double: float division gives exactly 2**30 and would drop the remainder file
    assert outputs(2**55 + 3, target=2**25, min_size=0, write_max=2**25 + 2**24) == 2**30 + 1


def test_split_size_is_the_target_when_the_count_rounded_up() -> None:
    """150 bytes as 2 files: one of the target and the remainder, not two of 75 each (both under the
    minimum size: the next compaction would pick them again); spread remainders give equal shares."""
    assert input_split_size(150, outputs(150), 100, 140) == 100
    assert input_split_size(1050, outputs(1050), 100, 140) == 105  # 10 files of 105
    assert input_split_size(1099, outputs(1099), 100, 140) == 100  # 10 of 100, the remainder 99
    assert input_split_size(500, 1, 100, 140) == 140  # never past the writer's maximum
