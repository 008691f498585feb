"""``POST /v1/embeddings``: OpenAI's embeddings endpoint on the loaded model.

Each input is one engine embedding request (prefill only, pooled as ``EngineConfig.pooling``
says, L2-normalized, no KV kept after it). The inputs of one HTTP request go to the engine
together, so they share the continuous batch with each other and with generation. Every bad
input is a 400 naming the item (``input[3]``) before anything is scheduled; a client that goes
away aborts the request's unfinished inputs.
"""

from __future__ import annotations

import asyncio
import base64
import math
import struct
import time
import uuid
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from stencil.api.engine_client import EngineClient
from stencil.api.errors import APIError, bad_request
from stencil.api.model_info import ModelInfo
from stencil.api.openai.prompt_tokens import prompt_ids
from stencil.api.openai.protocol import EmbeddingRequest
from stencil.api.openapi import json_body as openapi_body
from stencil.api.read_request import ClientGone, read_request, ready, unless_disconnected
from stencil.api.state import AppState, ServerConfig
from stencil.engine.errors import EngineError, QueueFullError

# Engine requests in flight per HTTP request: enough to fill the running batch, few enough that
# a max_embedding_inputs request stays inside the engine's waiting queue.
MAX_IN_FLIGHT = 256

Item = tuple[str, list[int]]  # (the request field it came from, e.g. "input[3]"; token ids)


def embedding_routes(state: AppState) -> APIRouter:
    router = APIRouter()

    @router.post("/v1/embeddings", openapi_extra=openapi_body(EmbeddingRequest))
    async def embeddings(request: Request) -> Response:
        st = ready(state)
        req = await read_request(request, st, EmbeddingRequest)
        dims = _check_dimensions(req.dimensions, st.engine)
        items = embedding_inputs(req.input, st.model, st.config)
        start = time.perf_counter()
        work = embed_all(st.runner, items, f"embd-{uuid.uuid4().hex}")
        try:
            vectors = await unless_disconnected(request, st, work)
        except ClientGone:
            return Response(status_code=499)
        st.metrics.e2e.observe(time.perf_counter() - start)
        st.metrics.finished["stop"] += 1
        return JSONResponse(embedding_response(vectors, items, dims, req.encoding_format, st))

    return router


def embedding_inputs(value: Any, model: ModelInfo, config: ServerConfig) -> list[Item]:
    """Token ids per input; raises APIError (400) naming the bad item."""
    if isinstance(value, str) or (value and all(isinstance(x, int) for x in value)):
        entries: list[tuple[str, Any]] = [("input", value)]  # one text or one token list
    elif not value:
        raise bad_request("input must not be an empty list", "input")
    else:
        entries = [(f"input[{i}]", v) for i, v in enumerate(value)]
    if len(entries) > config.max_embedding_inputs:
        raise bad_request(
            f"input has {len(entries)} items; at most {config.max_embedding_inputs} are allowed",
            "input",
        )
    for param, v in entries:
        if not v:
            what = "an empty string" if isinstance(v, str) else "an empty token list"
            raise bad_request(f"{param} is {what}", param)
    for param, v in entries:  # a huge text is a 400 before the whole batch is tokenized
        if isinstance(v, str) and len(v) > 4 * model.max_model_len:
            prompt_ids(model.tokenizer, v, model.max_model_len, param, True)
    texts = [v for _, v in entries if isinstance(v, str)]
    encoded = iter(model.tokenizer(texts, add_special_tokens=True).input_ids if texts else [])
    items = [(p, next(encoded) if isinstance(v, str) else list(v)) for p, v in entries]
    total = 0
    for param, ids in items:
        _check_item(param, ids, model)
        total += len(ids)
    if total > config.max_embedding_tokens:
        raise bad_request(
            f"input has {total} tokens in all; at most {config.max_embedding_tokens} are allowed "
            "per request",
            "input",
        )
    return items


def _check_item(param: str, ids: list[int], model: ModelInfo) -> None:
    bad = [i for i in ids if not 0 <= i < model.vocab_size]
    if bad:
        raise bad_request(
            f"{param}: token ids {bad[:5]} are outside the vocabulary [0, {model.vocab_size})",
            param,
        )
    if not ids:
        raise bad_request(f"{param} has no tokens", param)
    if len(ids) >= model.max_model_len:  # the engine's prompt limit
        raise bad_request(
            f"{param} has {len(ids)} tokens; at most {model.max_model_len - 1} fit this model's "
            f"context (max_model_len {model.max_model_len})",
            param,
            code="context_length_exceeded",
        )


def _check_dimensions(dims: int | None, engine: Any) -> int | None:
    hidden = engine.embedding_size
    if dims is not None and dims > hidden:
        raise bad_request(
            f"dimensions={dims} is larger than the model's embedding size {hidden}", "dimensions"
        )
    return dims


async def embed_all(runner: EngineClient, items: list[Item], request_id: str) -> list[list[float]]:
    """Every item's embedding, in order; the items are in the engine at the same time (up to
    ``MAX_IN_FLIGHT``). On any error or cancellation the unfinished ones are aborted."""
    gate = asyncio.Semaphore(MAX_IN_FLIGHT)
    started: set[str] = set()

    async def one(i: int, param: str, ids: list[int]) -> list[float]:
        rid = f"{request_id}-{i}"
        async with gate:
            started.add(rid)
            try:
                vec = await runner.engine.embed(ids, request_id=rid)
            except Exception as e:
                raise _engine_error(e, param, runner.engine) from None
            started.discard(rid)
            return vec

    tasks = [asyncio.ensure_future(one(i, p, ids)) for i, (p, ids) in enumerate(items)]
    try:
        return list(await asyncio.gather(*tasks))
    finally:
        for t in tasks:
            t.cancel()
        for rid in started:
            runner.abort_soon(rid)


def _engine_error(e: Exception, param: str, engine: Any) -> Exception:
    if isinstance(e, QueueFullError):
        return APIError(
            str(e) or "the request queue is full",
            status=503,
            type="server_error",
            code="queue_full",
            headers={"Retry-After": "1"},
        )
    if isinstance(e, EngineError) and not engine.is_healthy():
        return APIError(
            f"the engine is not available: {e}",
            status=503,
            type="server_error",
            code="engine_unavailable",
        )
    if isinstance(e, EngineError):
        return APIError(str(e), status=500, type="server_error", code="embedding_error")
    if isinstance(e, ValueError):  # RequestError
        return bad_request(f"{param}: {e}", param)
    return e


def embedding_response(
    vectors: list[list[float]], items: list[Item], dims: int | None, fmt: str, st: AppState
) -> dict[str, Any]:
    data = [
        {"object": "embedding", "index": i, "embedding": encode(v, dims, fmt)}
        for i, v in enumerate(vectors)
    ]
    tokens = sum(len(ids) for _, ids in items)
    return {
        "object": "list",
        "data": data,
        "model": st.model_name,
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
    }


def encode(vec: list[float], dims: int | None, fmt: str) -> list[float] | str:
    """Truncate to ``dims`` (and renormalize), then a float list or base64 of little-endian
    float32 bytes (what the openai SDK decodes)."""
    if dims is not None and dims < len(vec):
        vec = vec[:dims]
        norm = math.sqrt(math.fsum(x * x for x in vec))
        if norm > 0:
            vec = [x / norm for x in vec]
    if fmt == "base64":
        return base64.b64encode(struct.pack(f"<{len(vec)}f", *vec)).decode("ascii")
    return vec
