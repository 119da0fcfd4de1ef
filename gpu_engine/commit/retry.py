"""Commit retry policy from Iceberg's table properties, with exponential backoff and jitter.

``commit.retry.num-retries`` (4), ``commit.retry.min-wait-ms`` (100), ``commit.retry.max-wait-ms``
(60000) and ``commit.retry.total-timeout-ms`` (1800000), as Iceberg Java names and defaults them. The
wait before retry ``n`` (1-based) is ``min(min-wait * 2**(n-1), max-wait)`` scaled by a random factor in
[0.5, 1.0] so that writers that collided do not collide again in lockstep.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass

from ..errors import InvalidProperty
from ..properties import int_property

NUM_RETRIES = "commit.retry.num-retries"
MIN_WAIT_MS = "commit.retry.min-wait-ms"
MAX_WAIT_MS = "commit.retry.max-wait-ms"
TOTAL_TIMEOUT_MS = "commit.retry.total-timeout-ms"


@dataclass(frozen=True)
class RetryPolicy:
    num_retries: int = 4
    min_wait_ms: int = 100
    max_wait_ms: int = 60_000
    total_timeout_ms: int = 1_800_000

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> RetryPolicy:
        policy = cls(
            int_property(props, NUM_RETRIES, cls.num_retries, minimum=0),
            int_property(props, MIN_WAIT_MS, cls.min_wait_ms, minimum=0),
            int_property(props, MAX_WAIT_MS, cls.max_wait_ms, minimum=0),
            int_property(props, TOTAL_TIMEOUT_MS, cls.total_timeout_ms, minimum=0),
        )
        if policy.max_wait_ms < policy.min_wait_ms:
            raise InvalidProperty(
                f"table property {MAX_WAIT_MS}={policy.max_wait_ms} is below "
                f"{MIN_WAIT_MS}={policy.min_wait_ms}"
            )
        return policy

    def wait_s(self, retry: int, rng: random.Random | None = None) -> float:
        """Seconds to wait before retry number ``retry`` (1-based): as Java's Tasks, the doubling wait
        (``min-wait-ms`` at first, at most ``max-wait-ms``) and up to a tenth of it more at random; never
        less than ``min-wait-ms``."""
        base = min(self.min_wait_ms * 2.0 ** min(retry - 1, 62), float(self.max_wait_ms))
        return (base + (rng or random).uniform(0.0, 0.1 * base)) / 1000.0
