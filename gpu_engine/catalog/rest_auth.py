"""HTTP transport, authentication and error mapping of the REST catalog client (stdlib only).

Transport: one ``http.client`` connection per request (the module ``urllib.request`` wraps). ``urlopen``
reports a refused connection and a connection reset mid-request alike (``URLError``), but a commit must
tell "never sent" (an ordinary failure: nothing changed) from "sent, no answer" (the commit may have
landed: :class:`~gpu_engine.errors.CommitStateUnknown`). So the connection is opened first, on its own:
a failure there is a :class:`TransportError` with ``sent=False``; a failure while sending, waiting for or
reading the response has ``sent=True``. Environment HTTP proxies are not used.

Authentication (the OpenAPI ``security``: OAuth2 or a bearer token), by catalog properties:

* ``token``: a bearer token sent as ``Authorization: Bearer <token>``.
* ``credential`` (``client_id:client_secret``, or a bare secret): the OAuth2 client-credentials grant,
  a form POST of ``grant_type=client_credentials``, ``client_id``, ``client_secret``, ``scope`` (property
  ``scope``, default ``catalog``; ``audience`` and ``resource`` when set) to ``oauth2-server-uri``, else
  to ``<uri>/v1/oauth/tokens`` (the spec's deprecated endpoint). A token with ``expires_in`` is fetched
  again shortly before it expires; any fetched or initial token is fetched again once when a request is
  answered 401 (or 419, the spec's optional "authentication timeout"). With both, ``token`` is used first.

Errors (:class:`RestClient`): every non-2xx answer becomes a typed error whose message names the method,
the URL path, the HTTP status and the server's ErrorModel (``type: message``): 404 → the route's "no such"
error (NoSuchTable on table routes, NoSuchNamespace on namespace routes), 409 → the route's conflict,
401/403/419 → :class:`NotAuthorized`, 406/501 → :class:`UnsupportedFeature`, others →
:class:`CatalogError`; for a commit, 5xx other than 501 → :class:`CommitStateUnknown`.
"""

from __future__ import annotations

import http.client
import json
import re
import ssl
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, NoReturn
from urllib.parse import urlencode, urlsplit

from ..errors import (
    CatalogError,
    CommitStateUnknown,
    GpuEngineError,
    NoSuchNamespace,
    NoSuchTable,
    NotAuthorized,
    UnsupportedFeature,
)

TOKEN_PATH = "/v1/oauth/tokens"
DEFAULT_SCOPE = "catalog"
_BEARER_TYPES = ("bearer", "n_a")  # of the spec's token_type enum (bearer, mac, N_A), those sent as Bearer
_MAX_REFRESH_MARGIN_S = 60.0


@dataclass(frozen=True)
class HttpResponse:
    """A response: status, headers (lowercased names) and body."""

    status: int
    reason: str
    headers: Mapping[str, str] = field(default_factory=dict)
    body: bytes = b""


class TransportError(Exception):
    """No HTTP response; ``sent`` tells whether the request may have reached the server."""

    def __init__(self, message: str, *, sent: bool) -> None:
        super().__init__(message)
        self.sent = sent


def http_request(
    method: str, url: str, *, headers: Mapping[str, str], body: bytes | None, timeout: float
) -> HttpResponse:
    """Send one request on a fresh connection; :class:`TransportError` if no response came back."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise TransportError(f"not an http(s) URL: {redacted_url(url)!r}", sent=False)
    host = parts.hostname + (f":{parts.port}" if parts.port else "")  # no user:password
    conn: http.client.HTTPConnection
    if parts.scheme == "https":
        conn = http.client.HTTPSConnection(
            parts.hostname, parts.port, timeout=timeout, context=ssl.create_default_context()
        )
    else:
        conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout)
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    try:
        try:
            conn.connect()
        except OSError as e:
            raise TransportError(f"cannot connect to {host}: {e}", sent=False) from e
        try:  # built apart from the sending: a target or header it cannot hold never left this process
            conn.putrequest(method, target)
        except (ValueError, http.client.HTTPException) as e:  # UnicodeEncodeError is a ValueError
            raise TransportError(
                f"request {method} {target!r} to {host} cannot be sent: {type(e).__name__}: {e}", sent=False
            ) from e
        for name, value in headers.items():
            try:
                conn.putheader(name, value)
            except (ValueError, http.client.HTTPException) as e:  # the value not shown: a credential
                raise TransportError(
                    f"request {method} {target!r} to {host} cannot be sent: header {name!r} holds a "
                    f"character a header cannot carry ({type(e).__name__}; a line break, say; its value "
                    "is not shown)",
                    sent=False,
                ) from None
        if not any(k.lower() == "content-length" for k in headers) and (
            body is not None or method in ("POST", "PUT", "PATCH")
        ):
            conn.putheader("Content-Length", str(0 if body is None else len(body)))
        try:
            conn.endheaders(body)
            response = conn.getresponse()
            data = response.read()
        except (OSError, http.client.HTTPException) as e:
            what = "timed out" if isinstance(e, TimeoutError) else f"failed ({type(e).__name__}: {e})"
            raise TransportError(f"connection to {host} {what} after the request was sent", sent=True) from e
        headers_out = {k.lower(): v for k, v in response.getheaders()}
        return HttpResponse(response.status, response.reason, headers_out, data)
    finally:
        conn.close()


def _oauth_error(response: HttpResponse) -> str:
    """``error: error_description`` of an OAuth error body (RFC 6749 5.2), else the start of the body."""
    try:
        obj = json.loads(response.body)
    except ValueError:
        obj = None
    if isinstance(obj, dict) and isinstance(obj.get("error"), str):
        description = obj.get("error_description")
        return str(obj["error"]) + (f": {description}" if description else "")
    if isinstance(obj, dict) and isinstance(obj.get("error"), dict):  # an Iceberg ErrorModel instead
        err = obj["error"]
        return f"{err.get('type')}: {err.get('message')}"
    text = response.body[:200].decode("utf-8", "replace").strip()
    return text or response.reason


class RestAuth:
    """The ``Authorization`` header of catalog requests: a static token, or OAuth2 client credentials.

    Thread-safe. ``clock`` (seconds, monotonic) decides when a token with ``expires_in`` is due: it is
    fetched again ``min(60 s, expires_in / 10)`` before it expires.
    """

    def __init__(
        self,
        *,
        token: str | None = None,
        credential: str | None = None,
        token_url: str | None = None,
        params: Mapping[str, str] | None = None,
        headers: Mapping[str, str] | None = None,
        timeout: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if credential is not None and not token_url:
            raise CatalogError("OAuth2 client credentials need a token endpoint (oauth2-server-uri)")
        self._token = token
        self._credential = credential
        self.token_url = token_url
        self._params = dict(params or {})
        self._headers = dict(headers or {})
        self._timeout = timeout
        self._clock = clock
        self._refresh_at: float | None = None
        self._lock = threading.Lock()
        self.tokens_fetched = 0

    @classmethod
    def from_properties(cls, properties: Mapping[str, str], *, uri: str, timeout: float) -> RestAuth:
        """The auth configured by catalog ``properties`` (see the module docstring)."""
        params = {"scope": properties.get("scope") or DEFAULT_SCOPE}
        params.update({k: properties[k] for k in ("audience", "resource") if properties.get(k)})
        token = properties.get("token") or None
        if token is not None:
            header_value("token", token)
        if properties.get("oauth2-server-uri"):
            check_no_userinfo("oauth2-server-uri", properties["oauth2-server-uri"])
        return cls(
            token=token,
            credential=properties.get("credential") or None,
            token_url=properties.get("oauth2-server-uri") or uri.rstrip("/") + TOKEN_PATH,
            params=params,
            headers=header_properties(properties),
            timeout=timeout,
        )

    @property
    def can_reauthenticate(self) -> bool:
        return self._credential is not None

    def header(self) -> str | None:
        """``Bearer <token>``, fetching a token first if there is none yet or it is due; None without auth."""
        with self._lock:
            due = self._refresh_at is not None and self._clock() >= self._refresh_at
            if self._credential is not None and (self._token is None or due):
                self._fetch()
            return f"Bearer {self._token}" if self._token else None

    def reauthenticate(self, rejected: str | None) -> bool:
        """After a 401 to a request sent with ``rejected``: fetch a new token; False if impossible."""
        if self._credential is None:
            return False
        with self._lock:
            if rejected is None or rejected == (f"Bearer {self._token}" if self._token else None):
                self._fetch()  # else another thread already replaced the rejected token
        return True

    def _fetch(self) -> None:
        assert self._credential is not None and self.token_url is not None
        client_id, sep, secret = self._credential.partition(":")
        form = {"grant_type": "client_credentials"}
        form.update(
            {"client_id": client_id, "client_secret": secret} if sep else {"client_secret": client_id}
        )
        form.update(self._params)
        headers = {
            **self._headers,
            "Content-Type": "application/x-www-form-urlencoded",
            "Accept": "application/json",
        }
        where = f"OAuth2 token request POST {urlsplit(self.token_url).path or '/'}"
        try:
            response = http_request(
                "POST", self.token_url, headers=headers, body=urlencode(form).encode(), timeout=self._timeout
            )
        except TransportError as e:
            raise CatalogError(f"{where}: {e}") from e
        if response.status in (400, 401, 403):
            raise NotAuthorized(f"{where} -> HTTP {response.status}: {_oauth_error(response)}")
        if response.status != 200:
            raise CatalogError(f"{where} -> HTTP {response.status}: {_oauth_error(response)}")
        token, expires_in = _parse_token_response(response.body, where)
        self._token = token
        self.tokens_fetched += 1
        if expires_in is None:
            self._refresh_at = None
        else:
            self._refresh_at = self._clock() + expires_in - min(_MAX_REFRESH_MARGIN_S, expires_in / 10)


def _parse_token_response(body: bytes, where: str) -> tuple[str, float | None]:
    try:
        obj: Any = json.loads(body)
    except ValueError as e:
        raise CatalogError(f"{where}: the response is not JSON: {e}") from e
    if not isinstance(obj, dict) or not isinstance(obj.get("access_token"), str) or not obj["access_token"]:
        raise CatalogError(f"{where}: the response has no access_token")
    token_type = obj.get("token_type")
    if not isinstance(token_type, str) or token_type.lower() not in _BEARER_TYPES:
        raise CatalogError(f"{where}: token_type {token_type!r} is not a bearer token")
    expires_in = obj.get("expires_in")
    if isinstance(expires_in, str) and re.fullmatch(r"\s*[0-9]+\s*", expires_in):  # Azure AD v1: a string
        expires_in = int(expires_in)
    if expires_in is not None and (not isinstance(expires_in, int | float) or isinstance(expires_in, bool)):
        raise CatalogError(f"{where}: expires_in {expires_in!r} is not a number of seconds")
    return obj["access_token"], None if expires_in is None else float(expires_in)


def header_properties(properties: Mapping[str, str]) -> dict[str, str]:
    """Extra request headers from ``header.<Name>`` properties (checked: :func:`header_value`)."""
    return {
        k[len("header.") :]: header_value(k, v)
        for k, v in properties.items()
        if k.startswith("header.") and len(k) > 7
    }


def header_value(prop: str, value: str) -> str:
    """``value`` of the property ``prop`` (a token, a header), or a :class:`CatalogError` naming the
    property, not the value (a credential), where a header cannot carry it: a line break (a token read
    from a file with its newline) or another control character."""
    if any((ord(c) < 0x20 and c != "\t") or ord(c) == 0x7F for c in value):
        raise CatalogError(
            f"REST catalog property {prop}: its value holds a line break or another control character, "
            "which an HTTP header cannot carry (the value is not shown)"
        )
    return value


def redacted_url(url: str) -> str:
    """``url`` without the password of its ``user:password@`` part."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = f"{parts.username}:***@{host}" + (f":{parts.port}" if parts.port else "")
    return parts._replace(netloc=netloc).geturl()


def check_no_userinfo(prop: str, url: str) -> None:
    """A :class:`CatalogError` where ``url`` (the property ``prop``) holds ``user:password@``: not sent
    (``credential`` and ``token`` authenticate), so refused rather than ignored, the password not shown."""
    parts = urlsplit(url)
    if parts.username is not None or parts.password is not None:
        raise CatalogError(
            f"REST catalog property {prop}={redacted_url(url)!r} holds a user name (user:password@), which "
            "this client does not send: authenticate with credential= or token="
        )


def error_detail(response: HttpResponse) -> str:
    """``Type: message`` of an IcebergErrorResponse body, else the HTTP reason and the start of the body."""
    try:
        obj = json.loads(response.body) if response.body else None
    except ValueError:
        obj = None
    err = obj.get("error") if isinstance(obj, dict) else None
    if isinstance(err, dict) and ("message" in err or "type" in err):
        return f"{err.get('type', 'UnknownError')}: {err.get('message', '')}"
    text = response.body[:300].decode("utf-8", "replace").strip()
    return response.reason + (f": {text}" if text else "")


def json_object(response: HttpResponse, where: str) -> dict[str, Any]:
    """The response body as a JSON object; :class:`CatalogError` naming ``where`` otherwise."""
    try:
        obj = json.loads(response.body)
    except ValueError as e:
        raise CatalogError(f"{where}: the response is not JSON: {e}") from e
    if not isinstance(obj, dict):
        raise CatalogError(f"{where}: the response is not a JSON object")
    return obj


def str_map(value: Any, where: str) -> dict[str, str]:
    """A JSON object of strings (``null`` → empty)."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise CatalogError(f"{where}: expected a JSON object of strings, got {type(value).__name__}")
    return {str(k): str(v) for k, v in value.items()}


class RestClient:
    """Requests to one REST catalog: base URL, ``header.*`` headers, auth, typed errors."""

    def __init__(
        self,
        name: str,
        uri: str,
        *,
        properties: Mapping[str, str],
        timeout: float,
        auth: RestAuth | None = None,
    ) -> None:
        self.name = name
        self.uri = uri.rstrip("/")
        self.timeout = timeout
        self.headers = header_properties(properties)
        self.auth = auth or RestAuth.from_properties(properties, uri=self.uri, timeout=timeout)

    def where(self, method: str, path: str) -> str:
        return f"REST catalog {self.name!r}: {method} {path}"

    def request(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, str] | None = None,
        payload: Any = None,
        not_found: type[GpuEngineError] = CatalogError,
        conflict: type[GpuEngineError] = CatalogError,
        commit: bool = False,
        token: str | None = None,
        token_refused: Callable[[], None] | None = None,
    ) -> HttpResponse:
        """A 2xx response, or the typed error (see the module docstring); one re-auth after 401/419.
        ``token``: a bearer token for this request instead of the catalog's (a table's, from its load
        response's ``config``); refused, ``token_refused()`` is called and the request sent once more with
        the catalog's (itself re-fetched once if refused too: at most three requests)."""
        url = self.uri + path + (f"?{urlencode(query)}" if query else "")
        body = None if payload is None else json.dumps(payload).encode()
        reauthenticated = False
        while True:
            headers = {"Accept": "application/json", **self.headers}
            if body is not None:
                headers["Content-Type"] = "application/json"
            auth = f"Bearer {token}" if token is not None else self.auth.header()
            if auth is not None:
                headers["Authorization"] = auth
            try:
                response = http_request(method, url, headers=headers, body=body, timeout=self.timeout)
            except TransportError as e:
                if commit and e.sent:
                    raise CommitStateUnknown(
                        f"{self.where(method, path)}: {e}; the commit may or may not have been applied"
                    ) from e
                raise CatalogError(f"{self.where(method, path)}: {e}") from e
            if 200 <= response.status < 300:
                return response
            if response.status in (401, 419):
                if token is not None:  # a table's token refused (expired): once more with the catalog's
                    token = None
                    if token_refused is not None:
                        token_refused()
                    continue
                if not reauthenticated and self.auth.reauthenticate(auth):
                    reauthenticated = True
                    continue
            self._raise(response, method, path, not_found=not_found, conflict=conflict, commit=commit)

    def _raise(
        self,
        response: HttpResponse,
        method: str,
        path: str,
        *,
        not_found: type[GpuEngineError],
        conflict: type[GpuEngineError],
        commit: bool,
    ) -> NoReturn:
        status, detail = response.status, error_detail(response)
        message = f"{self.where(method, path)} -> HTTP {status} {detail}"
        if commit and status >= 500 and status != 501:
            raise CommitStateUnknown(f"{message}; the commit may or may not have been applied")
        cls: type[GpuEngineError] = CatalogError
        if status == 404:  # the server's error type names what is missing (a rename's namespace, say)
            kind = detail.split(":", 1)[0]
            cls = {"NoSuchNamespaceException": NoSuchNamespace, "NoSuchTableException": NoSuchTable}.get(
                kind, not_found
            )
        elif status == 409:
            cls = conflict
        elif status in (401, 403, 419):
            cls = NotAuthorized
        elif status in (406, 501):
            cls = UnsupportedFeature
        raise cls(message)
