"""Retry policy (commit.retry.* properties, backoff bounds) and snapshot summaries by hand."""

from __future__ import annotations

import random

import pytest

from gpu_engine.commit import RetryPolicy
from gpu_engine.commit.summary import snapshot_summary
from gpu_engine.errors import InvalidProperty
from gpu_engine.iceberg.content_file import EQUALITY_DELETES, POSITION_DELETES, ContentFile


def test_retry_defaults_are_icebergs() -> None:
    assert RetryPolicy.from_properties({}) == RetryPolicy(4, 100, 60_000, 1_800_000)
    props = {
        "commit.retry.num-retries": "7", "commit.retry.min-wait-ms": "5", "commit.retry.max-wait-ms": "50",
        "commit.retry.total-timeout-ms": "1000",
    }  # fmt: skip
    assert RetryPolicy.from_properties(props) == RetryPolicy(7, 5, 50, 1000)


def test_backoff_grows_exponentially_with_jitter_up_to_the_max() -> None:
    """As Java's Tasks: the doubling wait plus up to a tenth more; never below the minimum wait (a wait
    half as long came before)."""
    policy = RetryPolicy(min_wait_ms=100, max_wait_ms=1000)
    rng = random.Random(1)
    for retry, base in ((1, 0.1), (2, 0.2), (3, 0.4), (4, 0.8), (5, 1.0), (40, 1.0)):
        waits = [policy.wait_s(retry, rng) for _ in range(200)]
        assert base <= min(waits) and max(waits) <= base * 1.1
        assert max(waits) - min(waits) > base * 0.05  # jittered, not constant


@pytest.mark.parametrize(
    "props",
    [{"commit.retry.num-retries": "-1"}, {"commit.retry.min-wait-ms": "x"},
     {"commit.retry.min-wait-ms": "10", "commit.retry.max-wait-ms": "5"}],
)  # fmt: skip
def test_bad_retry_properties(props: dict[str, str]) -> None:
    with pytest.raises(InvalidProperty, match=r"commit\.retry"):
        RetryPolicy.from_properties(props)


def f(path: str, rows: int, size: int, part: tuple[object, ...] = ("a",), **kw: object) -> ContentFile:
    return ContentFile(path, kw.pop("fmt", "PARQUET"), 0, part, rows, size, **kw)  # type: ignore[arg-type]


def test_summary_by_hand() -> None:
    """DVs count their blob's size (Java's ScanTaskUtil.contentSizeInBytes), not their Puffin file's."""
    parent = {
        "total-records": "100", "total-files-size": "1000", "total-data-files": "4",
        "total-delete-files": "1", "total-position-deletes": "3", "total-equality-deletes": "0",
    }  # fmt: skip
    added = [
        f("/d1", 10, 100, ("a",)),
        f(
            "/dv",
            2,
            40,
            ("a",),
            fmt="PUFFIN",
            content=POSITION_DELETES,
            content_offset=4,
            content_size_in_bytes=12,
        ),
        f(
            "/dv",
            1,
            40,
            ("a",),
            fmt="PUFFIN",
            content=POSITION_DELETES,
            content_offset=16,
            content_size_in_bytes=14,
        ),
        f("/eq", 5, 30, ("b",), content=EQUALITY_DELETES, equality_ids=(1,)),
    ]
    removed = [f("/d0", 20, 200, ("c",)), f("/pd", 3, 50, ("a",), content=POSITION_DELETES)]
    s = snapshot_summary("overwrite", added=added, removed=removed, parent=parent, has_parent=True)
    assert s == {
        "operation": "overwrite",
        "added-data-files": "1", "deleted-data-files": "1", "added-records": "10", "deleted-records": "20",
        "added-files-size": "156", "removed-files-size": "250", "added-delete-files": "3",
        "removed-delete-files": "1", "removed-position-delete-files": "1", "added-dvs": "2",
        "added-equality-delete-files": "1", "added-position-deletes": "3", "removed-position-deletes": "3",
        "added-equality-deletes": "5",
        "total-records": "90", "total-files-size": "906", "total-data-files": "4", "total-delete-files": "3",
        "total-position-deletes": "3", "total-equality-deletes": "5",
        "changed-partition-count": "3", "engine-name": "gpu-engine",
    }  # fmt: skip
    by_path = snapshot_summary(
        "overwrite", added=added, removed=removed, parent=parent, has_parent=True,
        partition_path=lambda f: f"p={f.partition[0]}", partition_limit=3,
    )  # fmt: skip
    assert {k: v for k, v in by_path.items() if k not in s} == {
        # Java's SnapshotSummary.Builder: per partitionToPath, UpdateMetrics.addTo's keys and order
        "partitions.p=a": "added-data-files=1,removed-position-delete-files=1,added-dvs=2,"
        "added-delete-files=2,removed-delete-files=1,added-records=10,added-files-size=126,removed-files-size=50,"
        "added-position-deletes=3,removed-position-deletes=3",
        "partitions.p=b": "added-equality-delete-files=1,added-delete-files=1,added-files-size=30,"
        "added-equality-deletes=5",
        "partitions.p=c": "deleted-data-files=1,deleted-records=20,removed-files-size=200",
        "partition-summaries-included": "true",
    }
    over = snapshot_summary(
        "overwrite", added=added, removed=removed, parent=parent, has_parent=True,
        partition_path=lambda f: f"p={f.partition[0]}", partition_limit=2,
    )  # fmt: skip
    assert over == s  # more changed partitions than the limit: none listed
    calls: list[str] = []

    def counted(f: ContentFile) -> str:
        calls.append(f.path)
        return f"p={f.partition[0]}"

    by_default = snapshot_summary(
        "overwrite", added=added, removed=removed, parent=parent, has_parent=True, partition_path=counted,
    )  # fmt: skip
    assert by_default == s and not calls  # limit 0: no path computed (a commit may list 100k files)
    snapshot_summary(
        "overwrite", added=added, removed=removed, parent=parent, has_parent=True, partition_path=counted,
        partition_limit=3,
    )  # fmt: skip
    assert len(calls) == 3  # one per partition, not per file


def test_summary_totals_the_parent_lacks_are_left_out() -> None:
    s = snapshot_summary(
        "append", added=[f("/d", 1, 1)], removed=[], parent={"total-records": "5"}, has_parent=True
    )
    assert s["total-records"] == "6" and "total-data-files" not in s
    first = snapshot_summary("append", added=[f("/d", 1, 1)], removed=[], parent=None, has_parent=False)
    assert first["total-data-files"] == "1" and first["total-delete-files"] == "0"
    nan = snapshot_summary("append", added=[f("/x", 1, 1, (float("nan"),)), f("/y", 1, 1, (float("nan"),))],
                           removed=[], parent=None, has_parent=False)  # fmt: skip
    assert nan["changed-partition-count"] == "1"
    zeros = snapshot_summary("append", added=[f("/x", 1, 1, (-0.0,)), f("/y", 1, 1, (0.0,))],
                             removed=[], parent=None, has_parent=False)  # fmt: skip
    assert zeros["changed-partition-count"] == "2"  # partition values compare by their bits
