"""Data file locations as Iceberg Java's LocationProviders compute them; the expected paths are Java
1.11's, recorded file by file (hash directories included)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from gpu_engine.errors import InvalidProperty, UnsupportedFeature
from gpu_engine.io.locations import DataLocations, ObjectStoreLocations, entropy_dirs, location_provider

from ..commit._support import assert_all_readers, sql_catalog

WH = "s3://bucket/wh"
ON = {"write.object-storage.enabled": "true"}
FLAT = {**ON, "write.object-storage.partitioned-paths": "false"}
ALT = {**ON, "write.data.path": f"{WH}/alt-data"}


@pytest.mark.parametrize(
    ("table", "props", "name", "partition", "expected"),
    [
        ("ns/t", ON, "00000-28-3812449f-1cb2-488c-9cc3-8f96668c44cd-0-00001.parquet", None,
         "ns/t/data/1110/1011/1110/01000111/{name}"),
        ("ns/t", ON, "00000-34-96eea29b-37d5-44d2-8f8e-790fbe133349-0-00001.parquet", "cat=x",
         "ns/t/data/0001/1111/1111/10111111/cat=x/{name}"),
        ("ns/t", ON, "00000-34-96eea29b-37d5-44d2-8f8e-790fbe133349-0-00002.parquet", "cat=y",
         "ns/t/data/1001/1011/1111/11111010/cat=y/{name}"),
        ("ns/t", FLAT, "00000-39-afc298d7-6274-47c4-a229-c4bd98b470f7-0-00001.parquet", None,
         "ns/t/data/0001/1001/0110/10000001-{name}"),
        ("ns/t", FLAT, "00000-45-9205b7af-4125-4711-912d-a933510ba235-0-00001.parquet", "cat=x",
         "ns/t/data/0110/1101/0111/11111000-{name}"),  # the partition path left out
        ("ns/l_os_data_path", ALT, "00000-50-661c5ab6-de30-4594-858b-7f8d5fbc98e1-0-00001.parquet", None,
         "alt-data/1111/0011/1100/11110011/ns/l_os_data_path/{name}"),
        ("ns/p", ALT, "00000-56-c7fb03ac-63e3-46aa-8da7-1608d002a1a4-0-00001.parquet", "cat=x",
         "alt-data/0101/1111/0100/00101010/ns/p/cat=x/{name}"),
        ("ns/t", {"write.data.path": f"{WH}/alt-data2/"}, "f.parquet", "cat=x", "alt-data2/cat=x/{name}"),
        ("ns/t", {}, "f.parquet", None, "ns/t/data/{name}"),
    ],
)  # fmt: skip
def test_paths_are_javas(
    table: str, props: dict[str, str], name: str, partition: str | None, expected: str
) -> None:
    provider = location_provider(f"{WH}/{table}", props)
    assert isinstance(
        provider, ObjectStoreLocations if "write.object-storage.enabled" in props else DataLocations
    )
    assert provider.new_data_location(name, partition) == f"{WH}/" + expected.format(name=name)


def test_a_table_location_ending_in_a_slash_is_stripped_first() -> None:
    """Java's locationsFor strips it before the object store provider asks whether the data path lies
    under the table location (else the table's path segments were added as a context)."""
    props = {**ON, "write.data.path": f"{WH}/t/data"}
    assert location_provider(f"{WH}/t/", props).new_data_location("f.parquet", "d=1") == (
        location_provider(f"{WH}/t", props).new_data_location("f.parquet", "d=1")
    )


def test_a_table_one_level_below_a_root_has_javas_context() -> None:
    """Hadoop's Path("s3://bucket/").getName() is "": Java's context is "/t", hence the double slash."""
    props = {**ON, "write.data.path": "s3://other/data"}
    path = location_provider("s3://bucket/t", props).new_data_location("f.parquet", "cat=x")
    assert path == f"s3://other/data/{entropy_dirs('cat=x/f.parquet')}//t/cat=x/f.parquet"


def test_entropy_dirs_are_the_low_20_bits_of_murmur3() -> None:
    assert entropy_dirs("cat=y/00000-56-c7fb03ac-63e3-46aa-8da7-1608d002a1a4-0-00002.parquet") == (
        "0110/0010/1100/10100111"
    )


@pytest.mark.parametrize(
    ("props", "error", "match"),
    [
        (
            {"write.location-provider.impl": "com.x.Provider"},
            UnsupportedFeature,
            "write.location-provider.impl",
        ),
        (
            {"write.folder-storage.path": "/x"},
            InvalidProperty,
            "write.folder-storage.path='/x' is deprecated",
        ),
        ({**ON, "write.object-storage.path": "/x"}, InvalidProperty, "write.object-storage.path='/x'"),
        ({"write.object-storage.enabled": "yes"}, InvalidProperty, "write.object-storage.enabled='yes'"),
    ],
)
def test_what_java_refuses_or_cannot_run_is_refused(props: dict[str, str], error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        location_provider(f"{WH}/ns/t", props).new_data_location("f.parquet", None)


def test_a_deprecated_path_beside_write_data_path_is_not_read() -> None:
    props = {"write.data.path": "/d", "write.folder-storage.path": "/x"}
    assert location_provider("/t", props).new_data_location("f.parquet", None) == "/d/f.parquet"


def test_an_object_storage_table_is_written_and_read_by_every_reader(tmp_path: Path) -> None:
    schema = pa.schema([pa.field("id", pa.int64()), pa.field("cat", pa.string())])
    tbl = sql_catalog(tmp_path).create_table("db.o", schema, partition_spec=["cat"], properties=ON)
    data = pa.table({"id": [1, 2, 3], "cat": ["x", "y", "x"]}, schema=schema)
    tbl.append(data)
    tbl.compact(options={"rewrite-all": "true"})
    data_root = f"{tbl.location.rstrip('/')}/data/"
    for path in tbl.inspect.files()["file_path"].to_pylist():
        rest = path.removeprefix(data_root).split("/")
        assert all(len(d) == 4 and set(d) <= {"0", "1"} for d in rest[:3]) and len(rest[3]) == 8
        assert rest[4].startswith("cat=")
    assert_all_readers(tbl, data)
