"""The API-key matrix on a real uvicorn server: every route but /health needs the key, whatever the
path spelling (trailing / double slash, case, percent-encoding, dot segments) or Host header;
every route of the app has an explicit decision in ``auth.ROUTE_AUTH``.

Requests go through ``http.client`` so that the path and Host reach the server byte for byte.
"""

from __future__ import annotations

import http.client
import json
from urllib.parse import urlsplit

import pytest
from fastapi.testclient import TestClient

from stencil.api.app import ServerConfig, create_app
from stencil.api.middleware.auth import KEY, PUBLIC, ROUTE_AUTH, route_paths, undecided_routes
from stencil.cli import extra_routes

POSTS = {"/v1/chat/completions", "/v1/completions", "/v1/embeddings", "/tokenize", "/detokenize"}
POSTS |= {"/v1/responses"}
POSTS |= {f"/v1/playground/{p}" for p in ("request", "check", "documents", "spans", "trace")}
# path parameters filled in (an unknown stored response: 404 once past auth)
PROTECTED = sorted(
    p.replace("{response_id}", "resp_unknown").replace("{asset}", "app.js")
    for p, who in ROUTE_AUTH.items()
    if who == KEY
)


def no_model():
    raise RuntimeError("this test serves no model")


def request(server, method: str, path: str, headers: dict[str, str] | None = None) -> int:
    """Status of one raw request (the body of a POST is ``{}``: a 400 once past auth)."""
    netloc = urlsplit(server.base_url).netloc
    host, port = netloc.split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    try:
        body = b"{}" if method == "POST" else None
        hdrs = {"Content-Type": "application/json", **(headers or {})}
        conn.request(method, path, body=body, headers=hdrs)
        resp = conn.getresponse()
        resp.read()
        return resp.status
    finally:
        conn.close()


def method_of(path: str) -> str:
    return "POST" if path in POSTS else "GET"


def bearer(server) -> dict[str, str]:
    return {"Authorization": f"Bearer {server.api_key}"}


def test_every_route_has_an_auth_decision():
    settings = ServerConfig(api_key="k")  # with the playground, as `stencil serve` runs
    app = create_app(no_model, settings, extra_routes(settings))
    paths = route_paths(app.routes)
    assert undecided_routes(paths) == []
    assert set(ROUTE_AUTH) == set(paths), "ROUTE_AUTH names a route the app does not have"
    assert [p for p, who in ROUTE_AUTH.items() if who == PUBLIC] == ["/health"]


def test_a_route_added_without_a_decision_is_caught_and_still_denied():
    app = create_app(no_model, ServerConfig(api_key="k"))
    app.add_api_route("/v1/secret", lambda: {"secret": 1}, methods=["GET"])
    assert undecided_routes(route_paths(app.routes)) == ["/v1/secret"]
    with TestClient(app) as client:
        assert client.get("/v1/secret").status_code == 401  # default deny
        assert client.get("/v1/secret", headers={"Authorization": "Bearer k"}).status_code == 200


@pytest.mark.parametrize("path", PROTECTED)
def test_protected_route_needs_the_exact_key(live_server, path):
    method = method_of(path)
    wrong = [
        {},
        {"Authorization": "Bearer nope"},
        {"Authorization": f"bearer {live_server.api_key}"},
        {"Authorization": f"Bearer  {live_server.api_key}"},
        {"Authorization": f"Bearer {live_server.api_key}x"},
        {"Authorization": f"Bearer {live_server.api_key[:-1]}"},
        {"Authorization": live_server.api_key},
        {"X-API-Key": live_server.api_key},
    ]
    for headers in wrong:
        assert request(live_server, method, path, headers) == 401, (path, headers)
    expected = (404,) if path.endswith("resp_unknown") else (200, 400)
    assert request(live_server, method, path, bearer(live_server)) in expected, path


def _variants(path: str) -> list[str]:
    encoded = [f"/%{ord(path[1]):02X}{path[2:]}"] if len(path) > 1 else ["/%2E", "/%2F"]
    return [
        path + "/",
        "/" + path,
        path.replace("/", "//"),
        path.upper(),
        *encoded,
        path.replace("/", "%2F"),
        "/." + path,
        "/x/.." + path,
        path + "?api_key=x",
        path + "%00",
        path + ";",
    ]


@pytest.mark.parametrize("path", PROTECTED)
def test_path_variants_never_pass_without_the_key(live_server, path):
    for variant in _variants(path):
        status = request(live_server, method_of(path), variant)
        assert status in (400, 401), (variant, status)  # 400: the HTTP parser refused it


@pytest.mark.parametrize(
    "host", ["127.0.0.1", "localhost", "evil.example", "127.0.0.1:1", "[::1]", "HEALTH"]
)
def test_host_header_does_not_change_the_decision(live_server, host):
    assert request(live_server, "GET", "/v1/models", {"Host": host}) == 401
    assert request(live_server, "GET", "/health", {"Host": host}) == 200
    assert request(live_server, "GET", "/v1/models", {"Host": host, **bearer(live_server)}) == 200


def test_health_is_public_and_only_health(live_server):
    assert request(live_server, "GET", "/health") == 200
    for path in ("/health/", "/HEALTH", "/healthz", "/v1/health", "/nothing", "/", "/index.html"):
        assert request(live_server, "GET", path) == 401, path  # unknown paths are not enumerable


def test_the_401_body_is_openai_shaped(live_server):
    netloc = urlsplit(live_server.base_url).netloc
    conn = http.client.HTTPConnection(*netloc.split(":"), timeout=30)
    try:
        conn.request("GET", "/v1/models")
        resp = conn.getresponse()
        body = json.loads(resp.read())
    finally:
        conn.close()
    assert resp.status == 401 and resp.getheader("WWW-Authenticate") == "Bearer"
    assert body["error"]["code"] == "invalid_api_key"
