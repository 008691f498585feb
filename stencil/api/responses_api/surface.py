"""What the server does with every field of OpenAI's ``ResponseCreateParams``, classified as the
chat table is (``stencil.api.openai.surface``): honoured, template, advisory or refused.

``tests/api/test_request_surface.py`` reads the field list from the installed ``openai``
package, so a field a new SDK adds fails a test until it is classified here and in
docs/server.md.
"""

from __future__ import annotations

from stencil.api.errors import bad_request
from stencil.api.openai.surface import Field, refuse
from stencil.api.responses_api.protocol import ResponsesRequest

RESPONSES_FIELDS: dict[str, Field] = {
    "model": Field("honoured", "must name the served model (or be omitted)"),
    "input": Field(
        "honoured",
        "a string or items: messages (text parts), function_call, function_call_output, "
        "reasoning (history)",
    ),
    "instructions": Field(
        "honoured", "a system message before the input (not kept for the next turn)"
    ),
    "max_output_tokens": Field("honoured", "output budget; constrained outputs close within it"),
    "temperature": Field("honoured", "0-2; 0 is greedy"),
    "top_p": Field("honoured", "nucleus sampling"),
    "top_logprobs": Field("honoured", "0-20 alternatives per output token"),
    "text": Field(
        "honoured",
        "format: text, json_object, json_schema (strict or not), beside tools the answer of "
        "auto, not applied to required or named calls; verbosity: template",
    ),
    "tools": Field("honoured", "function tools; built-in tools are refused"),
    "tool_choice": Field(
        "honoured",
        "none, auto, required, a named function, allowed_tools; auto with text.format: the "
        "calls or the answer",
    ),
    "parallel_tool_calls": Field("honoured", "false: at most one call"),
    "max_tool_calls": Field("honoured", "1: at most one call; larger values are refused"),
    "previous_response_id": Field(
        "honoured", "continues a stored response: its input and output come before this input"
    ),
    "store": Field(
        "honoured", "true (default): kept in memory (bounded, LRU) for this API key only"
    ),
    "stream": Field("honoured", "server-sent events in the SDK's event sequence"),
    "include": Field(
        "honoured",
        "message.output_text.logprobs adds logprobs; the others name built-in tool outputs, "
        "never produced here",
    ),
    "truncation": Field(
        "honoured", "disabled: a prompt over the context is a 400; auto is refused"
    ),
    "reasoning": Field(
        "template", "effort goes to the chat template (reasoning models); else a 400"
    ),
    "metadata": Field("advisory", "key-value tags, returned on the response"),
    "user": Field("advisory", "an end-user id for the caller's own records"),
    "safety_identifier": Field("advisory", "an end-user id for abuse monitoring"),
    "service_tier": Field("advisory", "one service tier; accepted, no effect"),
    "prompt_cache_key": Field("advisory", "prefix caching is automatic"),
    "prompt_cache_retention": Field("advisory", "prefix caching is automatic"),
    "prompt_cache_options": Field("advisory", "prefix caching is automatic"),
    "stream_options": Field("advisory", "no obfuscation padding is sent"),
    "background": Field("refused", "background responses are not available; wait for the answer"),
    "conversation": Field(
        "refused", "the Conversations API is not served; use previous_response_id"
    ),
    "prompt": Field("refused", "stored prompt templates live on OpenAI's platform"),
    "context_management": Field("refused", "server-side context compaction is not available"),
    "moderation": Field("refused", "this server runs no moderation model"),
}

LOGPROBS_INCLUDE = "message.output_text.logprobs"


def check_responses_surface(req: ResponsesRequest) -> None:
    """400 for a refused field that is set (``background: false`` is its no-op value)."""
    for name, spec in RESPONSES_FIELDS.items():
        value = getattr(req, name, None)
        if spec.treatment == "refused" and value not in (None, False):
            refuse(name, RESPONSES_FIELDS)
    if req.truncation == "auto":
        raise bad_request(
            "truncation 'auto' is not supported: nothing is dropped from the input silently; "
            "send less input or 'disabled'",
            "truncation",
        )
    if req.max_tool_calls is not None and req.max_tool_calls != 1:
        raise bad_request(
            "max_tool_calls above 1 is not supported: 1 means at most one call, omit it for any "
            "number",
            "max_tool_calls",
        )
