"""The Spark entry points: ``python -m gpu_engine.spark compact|scan`` (spark-submit's way in) and
``gpu-engine compact --spark``, run in-process on the test session; and the RAPIDS session settings."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import gpu_engine as ge
from gpu_engine.cli import main as cli_main
from gpu_engine.errors import InvalidOption
from gpu_engine.spark import rapids_conf
from gpu_engine.spark.__main__ import main as spark_main
from gpu_engine.spark.config import DISCOVERY_SCRIPT

NAME = "sparkcli"
README = Path(__file__).resolve().parents[2] / "README.md"


@pytest.fixture
def table_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, spark: Any) -> str:
    monkeypatch.setenv("PYICEBERG_HOME", str(tmp_path))
    monkeypatch.setenv(f"PYICEBERG_CATALOG__{NAME.upper()}__URI", f"sqlite:///{tmp_path / 'catalog.db'}")
    monkeypatch.setenv(f"PYICEBERG_CATALOG__{NAME.upper()}__WAREHOUSE", (tmp_path / "wh").as_uri())
    cat = ge.load_catalog(NAME)
    cat.create_namespace("db")
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), ("name", pa.string())])
    tbl = cat.create_table("db.t", schema=schema, properties={"format-version": "2"})
    for i in range(5):
        tbl.append(pa.table({"id": list(range(i * 10, i * 10 + 10)), "name": [f"n{i}"] * 10}, schema=schema))
    tbl.delete("id in (4, 44)")
    return "db.t"


def test_module_compact_and_scan(table_name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert spark_main(["compact", table_name, "--catalog", NAME, "--backend", "cpu", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["rewritten-data-files-count"] == 5 and report["added-data-files-count"] == 1
    assert spark_main(["scan", table_name, "--catalog", NAME, "--filter", "id < 20", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"rows": 19}
    out = tmp_path / "out"
    assert spark_main(["scan", table_name, "--catalog", NAME, "--columns", "id", "-o", str(out)]) == 0
    assert sorted(pq.read_table(out)["id"].to_pylist()) == [i for i in range(50) if i not in (4, 44)]


def test_module_scan_errors_are_named_and_json_is_json(
    table_name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Spark's own failures (an existing directory, columns Parquet cannot hold) came out as tracebacks;
    ``--json -o`` printed text."""
    out = tmp_path / "out"
    scan = ["scan", table_name, "--catalog", NAME]
    assert spark_main([*scan, "--columns", "id", "-o", str(out), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"output": str(out)}
    assert spark_main([*scan, "-o", str(out)]) == 2
    assert re.search(r"error: -o .*out: already exists", capsys.readouterr().err)
    assert spark_main([*scan, "--columns", "_partition", "-o", str(tmp_path / "empty")]) == 2
    assert re.search(
        r"error: -o .*empty: .*(empty|schema)", capsys.readouterr().err, re.IGNORECASE | re.DOTALL
    )
    assert spark_main([*scan, "--columns", ","]) == 2
    assert "--columns ',': expected distinct comma-separated column names" in capsys.readouterr().err


def test_cli_compact_spark(table_name: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["compact", table_name, "--catalog", NAME, "--spark", "--dry-run", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["planned-files"] == 5
    assert cli_main(["compact", table_name, "--catalog", NAME, "--master", "local[1]"]) == 2
    assert "--master goes with --spark" in capsys.readouterr().err


def _spark_jobs(spark: Any) -> dict[int, tuple[str, str]]:
    """The jobs Spark's status store (what its UI lists) has recorded: id -> (description, status)."""
    jobs = spark.sparkContext._jsc.sc().statusStore().jobsList(None)
    out = {}
    for i in range(jobs.length()):
        job = jobs.apply(i)
        description = job.description().get() if job.description().isDefined() else ""
        out[int(job.jobId())] = (str(description), str(job.status().toString()))
    return out


@pytest.mark.parametrize(
    "command", [["-m", "gpu_engine.spark", "scan"], ["-m", "gpu_engine.cli", "compact", "--spark"]]
)
def test_a_master_spark_cannot_use_is_named(spark: Any, table_name: str, command: list[str]) -> None:
    """A fresh process (the tests' session would be reused whatever the master): an error line naming the
    master and Spark's reason, not sixty lines of Java and Python traceback."""
    args = [sys.executable, *command, table_name, "--catalog", NAME, "--master", "local[x]"]
    done = subprocess.run(args, capture_output=True, text=True, timeout=300)  # the fixture's catalog env
    assert done.returncode == 2, done.stderr[-2000:]
    assert "Spark could not start on master 'local[x]'" in done.stderr
    assert "Could not parse Master URL" in done.stderr and "Traceback" not in done.stderr


def test_cli_compact_spark_rewrites_on_spark(
    table_name: str, spark: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """``gpu-engine compact --spark`` (not only its dry run): the group is rewritten by a Spark job (one per
    group, described by the runner), as many groups at once as the session has task slots (single-process
    compaction runs 1), and the rows are those appended less those deleted."""
    earlier = set(_spark_jobs(spark))
    assert cli_main(["compact", table_name, "--catalog", NAME, "--spark", "--backend", "cpu", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["rewritten-data-files-count"] == 5 and report["added-data-files-count"] == 1
    assert report["planned-groups"] == 1 and not report["failed-groups"]
    parallelism = spark.sparkContext.defaultParallelism
    assert parallelism > 1 and report["options"]["max-concurrent-file-group-rewrites"] == parallelism
    jobs = {k: v for k, v in _spark_jobs(spark).items() if k not in earlier}
    assert sorted(jobs.values()) == [("gpu-engine rewrite of file group 0", "SUCCEEDED")]
    tbl = ge.load_catalog(NAME).load_table(table_name)
    assert len(tbl.scan().plan().tasks) == 1
    expected = [(i, f"n{i // 10}") for i in range(50) if i not in (4, 44)]
    assert sorted(tbl.scan().to_arrow().to_pylist(), key=lambda r: r["id"]) == [
        {"id": i, "name": name} for i, name in expected
    ]


def test_rapids_conf() -> None:
    conf = rapids_conf(tasks_per_gpu=2, rapids_jar="/opt/rapids.jar")
    assert conf["spark.plugins"] == "com.nvidia.spark.SQLPlugin"
    assert conf["spark.executor.resource.gpu.amount"] == "1"
    assert conf["spark.task.resource.gpu.amount"] == "0.5"
    assert conf["spark.rapids.sql.concurrentGpuTasks"] == "2"
    assert conf["spark.jars"] == "/opt/rapids.jar"
    assert rapids_conf()["spark.task.resource.gpu.amount"] == "1"
    with pytest.raises(InvalidOption, match=r"gpus_per_executor=0: expected an integer >= 1"):
        rapids_conf(gpus_per_executor=0)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"gpus_per_executor": 0}, r"gpus_per_executor=0: expected an integer >= 1"),
        ({"tasks_per_gpu": "2"}, r"tasks_per_gpu='2': expected an integer >= 1, not str"),
        ({"tasks_per_gpu": 1.5}, r"tasks_per_gpu=1.5: expected an integer >= 1, not float"),
        ({"pinned_pool_bytes": -1}, r"pinned_pool_bytes=-1: expected an integer >= 0"),
    ],
)
def test_rapids_conf_refuses_bad_counts_naming_them(kwargs: dict[str, Any], message: str) -> None:
    """An InvalidOption naming the argument (a bare ValueError, a TypeError comparing '2' with 1, or a
    negative pinned pool written into the session settings before)."""
    with pytest.raises(InvalidOption, match=message):
        rapids_conf(**kwargs)


def _readme_spark_submit() -> tuple[dict[str, str], list[str]]:
    """The ``--conf key=value`` settings and ``--jars`` of the README's spark-submit example."""
    text = README.read_text()
    block = text[text.index("spark-submit --master") :]
    block = block[: block.index("```")]
    return dict(re.findall(r"--conf (\S+?)=(\S+)", block)), re.findall(r"--jars (\S+)", block)


def test_rapids_conf_is_the_readmes_spark_submit_gpu_settings() -> None:
    """The README says ``rapids_conf()`` returns its spark-submit example's GPU settings: one GPU per
    executor found by the discovery script at /opt/sparkRapidsPlugin/getGpusResources.sh, one per task,
    the RAPIDS plugin and its jar (the interpreter settings are the job's own)."""
    documented, jars = _readme_spark_submit()
    gpu = {k: v for k, v in documented.items() if not k.startswith("spark.pyspark.")}
    assert gpu["spark.executor.resource.gpu.discoveryScript"] == "/opt/sparkRapidsPlugin/getGpusResources.sh"
    assert set(gpu) == {
        "spark.executor.resource.gpu.amount",
        "spark.task.resource.gpu.amount",
        "spark.executor.resource.gpu.discoveryScript",
        "spark.plugins",
    }
    (jar,) = jars
    conf = rapids_conf(rapids_jar=jar)
    assert {k: conf[k] for k in gpu} == gpu
    assert conf["spark.jars"] == jar
    assert gpu["spark.executor.resource.gpu.discoveryScript"] == DISCOVERY_SCRIPT
    # the session sets executor resources; a standalone worker's own (spark.worker.resource.*) are the
    # worker daemon's configuration, which a session cannot change
    assert not [k for k in conf if k.startswith("spark.worker.")]
    custom = rapids_conf(discovery_script="/etc/spark/gpus.sh")
    assert custom["spark.executor.resource.gpu.discoveryScript"] == "/etc/spark/gpus.sh"


def test_rapids_conf_pinned_pool_is_a_byte_count() -> None:
    """``spark.rapids.memory.pinnedPool.size`` is a byte size (RAPIDS reads a bare number as bytes):
    8 GiB unless given, and the given number of bytes exactly (not GiB, not a float)."""
    assert rapids_conf()["spark.rapids.memory.pinnedPool.size"] == str(8 * 1024**3) == "8589934592"
    assert rapids_conf(pinned_pool_bytes=3 * 1024**3 + 1)["spark.rapids.memory.pinnedPool.size"] == (
        "3221225473"
    )
