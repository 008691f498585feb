"""``POST /v1/playground/trace``: one chat completion (the body ``/v1/chat/completions`` takes,
or ``/v1/completions`` for a base model's plain prompt, read and converted by the same code) generated with the engine's constraint trace on; the answer
lists every output token with how it came (``sampled`` among ``allowed`` tokens, ``forced`` by
the grammar, ``closed`` by close_on_length) and the time spent in mask fills vs forward passes."""

from __future__ import annotations

import dataclasses
import uuid
from typing import Any

from stencil.api.errors import bad_request
from stencil.api.openai.convert import convert_chat, convert_completion
from stencil.api.openai.protocol import ChatCompletionRequest, CompletionRequest
from stencil.api.read_request import check_model, parse
from stencil.api.request_plan import Plan
from stencil.api.state import AppState


def request_plan(st: AppState, body: dict[str, Any]) -> Plan:
    """``body`` read and converted as ``/v1/chat/completions`` does, or as ``/v1/completions``
    for a plain prompt (a base model's)."""
    if "prompt" in body:
        req = parse(CompletionRequest, body)
        check_model(req.model, st)
        return convert_completion(req, st.model)[0]
    req = parse(ChatCompletionRequest, body)
    check_model(req.model, st)
    return convert_chat(req, st.model)


async def traced_completion(st: AppState, body: Any) -> dict[str, Any]:
    """Generate ``body`` (one choice, not streamed) with the trace on; its tokens and timings."""
    if not isinstance(body, dict):
        raise bad_request("the body must be a chat completion request (a JSON object)")
    body = {k: v for k, v in body.items() if k != "stream_options"} | {"stream": False}
    if body.get("n") not in (None, 1):
        raise bad_request("a trace follows one choice: n must be 1", "n")
    plan = request_plan(st, body)
    params = dataclasses.replace(plan.params, trace=True)
    rid = f"playground-trace-{uuid.uuid4().hex}"
    gen = await st.runner.open(plan.prompt_ids, params, rid, plan.constraint_param)
    last = None
    async for out in gen:
        last = out
    choice = last.outputs[0]
    trace = choice.trace
    decode = st.model.tokenizer.decode
    tokens = [
        {"id": s.token_id, "text": decode([s.token_id]), "kind": s.kind, "allowed": s.allowed}
        for s in (trace.steps if trace is not None else [])
    ]
    return {
        "text": choice.text,
        "finish_reason": choice.finish_reason,
        "constrained": plan.params.constraint is not None,
        "vocab_size": st.model.vocab_size,
        "tokens": tokens,
        "steps": trace.num_steps if trace is not None else 0,
        "mask_seconds": trace.mask_seconds if trace is not None else 0.0,
        "forward_seconds": trace.forward_seconds if trace is not None else 0.0,
    }
