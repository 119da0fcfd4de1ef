"""Where a compaction group's rows are cut into output files: by the input bytes they come from.

Iceberg Java reads a group as splits of ``inputSplitSize`` input bytes (``SizeBasedFileRewriter``:
``expected_output_files`` of about equal bytes, or target-sized ones and the remainder in one more) and
writes each split's rows as one file. :class:`InputSplits` does the same on the stream of rows: each row
weighs the input bytes it was read from (:func:`bytes_per_live_row`: its task's bytes over the task's live
rows, so the rows a file-scoped delete removes still count, as they do in Java's byte ranges), a file ends
once its rows weigh a split, at most ``expected_output_files`` files are made and the last takes the rest;
a rest of at most a tenth of a split joins the file before it instead of making a tiny file of its own.

Rows of files that compress differently are so cut by what they occupied in the input, not by the
group's average row: a run of well-compressed rows does not become a file of a few kilobytes nor a run of
poorly compressed ones a file past the maximum size. Where the rows are reordered (``sort``, ``zorder``)
each row weighs the group's average (Java's shuffle cuts those by row counts too).
"""

from __future__ import annotations

from ..tasks import FileGroup, ScanTask

SCALE = 1 << 20  # weights are counted in 1 / SCALE bytes


def expected_live_rows(group: FileGroup) -> int:
    """The group's rows less those its file-scoped deletes (DVs, position deletes of one file) remove. Where
    a file's deletes add up to more rows than it has (stacked position delete files may repeat positions),
    its deletes are not counted: the estimate errs high, so output files are never cut smaller than meant."""
    live = 0
    seen: set[str] = set()
    for task in group.tasks:
        if task.file.path in seen:
            continue
        seen.add(task.file.path)
        live += task.file.record_count - _scoped_deletes(task)
    return live


def _scoped_deletes(task: ScanTask) -> int:
    """Rows of ``task``'s file its file-scoped deletes remove (0 where they add up to more than it has)."""
    scoped = sum(
        d.record_count
        for d in task.deletes
        if d.is_deletion_vector or (d.content == 1 and d.referenced_data_file is not None)
    )
    return scoped if scoped <= task.file.record_count else 0


def bytes_per_live_row(task: ScanTask) -> int:
    """The input bytes each live row read by ``task`` stands for, in ``1 / SCALE`` bytes: its bytes over
    its rows less its share of the file's file-scoped deletes. (Integers, so that the cuts do not depend on
    how the rows are batched.)"""
    rows = task.estimated_rows
    if task.file.record_count > 0:
        rows -= _scoped_deletes(task) * task.estimated_rows // task.file.record_count
    return max(1, -(-max(task.length, 1) * SCALE // max(rows, 1)))  # rounded up: no row too many


def average_bytes_per_row(group: FileGroup) -> int:
    """The group's input bytes per live row (in ``1 / SCALE`` bytes): each row's weight where rows are
    reordered."""
    return max(1, -(-max(group.input_bytes, 1) * SCALE // max(expected_live_rows(group), 1)))


class InputSplits:
    """The cuts of one group's row stream into files (see the module doc). Feed it the rows in order
    (:meth:`feed`, then :meth:`finish`); it says where a file ends, by row position in the stream. A file's
    end is known once more than a tenth of a split of rows follows it (else the rest joins that file):
    rows before :meth:`safe` are surely the current file's."""

    def __init__(self, group: FileGroup) -> None:
        self.split = max(1, min(group.split_size, group.input_bytes)) * SCALE
        self.files = max(group.expected_output_files, 1)
        self.fed = 0  # rows fed
        self.ended = 0  # files ended (the tentative one included)
        self.current = 0  # input bytes of the rows of the file being filled (in 1 / SCALE bytes)
        self.tentative: tuple[int, int] | None = None  # a file's end and its bytes, until confirmed

    def feed(self, rows: int, per_row: int) -> list[tuple[int, int]]:
        """The ends confirmed by the next ``rows`` rows, each of ``per_row`` input bytes (in ``1 / SCALE``
        bytes): each file's end (the position of the first row after it) and its input bytes."""
        out: list[tuple[int, int]] = []
        at = 0
        per_row = max(per_row, 1)
        while at < rows:
            if self.tentative is not None:  # confirmed once the rows after it pass a tenth of a split
                more = max(0, (self.split // 10 - self.current) // per_row + 1)
                if at + more > rows:
                    break
                at += more
                self.current += more * per_row
                out.append(self.tentative)
                self.tentative = None
                continue
            if self.ended >= self.files - 1:  # the last file takes the rest
                break
            need = max(0, -(-(self.split - self.current) // per_row))  # rows that fill the file
            if at + need > rows or need == self.current == 0:
                break
            at += need
            self.tentative = (self.fed + at, self.current + need * per_row)
            self.current = 0
            self.ended += 1
        self.current += (rows - at) * per_row
        self.fed += rows
        return out

    def safe(self) -> int:
        """The rows (from the start) known to belong to the files confirmed and the current one."""
        return self.fed if self.tentative is None else self.tentative[0]

    def finish(self) -> int:
        """The stream has ended: an end not confirmed is dropped (the rest joins that file); the input bytes
        of the last file."""
        if self.tentative is not None:
            self.current += self.tentative[1]
            self.tentative = None
        return self.current
