"""Through ``--server`` a field's answer is reread by the model's odds as in process
(``stencil.extract.odds``): the same document and schema through the live ``stencil serve``
(the session's ``live_server``) and through the in-process engine give the same records, and the
server's ``logprobs.content`` turns into the tokens and odds the engine hands over."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from stencil.cli import build_parser
from stencil.extract import engine_backend, server_backend
from stencil.extract.command import run
from stencil.extract.odds import api_tokens, reread
from stencil.testing.live_server import LiveServer
from stencil.testing.tiny_models import TEST_KV_BYTES

DOCUMENT = """Ana Silva
Software engineer at Northwind Traders, Porto, Portugal (since 2019).
Phone: +351 912 345 678
"""
SCHEMA = {
    "title": "contact",
    "type": "object",
    "properties": {
        "name": {"type": "string", "description": "the person's full name"},
        "city": {"type": "string", "description": "the city the person lives in"},
        "employer": {"type": "string", "description": "the company the person works for"},
        "currency": {"type": "string", "description": "the currency of the salary"},
        "has_pets": {"type": "boolean", "description": "whether the person keeps pets"},
    },
    "required": ["name"],
    "additionalProperties": False,
}


@pytest.fixture(scope="module")
def runs(live_server: LiveServer, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Each backend's record and its ``reread`` calls (key -> (args, result)): in process (an
    engine configured as the live server's) and through the live server."""
    from stencil import LLM

    root = tmp_path_factory.mktemp("server_odds")
    doc, schema = root / "ana.txt", root / "contact.json"
    doc.write_text(DOCUMENT, encoding="utf-8")
    schema.write_text(json.dumps(SCHEMA))
    out: dict[str, Any] = {}
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("OPENAI_API_KEY", live_server.api_key)
        for name, module, extra, llm in [
            ("engine", engine_backend, [], LLM(seed=0, kv_cache_memory=4 * TEST_KV_BYTES)),
            ("server", server_backend, ["--server", live_server.base_url], None),
        ]:
            calls: dict[str, tuple] = {}

            def spy(*args: Any, calls: dict = calls) -> str:
                calls[args[0]] = (args, reread(*args))
                return calls[args[0]][1]

            mp.setattr(module, "reread", spy)
            records = root / f"{name}.jsonl"
            argv = ["extract", "--schema", str(schema), "--out", str(records), *extra, str(doc)]
            assert run(build_parser().parse_args(argv), llm=llm) == 0
            (record,) = [json.loads(line) for line in records.read_text().splitlines()]
            out[name] = (record, calls)
            del llm
    return out


def test_the_server_rereads_as_the_engine_does(runs: dict[str, Any]) -> None:
    (engine, engine_calls), (server, server_calls) = runs["engine"], runs["server"]
    assert server["data"] == engine["data"] and server["spans"] == engine["spans"], (
        engine,
        server,
    )
    cut = {k: v[1] for k, v in engine_calls.items() if v[0][4]}  # asked with logprobs
    assert {k: v[1] for k, v in server_calls.items()} == cut  # the same questions, answers
    changed = {k: json.loads(v[1]) for k, v in server_calls.items() if v[1] != v[0][2]}
    assert changed == {"city": {"city": "Porto"}}, server_calls  # `Porto, Portugal` closed


def test_the_servers_logprobs_are_the_engines(runs: dict[str, Any]) -> None:
    """The server's ``logprobs.content`` (its forced tokens too: logprob 0) turned by
    ``api_tokens`` joins to the answer and carries the engine's tokens and odds, position by
    position, top alternatives (under the constraint's mask) included."""
    (_, engine_calls), (_, server_calls) = runs["engine"], runs["server"]
    for key, ((_, _, text, ids, lps, decode), _) in server_calls.items():
        _, _, e_text, e_ids, e_lps, e_decode = engine_calls[key][0]
        assert text == e_text and decode(ids) == text
        assert len(lps) == len(e_lps) == len(e_ids), key  # every token has its entry
        for got, want in zip(lps, e_lps, strict=True):
            assert got.chosen.token == want.chosen.token
            assert math.isclose(got.chosen.logprob, want.chosen.logprob, abs_tol=1e-4)
            assert [t.token for t in got.top] == [t.token for t in want.top]


def _entry(token: str, logprob: float = -0.5, raw: bytes | None = None) -> dict[str, Any]:
    raw = token.encode() if raw is None else raw
    top = [{"token": token, "logprob": logprob, "bytes": list(raw)}]
    return {"token": token, "logprob": logprob, "bytes": list(raw), "top_logprobs": top}


def test_api_tokens_joins_the_entries_or_gives_up() -> None:
    ids, lps, decode = api_tokens('{"a": 1}', [_entry('{"'), _entry('a":'), _entry(" 1}")])
    assert ids == [0, 1, 2] and decode(ids[:2]) == '{"a":' and lps[1].chosen.token == 'a":'
    # a character cut between two tokens: their bytes join, their texts do not
    e = "é".encode()
    entries = [_entry('{"a": "', 0.0), _entry("\ufffd", -1, e[:1]), _entry("\ufffd", -1, e[1:])]
    ids, lps, decode = api_tokens('{"a": "é', entries)
    assert decode(ids) == '{"a": "é' and decode(ids[:2]).endswith("\ufffd")
    # a stop token after the answer is left out; a token missing (not joined) gives up
    assert api_tokens("{}", [_entry("{}"), _entry("<|im_end|>")])[0] == [0]
    assert api_tokens('{"a": 1}', [_entry('{"'), _entry(" 1}")]) is None
    assert api_tokens("{}", None) is None and api_tokens("{}", []) is None


def test_no_logprobs_the_answer_as_it_is() -> None:
    schema = {"properties": {"a": {"type": "string"}}}
    assert reread("a", schema, '{"a": "x, y"}', [], None, str) == '{"a": "x, y"}'
