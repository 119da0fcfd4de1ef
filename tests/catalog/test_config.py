"""Catalog configuration the PyIceberg way: ~/.pyiceberg.yaml, $PYICEBERG_HOME, PYICEBERG_* env vars."""

from __future__ import annotations

import importlib
import os
import sys
import types
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

import gpu_engine as ge
from gpu_engine.catalog.config import infer_catalog_type, load_config, resolve_catalog_config
from gpu_engine.catalog.filesystem import FileSystemCatalog
from gpu_engine.catalog.sql import SqlCatalog
from gpu_engine.errors import CatalogError, InvalidOption, UnsupportedFeature


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An isolated environment: no PYICEBERG_* variables, HOME and the working directory in tmp_path."""
    for var in list(os.environ):
        if var.lower().startswith("pyiceberg_"):
            monkeypatch.delenv(var)
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    return tmp_path


def write_yaml(directory: Path, text: str) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / ".pyiceberg.yaml").write_text(text)


def test_yaml_in_home(env: Path) -> None:
    write_yaml(
        env / "home", "catalog:\n  Prod:\n    URI: sqlite:////tmp/x.db\n    warehouse: file:///tmp/wh\n"
    )
    cfg = resolve_catalog_config("prod")
    assert cfg.type == "sql"
    assert dict(cfg.properties) == {"uri": "sqlite:////tmp/x.db", "warehouse": "file:///tmp/wh"}


def test_pyiceberg_home_wins_over_home_and_cwd_is_last(env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_yaml(env / "work", "catalog:\n  c:\n    uri: http://cwd\n")
    assert resolve_catalog_config("c").properties["uri"] == "http://cwd"
    write_yaml(env / "home", "catalog:\n  c:\n    uri: http://home\n")
    assert resolve_catalog_config("c").properties["uri"] == "http://home"
    write_yaml(env / "pyhome", "catalog:\n  c:\n    uri: http://pyiceberg-home\n")
    monkeypatch.setenv("PYICEBERG_HOME", str(env / "pyhome"))
    assert resolve_catalog_config("c").properties["uri"] == "http://pyiceberg-home"


def test_empty_yaml_falls_through_to_the_next_directory(env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_yaml(env / "pyhome", "")
    write_yaml(env / "home", "catalog:\n  c:\n    uri: http://home\n")
    monkeypatch.setenv("PYICEBERG_HOME", str(env / "pyhome"))
    assert resolve_catalog_config("c").properties["uri"] == "http://home"


def test_yaml_scalars_stay_strings(env: Path) -> None:
    write_yaml(env / "home", "catalog:\n  c:\n    uri: http://x\n    echo: true\n    pool-size: 5\n")
    props = resolve_catalog_config("c").properties
    assert props["echo"] == "true" and props["pool-size"] == "5"


def test_env_vars_nest_on_double_underscore(env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYICEBERG_CATALOG__PROD__URI", "postgresql://u:p@db/iceberg")
    monkeypatch.setenv("PYICEBERG_CATALOG__PROD__S3__ACCESS_KEY_ID", "AKIA")
    monkeypatch.setenv("PYICEBERG_CATALOG__PROD__PY_IO_IMPL", "x.y")
    monkeypatch.setenv("pyiceberg_catalog__prod__warehouse", "s3://b/wh")  # case-insensitive prefix
    cfg = resolve_catalog_config("PROD")
    assert cfg.type == "sql"
    assert dict(cfg.properties) == {
        "uri": "postgresql://u:p@db/iceberg",
        "s3.access-key-id": "AKIA",
        "py-io-impl": "x.y",
        "warehouse": "s3://b/wh",
    }


def test_env_overrides_yaml_even_when_empty_and_keywords_override_both(
    env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_yaml(env / "home", "catalog:\n  c:\n    uri: http://yaml\n    warehouse: /yaml/wh\n    token: t\n")
    monkeypatch.setenv("PYICEBERG_CATALOG__C__URI", "http://env")
    monkeypatch.setenv("PYICEBERG_CATALOG__C__WAREHOUSE", "")  # blanks the file's value, as in PyIceberg
    props = resolve_catalog_config("c").properties
    assert props["uri"] == "http://env" and props["warehouse"] == ""
    theirs = importlib.import_module("pyiceberg.utils.config").Config().get_catalog_config("c")
    assert {k: props[k] for k in ("uri", "warehouse", "token")} == {
        k: theirs[k] for k in ("uri", "warehouse", "token")
    }
    props = resolve_catalog_config("c", uri="http://kw", token=None).properties
    assert props["uri"] == "http://kw" and props["token"] == "t"


def test_default_catalog_name(env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_yaml(env / "home", "default-catalog: prod\ncatalog:\n  prod:\n    uri: http://prod\n")
    assert resolve_catalog_config().name == "prod"
    monkeypatch.setenv("PYICEBERG_DEFAULT_CATALOG", "other")
    monkeypatch.setenv("PYICEBERG_CATALOG__OTHER__URI", "http://other")
    cfg = resolve_catalog_config()
    assert (cfg.name, cfg.properties["uri"]) == ("other", "http://other")


def test_matches_pyiceberg_config(env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Our merged configuration equals PyIceberg's own Config on the same files and environment."""
    pyiceberg_config = importlib.import_module("pyiceberg.utils.config")
    write_yaml(
        env / "home",
        "Default-Catalog: a\ncatalog:\n  A:\n    uri: http://yaml\n    S3.Endpoint: http://minio\n"
        "  b:\n    uri: sqlite:////tmp/b.db\n",
    )
    monkeypatch.setenv("PYICEBERG_CATALOG__A__URI", "http://env")
    monkeypatch.setenv("PYICEBERG_CATALOG__A__S3__SECRET_ACCESS_KEY", "s")
    monkeypatch.setenv("PYICEBERG_CATALOG__NEW__TYPE", "rest")
    monkeypatch.setenv("PYICEBERG_MAX_WORKERS", "4")

    def plain(d: Any) -> Any:
        return {k: plain(v) for k, v in d.items()} if isinstance(d, dict) else d

    assert load_config() == plain(dict(pyiceberg_config.Config().config))


def test_env_value_under_a_scalar_is_an_error(env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_yaml(env / "home", "catalog: flat\n")
    monkeypatch.setenv("PYICEBERG_CATALOG__C__URI", "http://x")
    with pytest.raises(CatalogError, match="PYICEBERG_CATALOG__C__URI"):
        load_config()


@pytest.mark.parametrize(
    ("uri", "expected"),
    [
        ("http://rest:8181", "rest"),
        ("https://rest/api/catalog", "rest"),
        ("sqlite:///wh/catalog.db", "sql"),
        ("postgresql+psycopg2://u@db/x", "sql"),
        ("thrift://hms:9083", "hive"),
    ],
)
def test_type_inference(uri: str, expected: str) -> None:
    assert infer_catalog_type("c", {"uri": uri}) == expected


def test_type_inference_errors_name_the_fix(env: Path) -> None:
    with pytest.raises(CatalogError, match="cannot infer"):
        infer_catalog_type("c", {"uri": "mysql://db"})
    with pytest.raises(CatalogError, match="PYICEBERG_CATALOG__MISSING__URI"):
        resolve_catalog_config("missing")
    with pytest.raises(CatalogError, match="needs a uri"):
        resolve_catalog_config("c", type="REST")


def test_load_catalog_sql_from_env(env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    db = env / "cat" / "catalog.db"
    monkeypatch.setenv("PYICEBERG_CATALOG__LOCAL__URI", f"sqlite:///{db}")
    cat = ge.load_catalog("local")
    assert isinstance(cat, SqlCatalog) and cat.name == "local"
    cat.create_namespace("db")
    assert cat.list_namespaces() == [("db",)]
    assert db.exists()
    cat.close()


def test_load_catalog_keywords_and_in_memory(env: Path) -> None:
    cat = ge.load_catalog("mem", type="in-memory")
    assert isinstance(cat, SqlCatalog)
    cat.create_namespace(("a", "b"))
    assert cat.list_namespaces(("a",)) == [("a", "b")]
    fs = ge.load_catalog("files", type="filesystem", warehouse=str(env / "wh"))
    assert isinstance(fs, FileSystemCatalog)


def test_the_in_memory_catalog_is_one_catalog_for_every_thread(env: Path) -> None:
    """SQLite in memory is a database per connection, and the default pool gave each thread its own:
    another thread saw no tables ("no such table: iceberg_tables"). Threads committing at once all land."""
    import pyarrow as pa

    cat = ge.load_catalog("mem", type="in-memory", warehouse=(env / "wh").as_uri())
    cat.create_namespace("db")
    tbl = cat.create_table("db.t", pa.schema([("id", pa.int64())]))
    tbl.append(pa.table({"id": [1, 2, 3]}))

    def work(i: int) -> int:
        cat.load_table("db.t").append(pa.table({"id": [10 + i]}))
        return int(cat.load_table("db.t").scan().to_arrow().num_rows)

    with ThreadPoolExecutor(4) as pool:
        seen = list(pool.map(work, range(4)))
    assert all(n >= 4 for n in seen)
    assert sorted(cat.load_table("db.t").scan().to_arrow()["id"].to_pylist()) == [1, 2, 3, 10, 11, 12, 13]


def test_load_catalog_dispatches_rest_lazily(env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    created: list[tuple[str, dict[str, str]]] = []

    class FakeRestCatalog:
        def __init__(self, name: str, **props: str) -> None:
            created.append((name, props))

    module = types.ModuleType("gpu_engine.catalog.rest")
    module.RestCatalog = FakeRestCatalog  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "gpu_engine.catalog.rest", module)
    monkeypatch.setenv("PYICEBERG_CATALOG__R__URI", "http://localhost:8181")
    cat = ge.load_catalog("r", token="secret")
    assert isinstance(cat, FakeRestCatalog)
    assert created == [("r", {"uri": "http://localhost:8181", "token": "secret"})]


def test_unsupported_type(env: Path) -> None:
    with pytest.raises(UnsupportedFeature, match="'hive' is not supported"):
        ge.load_catalog("h", uri="thrift://hms:9083")


@pytest.mark.parametrize("name", [5, b"x", ("x",)], ids=repr)
def test_a_catalog_name_that_is_not_a_string_is_named(env: Path, name: object) -> None:
    """A CatalogError naming the argument ('int' object has no attribute 'lower' before)."""
    with pytest.raises(CatalogError, match=r"catalog name=.*: expected a string"):
        ge.load_catalog(name, type="in-memory")  # type: ignore[arg-type]


@pytest.mark.parametrize("path_map", [[("a", "b")], "a=b", {"a": 5}], ids=repr)
def test_a_path_map_that_is_not_a_mapping_of_strings_is_named(env: Path, path_map: object) -> None:
    """InvalidOption naming path_map (AttributeError on .items before)."""
    with pytest.raises(InvalidOption, match=r"path_map"):
        ge.load_catalog("x", type="in-memory", path_map=path_map)  # type: ignore[arg-type]
