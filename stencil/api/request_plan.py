"""One engine request as plain values: what a chat, completion or Responses API request is
converted into once (``openai.convert``), and all that the engine stream, the tool parser and the
renderers read of it."""

from __future__ import annotations

from dataclasses import dataclass

from stencil.api.tools.formats import ToolCallFormat
from stencil.engine.sampling_params import SamplingParams


@dataclass(slots=True, frozen=True)
class ToolParsing:
    """How a reply's calls are read: the family's ``format``, ``auto`` (text may come first,
    or instead) or forced (the reply is the calls), the offered tool ``names`` (an object
    naming another is no call), and ``answer``: in ``auto`` beside a JSON response format, a
    reply that is not calls is the answer (never cut free text)."""

    format: ToolCallFormat
    auto: bool
    names: tuple[str, ...]
    answer: bool = False


@dataclass(slots=True)
class Plan:
    """One engine request (a completion prompt, or the whole chat). The constraint is
    ``params.constraint``."""

    prompt_ids: list[int]
    prompt_text: str
    params: SamplingParams
    tools: ToolParsing | None = None  # how the reply's tool calls are read back
    harmony: bool = False  # the reply is in GPT-OSS's harmony format (``tools.harmony_parser``)
    echo_text: str = ""
    constraint_param: str | None = None  # the field that named the constraint (for 400s)
