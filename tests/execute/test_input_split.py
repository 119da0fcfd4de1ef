"""Cutting a group's rows into files by the input bytes they come from (Java's ``inputSplitSize`` splits):
checked against a plain model of the rule, with any batching of the same rows."""

from __future__ import annotations

import dataclasses

from hypothesis import given, settings
from hypothesis import strategies as st

from gpu_engine.execute.input_split import SCALE, InputSplits, bytes_per_live_row, expected_live_rows
from gpu_engine.expressions import TRUE
from gpu_engine.tasks import DataFile, DeleteFile, FileGroup, ScanTask


def group(split: int, files: int, input_bytes: int, tasks: tuple[ScanTask, ...] = ()) -> FileGroup:
    data = tuple(t.file for t in tasks) or (DataFile("/wh/g.parquet", "PARQUET", 0, (), 1, input_bytes, 1),)
    return FileGroup(
        index=0, spec_id=0, partition=(), files=data, tasks=tasks, output_spec_id=0,
        expected_output_files=files, max_output_file_size=2 * split, split_size=split,
    )  # fmt: skip


def run(splits: InputSplits, batches: list[tuple[int, int]]) -> tuple[list[tuple[int, int]], int]:
    """The ends ``splits`` confirms for ``batches`` of (rows, bytes a row, in bytes), and the last file's
    bytes."""
    ends = []
    for rows, per_row in batches:
        ends += splits.feed(rows, per_row * SCALE)
    return ends, splits.finish()


def model(rows: list[int], split: int, files: int) -> list[int]:
    """The ends by the rule in plain terms: a file ends at the first row that brings its bytes to a split,
    at most ``files - 1`` times, unless the rows after it weigh a tenth of a split or less."""
    ends: list[int] = []
    current = 0
    for i, weight in enumerate(rows):
        current += weight
        if current >= split and len(ends) < files - 1:
            ends.append(i + 1)
            current = 0
    if ends and sum(rows[ends[-1] :]) <= split // 10:
        ends.pop()
    return ends


def test_rows_of_cheap_and_dear_files_are_cut_by_their_bytes() -> None:
    """1000 rows of 1 byte then 1000 rows of 100 bytes, splits of 10,000 bytes: the cheap rows and the first
    90 dear ones make a file, then files of 100 dear rows; the last 10 rows (a tenth of a split) join the
    last file. (The average row, 50.5 bytes, would cut at 198 rows: files of 198 cheap rows.)"""
    splits = InputSplits(group(10_000, 11, 101_000))
    ends, last = run(splits, [(1000, 1), (1000, 100)])
    assert [e for e, _ in ends] == [1090, *range(1190, 1891, 100)]
    assert all(w == 10_000 * SCALE for _, w in ends)
    assert last == 110 * 100 * SCALE


def test_at_most_the_expected_files_the_last_taking_the_rest() -> None:
    ends, last = run(InputSplits(group(1000, 3, 10_000)), [(100, 100)])
    assert [e for e, _ in ends] == [10, 20]
    assert last == 80 * 100 * SCALE


def test_a_rest_of_a_tenth_of_a_split_joins_the_file_before_it() -> None:
    """Equality deletes the planner cannot count leave fewer rows than expected: 2005 rows of 1 byte in
    splits of 1000 give files of 1000 and 1005 rows, not a third of 5 rows; 2101 rows give three."""
    ends, last = run(InputSplits(group(1000, 3, 3000)), [(2005, 1)])
    assert [e for e, _ in ends] == [1000] and last == 1005 * SCALE
    ends, last = run(InputSplits(group(1000, 3, 3000)), [(2101, 1)])
    assert [e for e, _ in ends] == [1000, 2000] and last == 101 * SCALE


def test_an_end_is_confirmed_only_when_more_than_a_tenth_of_a_split_follows() -> None:
    splits = InputSplits(group(1000, 3, 3000))
    assert splits.feed(1000, SCALE) == [] and splits.safe() == 1000  # the file may still take the rest
    assert splits.feed(100, SCALE) == [] and splits.safe() == 1000
    assert splits.feed(1, SCALE) == [(1000, 1000 * SCALE)] and splits.safe() == 1101


@settings(max_examples=200, deadline=None)
@given(
    weights=st.lists(st.integers(1, 50), min_size=1, max_size=300),
    split=st.integers(20, 400),
    files=st.integers(1, 8),
    cuts=st.lists(st.integers(1, 40), max_size=30),
)
def test_any_batching_gives_the_model_s_ends(
    weights: list[int], split: int, files: int, cuts: list[int]
) -> None:
    """Rows of one weight per batch (a task's rows), batches cut anywhere: the ends of the model."""
    rows = [w for w in weights for _ in range(3)]  # three rows of each weight
    batches, i = [], 0
    for n in [*cuts, len(rows)]:
        if i >= len(rows):
            break
        take = rows[i : i + n]
        same = (
            len(take) if len(set(take)) == 1 else next(k for k in range(1, len(take)) if take[k] != take[0])
        )
        batches.append((same, take[0]))
        i += same
    while i < len(rows):  # the rest, a batch per run of one weight
        j = i
        while j < len(rows) and rows[j] == rows[i]:
            j += 1
        batches.append((j - i, rows[i]))
        i = j
    ends, last = run(InputSplits(group(split, files, sum(rows))), batches)
    assert [e for e, _ in ends] == model(rows, split, files)
    assert sum(w for _, w in ends) + last == sum(rows) * SCALE


def test_live_rows_and_the_bytes_each_stands_for() -> None:
    """A file-scoped delete's rows still count as input bytes (Java splits by byte ranges): 1000 bytes over
    100 rows of which a DV deletes 20 make 12.5 bytes a live row."""
    f = DataFile("/wh/a.parquet", "PARQUET", 0, (), 100, 1000, 1)
    dv = DeleteFile("/wh/a.puffin", "PUFFIN", 1, 0, (), 20, 300, 2, referenced_data_file=f.path)
    task = ScanTask(f, 4, 1000, (dv,), TRUE, 100)
    assert bytes_per_live_row(task) == 12.5 * SCALE
    assert expected_live_rows(group(500, 2, 1000, (task,))) == 80
    # stacked position deletes counting more rows than the file has are not counted
    many = dataclasses.replace(dv, file_format="PARQUET", record_count=150)
    assert bytes_per_live_row(dataclasses.replace(task, deletes=(many,))) == 10 * SCALE
