"""The playground's HTTP surface on the live server (the embedded model, the API key set): the
page behind the key (Bearer or a browser's Basic credentials, never another site's), the same
400 as ``/v1/chat/completions`` for a bad constraint, documents read by ``stencil extract``'s
readers, and ``--no-playground`` importing nothing of it."""

from __future__ import annotations

import base64
import json
import subprocess
import sys

import httpx
import pytest

from stencil.testing.live_server import LiveServer

SCHEMA = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
    "required": ["name", "age"],
}
DOC = "Ada Lovelace was 36 years old."


def _unstreamed(body: dict) -> dict:
    return {k: v for k, v in body.items() if k != "stream_options"} | {"stream": False}


def _post(live: LiveServer, path: str, body: object, **kw) -> httpx.Response:
    headers = {"Authorization": f"Bearer {live.api_key}"}
    return httpx.post(live.base_url + path, json=body, headers=headers, timeout=120, **kw)


AUTH_CASES = [
    # (headers, auth, status)
    ({}, None, 401),
    ({"Authorization": "Bearer wrong"}, None, 401),
    ({}, ("anyone", "wrong"), 401),
    ({}, ("anyone", "KEY"), 200),
    ({"Sec-Fetch-Site": "same-origin"}, ("anyone", "KEY"), 200),
    ({"Sec-Fetch-Site": "cross-site"}, ("anyone", "KEY"), 401),
    ({"Sec-Fetch-Site": "same-site"}, ("anyone", "KEY"), 401),
    ({"Authorization": "Bearer KEY"}, None, 200),
]


@pytest.mark.parametrize(("headers", "auth", "status"), AUTH_CASES)
@pytest.mark.parametrize("path", ["/", "/playground/app.js", "/v1/playground/facts"])
def test_behind_the_api_key(live_server: LiveServer, path, headers, auth, status) -> None:
    key = live_server.api_key
    headers = {k: v.replace("KEY", key) for k, v in headers.items()}
    auth = (auth[0], auth[1].replace("KEY", key)) if auth else None
    r = httpx.get(live_server.base_url + path, headers=headers, auth=auth)
    assert r.status_code == status, r.text
    if status == 401 and path == "/":
        assert r.headers["www-authenticate"].startswith("Basic ")  # the browser asks for the key


def test_the_page_and_its_assets(live_server: LiveServer) -> None:
    auth = ("u", live_server.api_key)
    page = httpx.get(live_server.base_url + "/", auth=auth)
    assert page.headers["content-type"].startswith("text/html")
    for asset, kind in (
        ("app.js", "text/javascript"),
        ("views.js", "text/javascript"),
        ("app.css", "text/css"),
    ):
        assert f"/playground/{asset}" in page.text
        r = httpx.get(f"{live_server.base_url}/playground/{asset}", auth=auth)
        assert r.status_code == 200 and r.headers["content-type"].startswith(kind)
    assert "http" not in page.text.replace(live_server.base_url, "")  # nothing from a CDN
    missing = httpx.get(live_server.base_url + "/playground/secret.py", auth=auth)
    assert missing.status_code == 404


BAD_SPECS = [
    ("json", json.dumps({"type": "object", "properties": {"a": {"type": "strin"}}})),
    ("json", json.dumps({"type": "object", "properties": {"a": {"$ref": "#/nowhere"}}})),
    ("regex", "a{2147483647}"),
    ("grammar", "start: missing_rule"),
]


@pytest.mark.parametrize(("kind", "spec"), BAD_SPECS)
def test_check_gives_the_chat_endpoints_400(live_server: LiveServer, kind, spec) -> None:
    run = {"kind": kind, "spec": spec, "document": DOC, "max_tokens": 16}
    checked = _post(live_server, "/v1/playground/check", run)
    body = _post(live_server, "/v1/playground/request", run).json()["body"]
    chat = _post(live_server, "/v1/chat/completions", _unstreamed(body))
    assert checked.status_code == chat.status_code == 400
    assert checked.json() == chat.json()


GOOD_SPECS = [
    ("json", json.dumps(SCHEMA), False),
    ("json", json.dumps(SCHEMA), True),
    ("regex", "[A-Z][a-z]+ [A-Z][a-z]+", False),
    ("choice", "Ada Lovelace\nCharles Babbage", False),
    ("grammar", 'start: "Ada" | "Charles"', False),
]


@pytest.mark.parametrize(("kind", "spec", "grounding"), GOOD_SPECS)
def test_check_accepts_what_the_chat_endpoint_runs(live_server, kind, spec, grounding) -> None:
    run = {"kind": kind, "spec": spec, "document": DOC, "grounding": grounding, "max_tokens": 40}
    assert _post(live_server, "/v1/playground/check", run).json() == {"ok": True}
    body = _post(live_server, "/v1/playground/request", run).json()["body"]
    out = _post(live_server, "/v1/chat/completions", _unstreamed(body)).json()
    text = out["choices"][0]["message"]["content"]
    if kind == "json":
        import jsonschema

        jsonschema.validate(json.loads(text), SCHEMA)
    if kind == "choice":
        assert text in spec.splitlines()


def test_check_passes_a_schema_whose_values_the_document_does_not_state(live_server) -> None:
    """Before a document is pasted, a grounded schema with a required string holds: the check
    says what the document lacks; the chat endpoint's 400 carries code ``unstated_value``."""
    run = {"kind": "json", "spec": json.dumps(SCHEMA), "document": "", "grounding": True}
    checked = _post(live_server, "/v1/playground/check", run).json()
    assert checked["ok"] and "cannot be filled" in checked["note"], checked
    body = _post(live_server, "/v1/playground/request", run).json()["body"]
    chat = _post(live_server, "/v1/chat/completions", _unstreamed(body))
    assert chat.status_code == 400 and chat.json()["error"]["code"] == "unstated_value"


def test_a_schema_that_is_not_json(live_server: LiveServer) -> None:
    r = _post(live_server, "/v1/playground/check", {"kind": "json", "spec": '{"type": "obj'})
    assert r.status_code == 400
    assert r.json()["error"]["message"].startswith("the schema is not JSON: Unterminated string")
    assert "(line 1, column 10)" in r.json()["error"]["message"]


def test_trace_endpoint(live_server: LiveServer) -> None:
    run = {"kind": "choice", "spec": "Ada Lovelace\nCharles Babbage", "document": DOC}
    body = _post(live_server, "/v1/playground/request", run).json()["body"]
    trace = _post(live_server, "/v1/playground/trace", body).json()
    assert trace["text"] in ("Ada Lovelace", "Charles Babbage")
    assert "".join(t["text"] for t in trace["tokens"]) == trace["text"]
    first = trace["tokens"][0]
    assert first["kind"] == "sampled" and first["allowed"] >= 2  # two choices, maybe more starts
    assert trace["mask_seconds"] > 0 and trace["forward_seconds"] > 0
    bad = _post(live_server, "/v1/playground/trace", {**body, "n": 2})
    assert bad.status_code == 400 and bad.json()["error"]["param"] == "n"
    bad = _post(live_server, "/v1/playground/trace", [1])
    assert bad.status_code == 400


def test_deep_nesting_is_a_400(live_server: LiveServer) -> None:
    deep = "[" * 5000 + "]" * 5000
    r = _post(live_server, "/v1/playground/check", {"kind": "json", "spec": deep})
    assert r.status_code == 400 and r.json()["error"]["param"] == "schema"
    value = json.loads("[" * 900 + "]" * 900)
    r = _post(live_server, "/v1/playground/spans", {"document": DOC, "value": value})
    assert r.status_code in (200, 400)  # found nothing, or refused by name; never a 500
    if r.status_code == 400:
        assert r.json()["error"]["param"] == "value"


BAD_BODIES = [
    ({"kind": "xml", "spec": "x"}, "kind"),
    ({"kind": "json", "spec": 3}, "spec"),
    ({"kind": "json", "spec": "{}", "max_tokens": 0}, "max_tokens"),
    ({"kind": "json", "spec": "{}", "colour": 1}, "colour"),
]


@pytest.mark.parametrize(("body", "param"), BAD_BODIES)
def test_bad_run_bodies(live_server: LiveServer, body, param) -> None:
    r = _post(live_server, "/v1/playground/request", body)
    assert r.status_code == 400 and r.json()["error"]["param"] == param


def test_documents_use_the_extract_readers(live_server: LiveServer) -> None:
    files = [
        ("a.html", b"<html><body><h1>Invoice</h1><script>x()</script><p>Total 5</p></body></html>"),
        ("b.txt", "Grüße aus Köln".encode("utf-16")),
        ("c.csv", b"name,age\nAda,36\n"),
        ("d.bin", bytes(range(256)) * 8),
        ("e.txt", b""),
    ]
    payload = {"files": [{"name": n, "data": base64.b64encode(d).decode()} for n, d in files]}
    docs = _post(live_server, "/v1/playground/documents", payload).json()["documents"]
    assert [d["name"] for d in docs] == [n for n, _ in files]
    assert docs[0]["text"] == "Invoice\nTotal 5"
    assert docs[1]["text"] == "Grüße aus Köln"
    assert docs[2]["text"] == "name: Ada\nage: 36"
    assert docs[3]["text"] is None and docs[3]["error"].startswith("binary file")
    assert docs[4]["error"] == "empty file"
    bad = _post(live_server, "/v1/playground/documents", {"files": [{"name": "x", "data": "!"}]})
    assert bad.status_code == 400 and bad.json()["error"]["param"] == "files[0].data"


def test_schema_library(live_server: LiveServer) -> None:
    r = httpx.get(
        live_server.base_url + "/v1/playground/schemas",
        headers={"Authorization": f"Bearer {live_server.api_key}"},
    )
    names = {s["name"]: s for s in r.json()["schemas"]}
    assert {"invoice", "person"} <= set(names)
    assert names["person"]["schema"]["type"] == "object"


def test_facts_in_words(live_server: LiveServer) -> None:
    r = httpx.get(
        live_server.base_url + "/v1/playground/facts",
        headers={"Authorization": f"Bearer {live_server.api_key}"},
    )
    values, facts = r.json()["values"], dict(r.json()["facts"])
    assert values["model"] == live_server.model and values["context_length"] > 0
    assert facts["Family"].startswith("llama")
    assert facts["Context"].startswith(f"{values['context_length']:,} tokens")


NO_PLAYGROUND = """
import sys
from stencil.api.app import create_app
from stencil.api.state import ServerConfig
from stencil.cli import extra_routes
settings = ServerConfig(playground=False)
app = create_app(lambda: None, settings, extra_routes(settings))
paths = {getattr(r, "path", "") for r in app.routes}
print(sorted(m for m in sys.modules if m.startswith(("stencil.playground", "stencil.extract"))))
print("/" in paths)
"""


def test_the_flag() -> None:
    from stencil.cli import build_parser, server_config

    for argv, on in ((["serve"], True), (["serve", "--no-playground"], False)):
        assert server_config(build_parser().parse_args(argv)).playground is on


def test_the_page_and_facts_answer_while_the_engine_generates(live_server: LiveServer) -> None:
    """A long stream runs; meanwhile ``/`` and the facts answer, and the facts see it running."""
    headers = {"Authorization": f"Bearer {live_server.api_key}"}
    body = {
        "messages": [{"role": "user", "content": "Count to one thousand."}],
        "max_tokens": 400,
        "stream": True,
        "ignore_eos": True,
    }
    with httpx.stream(
        "POST", live_server.v1 + "/chat/completions", json=body, headers=headers, timeout=120
    ) as stream:
        lines = stream.iter_lines()
        next(line for line in lines if line.startswith("data: "))  # it is generating
        for _ in range(5):
            page = httpx.get(live_server.base_url + "/", headers=headers, timeout=10)
            assert page.status_code == 200 and b"playground" in page.content
        facts = httpx.get(live_server.base_url + "/v1/playground/facts", headers=headers).json()
        assert facts["values"]["requests_running"] >= 1
        assert facts["values"]["kv_cache_usage"] > 0
        assert dict(facts["facts"])["Requests"].startswith(
            f"{facts['values']['requests_running']} running"
        )


def test_no_playground_imports_nothing_of_it() -> None:
    out = subprocess.run(
        [sys.executable, "-c", NO_PLAYGROUND], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split("\n")[:2] == ["[]", "False"]
