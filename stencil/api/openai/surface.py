"""What the server does with every field of OpenAI's chat and completion requests.

Each field the ``openai`` package can send is one of:

- ``honoured``: it changes the output as OpenAI documents;
- ``template``: passed to the model's chat template, which gives it its effect; a 400 when the
  served model's template has no place for it (it would otherwise be silently ignored);
- ``advisory``: identifying, billing, caching or latency hints that do not change the output
  (``user``, ``metadata``, ``store``, ...): accepted, no effect, no error;
- ``refused``: a 400 naming the field and saying why, whenever it is set to anything but its
  no-op value.

``tests/api/test_request_surface.py`` builds the field lists from the installed ``openai``
package's request TypedDicts, so a field a new SDK adds fails a test until it is classified here
(and in docs/server.md's table).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from stencil.api.errors import bad_request
from stencil.api.openai.protocol import KNOWN_BACKENDS

Treatment = Literal["honoured", "template", "advisory", "refused"]


@dataclass(slots=True, frozen=True)
class Field:
    treatment: Treatment
    note: str


_SAMPLING = {
    "model": Field("honoured", "must name the served model (or be omitted)"),
    "frequency_penalty": Field("honoured", "sampling penalty"),
    "presence_penalty": Field("honoured", "sampling penalty"),
    "logit_bias": Field("honoured", "added to the logits before the constraint's mask"),
    "max_tokens": Field("honoured", "completion budget; constrained outputs close within it"),
    "n": Field(
        "honoured", "1-16 choices; with tools in `auto` each choice is text or calls on its own"
    ),
    "seed": Field("honoured", "per-request sampling seed"),
    "stop": Field("honoured", "stop strings"),
    "stream": Field("honoured", "server-sent events"),
    "stream_options": Field("honoured", "include_usage adds a final usage chunk"),
    "temperature": Field("honoured", "0-2; 0 is greedy"),
    "top_p": Field("honoured", "nucleus sampling"),
    "user": Field("advisory", "an end-user id for the caller's own records"),
}

CHAT_FIELDS: dict[str, Field] = {
    **_SAMPLING,
    "messages": Field("honoured", "rendered with the model's chat template; text parts only"),
    "max_completion_tokens": Field("honoured", "same as max_tokens (wins when both are set)"),
    "logprobs": Field("honoured", "per-token logprobs of the choice"),
    "top_logprobs": Field("honoured", "0-20 alternatives per token"),
    "response_format": Field(
        "honoured",
        "text, json_object, json_schema (strict or not); beside tools: the answer of auto, "
        "not applied to required or named calls",
    ),
    "tools": Field("honoured", "function tools; custom tools are refused"),
    "tool_choice": Field(
        "honoured",
        "none, auto, required, a named function, allowed_tools; auto with a response format: "
        "the calls or the answer",
    ),
    "parallel_tool_calls": Field("honoured", "false: at most one call"),
    "modalities": Field("honoured", '["text"] only; audio output is refused'),
    "reasoning_effort": Field(
        "template", "for models whose chat template reads it (e.g. gpt-oss); else a 400"
    ),
    "verbosity": Field("template", "for models whose chat template reads it; else a 400"),
    "metadata": Field("advisory", "key-value tags for the caller's records"),
    "store": Field("advisory", "nothing is stored; completions are never kept"),
    "service_tier": Field("advisory", "one service tier; accepted, no effect"),
    "safety_identifier": Field("advisory", "an end-user id for abuse monitoring"),
    "prompt_cache_key": Field("advisory", "prefix caching is automatic"),
    "prompt_cache_retention": Field("advisory", "prefix caching is automatic"),
    "prompt_cache_options": Field("advisory", "prefix caching is automatic"),
    "prediction": Field("advisory", "a latency hint; the output does not depend on it"),
    "audio": Field("refused", "audio output is not available (text models only)"),
    "functions": Field(
        "refused", "the deprecated function-calling API; send tools and tool_choice instead"
    ),
    "function_call": Field(
        "refused", "the deprecated function-calling API; send tools and tool_choice instead"
    ),
    "web_search_options": Field("refused", "this server has no web search"),
    "moderation": Field("refused", "this server runs no moderation model"),
}

COMPLETION_FIELDS: dict[str, Field] = {
    **_SAMPLING,
    "prompt": Field("honoured", "a string, token ids, or a list of either (one choice set each)"),
    "logprobs": Field("honoured", "0-20 alternatives per token"),
    "echo": Field("honoured", "the prompt is prepended to the text"),
    "best_of": Field("honoured", "only equal to n: there is no server-side reranking"),
    "suffix": Field("refused", "insertion (fill-in-the-middle) is not supported"),
}

MESSAGE_FIELDS: dict[str, Field] = {
    "role": Field("honoured", "system, developer, user, assistant, tool"),
    "content": Field("honoured", "a string or text parts (assistant: also refusal parts)"),
    "name": Field("template", "passed to the chat template, which may ignore it (never a 400)"),
    "tool_calls": Field("honoured", "past calls, rendered as the model writes them"),
    "tool_call_id": Field("honoured", "passed to the chat template"),
    "refusal": Field("honoured", "kept as the assistant's text"),
    "audio": Field("refused", "audio is not available (text models only)"),
    "function_call": Field("refused", "the deprecated function-calling API; send tool_calls"),
}

REFUSED_ROLES = {"function": "the deprecated function-calling API; send role 'tool' messages"}


def refuse(field: str, table: dict[str, Field], where: str | None = None) -> None:
    """Raise the 400 for a refused field, with its reason."""
    param = where or field
    raise bad_request(f"{param} is not supported: {table[field].note}", param)


def check_chat_surface(req: Any, template: str) -> dict[str, Any]:
    """400 for a refused chat field that is set, a template field the template cannot use, or
    fields that contradict each other; returns the template fields to pass to the chat
    template."""
    _check_common(req)
    if req.top_logprobs is not None and not req.logprobs:
        raise bad_request("top_logprobs requires logprobs to be true", "top_logprobs")
    if req.continue_final_message and req.add_generation_prompt:
        raise bad_request(
            "continue_final_message and add_generation_prompt cannot both be true",
            "continue_final_message",
        )
    for name, spec in CHAT_FIELDS.items():
        if spec.treatment == "refused" and getattr(req, name, None) is not None:
            refuse(name, CHAT_FIELDS)
    if req.modalities is not None and list(req.modalities) != ["text"]:
        raise bad_request(
            f"modalities {req.modalities} is not supported: only ['text'] (audio output is not "
            "available)",
            "modalities",
        )
    kwargs = {}
    for name, spec in CHAT_FIELDS.items():
        value = getattr(req, name, None)
        if spec.treatment != "template" or value is None:
            continue
        if name not in template:
            raise bad_request(
                f"{name} is not supported by the served model: its chat template has no "
                f"{name} setting (it is not a reasoning model)",
                name,
            )
        kwargs[name] = value
    return kwargs


def check_completion_surface(req: Any) -> None:
    """400 for a refused completion field that is set, or fields that contradict each other."""
    _check_common(req)
    for name, spec in COMPLETION_FIELDS.items():
        if spec.treatment == "refused" and getattr(req, name, None) is not None:
            refuse(name, COMPLETION_FIELDS)
    if req.best_of is not None and req.best_of != req.n:
        raise bad_request("best_of must equal n (no server-side reranking)", "best_of")
    if req.echo and req.logprobs is not None:
        raise bad_request("echo with logprobs (prompt logprobs) is not supported", "echo")


def _check_common(req: Any) -> None:
    if req.stream_options is not None and not req.stream:
        raise bad_request("stream_options is only allowed when stream is true", "stream_options")
    backend = req.guided_decoding_backend
    if backend is not None and backend not in KNOWN_BACKENDS:
        raise bad_request(
            f"unknown guided_decoding_backend {backend!r}; known: {', '.join(KNOWN_BACKENDS)}",
            "guided_decoding_backend",
        )
