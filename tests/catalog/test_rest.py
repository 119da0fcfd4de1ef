"""REST catalog client against a local in-memory REST catalog (tests/catalog/rest_server.py) on 127.0.0.1."""

from __future__ import annotations

import json
import re
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import gpu_engine as ge
from gpu_engine.catalog.rest import RestCatalog
from gpu_engine.catalog.rest_auth import TransportError, _parse_token_response, http_request
from gpu_engine.errors import (
    CatalogError,
    CommitConflict,
    CommitStateUnknown,
    NamespaceAlreadyExists,
    NamespaceNotEmpty,
    NoSuchNamespace,
    NoSuchTable,
    NotAuthorized,
    TableAlreadyExists,
    UnsupportedFeature,
)
from gpu_engine.iceberg.metadata import metadata_to_json

from .rest_server import ENDPOINTS, NS, RestCatalogServer

FIXTURES = Path(__file__).resolve().parents[2].parent / "shared" / "fixtures"
if not FIXTURES.is_dir():  # a missing fixture tree fails the run, never skips it
    raise RuntimeError(f"fixture tables not found at {FIXTURES}")
ORDERS = FIXTURES / "dremio-oss" / "iceberg" / "v2" / "orders" / "metadata" / "v3.metadata.json"
Json = dict[str, Any]
ORDERS_JSON: Json = json.loads(ORDERS.read_text())
UUID = ORDERS_JSON["table-uuid"]
SNAPSHOT = ORDERS_JSON["current-snapshot-id"]


@pytest.fixture
def server(tmp_path: Path) -> Iterator[RestCatalogServer]:
    srv = RestCatalogServer(tmp_path / "server").start()
    yield srv
    srv.stop()
    assert not srv.errors, srv.errors


def make_server(tmp_path: Path, request: pytest.FixtureRequest, **options: Any) -> RestCatalogServer:
    srv = RestCatalogServer(tmp_path / "server2", **options).start()

    def stop() -> None:
        srv.stop()
        assert not srv.errors, srv.errors

    request.addfinalizer(stop)
    return srv


def connect(srv: RestCatalogServer, **props: str) -> RestCatalog:
    props.setdefault("credential", "client:secret")
    return RestCatalog("test", uri=srv.url, **props)


@pytest.fixture
def cat(server: RestCatalogServer) -> RestCatalog:
    c = connect(server)
    c.create_namespace("db")
    c.register_table("db.orders", str(ORDERS))
    return c


def requirements(*, uuid: str = UUID, snapshot: int | None = SNAPSHOT, schema: int = 0) -> list[Json]:
    return [
        {"type": "assert-table-uuid", "uuid": uuid},
        {"type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": snapshot},
        {"type": "assert-current-schema-id", "current-schema-id": schema},
    ]


def set_props(**props: str) -> list[Json]:
    return [{"action": "set-properties", "updates": props}]


# -- configuration ---------------------------------------------------------------------------------------


def test_config_defaults_user_overrides_and_prefix(tmp_path: Path, request: pytest.FixtureRequest) -> None:
    srv = make_server(
        tmp_path,
        request,
        defaults={"clients": "4", "warehouse": "default-wh", "from": "default"},
        overrides={"from": "override", "namespace-separator": "%1F"},
    )
    c = connect(srv, warehouse="user-wh", prefix="mine", **{"from": "user"})
    # a token first: the config endpoint needs auth too
    assert [s.path for s in srv.seen] == ["/v1/oauth/tokens", "/v1/config"]
    assert srv.seen[1].query == {"warehouse": ["user-wh"]}
    assert c.properties["clients"] == "4"  # default kept
    assert c.properties["warehouse"] == "user-wh"  # user beats default
    assert c.properties["from"] == "override"  # override beats user
    assert c.prefix == "ws1"  # the server's prefix override, not the user's
    c.create_namespace("db")
    assert srv.seen[-1].path == "/v1/ws1/namespaces"


def test_a_prefix_a_path_cannot_hold_is_percent_encoded(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    srv = make_server(tmp_path, request, prefix="données x")  # a crash (non-ASCII), InvalidURL (space)
    c = connect(srv)
    c.create_namespace("db")
    assert c.list_namespaces() == [("db",)]
    assert srv.seen[-1].path == "/v1/donn%C3%A9es%20x/namespaces"


def test_a_request_that_cannot_be_built_was_not_sent(server: RestCatalogServer) -> None:
    """A header value a request line cannot hold fails before anything is sent (for a commit: not an
    unknown state)."""
    with pytest.raises(TransportError, match=r"cannot be sent: header 'X-Bad' holds a character") as info:
        http_request("GET", f"{server.url}/v1/config", headers={"X-Bad": "se\ncret"}, body=None, timeout=5)
    assert info.value.sent is False
    assert "se\ncret" not in str(info.value) and "cret" not in str(info.value)  # perhaps a credential


@pytest.mark.parametrize(
    ("props", "named"),
    [
        ({"token": "s3cr3t-TOKEN\n"}, "token"),
        ({"header.X-Api-Key": "k3y-SECRET\r\n"}, "header.X-Api-Key"),
    ],
)
def test_a_token_or_header_a_request_cannot_carry_is_named_not_shown(
    server: RestCatalogServer, props: dict[str, str], named: str
) -> None:
    """A token read from a file with its newline: the error printed it whole."""
    with pytest.raises(CatalogError, match=f"property {named}: its value holds a line break") as info:
        RestCatalog("c", uri=server.url, **props)
    assert "SECRET" not in str(info.value).upper().replace("A LINE BREAK", "")
    assert "s3cr3t" not in str(info.value) and "k3y" not in str(info.value)
    assert server.seen == []


@pytest.mark.parametrize("prop", ["uri", "oauth2-server-uri"])
def test_a_password_in_a_url_is_refused_not_shown(server: RestCatalogServer, prop: str) -> None:
    """``user:password@`` in the URL was not sent (silently) and printed whole in connection errors."""
    url = server.url.replace("http://", "http://alice:pa55word@") + (
        "/v1/oauth/tokens" if prop != "uri" else ""
    )
    props = {"uri": server.url, "credential": "client:secret", prop: url}
    with pytest.raises(
        CatalogError, match=f"property {prop}=.*alice:\\*\\*\\*@.*credential= or token="
    ) as info:
        RestCatalog("c", **props)
    assert "pa55word" not in str(info.value)
    with pytest.raises(CatalogError) as info:
        RestCatalog("c", uri="ftp://bob:hunter2@host")
    assert "hunter2" not in str(info.value)


def test_the_file_io_shows_no_credentials(server: RestCatalogServer) -> None:
    """``repr(catalog)`` hid them, the IO it holds printed every one (tracebacks, debuggers, logs)."""
    c = connect(server, **{"s3.secret-access-key": "S3-SECRET-KEY"})
    assert "S3-SECRET-KEY" not in repr(c.io) and "client:secret" not in repr(c.io)
    assert "S3-SECRET-KEY" not in str(c.io)


@pytest.mark.parametrize("name", [".", ".."])
def test_dot_segments_are_refused_before_any_request(server: RestCatalogServer, name: str) -> None:
    """``DELETE /v1/namespaces/ns/tables/..`` is ``DELETE /v1/namespaces/ns`` to a server or proxy that
    normalises the path."""
    c = connect(server)
    server.seen.clear()
    with pytest.raises(CatalogError, match=f"table name '{re.escape(name)}' cannot be sent"):
        c.drop_table(("db", name))
    with pytest.raises(CatalogError, match=f"namespace level '{re.escape(name)}' cannot be sent"):
        c.load_table((name, "t"))
    with pytest.raises(CatalogError, match="cannot be sent"):
        c.drop_namespace(("db", name))
    assert server.seen == []


def test_load_catalog_dispatches_rest(server: RestCatalogServer) -> None:
    c = ge.load_catalog("via-config", type="rest", uri=server.url, credential="client:secret")
    assert isinstance(c, RestCatalog) and c.prefix == "ws1"


def test_header_properties_are_sent(server: RestCatalogServer) -> None:
    connect(server, **{"header.X-Tenant": "t1"}).list_namespaces()
    assert all(s.headers.get("x-tenant") == "t1" for s in server.seen if s.path != "/v1/oauth/tokens")


def test_bad_uri_and_sigv4_refused() -> None:
    with pytest.raises(CatalogError, match="needs uri"):
        RestCatalog("x", uri="ftp://host")
    with pytest.raises(UnsupportedFeature, match="sigv4"):
        RestCatalog("x", uri="http://127.0.0.1:1", **{"rest.sigv4-enabled": "true"})


# -- authentication --------------------------------------------------------------------------------------


def test_oauth_client_credentials(server: RestCatalogServer) -> None:
    c = connect(server, scope="catalog:read")
    c.list_namespaces()
    assert server.token_forms == [
        {
            "grant_type": "client_credentials",
            "client_id": "client",
            "client_secret": "secret",
            "scope": "catalog:read",
        }
    ]
    token = server.seen[1].headers["authorization"]
    assert token.startswith("Bearer ") and all(s.headers["authorization"] == token for s in server.seen[1:])


def test_oauth_bad_secret_is_not_authorized(server: RestCatalogServer) -> None:
    with pytest.raises(NotAuthorized, match=r"POST /v1/oauth/tokens -> HTTP 401: invalid_client"):
        connect(server, credential="client:wrong")


def test_token_refreshed_before_expiry(tmp_path: Path, request: pytest.FixtureRequest) -> None:
    srv = make_server(tmp_path, request, token_ttl_s=1)
    c = connect(srv)
    c.list_namespaces()
    time.sleep(1.05)  # expired on the server: the client fetches a new token *before* the request
    c.list_namespaces()
    assert len(srv.token_forms) == 2
    assert [s.path for s in srv.seen].count("/v1/ws1/namespaces") == 2  # no 401 and retry


def test_401_once_reauthenticates_once(server: RestCatalogServer) -> None:
    c = connect(server)
    c.create_namespace("db")
    server.faults.append("unauthorized")
    assert c.list_namespaces() == [("db",)]
    assert len(server.token_forms) == 2
    assert [s.method for s in server.seen if s.path == "/v1/ws1/namespaces"] == ["POST", "GET", "GET"]


def test_persistent_401_raises_after_one_reauth(server: RestCatalogServer) -> None:
    c = connect(server)
    server.faults += ["unauthorized", "unauthorized"]
    with pytest.raises(NotAuthorized, match=r"GET /v1/ws1/namespaces -> HTTP 401 NotAuthorizedException"):
        c.list_namespaces()
    assert len(server.token_forms) == 2


def test_static_token_is_not_retried(tmp_path: Path, request: pytest.FixtureRequest) -> None:
    srv = make_server(tmp_path, request, static_tokens=("tok",))
    c = RestCatalog("static", uri=srv.url, token="tok")
    assert srv.seen[0].headers["authorization"] == "Bearer tok"
    srv.faults.append("unauthorized")
    with pytest.raises(NotAuthorized, match="token revoked"):
        c.list_namespaces()
    assert len([s for s in srv.seen if s.path == "/v1/ws1/namespaces"]) == 1
    assert not srv.token_forms


# -- namespaces ------------------------------------------------------------------------------------------


def test_namespaces(server: RestCatalogServer) -> None:
    c = connect(server)
    c.create_namespace("a", {"owner": "me"})
    c.create_namespace(("a", "b"))
    c.create_namespace(("a", "b", "c/d"))
    c.create_namespace("z")
    with pytest.raises(NamespaceAlreadyExists, match="POST /v1/ws1/namespaces -> HTTP 409 AlreadyExists"):
        c.create_namespace("a")
    assert c.list_namespaces() == [("a",), ("z",)]
    assert c.list_namespaces("a") == [("a", "b")]
    assert c.list_namespaces(("a", "b")) == [("a", "b", "c/d")]
    assert server.seen[-1].query["parent"] == ["a\x1fb"]
    assert c.load_namespace_properties("a") == {"owner": "me"}
    assert c.namespace_exists(("a", "b", "c/d")) and not c.namespace_exists("nope")
    assert server.seen[-2].method == "HEAD" and server.seen[-2].path == "/v1/ws1/namespaces/a%1Fb%1Fc%2Fd"
    update = c.update_namespace_properties("a", removals=["owner", "ghost"], updates={"k": "v"})
    assert (update.updated, update.removed, update.missing) == (("k",), ("owner",), ("ghost",))
    assert c.load_namespace_properties("a") == {"k": "v"}
    with pytest.raises(NamespaceNotEmpty, match="DELETE /v1/ws1/namespaces/a -> HTTP 409"):
        c.drop_namespace("a")
    c.drop_namespace("z")
    with pytest.raises(NoSuchNamespace, match="NoSuchNamespaceException: Namespace does not exist: z"):
        c.drop_namespace("z")
    with pytest.raises(NoSuchNamespace):
        c.list_namespaces("z")


def test_custom_namespace_separator_and_get_fallback(tmp_path: Path, request: pytest.FixtureRequest) -> None:
    srv = make_server(tmp_path, request, overrides={"namespace-separator": "%2E"}, endpoints=None)
    c = connect(srv)
    c.create_namespace("a")
    c.create_namespace(("a", "b"))
    assert c.namespace_exists(("a", "b"))
    assert (srv.seen[-1].method, srv.seen[-1].path) == ("GET", "/v1/ws1/namespaces/a%2Eb")  # no HEAD listed
    assert c.list_namespaces("a") == [("a", "b")]
    c.register_table(("a", "b", "orders"), str(ORDERS))
    assert c.table_exists("a.b.orders") and srv.seen[-1].method == "GET"
    with pytest.raises(CatalogError, match="separator"):
        c.create_namespace(("x.y", "z"))


def test_pagination(server: RestCatalogServer) -> None:
    c = connect(server, **{"rest-page-size": "2"})
    c.create_namespace("db")
    for i in range(5):
        c.register_table(("db", f"t{i}"), str(ORDERS))
    assert c.list_tables("db") == [("db", f"t{i}") for i in range(5)]
    pages = [s.query["pageToken"] for s in server.seen if s.path == "/v1/ws1/namespaces/db/tables"]
    assert pages == [[""], ["2"], ["4"]]


# -- tables ----------------------------------------------------------------------------------------------


def test_register_load_list_drop(server: RestCatalogServer, cat: RestCatalog) -> None:
    table = cat.load_table("db.orders")
    assert table.metadata_location == str(ORDERS)
    assert metadata_to_json(table.metadata) == ORDERS_JSON
    assert table.catalog is cat and table.identifier == ("db", "orders")
    assert cat.list_tables("db") == [("db", "orders")]
    assert cat.table_exists("db.orders") and not cat.table_exists("db.nope")
    assert server.seen[-1].method == "HEAD"
    with pytest.raises(TableAlreadyExists, match="POST /v1/ws1/namespaces/db/register -> HTTP 409"):
        cat.register_table("db.orders", str(ORDERS))
    with pytest.raises(NoSuchNamespace, match="NoSuchNamespaceException"):
        cat.register_table("nope.orders", str(ORDERS))
    cat.rename_table("db.orders", "db.orders2")
    assert cat.list_tables("db") == [("db", "orders2")]
    cat.drop_table("db.orders2")
    with pytest.raises(
        NoSuchTable, match=r"GET /v1/ws1/namespaces/db/tables/orders2 -> HTTP 404 NoSuchTable"
    ):
        cat.load_table("db.orders2")
    with pytest.raises(NoSuchTable):
        cat.drop_table("db.orders2")


def test_table_config_configures_table_io(server: RestCatalogServer, cat: RestCatalog) -> None:
    assert cat.load_table("db.orders").io is cat.io
    server.table_config = {"s3.region": "eu-west-1"}
    io = cat.load_table("db.orders").io
    assert io is not cat.io and getattr(io, "properties", {}).get("s3.region") == "eu-west-1"


def test_refresh_renews_the_tables_config_and_credentials(
    server: RestCatalogServer, cat: RestCatalog
) -> None:
    """Vended credentials expire: a refresh (every commit retry does one) takes the load response's."""
    server.table_config = {"s3.session-token": "TOKEN-A"}
    tbl = cat.load_table("db.orders")
    assert getattr(tbl.io, "properties", {}).get("s3.session-token") == "TOKEN-A"
    server.table_config = {"s3.session-token": "TOKEN-B"}
    assert tbl.refresh() is tbl
    assert getattr(tbl.io, "properties", {}).get("s3.session-token") == "TOKEN-B"


def test_a_table_token_authorizes_the_requests_on_the_table(
    server: RestCatalogServer, cat: RestCatalog
) -> None:
    """The load response's config token is the bearer of that table's requests (loads, commits); once it
    is refused, the catalog's token is used."""
    server.tokens["TABLE-T"] = None
    server.table_config = {"token": "TABLE-T"}
    tbl = cat.load_table("db.orders")
    server.seen.clear()
    cat.commit_table(
        "db.orders", requirements=[], updates=[{"action": "set-properties", "updates": {"a": "1"}}]
    )
    cat.load_table("db.orders")
    assert [s.headers.get("authorization") for s in server.seen] == ["Bearer TABLE-T"] * 2
    del server.tokens["TABLE-T"]  # expired
    server.seen.clear()
    cat.commit_table(
        "db.orders", requirements=[], updates=[{"action": "set-properties", "updates": {"b": "2"}}]
    )
    auth = [s.headers.get("authorization") for s in server.seen]
    assert auth[0] == "Bearer TABLE-T" and auth[1] != "Bearer TABLE-T" and len(auth) == 2
    assert cat.load_table("db.orders").metadata.properties["b"] == "2" and tbl.identifier == ("db", "orders")


def test_a_refused_table_token_is_forgotten_and_the_catalogs_fetched_again(
    server: RestCatalogServer, cat: RestCatalog
) -> None:
    """Both the table's token and the catalog's expired: the request was sent with the table's, then
    with the catalog's stale one, and failed, on every later call (the table's token kept)."""
    server.tokens["TABLE-T"] = None
    server.table_config = {"token": "TABLE-T"}
    cat.load_table("db.orders")
    server.table_config = {}
    server.tokens.clear()  # every token expires (a server restart)
    server.seen.clear()
    fetched = len(server.token_forms)
    assert cat.load_table("db.orders").metadata.table_uuid == UUID
    auth = [s.headers.get("authorization") for s in server.seen if s.path != "/v1/oauth/tokens"]
    assert auth[0] == "Bearer TABLE-T" and len(auth) == 3 and "Bearer TABLE-T" not in auth[1:]
    assert len(server.token_forms) == fetched + 1
    server.seen.clear()
    cat.load_table("db.orders")  # the catalog's new token, the table's forgotten: one request
    assert [s.headers.get("authorization") for s in server.seen] == [auth[2]]


def test_a_404_names_what_is_missing(server: RestCatalogServer, cat: RestCatalog) -> None:
    """By the server's error type, as Java's error handlers: a rename into a missing namespace."""
    with pytest.raises(NoSuchNamespace, match="NoSuchNamespaceException"):
        cat.rename_table("db.orders", "nope.orders")
    with pytest.raises(NoSuchTable):
        cat.rename_table("db.missing", "db.other")
    assert not cat.table_exists("nope.orders") and not cat.table_exists("db.missing")


def test_read_restrictions_are_refused(server: RestCatalogServer, cat: RestCatalog) -> None:
    server.read_restrictions = {"required-row-filter": {"type": "eq", "term": "id", "value": 1}}
    with pytest.raises(UnsupportedFeature, match="read-restrictions"):
        cat.load_table("db.orders")


def test_non_json_error_body(server: RestCatalogServer, cat: RestCatalog) -> None:
    server.faults.append("plain-500")
    with pytest.raises(
        CatalogError, match=r"GET /v1/ws1/namespaces/db/tables -> HTTP 500 .*upstream proxy exploded"
    ):
        cat.list_tables("db")


# -- commits ---------------------------------------------------------------------------------------------


def test_commit_sets_and_removes_properties(server: RestCatalogServer, cat: RestCatalog) -> None:
    committed = cat.commit_table("db.orders", requirements=requirements(), updates=set_props(a="1", b="2"))
    first = committed.metadata_location
    assert committed.properties == {"a": "1", "b": "2"}
    assert committed.metadata_location != str(ORDERS) and Path(committed.metadata_location).is_file()
    assert cat.load_table("db.orders").properties == {"a": "1", "b": "2"}
    removal = [{"action": "remove-properties", "removals": ["a"]}]
    cat.commit_table("db.orders", requirements=requirements(), updates=removal)
    reloaded = cat.load_table("db.orders")
    assert reloaded.properties == {"b": "2"}
    assert reloaded.metadata.snapshots == committed.metadata.snapshots
    stale = committed.refresh()  # Table.refresh goes through current_metadata_location
    assert stale.properties == {"b": "2"}
    body = json.loads(Path(reloaded.metadata_location).read_text())
    assert body["metadata-log"][-1]["metadata-file"] == first
    assert stale.metadata_location == reloaded.metadata_location


@pytest.mark.parametrize(
    ("reqs", "named"),
    [
        (requirements(snapshot=1234), "assert-ref-snapshot-id: branch main has changed: expected id 1234"),
        (requirements(snapshot=None), "assert-ref-snapshot-id: branch or tag main was created concurrently"),
        (requirements(uuid="00000000-0000-0000-0000-000000000000"), "assert-table-uuid"),
        (requirements(schema=7), "assert-current-schema-id: current schema changed: expected id 7 != 0"),
        ([{"type": "assert-create"}], "assert-create"),
    ],
)
def test_failed_requirement_is_conflict_and_changes_nothing(
    server: RestCatalogServer, cat: RestCatalog, reqs: list[dict[str, Any]], named: str
) -> None:
    before = cat.load_table("db.orders").metadata_location
    with pytest.raises(CommitConflict, match=r"POST /v1/ws1/namespaces/db/tables/orders -> HTTP 409") as info:
        cat.commit_table("db.orders", requirements=reqs, updates=set_props(x="y"))
    assert named in str(info.value)
    after = cat.load_table("db.orders")
    assert after.metadata_location == before and after.properties == {}


def test_commit_503_after_apply_is_unknown(server: RestCatalogServer, cat: RestCatalog) -> None:
    server.faults.append("commit-503")
    with pytest.raises(CommitStateUnknown, match=r"HTTP 503 SlowDownException: Slow down"):
        cat.commit_table("db.orders", requirements=requirements(), updates=set_props(x="y"))
    assert cat.load_table("db.orders").properties == {"x": "y"}  # it did land: never clean up


def test_commit_connection_dropped_after_send_is_unknown(server: RestCatalogServer, cat: RestCatalog) -> None:
    server.faults.append("commit-drop")
    with pytest.raises(CommitStateUnknown, match="after the request was sent"):
        cat.commit_table("db.orders", requirements=requirements(), updates=set_props(x="y"))
    assert len([s for s in server.seen if s.method == "POST" and s.path.endswith("/orders")]) == 1  # no retry


def test_commit_timeout_is_unknown(tmp_path: Path, request: pytest.FixtureRequest) -> None:
    srv = make_server(tmp_path, request, slow_s=3.0)
    c = connect(srv, timeout="0.5")
    c.create_namespace("db")
    c.register_table("db.orders", str(ORDERS))
    srv.faults.append("commit-slow")
    with pytest.raises(CommitStateUnknown, match="timed out after the request was sent"):
        c.commit_table("db.orders", requirements=requirements(), updates=set_props(x="y"))
    srv.release.set()


def test_commit_not_sent_is_plain_failure(server: RestCatalogServer, cat: RestCatalog) -> None:
    with socket.socket() as s:  # a port with nothing listening
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cat._client.uri = f"http://127.0.0.1:{port}"
    with pytest.raises(CatalogError, match="cannot connect") as info:
        cat.commit_table("db.orders", requirements=requirements(), updates=set_props(x="y"))
    assert not isinstance(info.value, CommitStateUnknown)


def test_commit_missing_table_and_bad_update(server: RestCatalogServer, cat: RestCatalog) -> None:
    with pytest.raises(NoSuchTable, match="NoSuchTableException"):
        cat.commit_table("db.nope", requirements=[], updates=set_props(x="y"))
    bad = [{"action": "set-location", "location": "/elsewhere"}]
    with pytest.raises(CatalogError, match="HTTP 400 BadRequestException: unsupported update action") as info:
        cat.commit_table("db.orders", requirements=requirements(), updates=bad)
    assert not isinstance(info.value, CommitStateUnknown | CommitConflict)
    with pytest.raises(CatalogError, match="needs a 'action'"):
        cat.commit_table("db.orders", requirements=[], updates=[{"updates": {}}])


def test_commit_401_once_reauthenticates(server: RestCatalogServer, cat: RestCatalog) -> None:
    server.faults.append("unauthorized")
    assert cat.commit_table(
        "db.orders", requirements=requirements(), updates=set_props(x="y")
    ).properties == {"x": "y"}
    assert len(server.token_forms) == 2


def test_commit_metadata_pointer_swap_is_unsupported(server: RestCatalogServer, cat: RestCatalog) -> None:
    with pytest.raises(UnsupportedFeature, match="commit_table"):
        cat.commit_metadata("db.orders", str(ORDERS), "/elsewhere/v4.metadata.json")
    assert cat.commit_metadata("db.created", None, str(ORDERS)) == str(ORDERS)  # create = register
    assert cat.load_table("db.created").metadata.table_uuid == UUID
    with pytest.raises(CommitConflict, match="HTTP 409"):
        cat.commit_metadata("db.created", None, str(ORDERS))


def test_a_server_without_table_commits_refuses_writes_before_any_file(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """A read-only catalog (no POST on tables): a write fails before writing data or manifests."""
    srv = make_server(
        tmp_path, request, endpoints=[e for e in ENDPOINTS if e != f"POST {NS}/tables/{{table}}"]
    )
    c = connect(srv, warehouse=str(tmp_path / "wh"))
    c.create_namespace("db")
    tbl = c.create_table("db.t", pa.schema([pa.field("id", pa.int64())]))
    before = {p for p in Path(tbl.location).rglob("*") if p.is_file()}
    with pytest.raises(UnsupportedFeature, match=r"does not offer POST .*/tables/\{table\}"):
        tbl.append(pa.table({"id": pa.array([1], pa.int64())}))
    assert {p for p in Path(tbl.location).rglob("*") if p.is_file()} == before


def test_server_endpoint_list_is_respected(tmp_path: Path, request: pytest.FixtureRequest) -> None:
    srv = make_server(tmp_path, request, endpoints=[e for e in ENDPOINTS if "register" not in e])
    c = connect(srv)
    c.create_namespace("db")
    with pytest.raises(
        UnsupportedFeature, match=r"does not offer POST /v1/\{prefix\}/namespaces/\{namespace\}/register"
    ):
        c.register_table("db.orders", str(ORDERS))


@pytest.mark.parametrize(
    ("expires_in", "seconds"), [(3599, 3599.0), ("3599", 3599.0), (None, None), (1.5, 1.5)]
)
def test_expires_in_as_a_number_or_a_numeric_string(expires_in: object, seconds: float | None) -> None:
    """The spec says a number; Azure AD v1 sends a string of digits (PyIceberg takes it)."""
    body = json.dumps({"access_token": "t", "token_type": "bearer", "expires_in": expires_in}).encode()
    assert _parse_token_response(body, "where") == ("t", seconds)


@pytest.mark.parametrize("expires_in", ["soon", True, "-5", [1], "\u00b2", "\u2460"])
def test_expires_in_that_is_no_number_of_seconds_is_refused(expires_in: object) -> None:
    body = json.dumps({"access_token": "t", "token_type": "bearer", "expires_in": expires_in}).encode()
    with pytest.raises(CatalogError, match=r"where: expires_in .* is not a number of seconds"):
        _parse_token_response(body, "where")
