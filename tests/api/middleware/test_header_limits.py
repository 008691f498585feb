"""Request header limits on a real uvicorn server: too many header fields or too many header bytes
is a 431 (from the app's middleware, or from the HTTP parser when the head is larger than it
buffers), just under the limits is served, and the server keeps serving afterwards."""

from __future__ import annotations

import socket
from urllib.parse import urlsplit

from fastapi.testclient import TestClient

from stencil.api.app import ServerConfig, create_app
from stencil.api.middleware.header_limits import parser_buffer_bytes
from stencil.api.uvicorn_server import uvicorn_config

DEFAULTS = ServerConfig()


def no_model():
    raise RuntimeError("this test serves no model")


def raw_request(server, extra: list[tuple[str, str]], path: str = "/health") -> int:
    """Send a GET with exactly these extra header fields (besides Host); the response status."""
    host, port = urlsplit(server.base_url).netloc.split(":")
    head = f"GET {path} HTTP/1.1\r\nHost: {host}\r\n"
    head += "".join(f"{k}: {v}\r\n" for k, v in extra) + "\r\n"
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        try:
            sock.sendall(head.encode())
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server answered and closed before reading everything
        data = b""
        while b"\r\n" not in data:
            chunk = sock.recv(4096)
            if not chunk:
                break
            data += chunk
    return int(data.split(b" ", 2)[1])


def fields(n: int, value_len: int = 4) -> list[tuple[str, str]]:
    return [(f"X-F{i}", "v" * value_len) for i in range(n)]


def test_header_count_limit(live_server):
    # Host + max_headers - 1 extra fields: exactly at the limit
    assert raw_request(live_server, fields(DEFAULTS.max_headers - 1)) == 200
    assert raw_request(live_server, fields(DEFAULTS.max_headers)) == 431
    assert raw_request(live_server, fields(20_000, 1)) == 431  # past the parser's buffer too


def test_header_size_limit(live_server):
    name = "X-Big"
    room = DEFAULTS.max_header_bytes - len("host") - len("127.0.0.1") - len(name.lower())
    assert raw_request(live_server, [(name, "a" * room)]) == 200
    assert raw_request(live_server, [(name, "a" * (room + 1))]) == 431
    huge = parser_buffer_bytes(DEFAULTS.max_header_bytes) + 1000
    assert raw_request(live_server, [(name, "a" * huge)]) == 431


def test_431_body_and_the_server_keeps_serving(live_server):
    import httpx

    r = httpx.get(f"{live_server.base_url}/health", headers={"X-Big": "a" * 20_000})
    assert r.status_code == 431
    assert r.json()["error"]["code"] == "request_header_fields_too_large"
    assert httpx.get(f"{live_server.base_url}/health").status_code == 200


def test_limits_are_configurable():
    settings = ServerConfig(max_headers=6, max_header_bytes=300)
    assert uvicorn_config(no_model, settings).h11_max_incomplete_event_size == (
        parser_buffer_bytes(300)
    )
    with TestClient(create_app(no_model, settings)) as client:
        assert client.get("/health", headers={"X-A": "1"}).status_code == 503  # still loading
        assert client.get("/health", headers={f"X-{i}": "1" for i in range(6)}).status_code == 431
        assert client.get("/health", headers={"X-A": "a" * 300}).status_code == 431
