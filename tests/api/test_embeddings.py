"""``/v1/embeddings`` against the live server (embedded model): the real openai client (float,
base64, dimensions, token inputs), langchain-openai's ``OpenAIEmbeddings``, a mixed chat +
embedding load, the bad-input table, auth and client disconnects."""

from __future__ import annotations

import base64
import math
import struct
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

TEXTS = [
    "Paged attention stores the KV cache in fixed-size blocks.",
    "The cat sat on the mat.",
    "Ada Lovelace wrote the first published algorithm.",
]
TOL = 1e-4


def _post(server, body, key: str | None = "default", timeout: float = 60.0) -> httpx.Response:
    headers = {} if key is None else {"Authorization": f"Bearer {server.api_key}"}
    return httpx.post(f"{server.v1}/embeddings", json=body, headers=headers, timeout=timeout)


def _close(a: list[float], b: list[float], tol: float = TOL) -> bool:
    return len(a) == len(b) and max(abs(x - y) for x, y in zip(a, b, strict=True)) < tol


def _norm(v: list[float]) -> float:
    return math.sqrt(math.fsum(x * x for x in v))


@pytest.fixture(scope="module")
def client(live_server):
    return live_server.openai()


@pytest.fixture(scope="module")
def reference(client, live_server) -> list[list[float]]:
    """The float embeddings of TEXTS, one per request (no batching)."""
    outs = []
    for t in TEXTS:
        r = client.embeddings.create(model=live_server.model, input=t, encoding_format="float")
        outs.append(r.data[0].embedding)
    return outs


def test_openai_float_shape_and_batch_equals_single(client, live_server, reference):
    r = client.embeddings.create(
        model=live_server.model, input=TEXTS, encoding_format="float", user="u1"
    )
    assert r.object == "list" and r.model == live_server.model
    assert [d.index for d in r.data] == [0, 1, 2] and all(d.object == "embedding" for d in r.data)
    hidden = live_server.engine.engine.hf_config.hidden_size
    assert all(len(d.embedding) == hidden for d in r.data)
    assert all(abs(_norm(d.embedding) - 1.0) < 1e-5 for d in r.data)
    assert all(_close(d.embedding, ref) for d, ref in zip(r.data, reference, strict=True))
    assert not _close(reference[0], reference[1], 1e-2)  # different texts, different vectors
    ids = [live_server.engine.tokenizer(t).input_ids for t in TEXTS]
    assert r.usage.prompt_tokens == r.usage.total_tokens == sum(map(len, ids))


def test_openai_base64(client, live_server, reference):
    # the SDK's default: it asks for base64 and decodes it to floats itself
    r = client.embeddings.create(model=live_server.model, input=TEXTS)
    assert all(_close(d.embedding, ref) for d, ref in zip(r.data, reference, strict=True))
    # explicit base64: little-endian float32 bytes, exactly the float response's values
    raw = client.embeddings.create(
        model=live_server.model, input=TEXTS[:2], encoding_format="base64"
    )
    for d, ref in zip(raw.data, reference[:2], strict=True):
        blob = base64.b64decode(d.embedding)
        assert list(struct.unpack(f"<{len(blob) // 4}f", blob)) == pytest.approx(ref, abs=TOL)


def test_openai_dimensions(client, live_server, reference):
    for fmt in ("float", "base64"):
        r = client.embeddings.create(
            model=live_server.model, input=TEXTS[0], dimensions=32, encoding_format=fmt
        )
        vec = r.data[0].embedding
        if fmt == "base64":
            vec = list(struct.unpack("<32f", base64.b64decode(vec)))
        prefix = reference[0][:32]
        expected = [x / _norm(prefix) for x in prefix]
        assert len(vec) == 32 and abs(_norm(vec) - 1.0) < 1e-5 and _close(vec, expected)


def test_token_id_inputs(client, live_server, reference):
    ids = [live_server.engine.tokenizer(t).input_ids for t in TEXTS]
    one = client.embeddings.create(model=live_server.model, input=ids[0], encoding_format="float")
    assert len(one.data) == 1 and _close(one.data[0].embedding, reference[0])
    many = client.embeddings.create(model=live_server.model, input=ids, encoding_format="float")
    assert all(_close(d.embedding, ref) for d, ref in zip(many.data, reference, strict=True))
    assert many.usage.prompt_tokens == sum(map(len, ids))


def test_langchain_openai_embeddings(live_server, reference):
    from langchain_openai import OpenAIEmbeddings

    emb = OpenAIEmbeddings(
        base_url=live_server.v1,
        api_key=live_server.api_key,
        model=live_server.model,
        check_embedding_ctx_length=False,
    )
    docs = emb.embed_documents(TEXTS)
    assert len(docs) == 3 and all(_close(d, ref) for d, ref in zip(docs, reference, strict=True))
    assert _close(emb.embed_query(TEXTS[1]), reference[1])


def test_mixed_chat_and_embedding_load(client, live_server):
    """8 chat + 8 embedding requests at once share the batch and all succeed."""

    def chat(i: int) -> str:
        r = client.chat.completions.create(
            model=live_server.model,
            messages=[{"role": "user", "content": f"Count to {i + 3}."}],
            max_tokens=8,
            temperature=0.0,
        )
        return r.choices[0].finish_reason

    def embed(i: int) -> int:
        batch = [f"document {i}-{k}: " + "lorem ipsum " * (4 + k) for k in range(4)]
        r = client.embeddings.create(model=live_server.model, input=batch)
        assert all(abs(_norm(d.embedding) - 1.0) < 1e-4 for d in r.data)
        return len(r.data)

    with ThreadPoolExecutor(16) as pool:
        chats = [pool.submit(chat, i) for i in range(8)]
        embeds = [pool.submit(embed, i) for i in range(8)]
        assert [f.result(timeout=120) for f in embeds] == [4] * 8
        assert all(f.result(timeout=120) in ("stop", "length") for f in chats)
    _wait_idle(live_server)


BIG = 2049  # one more than the default max_embedding_inputs


@pytest.mark.parametrize(
    "body, status, param",
    [
        ({"input": []}, 400, "input"),
        ({"input": ""}, 400, "input"),
        ({"input": ["a", "b", ""]}, 400, "input[2]"),
        ({"input": [[1, 2], []]}, 400, "input[1]"),
        ({"input": [[1, 2], [3, 10**9]]}, 400, "input[1]"),
        ({"input": [1, -1]}, 400, "input"),
        ({"input": [[1], [2], [3], [5] * 8192]}, 400, "input[3]"),  # max_model_len 8192
        ({"input": ["a", 1]}, 400, "input"),  # mixed item types
        ({"input": ["a"] * BIG}, 400, "input"),
        ({"input": [[5] * 150] * 2048}, 400, "input"),  # 307,200 tokens > 300,000
        ({"input": "a", "dimensions": 0}, 400, "dimensions"),
        ({"input": "a", "dimensions": 100_000}, 400, "dimensions"),
        ({"input": "a", "encoding_format": "int8"}, 400, "encoding_format"),
        ({"input": "a", "model": "gpt-9"}, 404, "model"),
        ({"input": "a", "foo": 1}, 400, "foo"),
        ({}, 400, "input"),
        ({"input": 3}, 400, "input"),
    ],
)
def test_bad_input(live_server, body, status, param):
    r = _post(live_server, body)
    assert r.status_code == status, r.text
    err = r.json()["error"]
    assert err["param"] == param, err
    assert err["type"] in ("invalid_request_error", "not_found_error")


def test_auth(live_server):
    assert _post(live_server, {"input": "a"}, key=None).status_code == 401
    assert _post(live_server, {"input": "a"}).status_code == 200


def test_client_disconnect_aborts(live_server):
    """A client that gives up aborts the request's unfinished inputs at once."""
    before = live_server.metrics()["request_client_disconnects_total"]
    body = {"input": [[(7 * k + j) % 40_000 + 100 for j in range(500)] for k in range(256)]}
    with pytest.raises(httpx.TimeoutException):
        _post(live_server, body, timeout=1.0)
    _wait_idle(live_server, within=30.0)  # 128k tokens: many minutes of CPU if not aborted
    assert live_server.metrics()["request_client_disconnects_total"] == before + 1


def _wait_idle(server, within: float = 30.0) -> None:
    deadline = time.monotonic() + within
    while server.engine.engine.has_unfinished_requests():
        assert time.monotonic() < deadline, "engine requests left running"
        time.sleep(0.05)
