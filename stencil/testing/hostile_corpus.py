"""A corpus of hostile requests, each of which the server must refuse with a 4xx (fast, without
hurting anyone else): shared by ``tests/api/test_hostile_corpus.py`` and
``bench/server/reliability_bench.py``.

``build_corpus(vocab_size, max_model_len)`` returns :class:`Payload` objects; ``send`` posts one
and checks the answer's shape (OpenAI error body, sanitized message).
"""

from __future__ import annotations

import json
from typing import Any

from stencil.testing.hostile_payload import MB, Payload
from stencil.testing.hostile_responses import responses_payloads

COMPLETIONS = "/v1/completions"
EMBEDDINGS = "/v1/embeddings"


def _msgs(text: str = "Say hi.") -> list[dict[str, str]]:
    return [{"role": "user", "content": text}]


def chat(**fields: Any) -> bytes:
    return json.dumps({"messages": _msgs(), "max_tokens": 8, **fields}).encode()


def completion(**fields: Any) -> bytes:
    return json.dumps({"prompt": "Hello", "max_tokens": 8, **fields}).encode()


def _schema_format(schema: Any) -> bytes:
    return chat(
        response_format={"type": "json_schema", "json_schema": {"name": "x", "schema": schema}}
    )


def _nested_schema(depth: int) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(depth):
        schema = {"type": "object", "properties": {"a": schema}, "required": ["a"]}
    return schema


def _nested_json(depth: int) -> bytes:
    return b'{"messages": ' + b"[" * depth + b"]" * depth + b"}"


def schema_payloads() -> list[Payload]:
    wide = {"type": "object", "properties": {f"p{i}": {"type": "integer"} for i in range(60_000)}}
    many_refs = {"$defs": {f"d{i}": {"$ref": f"#/$defs/d{i + 1}"} for i in range(2000)}}
    many_refs["$ref"] = "#/$defs/d0"
    return [
        Payload("json nested 100k deep", "schema", _nested_json(100_000)),
        Payload("schema 300 levels deep", "schema", _schema_format(_nested_schema(300))),
        Payload("schema 60k properties (2 MB)", "schema", _schema_format(wide), compile_bound=True),
        Payload("schema pure $ref cycle", "schema", chat(guided_json={"$ref": "#"})),
        Payload(
            "schema recursive, no finite instance",
            "schema",
            _schema_format(
                {
                    "type": "object",
                    "properties": {"child": {"$ref": "#"}},
                    "required": ["child"],
                }
            ),
        ),
        Payload(
            "schema $ref chain of 2000 ending nowhere",
            "schema",
            chat(guided_json=many_refs),
            compile_bound=True,
        ),
        Payload("schema dangling $ref", "schema", chat(guided_json={"$ref": "#/$defs/nope"})),
        Payload("schema unknown type", "schema", chat(guided_json={"type": "nope"})),
        Payload("schema is a number", "schema", chat(guided_json=5)),
        Payload("schema string not JSON", "schema", chat(guided_json="{not json")),
        Payload(
            "schema enum of 100k",
            "schema",
            chat(guided_json={"enum": [f"v{i}" for i in range(100_000)]}),
        ),
        Payload(
            "schema minItems 1e9",
            "schema",
            chat(guided_json={"type": "array", "items": {"type": "integer"}, "minItems": 10**9}),
        ),
        Payload(
            "schema catastrophic pattern",
            "schema",
            chat(guided_json={"type": "string", "pattern": "(a|aa){1,100000}b"}),
        ),
        Payload(
            "schema contradictory",
            "schema",
            chat(guided_json={"type": "integer", "minimum": 10, "maximum": 1}),
            compile_bound=True,
        ),
    ]


def regex_payloads() -> list[Payload]:
    big = "a" * (200 * 1024)
    return [
        Payload(
            "regex a{2147483647}",
            "regex",
            completion(guided_regex="a{2147483647}"),
            COMPLETIONS,
        ),
        Payload("regex unbalanced ((((", "regex", chat(guided_regex="((((")),
        Payload("regex 200 KB", "regex", chat(guided_regex=big), echo=big[:2000]),
        Payload("regex backreference", "regex", chat(guided_regex=r"(a)\1")),
        Payload("regex lookahead", "regex", chat(guided_regex="(?=a)a")),
        Payload(
            "regex nested bounds (a{1000}){1000}", "regex", chat(guided_regex="(a{1000}){1000}")
        ),
    ]


def pathological_payloads() -> list[Payload]:
    """Valid but pathological constraints: each either compiles within the budget and then
    works (200), or is a 400 naming the budget; never a hang or a 5xx."""
    either = frozenset({200, 400})
    alternation = "|".join(f"[ab]*a[ab]{{{i % 20 + 5}}}x{i}" for i in range(2000))
    return [
        Payload(
            "regex state explosion [ab]*a[ab]{20}",
            "pathological",
            chat(guided_regex="[ab]*a[ab]{20}"),
            expect=either,
            compile_bound=True,
        ),
        Payload(
            "regex (a+)+b",
            "pathological",
            chat(guided_regex="(a+)+b"),
            expect=either,
            compile_bound=True,
        ),
        Payload(
            "regex 2000-way alternation of wildcards",
            "pathological",
            chat(guided_regex=alternation),
            expect=either,
            compile_bound=True,
        ),
        Payload("regex foo**", "pathological", chat(guided_regex="foo**"), expect=either),
        Payload("regex NUL byte", "pathological", chat(guided_regex="a\x00b"), expect=either),
        Payload(
            "grammar left-recursive with a base case",
            "pathological",
            chat(guided_grammar='start: start "a" | "b"'),
            expect=either,
            compile_bound=True,
        ),
        Payload(
            "schema recursive tree",
            "pathological",
            chat(
                guided_json={
                    "type": "object",
                    "properties": {"kids": {"type": "array", "items": {"$ref": "#"}}},
                }
            ),
            expect=either,
            compile_bound=True,
        ),
    ]


def grammar_payloads() -> list[Payload]:
    return [
        Payload("grammar malformed", "grammar", chat(guided_grammar="start: (")),
        Payload("grammar undefined rule", "grammar", chat(guided_grammar="start: foo")),
        Payload("grammar start derives nothing", "grammar", chat(guided_grammar="start: start")),
        Payload(
            "grammar left-recursive, no base case",
            "grammar",
            chat(guided_grammar='start: start "a" | start "b"'),
        ),
        Payload("grammar no start rule", "grammar", chat(guided_grammar='foo: "a"')),
        Payload(
            "grammar 3 MB",
            "grammar",
            chat(guided_grammar="start: " + " | ".join(f'"w{i}"' for i in range(300_000))),
        ),
        Payload("grammar NUL and garbage", "grammar", chat(guided_grammar="\x00\x01 ::= ::= |")),
    ]


def choice_payloads() -> list[Payload]:
    return [
        Payload("choice empty", "choice", chat(guided_choice=[])),
        Payload(
            "choice 200k entries", "choice", chat(guided_choice=[f"c{i}" for i in range(200_000)])
        ),
        Payload("choice of non-strings", "choice", chat(guided_choice=[1, {"a": 2}])),
        Payload(
            "two constraints at once",
            "choice",
            chat(guided_choice=["a", "b"], guided_regex="a"),
        ),
    ]


def id_payloads(vocab: int) -> list[Payload]:
    many_bias = {str(i): 1.0 for i in range(200_000)}
    return [
        Payload("logit_bias id >= vocab", "ids", chat(logit_bias={str(vocab + 7): 5})),
        Payload("logit_bias id -1", "ids", chat(logit_bias={"-1": 5})),
        Payload("logit_bias id not a number", "ids", chat(logit_bias={"abc": 5})),
        Payload("logit_bias value 1e300", "ids", chat(logit_bias={"5": 1e300})),
        Payload("logit_bias 200k entries", "ids", chat(logit_bias=many_bias)),
        Payload("stop_token_ids 1e12", "ids", chat(stop_token_ids=[10**12])),
        Payload("stop_token_ids valid then -5", "ids", chat(stop_token_ids=[2, -5])),
        Payload(
            "prompt ids valid then >= vocab",
            "ids",
            completion(prompt=[1, 2, 3, vocab]),
            COMPLETIONS,
        ),
        Payload("prompt ids negative", "ids", completion(prompt=[[5, -3]]), COMPLETIONS),
        Payload("prompt ids 2**70", "ids", completion(prompt=[2**70]), COMPLETIONS),
        Payload(
            "embedding ids >= vocab",
            "ids",
            json.dumps({"input": [[1, vocab + 1]]}).encode(),
            EMBEDDINGS,
        ),
        Payload("detokenize id -1", "ids", json.dumps({"tokens": [-1]}).encode(), "/detokenize"),
    ]


def param_payloads(max_model_len: int) -> list[Payload]:
    return [
        Payload("n 1e9", "params", chat(n=10**9)),
        Payload("max_tokens 1e12", "params", chat(max_tokens=10**12)),
        Payload("max_tokens 0", "params", chat(max_tokens=0)),
        Payload("max_tokens beyond the context", "params", chat(max_tokens=max_model_len + 1)),
        Payload("min_tokens 1e9", "params", chat(min_tokens=10**9)),
        Payload("min_tokens > max_tokens", "params", chat(min_tokens=50, max_tokens=5)),
        Payload("top_logprobs 1e6", "params", chat(logprobs=True, top_logprobs=10**6)),
        Payload("completion logprobs 1e6", "params", completion(logprobs=10**6), COMPLETIONS),
        Payload("temperature NaN", "params", chat(temperature=float("nan"))),
        Payload("top_p Infinity", "params", chat(top_p=float("inf"))),
        Payload("best_of 1e6", "params", completion(best_of=10**6), COMPLETIONS),
        Payload(
            "embedding dimensions 1e9",
            "params",
            json.dumps({"input": "a", "dimensions": 10**9}).encode(),
            EMBEDDINGS,
        ),
    ]


def size_payloads(max_model_len: int) -> list[Payload]:
    return [
        Payload(
            "prompt beyond the context", "size", chat(messages=_msgs("word " * (max_model_len * 3)))
        ),
        Payload("50k messages", "size", chat(messages=_msgs("a") * 50_000)),
        Payload("stop list of 100k", "size", chat(stop=[f"s{i}" for i in range(100_000)])),
        Payload("stop string of 1 MB", "size", chat(stop="x" * MB), echo="x" * 5000),
        Payload(
            "embedding 100k inputs",
            "size",
            json.dumps({"input": ["a"] * 100_000}).encode(),
            EMBEDDINGS,
        ),
        Payload(
            "body of 17 MB", "size", chat(messages=_msgs("a" * (17 * MB))), expect=frozenset({413})
        ),
        Payload(
            "header of 64 KB",
            "size",
            chat(),
            headers={"X-Pad": "a" * (64 << 10)},
            expect=frozenset({431}),
        ),
        Payload(
            "200 headers",
            "size",
            chat(),
            headers={f"X-H{i}": "v" for i in range(200)},
            expect=frozenset({431}),
        ),
    ]


def encoding_payloads() -> list[Payload]:
    return [
        Payload(
            "invalid UTF-8 in body",
            "encoding",
            b'{"messages": [{"role": "user", "content": "\xff\xfe\x80"}]}',
        ),
        Payload(
            "overlong UTF-8 NUL",
            "encoding",
            b'{"messages": [{"role": "user", "content": "\xc0\x80"}]}',
        ),
        Payload(
            "lone surrogate in content",
            "encoding",
            b'{"messages": [{"role": "user", "content": "a\\ud800b"}]}',
        ),
        Payload(
            "lone surrogate in model",
            "encoding",
            b'{"model": "\\udfff", "messages": [{"role": "user", "content": "a"}]}',
            expect=frozenset({400, 404}),
        ),
        Payload(
            "lone surrogate in regex",
            "encoding",
            b'{"messages": [{"role": "user", "content": "a"}], "guided_regex": "\\ud800+"}',
        ),
        Payload(
            "lone surrogate in stop",
            "encoding",
            b'{"messages": [{"role": "user", "content": "a"}], "stop": ["\\udc00"]}',
        ),
        Payload("lone surrogate in embeddings", "encoding", b'{"input": "\\ud83d"}', EMBEDDINGS),
        Payload("UTF-16 body", "encoding", '{"messages": []}'.encode("utf-16")),
    ]


def type_payloads() -> list[Payload]:
    return [
        Payload("body is an array", "types", b"[1, 2, 3]"),
        Payload("body is null", "types", b"null"),
        Payload("body is empty", "types", b""),
        Payload("messages is a string", "types", json.dumps({"messages": "hi"}).encode()),
        Payload("max_tokens is a string", "types", chat(max_tokens="many")),
        Payload(
            "role unknown after a valid message",
            "types",
            chat(messages=[*_msgs(), {"role": "wizard", "content": "x"}]),
        ),
        Payload(
            "content part of unknown type",
            "types",
            chat(
                messages=[
                    {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}
                ]
            ),
        ),
        Payload(
            "tool with bad name",
            "types",
            chat(tools=[{"type": "function", "function": {"name": "a b;drop", "parameters": {}}}]),
        ),
        Payload(
            "tool_choice names a missing tool",
            "types",
            chat(tool_choice={"type": "function", "function": {"name": "nope"}}),
        ),
        Payload("unknown field", "types", chat(functions=[{"name": "f"}])),
        Payload("tokenize empty messages", "types", b'{"messages": []}', "/tokenize"),
    ]


def build_corpus(vocab_size: int, max_model_len: int) -> list[Payload]:
    """Every hostile payload for a server whose model has this vocabulary and context."""
    return [
        *schema_payloads(),
        *regex_payloads(),
        *grammar_payloads(),
        *pathological_payloads(),
        *choice_payloads(),
        *id_payloads(vocab_size),
        *param_payloads(max_model_len),
        *size_payloads(max_model_len),
        *encoding_payloads(),
        *type_payloads(),
        *responses_payloads(max_model_len),
    ]
