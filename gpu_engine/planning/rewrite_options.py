"""The options of a compaction (Iceberg's ``rewrite_data_files``), by Iceberg's names and defaults.

Options arrive as strings or values (``{"min-input-files": "2", "rewrite-all": True}``); an unknown name
or a bad value is an :class:`~gpu_engine.errors.InvalidOption` naming it, as Iceberg Java refuses them.
``target-file-size-bytes`` defaults to the table's ``write.target-file-size-bytes`` (512 MiB);
``min-file-size-bytes`` and ``max-file-size-bytes`` to 0.75 and 1.8 times the target.

One deviation: ``max-concurrent-file-group-rewrites`` defaults to 1, not Java's 5. Java runs groups on
Spark executors; here groups share one process and one device, and the memory bound (about twice the
target file size per group) holds per concurrent group.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import InvalidOption
from ..properties import int_property

JOB_ORDERS = ("none", "bytes-asc", "bytes-desc", "files-asc", "files-desc")
DEFAULT_TARGET = 512 << 20
_NAMES = {
    "target-file-size-bytes": "target_file_size_bytes",
    "min-file-size-bytes": "min_file_size_bytes",
    "max-file-size-bytes": "max_file_size_bytes",
    "min-input-files": "min_input_files",
    "rewrite-all": "rewrite_all",
    "max-file-group-size-bytes": "max_file_group_size_bytes",
    "max-files-to-rewrite": "max_files_to_rewrite",
    "delete-file-threshold": "delete_file_threshold",
    "delete-ratio-threshold": "delete_ratio_threshold",
    "partial-progress.enabled": "partial_progress_enabled",
    "partial-progress.max-commits": "partial_progress_max_commits",
    "partial-progress.max-failed-commits": "partial_progress_max_failed_commits",
    "max-concurrent-file-group-rewrites": "max_concurrent_file_group_rewrites",
    "rewrite-job-order": "rewrite_job_order",
    "use-starting-sequence-number": "use_starting_sequence_number",
    "remove-dangling-deletes": "remove_dangling_deletes",
    "output-spec-id": "output_spec_id",
}


@dataclass(frozen=True)
class RewriteOptions:
    """Resolved options; build with :meth:`resolve`."""

    target_file_size_bytes: int
    min_file_size_bytes: int
    max_file_size_bytes: int
    min_input_files: int = 5
    rewrite_all: bool = False
    max_file_group_size_bytes: int = 100 << 30
    max_files_to_rewrite: int | None = None
    delete_file_threshold: int = 2**31 - 1
    delete_ratio_threshold: float = 0.3
    partial_progress_enabled: bool = False
    partial_progress_max_commits: int = 10
    partial_progress_max_failed_commits: int | None = None
    max_concurrent_file_group_rewrites: int = 1
    rewrite_job_order: str = "none"
    use_starting_sequence_number: bool = True
    remove_dangling_deletes: bool = False
    output_spec_id: int | None = None

    @classmethod
    def resolve(
        cls, options: Mapping[str, Any] | None, table_properties: Mapping[str, str]
    ) -> RewriteOptions:
        """The options of ``options`` (Iceberg names) over the defaults and the table's properties; a None
        value leaves the option unset (so :meth:`as_dict` resolves back to the same options)."""
        unknown = sorted(k for k in (options or {}) if k not in _NAMES)
        if unknown:
            raise InvalidOption(
                f"compaction option(s) {unknown} are not supported; known options: {sorted(_NAMES)}"
            )
        given = {k: v for k, v in (options or {}).items() if v is not None}
        table_target = int_property(table_properties, "write.target-file-size-bytes", DEFAULT_TARGET)
        target = _int(given, "target-file-size-bytes", table_target, minimum=1)
        values: dict[str, Any] = {
            "target_file_size_bytes": target,
            "min_file_size_bytes": _int(given, "min-file-size-bytes", int(target * 0.75), minimum=0),
            "max_file_size_bytes": _int(given, "max-file-size-bytes", int(target * 1.8), minimum=1),
        }
        for name, attr in _NAMES.items():
            if attr in values or name not in given:
                continue
            if attr in ("rewrite_all", "partial_progress_enabled", "use_starting_sequence_number",
                        "remove_dangling_deletes"):  # fmt: skip
                values[attr] = _bool(given, name)
            elif attr == "delete_ratio_threshold":
                values[attr] = _ratio(given, name)
            elif attr == "rewrite_job_order":
                values[attr] = _choice(given, name, JOB_ORDERS)
            elif attr == "output_spec_id":
                values[attr] = _int(given, name, 0, minimum=0)
            else:
                # 0 failed commits allowed is meaningful (any failure fails the compaction), as in Java
                minimum = 0 if attr in ("delete_file_threshold", "partial_progress_max_failed_commits") else 1
                values[attr] = _int(given, name, 0, minimum=minimum)
        out = cls(**values)
        out._check()
        return out

    def _check(self) -> None:
        if not self.min_file_size_bytes < self.target_file_size_bytes < self.max_file_size_bytes:
            raise InvalidOption(
                "compaction options: need min-file-size-bytes < target-file-size-bytes < "
                "max-file-size-bytes, "
                f"got {self.min_file_size_bytes} / {self.target_file_size_bytes} / {self.max_file_size_bytes}"
            )

    @property
    def write_max_file_size(self) -> int:
        """The largest file a rewrite writes: halfway from the target to ``max-file-size-bytes`` (Java's
        ``writeMaxFileSize``), so a group slightly over the target does not leave a tiny tail file."""
        return int(
            self.target_file_size_bytes + (self.max_file_size_bytes - self.target_file_size_bytes) * 0.5
        )

    def as_dict(self) -> dict[str, Any]:
        """The resolved options by their Iceberg names."""
        return {name: getattr(self, attr) for name, attr in _NAMES.items()}


# options Java reads as a long (``PropertyUtil.propertyAsLong``); the other integer options are Java ints
_LONGS = frozenset(
    {"target-file-size-bytes", "min-file-size-bytes", "max-file-size-bytes", "max-file-group-size-bytes"}
)


def _int(given: Mapping[str, Any], name: str, default: int, *, minimum: int) -> int:
    """``given[name]`` as an integer >= ``minimum`` that Java parses as the option's type (an int, or a
    long for the byte sizes): a larger value is refused here rather than by Java's parser."""
    if name not in given:
        return default
    raw = given[name]
    maximum = 2**63 - 1 if name in _LONGS else 2**31 - 1
    bad = f"compaction option {name}={raw!r}: expected an integer in {minimum}..{maximum}"
    if isinstance(raw, bool):
        raise InvalidOption(bad)
    try:
        value = int_property({name: str(raw)}, name, default, minimum=minimum)
    except ValueError:
        raise InvalidOption(bad) from None
    if value > maximum:
        raise InvalidOption(bad)
    return value


def _bool(given: Mapping[str, Any], name: str) -> bool:
    raw = given[name]
    if isinstance(raw, bool):
        return raw
    text = str(raw).strip().lower()
    if text not in ("true", "false"):
        raise InvalidOption(f"compaction option {name}={raw!r}: expected true or false")
    return text == "true"


def _ratio(given: Mapping[str, Any], name: str) -> float:
    raw = given[name]
    try:
        value = float(str(raw).strip())
    except ValueError:
        value = -1.0
    if isinstance(raw, bool) or not 0.0 < value <= 1.0:
        raise InvalidOption(f"compaction option {name}={raw!r}: expected a number in (0, 1]")
    return value


def _choice(given: Mapping[str, Any], name: str, allowed: tuple[str, ...]) -> str:
    text = str(given[name]).strip().lower()
    if text not in allowed:
        raise InvalidOption(f"compaction option {name}={given[name]!r}: expected one of {list(allowed)}")
    return text
