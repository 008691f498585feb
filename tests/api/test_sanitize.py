"""Error text echoed to clients: no object reprs or addresses, no control characters or lone
surrogates, user input truncated; a 500 tells the exception type and a log reference only."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from stencil.api.app import ServerConfig, create_app
from stencil.api.errors import APIError
from stencil.api.sanitize import (
    MAX_MESSAGE_CHARS,
    MAX_TOKEN_CHARS,
    is_sanitized,
    sanitize_message,
)

CASES = [
    ("compile failed: <stencil.constraints.Matcher object at 0x7f3a2b1c9d40>", "<Matcher>"),
    ("at <function f at 0x7f3a2b1c9d40>", "<function>"),
    ("pointer 0xdeadbeef1234 freed", "0x…"),
    ("bad \ud800 text", "bad \ufffd text"),
    ("nul\x00bell\x07", "nul bell "),
    ("regex " + "a" * 10_000, "…(+"),
]


@pytest.mark.parametrize("raw, expected", CASES)
def test_sanitize_message(raw, expected):
    out = sanitize_message(raw)
    assert expected in out
    assert is_sanitized(out)
    assert sanitize_message(out) == out  # idempotent
    out.encode("utf-8")


def test_long_messages_and_runs_are_cut():
    out = sanitize_message(" ".join(["word"] * 1000))
    assert len(out) <= MAX_MESSAGE_CHARS and out.endswith("…")
    run = sanitize_message("x" * 100_000)
    assert max(len(w) for w in run.split()) <= MAX_TOKEN_CHARS


def test_is_sanitized_rejects_what_it_should():
    for bad in ("<a.B object at 0x7f0000000000>", "x" * 200, "a\x00b", "\udc00", "Traceback (most"):
        assert not is_sanitized(bad)


def test_api_error_bodies_are_sanitized():
    err = APIError(f"the model `{'m' * 5000}\ud800` does not exist", param="model\x00")
    body = err.body()["error"]
    assert is_sanitized(body["message"]) and is_sanitized(body["param"])


def no_model():
    raise RuntimeError("this test serves no model")


def test_internal_errors_show_no_details():
    app = create_app(no_model, ServerConfig())

    def boom():
        raise RuntimeError(f"secret {object()!r} {'p' * 500}")

    app.add_api_route("/v1/boom", boom, methods=["GET"])
    with TestClient(app, raise_server_exceptions=False) as client:
        r = client.get("/v1/boom")
    assert r.status_code == 500
    message = r.json()["error"]["message"]
    assert "secret" not in message and "object at" not in message
    assert "RuntimeError" in message and "ref " in message and is_sanitized(message)
