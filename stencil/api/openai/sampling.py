"""A request's sampling fields -> validated ``SamplingParams`` (every bad value a 400 naming its
field), with the completion budget checked against the context."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from stencil.api.errors import bad_request
from stencil.api.openai.protocol import SamplingFields
from stencil.constraints import Constraint
from stencil.engine.errors import RequestError
from stencil.engine.sampling_params import SamplingParams


def sampling_params(
    req: SamplingFields,
    *,
    prompt_len: int,
    prompt_param: str,
    max_tokens: int | None,
    max_tokens_param: str,
    constraint: Constraint | None,
    max_model_len: int,
    vocab_size: int,
) -> SamplingParams:
    """Validated SamplingParams from the request's sampling fields, the prompt's length (a
    prompt that fills the context is a 400 on ``prompt_param``), the completion budget (the
    rest of the context when None; beyond it a 400 on ``max_tokens_param``) and the request's
    constraint; a RequestError becomes a 400 naming the field."""
    room = max_model_len - prompt_len
    if room <= 0:
        raise bad_request(
            f"the prompt is {prompt_len} tokens; this model's context is {max_model_len}",
            prompt_param,
        )
    if max_tokens is not None and max_tokens > room:
        raise bad_request(
            f"this model's maximum context length is {max_model_len} tokens; the request "
            f"asks for {prompt_len + max_tokens} ({prompt_len} prompt + {max_tokens} completion)",
            max_tokens_param,
        )
    _check_ids(req, vocab_size)
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
    return _validated(lambda: SamplingParams(**fields), vocab_size)


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
