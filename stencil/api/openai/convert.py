"""Request -> engine input: prompt token ids, SamplingParams and at most one Constraint.

Every bad input becomes an ``APIError`` (HTTP 400 naming the field) here, before anything is
scheduled.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from stencil.api.errors import bad_request
from stencil.api.model_info import ModelInfo
from stencil.api.openai.messages import content_text, render_chat
from stencil.api.openai.prompt_size import PromptTooLong, tokenize_bounded
from stencil.api.openai.protocol import (
    KNOWN_BACKENDS,
    AssistantMessage,
    ChatCompletionRequest,
    CompletionRequest,
    SamplingFields,
    SystemMessage,
)
from stencil.api.openai.structured_output import (
    Grounding,
    Source,
    build_constraint,
    collect_sources,
    whitespace_options,
)
from stencil.api.openai.surface import check_completion_surface
from stencil.api.tools.constraint import tool_sources
from stencil.api.tools.formats import SMOLLM2, ToolCallFormat
from stencil.api.tools.harmony import FINAL_MARKER
from stencil.api.tools.plan import ToolPlan, function_tools, plan_tools
from stencil.constraints import Constraint
from stencil.engine.errors import RequestError
from stencil.engine.sampling_params import SamplingParams


@dataclass(slots=True)
class Plan:
    """One engine request (a completion prompt, or the whole chat)."""

    prompt_ids: list[int]
    prompt_text: str
    params: SamplingParams
    tools: ToolPlan | None = None
    tool_format: ToolCallFormat = SMOLLM2
    echo_text: str = ""
    constraint_param: str | None = None  # the field that named the constraint (for 400s)
    harmony: bool = False  # the reply is in GPT-OSS's harmony format (``harmony_parser``)
    answer: bool = False  # tools in auto with a JSON answer format: calls or the answer


# ---- chat -------------------------------------------------------------------------------------


def convert_chat(req: ChatCompletionRequest, model: ModelInfo) -> Plan:
    """Convert a chat request; raises APIError (400) for anything that cannot be honoured."""
    _check_common(req)
    if req.top_logprobs is not None and not req.logprobs:
        raise bad_request("top_logprobs requires logprobs to be true", "top_logprobs")
    if req.continue_final_message and req.add_generation_prompt:
        raise bad_request(
            "continue_final_message and add_generation_prompt cannot both be true",
            "continue_final_message",
        )
    plan = plan_tools(function_tools(req.tools), req.tool_choice, req.parallel_tool_calls)
    if model.harmony is not None:
        _check_harmony_messages(req)
    fmt = model.call_format
    harmony = model.harmony is not None
    text = render_chat(req, model.tokenizer, plan, model.max_model_len, fmt, harmony)
    ids = prompt_ids(model, text, "messages")
    sources = collect_sources(req)
    tokens, special = model.call_tokens
    if plan is not None:
        sources = tool_sources(req, sources, plan, fmt, tokens, model.harmony)
    constraint = _single_constraint(req, sources)
    max_tokens = req.max_completion_tokens or req.max_tokens
    params = sampling_params(req, len(ids), max_tokens, constraint, model)
    if plan is not None and special:
        params.skip_special_tokens = False  # the trigger token's text marks where calls begin
    if model.harmony is not None:
        params.skip_special_tokens = False  # the channels are parsed from the special tokens
        if plan is None and constraint is not None:
            params.reasoning_end = FINAL_MARKER  # the answer channel only; analysis is free
    if req.logprobs:
        params.logprobs = req.top_logprobs or 0
    echo = ""
    last = req.messages[-1]
    if req.echo and isinstance(last, AssistantMessage):
        echo = content_text(last.content)
    param = sources[0].param if sources else None
    answer = any(s.kind == "calls_or_answer" for s in sources)
    return Plan(ids, text, params, plan, fmt, echo, param, model.harmony is not None, answer)


def _check_harmony_messages(req: ChatCompletionRequest) -> None:
    """GPT-OSS's template takes one system or developer message, the first (its instructions);
    a later one would be dropped silently, so it is a 400."""
    for i, m in enumerate(req.messages[1:], start=1):
        if isinstance(m, SystemMessage):
            raise bad_request(
                f"a {m.role} message is only allowed first for this model (GPT-OSS's harmony "
                "template renders the first system or developer message as its instructions)",
                f"messages.{i}.role",
            )


# ---- completions ------------------------------------------------------------------------------


def convert_completion(req: CompletionRequest, model: ModelInfo) -> list[Plan]:
    """Convert a completion request into one plan per prompt."""
    _check_common(req)
    check_completion_surface(req)
    if req.best_of is not None and req.best_of != req.n:
        raise bad_request("best_of must equal n (no server-side reranking)", "best_of")
    if req.echo and req.logprobs is not None:
        raise bad_request("echo with logprobs (prompt logprobs) is not supported", "echo")
    sources = collect_sources(req)
    constraint = _single_constraint(req, sources)
    plans = []
    for ids, text in _prompts(req.prompt, model):
        params = sampling_params(req, len(ids), req.max_tokens, constraint, model)
        params.logprobs = req.logprobs
        echo = text if req.echo else ""
        param = sources[0].param if sources else None
        plans.append(Plan(ids, text, params, echo_text=echo, constraint_param=param))
    return plans


def _prompts(prompt: Any, model: ModelInfo) -> list[tuple[list[int], str]]:
    tok = model.tokenizer
    if isinstance(prompt, str):
        prompt = [prompt]
    if not prompt:
        raise bad_request("prompt must not be empty", "prompt")
    if all(isinstance(p, int) for p in prompt):
        prompt = [prompt]
    out = []
    for p in prompt:
        if isinstance(p, str):
            out.append((prompt_ids(model, p, "prompt", True), p))
            continue
        bad = [i for i in p if not 0 <= i < model.vocab_size]
        if bad:
            raise bad_request(f"prompt token ids {bad[:5]} are outside the vocabulary", "prompt")
        out.append((list(p), tok.decode(p)))
    if any(not ids for ids, _ in out):
        raise bad_request("prompt must not be empty", "prompt")
    return out


# ---- shared -----------------------------------------------------------------------------------


def prompt_ids(model: ModelInfo, text: str, param: str, special: bool = False) -> list[int]:
    """Token ids of ``text``; a 400 naming ``param`` once it is sure to exceed the context
    (without tokenizing all of a huge prompt)."""
    try:
        return tokenize_bounded(model.tokenizer, text, model.max_model_len, special)
    except PromptTooLong as e:
        raise bad_request(f"{e} (this model's context)", param) from None


def _check_common(req: SamplingFields) -> None:
    if req.stream_options is not None and not req.stream:
        raise bad_request("stream_options is only allowed when stream is true", "stream_options")
    backend = req.guided_decoding_backend
    if backend is not None and backend not in KNOWN_BACKENDS:
        raise bad_request(
            f"unknown guided_decoding_backend {backend!r}; known: {', '.join(KNOWN_BACKENDS)}",
            "guided_decoding_backend",
        )


def _single_constraint(req: SamplingFields, sources: list[Source]) -> Constraint | None:
    ws = whitespace_options(req)
    grounding = Grounding.of(req)
    if len(sources) > 1:
        names = " and ".join(s.param for s in sources)
        raise bad_request(
            f"only one structured-output constraint per request, got {names}", sources[1].param
        )
    if not sources:
        if ws:
            raise bad_request(
                "a whitespace option needs a JSON constraint (json schema or json object)",
                ws.param,
            )
        if grounding:
            raise bad_request(
                "structured_outputs.source_text needs a JSON schema to ground",
                "structured_outputs.source_text",
            )
        return None
    src = sources[0]
    if ws and src.kind not in ("json", "json_object", "calls_or_answer"):
        raise bad_request(f"{ws.param} applies only to JSON constraints", ws.param)
    return build_constraint(src, ws, grounding)


def sampling_params(
    req: SamplingFields,
    prompt_len: int,
    max_tokens: int | None,
    constraint: Constraint | None,
    model: ModelInfo,
) -> SamplingParams:
    """Build validated SamplingParams; RequestError becomes a 400 naming the field."""
    room = model.max_model_len - prompt_len
    if room <= 0:
        raise bad_request(
            f"the prompt is {prompt_len} tokens; this model's context is {model.max_model_len}",
            "messages" if hasattr(req, "messages") else "prompt",
        )
    if max_tokens is not None and max_tokens > room:
        raise bad_request(
            f"this model's maximum context length is {model.max_model_len} tokens; the request "
            f"asks for {prompt_len + max_tokens} ({prompt_len} prompt + {max_tokens} completion)",
            "max_completion_tokens"
            if getattr(req, "max_completion_tokens", None)
            else "max_tokens",
        )
    _check_ids(req, model.vocab_size)
    fields: dict[str, Any] = dict(
        n=req.n,
        max_tokens=max_tokens if max_tokens is not None else room,
        min_tokens=req.min_tokens,
        temperature=_or(req.temperature, 1.0),
        top_p=_or(req.top_p, 1.0),
        top_k=_or(req.top_k, 0),
        min_p=_or(req.min_p, 0.0),
        seed=req.seed,
        presence_penalty=_or(req.presence_penalty, 0.0),
        frequency_penalty=_or(req.frequency_penalty, 0.0),
        repetition_penalty=_or(req.repetition_penalty, 1.0),
        logit_bias=_logit_bias(req.logit_bias),
        stop=_stop(req.stop),
        stop_token_ids=list(req.stop_token_ids or []),
        ignore_eos=req.ignore_eos,
        skip_special_tokens=req.skip_special_tokens,
        include_stop_str_in_output=req.include_stop_str_in_output,
        constraint=constraint,
        close_on_length=constraint is not None,
    )
    return _validated(lambda: SamplingParams(**fields), model.vocab_size)


def _validated(make: Callable[[], SamplingParams], vocab_size: int) -> SamplingParams:
    try:
        params = make()
        params.check_token_ids(vocab_size)
    except RequestError as e:
        raise bad_request(str(e), _param_of(str(e))) from None
    return params


def _param_of(message: str) -> str | None:
    m = re.match(r"(?:at most \d+ )?([a-z_]+)", message)
    if not m:
        return None
    word = m.group(1)
    if word == "token":
        return "logit_bias" if "logit" in message else "stop_token_ids"
    return {"stop": "stop", "logit_bias": "logit_bias"}.get(word, word)


def _check_ids(req: SamplingFields, vocab_size: int) -> None:
    for param, ids in (
        ("logit_bias", req.logit_bias or {}),
        ("stop_token_ids", req.stop_token_ids or []),
    ):
        for i in ids:
            if not str(i).lstrip("-").isdigit():
                continue  # reported by _logit_bias
            if not 0 <= int(i) < vocab_size:
                raise bad_request(
                    f"token id {i} is outside the vocabulary [0, {vocab_size})", param
                )


def _or(value: Any, default: Any) -> Any:
    return default if value is None else value


def _stop(stop: str | list[str] | None) -> list[str]:
    if stop is None:
        return []
    return [stop] if isinstance(stop, str) else list(stop)


def _logit_bias(bias: dict[str, float] | None) -> dict[int, float] | None:
    if not bias:
        return None
    out = {}
    for key, value in bias.items():
        try:
            out[int(key)] = float(value)
        except ValueError:
            raise bad_request(f"logit_bias key {key!r} is not a token id", "logit_bias") from None
    return out
