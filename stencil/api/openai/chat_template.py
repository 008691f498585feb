"""Message dicts (and the ``tools`` argument) -> the prompt text, through the served model's
chat template; a template that cannot take a system message gets it folded into the first user
turn, and any error of the template is a 400."""

from __future__ import annotations

from typing import Any

from stencil.api.errors import bad_request

_NO_SYSTEM_ROLE = "System role not supported"  # Gemma 2's template raises this
_RESERVED_TEMPLATE_KWARGS = {
    "messages",
    "conversation",
    "tools",
    "tokenize",
    "add_generation_prompt",
    "continue_final_message",
    "return_dict",
}


def apply_chat_template(
    tokenizer: Any,
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]] | None,
    *,
    add_generation_prompt: bool,
    continue_final_message: bool,
    template_fields: dict[str, Any],
    chat_template_kwargs: dict[str, Any] | None,
) -> str:
    """The prompt text. ``template_fields``: the request fields the template reads
    (``surface``); ``chat_template_kwargs``: the caller's own, which may not set what the
    server sets."""
    kwargs = dict(chat_template_kwargs or {})
    clash = sorted(_RESERVED_TEMPLATE_KWARGS & kwargs.keys())
    if clash:
        raise bad_request(f"chat_template_kwargs may not set {clash}", "chat_template_kwargs")
    kwargs.update(template_fields)
    if _NO_SYSTEM_ROLE in (getattr(tokenizer, "chat_template", None) or ""):
        messages = _fold_system(messages)
    try:
        return tokenizer.apply_chat_template(
            messages,
            tools=tools,
            add_generation_prompt=add_generation_prompt,
            continue_final_message=continue_final_message,
            tokenize=False,
            **kwargs,
        )
    except Exception as e:  # jinja errors, template raise_exception(), bad kwargs
        raise bad_request(f"the chat template could not render messages: {e}", "messages") from None


def _fold_system(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A leading system message as the start of the first user turn (Gemma 3's template does
    this itself; Gemma 2's refuses a system message)."""
    if len(messages) < 2 or messages[0]["role"] != "system" or messages[1]["role"] != "user":
        return messages
    first = dict(messages[1], content=f"{messages[0]['content']}\n\n{messages[1]['content']}")
    return [first, *messages[2:]]
