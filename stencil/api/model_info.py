"""What the request path needs to know about the served model, read once when it loads: its
tokenizer and limits, its tool-call format and the special tokens that format and GPT-OSS's
harmony format use."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from stencil.api.tools.formats import ToolCallFormat, added_tokens, detect_format
from stencil.api.tools.harmony import harmony_tokens


@dataclass(slots=True)
class ModelInfo:
    """What conversion needs to know about the served model (read once, as plain values)."""

    tokenizer: Any
    max_model_len: int
    vocab_size: int
    tool_format: ToolCallFormat | None = None  # None: detected from the chat template
    reasoning_end: str | None = None  # a reasoning model's end marker (EngineConfig)
    chat_template: str = field(init=False)  # "" for a model without one
    call_format: ToolCallFormat = field(init=False)  # ``tool_format`` or the detected one
    harmony: dict[str, int] | None = field(init=False)  # GPT-OSS: its harmony tokens
    call_tokens: tuple[dict[str, int], bool] = field(init=False)  # ``added_tokens``

    def __post_init__(self) -> None:
        template = getattr(self.tokenizer, "chat_template", None)
        self.chat_template = template if isinstance(template, str) else ""
        self.call_format = self.tool_format or detect_format(self.tokenizer)
        self.harmony = harmony_tokens(self.tokenizer)
        self.call_tokens = added_tokens(self.tokenizer, self.call_format)
