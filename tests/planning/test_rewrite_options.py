"""RewriteOptions.resolve: Iceberg's rewrite_data_files option names and defaults (Java's
SizeBasedFileRewritePlanner / BinPackRewriteFilePlanner / RewriteDataFilesSparkAction), string and typed
values, InvalidOption naming the option for every bad value, the min < target < max check,
write_max_file_size and the as_dict round trip."""

from __future__ import annotations

import pickle
import re
from typing import Any

import pytest

from gpu_engine.errors import InvalidOption, InvalidProperty
from gpu_engine.planning.rewrite_options import RewriteOptions

MIB = 1 << 20
GIB = 1 << 30


def resolve(options: dict[str, Any] | None = None, *, table_target: str | None = None) -> RewriteOptions:
    """``options`` resolved for a table whose ``write.target-file-size-bytes`` is ``table_target``."""
    props = {} if table_target is None else {"write.target-file-size-bytes": table_target}
    return RewriteOptions.resolve(options, props)


# -- defaults ----------------------------------------------------------------------------------------------


def test_defaults_without_table_property() -> None:
    o = resolve()
    assert o.target_file_size_bytes == 512 * MIB == 536_870_912
    assert o.min_file_size_bytes == 402_653_184  # (long) (512 MiB * 0.75)
    assert o.max_file_size_bytes == 966_367_641  # (long) (512 MiB * 1.8), rounded down
    assert o.min_input_files == 5
    assert o.rewrite_all is False
    assert o.max_file_group_size_bytes == 100 * GIB
    assert o.max_files_to_rewrite is None
    assert o.delete_file_threshold == 2**31 - 1  # Integer.MAX_VALUE: off
    assert o.delete_ratio_threshold == 0.3
    assert o.partial_progress_enabled is False
    assert o.partial_progress_max_commits == 10
    assert o.partial_progress_max_failed_commits is None
    assert o.max_concurrent_file_group_rewrites == 1  # the documented deviation from Java's 5
    assert o.rewrite_job_order == "none"
    assert o.use_starting_sequence_number is True
    assert o.remove_dangling_deletes is False
    assert o.output_spec_id is None


def test_empty_mapping_is_the_defaults() -> None:
    assert resolve({}) == resolve(None)


def test_target_from_the_table_property() -> None:
    o = resolve(table_target="1000")
    assert (o.target_file_size_bytes, o.min_file_size_bytes, o.max_file_size_bytes) == (1000, 750, 1800)


def test_target_option_wins_over_the_table_property() -> None:
    o = resolve({"target-file-size-bytes": "2000"}, table_target="1000")
    assert (o.target_file_size_bytes, o.min_file_size_bytes, o.max_file_size_bytes) == (2000, 1500, 3600)


def test_min_and_max_follow_the_effective_target_rounded_down() -> None:
    o = resolve({"target-file-size-bytes": 1001})
    # 1001 * 0.75 = 750.75 -> 750; 1001 * 1.8 = 1801.8 -> 1801 (Java's (long) casts truncate)
    assert (o.min_file_size_bytes, o.max_file_size_bytes) == (750, 1801)


def test_explicit_min_and_max_are_kept() -> None:
    o = resolve({"target-file-size-bytes": 100, "min-file-size-bytes": 0, "max-file-size-bytes": 101})
    assert (o.min_file_size_bytes, o.target_file_size_bytes, o.max_file_size_bytes) == (0, 100, 101)


@pytest.mark.parametrize("value", ["abc", "0", "-5", "1.5"])
def test_bad_table_property_is_invalid_property(value: str) -> None:
    with pytest.raises(InvalidProperty, match=re.escape("write.target-file-size-bytes")):
        resolve(table_target=value)


# -- values: strings and typed ------------------------------------------------------------------------------

EVERY_OPTION_AS_STRINGS = {
    "target-file-size-bytes": "1000",
    "min-file-size-bytes": "100",
    "max-file-size-bytes": "5000",
    "min-input-files": "2",
    "rewrite-all": "TRUE",
    "max-file-group-size-bytes": "123456",
    "max-files-to-rewrite": "7",
    "delete-file-threshold": "0",
    "delete-ratio-threshold": "0.5",
    "partial-progress.enabled": " true ",
    "partial-progress.max-commits": "3",
    "partial-progress.max-failed-commits": "0",
    "max-concurrent-file-group-rewrites": "4",
    "rewrite-job-order": "Bytes-Desc",
    "use-starting-sequence-number": "false",
    "remove-dangling-deletes": "True",
    "output-spec-id": "2",
}

EVERY_OPTION_TYPED: dict[str, Any] = {
    "target-file-size-bytes": 1000,
    "min-file-size-bytes": 100,
    "max-file-size-bytes": 5000,
    "min-input-files": 2,
    "rewrite-all": True,
    "max-file-group-size-bytes": 123456,
    "max-files-to-rewrite": 7,
    "delete-file-threshold": 0,
    "delete-ratio-threshold": 0.5,
    "partial-progress.enabled": True,
    "partial-progress.max-commits": 3,
    "partial-progress.max-failed-commits": 0,
    "max-concurrent-file-group-rewrites": 4,
    "rewrite-job-order": "bytes-desc",
    "use-starting-sequence-number": False,
    "remove-dangling-deletes": True,
    "output-spec-id": 2,
}

EXPECTED_EVERY_OPTION = RewriteOptions(
    target_file_size_bytes=1000,
    min_file_size_bytes=100,
    max_file_size_bytes=5000,
    min_input_files=2,
    rewrite_all=True,
    max_file_group_size_bytes=123456,
    max_files_to_rewrite=7,
    delete_file_threshold=0,
    delete_ratio_threshold=0.5,
    partial_progress_enabled=True,
    partial_progress_max_commits=3,
    partial_progress_max_failed_commits=0,
    max_concurrent_file_group_rewrites=4,
    rewrite_job_order="bytes-desc",
    use_starting_sequence_number=False,
    remove_dangling_deletes=True,
    output_spec_id=2,
)


@pytest.mark.parametrize("given", [EVERY_OPTION_AS_STRINGS, EVERY_OPTION_TYPED], ids=["strings", "typed"])
def test_every_option_parses(given: dict[str, Any]) -> None:
    assert resolve(given) == EXPECTED_EVERY_OPTION


def test_every_option_name_is_covered() -> None:
    assert set(EVERY_OPTION_AS_STRINGS) == set(EVERY_OPTION_TYPED) == set(resolve().as_dict())


@pytest.mark.parametrize("order", ["none", "bytes-asc", "bytes-desc", "files-asc", "files-desc"])
def test_job_orders(order: str) -> None:
    assert resolve({"rewrite-job-order": order.upper()}).rewrite_job_order == order


def test_delete_ratio_bounds_inclusive_at_one() -> None:
    assert resolve({"delete-ratio-threshold": "1"}).delete_ratio_threshold == 1.0
    assert resolve({"delete-ratio-threshold": 1e-9}).delete_ratio_threshold == 1e-9


def test_whitespace_around_integers_is_accepted() -> None:
    assert resolve({"min-input-files": " 3 "}).min_input_files == 3


def test_none_value_leaves_the_option_unset() -> None:
    assert resolve({"max-files-to-rewrite": None, "min-input-files": None}) == resolve()


# -- bad values -----------------------------------------------------------------------------------------

BAD_VALUES: list[tuple[str, Any]] = [
    ("target-file-size-bytes", "0"),
    ("target-file-size-bytes", "-1"),
    ("target-file-size-bytes", "abc"),
    ("target-file-size-bytes", "1.5"),
    ("target-file-size-bytes", 1.5),
    ("target-file-size-bytes", ""),
    ("target-file-size-bytes", True),
    ("min-file-size-bytes", "-1"),
    ("min-file-size-bytes", "x"),
    ("max-file-size-bytes", "0"),
    ("max-file-size-bytes", "x"),
    ("min-input-files", "0"),
    ("min-input-files", -3),
    ("min-input-files", "five"),
    ("min-input-files", False),
    ("rewrite-all", "yes"),
    ("rewrite-all", "1"),
    ("rewrite-all", 1),
    ("max-file-group-size-bytes", "0"),
    ("max-file-group-size-bytes", "100GB"),
    ("max-files-to-rewrite", "0"),
    ("max-files-to-rewrite", "-2"),
    ("max-files-to-rewrite", "many"),
    ("delete-file-threshold", "-1"),
    ("delete-file-threshold", "x"),
    ("delete-ratio-threshold", "0"),
    ("delete-ratio-threshold", "-0.5"),
    ("delete-ratio-threshold", "1.01"),
    ("delete-ratio-threshold", "x"),
    ("delete-ratio-threshold", "nan"),
    ("delete-ratio-threshold", True),
    ("partial-progress.enabled", "maybe"),
    ("partial-progress.max-commits", "0"),
    ("partial-progress.max-commits", "x"),
    ("partial-progress.max-failed-commits", "-1"),
    ("partial-progress.max-failed-commits", "x"),
    ("max-concurrent-file-group-rewrites", "0"),
    ("max-concurrent-file-group-rewrites", "x"),
    ("rewrite-job-order", "bytes"),
    ("rewrite-job-order", "random"),
    ("rewrite-job-order", 5),
    ("use-starting-sequence-number", "no"),
    ("remove-dangling-deletes", "2"),
    ("output-spec-id", "-1"),
    ("output-spec-id", "x"),
]


@pytest.mark.parametrize(("name", "value"), BAD_VALUES, ids=[f"{n}={v!r}" for n, v in BAD_VALUES])
def test_bad_value_is_invalid_option_naming_it(name: str, value: Any) -> None:
    with pytest.raises(InvalidOption, match=re.escape(name)):
        resolve({name: value})


def test_every_option_has_a_bad_value_case() -> None:
    assert {n for n, _ in BAD_VALUES} == set(resolve().as_dict())


@pytest.mark.parametrize(
    "name", ["min-input-file", "target_file_size_bytes", "strategy", "max-bytes-to-rewrite"]
)
def test_unknown_option_is_invalid_option_naming_it(name: str) -> None:
    with pytest.raises(InvalidOption, match=re.escape(repr(name))):
        resolve({name: "1", "min-input-files": "2"})


def test_unknown_option_is_reported_even_with_none_value() -> None:
    with pytest.raises(InvalidOption, match="bogus"):
        resolve({"bogus": None})


def test_invalid_option_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="min-input-files"):
        resolve({"min-input-files": "0"})


# -- min < target < max ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "given",
    [
        {"target-file-size-bytes": 100, "min-file-size-bytes": 100},  # min == target
        {"target-file-size-bytes": 100, "min-file-size-bytes": 101},  # min > target
        {"target-file-size-bytes": 100, "max-file-size-bytes": 100},  # max == target
        {"target-file-size-bytes": 100, "max-file-size-bytes": 99},  # max < target
        {"min-file-size-bytes": 600 * MIB},  # over the default 512 MiB target
        {"max-file-size-bytes": 512 * MIB},  # equal to the default target
        {"target-file-size-bytes": 1},  # max defaults to (long) 1.8 = 1 == target
    ],
)
def test_min_target_max_order_is_checked(given: dict[str, Any]) -> None:
    with pytest.raises(
        InvalidOption, match="min-file-size-bytes < target-file-size-bytes < max-file-size-bytes"
    ):
        resolve(given)


def test_smallest_valid_target() -> None:
    o = resolve({"target-file-size-bytes": 2})  # min (long) 1.5 = 1, max (long) 3.6 = 3
    assert (o.min_file_size_bytes, o.target_file_size_bytes, o.max_file_size_bytes) == (1, 2, 3)


def test_small_table_target_conflicting_with_explicit_min() -> None:
    with pytest.raises(InvalidOption, match="got 2000 / 1000 / 1800"):
        resolve({"min-file-size-bytes": 2000}, table_target="1000")


# -- write_max_file_size ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("target", "max_size", "expected"),
    [
        (100, 180, 140),  # 100 + 80 / 2
        (100, 181, 140),  # 100 + 40.5 -> 140 (truncated)
        (100, 101, 100),  # 100 + 0.5 -> 100
        (512 * MIB, 966_367_641, 751_619_276),  # 536870912 + 429496729 / 2 = 751619276.5 -> 751619276
    ],
)
def test_write_max_file_size(target: int, max_size: int, expected: int) -> None:
    o = resolve({"target-file-size-bytes": target, "max-file-size-bytes": max_size})
    assert o.write_max_file_size == expected


def test_default_write_max_file_size() -> None:
    assert resolve().write_max_file_size == 751_619_276


# -- as_dict ------------------------------------------------------------------------------------------------


def test_as_dict_uses_iceberg_names() -> None:
    d = resolve({"min-input-files": 2}).as_dict()
    assert d["min-input-files"] == 2
    assert d["target-file-size-bytes"] == 512 * MIB
    assert d["max-files-to-rewrite"] is None
    assert all("_" not in k for k in d)


@pytest.mark.parametrize(
    "given", [None, EVERY_OPTION_AS_STRINGS, {"max-files-to-rewrite": 3, "rewrite-job-order": "files-asc"}]
)
def test_as_dict_round_trip(given: dict[str, Any] | None) -> None:
    o = resolve(given, table_target="4096")
    assert RewriteOptions.resolve(o.as_dict(), {}) == o
    assert RewriteOptions.resolve({k: str(v) for k, v in o.as_dict().items() if v is not None}, {}) == o


def test_options_are_frozen_and_picklable() -> None:
    o = resolve(EVERY_OPTION_AS_STRINGS)
    assert pickle.loads(pickle.dumps(o)) == o
    with pytest.raises(AttributeError):
        o.min_input_files = 3  # type: ignore[misc]


INTS = [
    "min-input-files",
    "max-files-to-rewrite",
    "delete-file-threshold",
    "partial-progress.max-commits",
    "partial-progress.max-failed-commits",
    "max-concurrent-file-group-rewrites",
    "output-spec-id",
]
LONGS = ["target-file-size-bytes", "max-file-group-size-bytes"]


@pytest.mark.parametrize("name", INTS + LONGS)
def test_integers_java_could_not_parse_are_refused(name: str) -> None:
    """Java reads these with Integer.parseInt or Long.parseLong (RewriteDataFilesSparkAction,
    SizeBasedFileRewritePlanner): one past the largest is refused naming the option, the largest taken."""
    largest = 2**63 - 1 if name in LONGS else 2**31 - 1
    for value in (largest + 1, str(largest + 1), 2**64):
        with pytest.raises(
            InvalidOption, match=rf"{re.escape(name)}=.*: expected an integer in \d+\.\.{largest}"
        ):
            resolve({name: value})
    assert resolve({name: str(largest)}).as_dict()[name] == largest
