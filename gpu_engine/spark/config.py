"""Spark session settings: GPU scheduling the Spark way, the RAPIDS plugin, and a local session.

On a GPU cluster each executor declares its GPUs (``spark.executor.resource.gpu.amount``, found by a
discovery script) and each task asks for a share (``spark.task.resource.gpu.amount``); inside a task the
engine binds to ``TaskContext.get().resources()["gpu"].addresses`` (:mod:`.executor`).
:func:`rapids_conf` builds those settings plus NVIDIA's RAPIDS Accelerator (``spark.plugins=
com.nvidia.spark.SQLPlugin``, a pinned host memory pool) for the rest of the Spark job. On CPU-only
clusters none of this is set and the same job runs with the CPU backend.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import Any

from .. import _args
from ..errors import BackendUnavailable, InvalidOption

DISCOVERY_SCRIPT = (
    "/opt/sparkRapidsPlugin/getGpusResources.sh"  # ships with Spark as examples/src/main/scripts
)


def rapids_conf(
    *,
    gpus_per_executor: int = 1,
    tasks_per_gpu: int = 1,
    discovery_script: str = DISCOVERY_SCRIPT,
    pinned_pool_bytes: int = 8 << 30,
    rapids_jar: str | None = None,
) -> dict[str, str]:
    """Session settings for a RAPIDS cluster: one GPU per executor by default, ``tasks_per_gpu``
    concurrent tasks sharing it (each asks for ``1 / tasks_per_gpu`` GPU)."""
    gpus_per_executor = _args.integer(gpus_per_executor, "gpus_per_executor", InvalidOption, minimum=1)
    tasks_per_gpu = _args.integer(tasks_per_gpu, "tasks_per_gpu", InvalidOption, minimum=1)
    pinned_pool_bytes = _args.integer(pinned_pool_bytes, "pinned_pool_bytes", InvalidOption, minimum=0)
    conf = {
        "spark.plugins": "com.nvidia.spark.SQLPlugin",
        "spark.executor.resource.gpu.amount": str(gpus_per_executor),
        "spark.executor.resource.gpu.discoveryScript": discovery_script,
        "spark.task.resource.gpu.amount": _share(tasks_per_gpu),
        "spark.rapids.memory.pinnedPool.size": str(pinned_pool_bytes),
        "spark.rapids.sql.concurrentGpuTasks": str(tasks_per_gpu),
        "spark.sql.execution.arrow.pyspark.enabled": "true",
    }
    if rapids_jar is not None:
        conf["spark.jars"] = rapids_jar
    return conf


def _share(tasks_per_gpu: int) -> str:
    return "1" if tasks_per_gpu == 1 else repr(1.0 / tasks_per_gpu)


def session(master: str | None = None, *, conf: Mapping[str, str] | None = None) -> Any:
    """The active Spark session (as spark-submit configures it), or a new one on ``master``
    (default ``local[*]``) with Python workers running this interpreter."""
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None and master is None:
        return active
    return local_session(master or "local[*]", conf=conf)


def local_session(
    master: str = "local[2,2]", *, conf: Mapping[str, str] | None = None, app_name: str = "gpu-engine"
) -> Any:
    """A Spark session running Python workers with this interpreter (``PYSPARK_PYTHON``); ``local[N,F]``
    runs N task slots and retries a failed task until F failures (plain ``local[N]`` never retries)."""
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    builder = SparkSession.builder.master(master).appName(app_name)
    settings = {"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "2", **(conf or {})}
    for key, value in settings.items():
        builder = builder.config(key, value)
    try:
        return builder.getOrCreate()
    except Exception as exc:  # a master Spark cannot parse or reach, a JVM that did not start
        from .runner import first_line

        raise BackendUnavailable(f"Spark could not start on master {master!r}: {first_line(exc)}") from None
