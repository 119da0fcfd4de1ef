"""One local Spark session for the Spark tests: ``local[2,2]`` (two task slots; a task is retried once,
as on a cluster, where plain ``local[2]`` would never retry). Without Java the tests skip with the
reason, except under CI, where ``.ci/run`` installs it and a skip would hide a broken setup."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        if os.environ.get("CI"):
            pytest.fail("no Java runtime: .ci/run installs openjdk-17-jre-headless for the Spark tests")
        pytest.skip("no Java runtime on this machine (PySpark needs Java 17+; .ci/run installs it)")
    from gpu_engine.spark import local_session

    session = local_session("local[2,2]", app_name="gpu-engine-tests")
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()
