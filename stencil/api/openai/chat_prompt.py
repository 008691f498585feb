"""Chat messages -> the prompt (text and token ids): the messages checked and read
(``messages``), the tools and past calls written in the model's format (``tools.prompt``),
the chat template applied (``chat_template``) and the text tokenized within the context
(``prompt_tokens``). Used by chat conversion and ``/tokenize``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from stencil.api.errors import bad_request
from stencil.api.model_info import ModelInfo
from stencil.api.openai.chat_template import apply_chat_template
from stencil.api.openai.messages import chat_messages
from stencil.api.openai.prompt_tokens import prompt_ids
from stencil.api.openai.protocol import Tool
from stencil.api.tools.prompt import prompt_with_tools


@dataclass(slots=True, frozen=True)
class ChatPrompt:
    messages: list[dict[str, Any]]  # as sent (before the tools were written into them)
    text: str
    ids: list[int]


def chat_prompt(
    messages: list[Any],
    model: ModelInfo,
    *,
    offered: tuple[Tool, ...] = (),
    add_generation_prompt: bool = True,
    continue_final_message: bool = False,
    template_fields: dict[str, Any] | None = None,
    chat_template_kwargs: dict[str, Any] | None = None,
) -> ChatPrompt:
    """The prompt of ``messages`` with the ``offered`` tools; a 400 for anything the template
    cannot render or the context cannot hold."""
    template, harmony = model.chat_template, model.harmony is not None
    if not template:
        raise bad_request("the served model has no chat template; use /v1/completions", "messages")
    sent = chat_messages(messages, template=template, max_len=model.max_model_len, harmony=harmony)
    shown, tools = prompt_with_tools(
        sent, offered, model.call_format, template=template, harmony=harmony
    )
    text = apply_chat_template(
        model.tokenizer,
        shown,
        tools,
        add_generation_prompt=add_generation_prompt,
        continue_final_message=continue_final_message,
        template_fields=template_fields or {},
        chat_template_kwargs=chat_template_kwargs,
    )
    ids = prompt_ids(model.tokenizer, text, model.max_model_len, "messages")
    return ChatPrompt(sent, text, ids)
