"""Compaction groups as Spark jobs: the driver plans and commits, executors rewrite.

:class:`SparkRunner` implements :class:`~gpu_engine.execute.group_runner.GroupRunner`: each file group
becomes one Spark job of one task (a one-row DataFrame of the pickled group, ``mapInArrow`` over
:func:`gpu_engine.spark.executor.rewrite_batches`), submitted from driver threads, at most ``concurrency``
at a time, as Iceberg's Spark action runs its groups. A task Spark retries writes its files again; only
the attempt whose result reaches the driver is committed, so retries leave no duplicate data in the table
(a killed attempt's files are orphans: ``tbl.remove_orphan_files`` finds them). Closing the runner early
cancels the jobs still running (their Spark job group) and deletes the files of finished, unclaimed ones.
"""

from __future__ import annotations

import pickle
import re
import uuid
from collections.abc import Callable, Generator, Mapping, Sequence
from typing import Any

from ..errors import GpuEngineError
from ..execute.group_runner import GroupJob, Outcome, pooled
from ..tasks import FileGroup, RewriteResult
from .executor import RESULT_DDL, GroupPayload, rewrite_batches, stamp_of


class GroupRewriteFailed(GpuEngineError, RuntimeError):
    """A group failed on an executor (its message carries the executor's error)."""


class SparkRunner:
    """Rewrites groups on the executors of ``spark`` (a ``SparkSession``). Test hooks: ``fail_attempts``,
    group index -> how many attempts of its task fail before one runs; ``crash_after_write``: they fail by
    killing their Python worker after writing (else by raising before)."""

    def __init__(
        self, spark: Any, *, fail_attempts: Mapping[int, int] | None = None, crash_after_write: bool = False
    ):
        self.spark = spark
        self.fail_attempts = dict(fail_attempts or {})
        self.crash_after_write = crash_after_write
        self.job_group = f"gpu-engine-compaction-{uuid.uuid4()}"

    def run(
        self,
        job: GroupJob,
        groups: Sequence[FileGroup],
        *,
        concurrency: int,
        started: Callable[[FileGroup], None],
    ) -> Generator[tuple[FileGroup, Outcome], None, None]:
        def cancel() -> None:
            self.spark.sparkContext.cancelJobGroup(self.job_group)

        return pooled(
            groups, lambda g: self._one(job, g), io=job.io, concurrency=concurrency, started=started,
            cancel=cancel,
        )  # fmt: skip

    def _one(self, job: GroupJob, group: FileGroup) -> RewriteResult:
        sc = self.spark.sparkContext
        sc.setJobGroup(self.job_group, f"gpu-engine rewrite of file group {group.index}", True)
        payload = GroupPayload(
            job.metadata_location, stamp_of(job.metadata), job.io, group, job.strategy, job.backend,
            job.parquet_io, fail_attempts=self.fail_attempts.get(group.index, 0),
            crash_after_write=self.crash_after_write,
        )  # fmt: skip
        frame = self.spark.createDataFrame(
            [(group.index, pickle.dumps(payload))], "group_index bigint, payload binary"
        )
        try:
            rows = frame.mapInArrow(rewrite_batches, RESULT_DDL).collect()
        except Exception as exc:
            raise GroupRewriteFailed(
                f"file group {group.index}: its Spark job failed: {first_line(exc)}"
            ) from exc
        if len(rows) != 1 or rows[0]["group_index"] != group.index:
            raise GroupRewriteFailed(
                f"file group {group.index}: the Spark job returned {len(rows)} result rows"
            )
        result: RewriteResult = pickle.loads(rows[0]["result"])
        return result


_RAISED = re.compile(r"^(?:Caused by: )?(?:[A-Za-z_][\w$]*\.)*([A-Z][\w$]*): (.+)$")
_CRASH = re.compile(r"Python worker exited unexpectedly[^\n]*")


def first_line(exc: BaseException) -> str:
    """What an executor raised, out of Spark's wrapping: the exception line of the last Python traceback
    (``Class: message``, the class without its module, whatever its name), else a crashed worker, else the
    last Java exception line (or the first line of the message)."""
    text = str(exc)
    if "Traceback (most recent call last)" in text:
        tail = text.rsplit("Traceback (most recent call last)", 1)[1].splitlines()
        first = next((m for ln in tail if not ln.startswith((" ", "\t")) and (m := _RAISED.match(ln))), None)
        if first:  # the traceback's first unindented line: what was raised (the JVM's trace may follow)
            return f"{first.group(1)}: {first.group(2)}"
    crash = _CRASH.search(text)
    if crash:
        return crash.group(0).strip()
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    java = [
        m.group(0) for ln in lines if (m := _RAISED.match(ln)) and m.group(1).endswith(("Error", "Exception"))
    ]
    return java[-1] if java else (lines[0] if lines else type(exc).__name__)
