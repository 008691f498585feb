"""Tool-call syntax per model family: detection from the chat template, the constraint grammar
that makes a call conform (forced, or triggered in ``auto``) and the parser back to ``tool_calls``.

The families and their names follow vLLM's tool parsers:

- ``hermes`` (Qwen2.5, Qwen3, Hermes): ``<tool_call>\\n{"name": .., "arguments": {..}}\\n</tool_call>``,
  one object per tag, tags separated by a newline; beside a response format also a call object
  in a ```` ```json ```` code block, as Qwen2.5-Coder writes its calls (``fence``);
- ``llama3_json`` (Llama 3.1+): the output *is* ``{"name": .., "parameters": {..}}`` (calls joined
  by ``"; "``; a leading ``<|python_tag|>`` is accepted when parsing);
- ``mistral``: ``[TOOL_CALLS][{"name": .., "arguments": {..}}, ..]``;
- ``granite`` (Granite 3.x): ``<|tool_call|>[{"name": .., "arguments": {..}}, ..]``;
- ``phi4_mini`` (Phi-4-mini): ``functools[{"name": .., "arguments": {..}}, ..]``; its template
  takes the tools as a JSON string in the system message's ``tools`` field;
- ``smollm2`` (templates that do not render tools, SmolLM2's own convention; Gemma's too):
  ``<tool_call>[{"name": .., "arguments": {..}}, ..]</tool_call>``.
"""

from __future__ import annotations

import json
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from stencil.api.openai.protocol import Tool
from stencil.api.tools.schema import call_item_schema, calls_schema
from stencil.constraints import special_token_ids

_TEXT = "TEXT: /(.|\\n)*/"


@dataclass(frozen=True, slots=True)
class ToolCallFormat:
    """One family's call syntax. A *block* is ``open`` + calls + ``close``."""

    name: str
    open: str  # opens a block; "" = the output starts with the call's JSON
    close: str
    args_key: str  # "arguments" | "parameters"
    array: bool  # a block holds a JSON array of calls (else one call object per block)
    separator: str = ""  # between blocks (one-object formats)
    calls_first: bool = False  # auto: a call can only open the output (else after any text)
    call_id_chars: int = 0  # templates that take call ids of exactly this length (0: any)
    system_tools: bool = False  # the template reads the tools from the system message
    fence: str = ""  # calls or answer: a block may also be a code block opened by this

    @property
    def trigger(self) -> str:
        """The text whose appearance starts a call in ``auto``."""
        return self.open.rstrip() or "{"

    # ---- the constraint ----------------------------------------------------------------------

    def grammar(
        self,
        tools: list[Tool],
        *,
        auto: bool,
        single: bool,
        tokens: dict[str, int],
    ) -> tuple[str, dict[str, Any]]:
        """``(lark, json_rules)`` for ``Constraint.grammar``: the whole output is one block
        (forced), or text or a block (``auto``). ``tokens``: the syntax's pieces that are
        single special tokens (``added_tokens``), written as those tokens."""
        return self._lark(auto=auto, single=single, tokens=tokens), self._rules(tools, single)

    def calls_or_answer_grammar(
        self, tools: list[Tool], *, single: bool, tokens: dict[str, int]
    ) -> tuple[str, str, dict[str, Any]]:
        """``(lark of the calls or the answer, lark of the calls alone, json_rules)``: the two
        grammars of ``Constraint.calls_or_answer`` over the same rules: the blocks (or, with a
        ``fence``, code blocks of the same calls) or the rule ``answer``, the response format
        in place of the text. The answer is bare JSON, so a block's opening decides the branch
        at the first token (``llama3_json``, whose calls are bare JSON too: at the first key)."""
        union = self._lark(auto=True, single=single, tokens=tokens, answer=True, fenced=True)
        calls = self._lark(auto=False, single=single, tokens=tokens, fenced=True)
        return union, calls, self._rules(tools, single)

    def _rules(self, tools: list[Tool], single: bool) -> dict[str, Any]:
        if self.array:
            return {"calls": calls_schema(tools, single=single, args_key=self.args_key)}
        return {"call": call_item_schema(tools, self.args_key)}

    def _lark(
        self,
        *,
        auto: bool,
        single: bool,
        tokens: dict[str, int],
        answer: bool = False,
        fenced: bool = False,
    ) -> str:
        body = "calls" if self.array else "call"
        trigger_id = tokens.get(self.trigger)
        trig = _lit(self.trigger, tokens) if self.open else ""
        rest = _lit(self.open[len(self.trigger) :], tokens)
        one = f"{rest} {body} {_lit(self.close, tokens)}".strip()
        sep = _lit(self.separator, tokens)
        after = one if self.array or single else f"{one} ({sep} {trig} {one})*"
        block = f"{trig} {after}".strip()
        if self.fence and fenced:
            opening, closing = _lit(self.fence + "\n", {}), _lit("\n```", {})
            code = f"{opening} {body} {closing}"
            block += f" | {code}" if self.array or single else f" | {code} ({sep} {code})*"
        if not auto:
            lines = [f"start: {block}"]
        elif answer:
            lines = [f"start: {block} | answer"]
        elif self.calls_first or not self.open:
            plain = "TEXT" if trigger_id is not None else "PLAIN"
            lines = [f"start: {plain} | {block}", _TEXT]
            lines += [f"PLAIN: /{_not_starting_with(self.trigger)}/"] if plain == "PLAIN" else []
        elif trigger_id is not None:  # a special token cannot occur inside TEXT
            lines = [f"start: TEXT | TEXT {block}", _TEXT]
        else:
            lines = [f"start: TEXT | hd {after}", f"hd[lazy]: TEXT {trig}", _TEXT]
        return "%llguidance {}\n" + "\n".join(lines) + "\n"

    # ---- parsing -----------------------------------------------------------------------------

    def split(self, text: str, *, fenced: bool = False) -> tuple[str, bool]:
        """For streaming ``auto``: ``(text safe to emit, whether a call has started)``; a tail
        that could still grow into the trigger is held back. ``fenced``: the output is the calls
        or an answer, so one that opens with (a prefix of) the ``fence`` is a call."""
        if fenced and self.fence and text and self.fence.startswith(text[: len(self.fence)]):
            return "", True
        if not self.open:
            head = text.lstrip()
            if head.startswith(("{", "<|python_tag|>")):
                return "", True
            return ("", False) if not head or "<|python_tag|>".startswith(head) else (text, False)
        at = text.find(self.trigger)
        if at >= 0:
            return text[:at], True
        for k in range(min(len(self.trigger) - 1, len(text)), 0, -1):
            if self.trigger.startswith(text[-k:]):
                return text[:-k], False
        return text, False

    def parse(
        self,
        text: str,
        *,
        bare: bool = False,
        names: Collection[str] | None = None,
        fenced: bool = False,
    ) -> tuple[str, list[dict[str, Any]] | None]:
        """``(content before the calls, the calls as name/arguments dicts)``; calls is None when
        ``text`` holds no complete call. ``bare``: the calls' JSON without ``open``/``close``.
        ``names``: the tools offered; an object naming another, or with keys other than the
        name and the arguments, is no call (an answer in ``llama3_json``'s bare JSON).
        ``fenced``: the calls or an answer (``split``), the calls maybe in ``fence`` blocks."""
        content, started = self.split(text, fenced=fenced)
        if not started:
            if not bare:
                return text, None
            content = ""
        body = text[len(content) :]
        glue = (self.open, self.close, self.separator, "<|python_tag|>")
        values = _json_values(body, glue + ((self.fence, "```") if fenced else ()))
        if values is None:
            return text, None
        calls = []
        for v in values:
            for call in v if isinstance(v, list) else [v]:
                if not self._is_call(call, names):
                    return text, None
                args = call.get(self.args_key, call.get("arguments"))
                calls.append({"name": call["name"], "arguments": args if args is not None else {}})
        return content, calls or None

    def _is_call(self, value: Any, names: Collection[str] | None) -> bool:
        if not isinstance(value, dict) or not isinstance(value.get("name"), str):
            return False
        if names is None:
            return True
        return value["name"] in names and value.keys() <= {"name", self.args_key}


def _json_values(body: str, glue: tuple[str, ...]) -> list[Any] | None:
    """The JSON values in ``body``, between any of the ``glue`` strings and whitespace; None
    when anything else is there or a value is incomplete."""
    decoder = json.JSONDecoder()
    pieces = sorted((g.strip() for g in glue if g.strip()), key=len, reverse=True)
    values, i = [], 0
    while True:
        while i < len(body):
            if body[i].isspace() or body[i] == ";":
                i += 1
                continue
            hit = next((g for g in pieces if body.startswith(g, i)), None)
            if hit is None:
                break
            i += len(hit)
        if i == len(body):
            return values
        try:
            value, i = decoder.raw_decode(body, i)
        except json.JSONDecodeError:
            return None
        values.append(value)


def _lit(text: str, tokens: dict[str, int]) -> str:
    """``text`` as Lark: string literals, and ``<[id]>`` for the pieces that are special
    tokens (a special token is only reachable as itself)."""
    for piece, token_id in tokens.items():
        at = text.find(piece)
        if at >= 0:
            head, tail = text[:at], text[at + len(piece) :]
            return f"{_lit(head, tokens)} <[{token_id}]> {_lit(tail, tokens)}".strip()
    return json.dumps(text) if text else ""


def _not_starting_with(prefix: str) -> str:
    """A regex (Lark ``/.../`` body) for any text that does not start with ``prefix``."""
    alts = [""]
    for i, ch in enumerate(prefix):
        head = "".join(_cls(c) for c in prefix[:i])
        if i:
            alts.append(head)
        alts.append(f"{head}{_cls(ch, negate=True)}(.|\\n)*")
    return "(" + "|".join(alts) + ")"


def _cls(ch: str, *, negate: bool = False) -> str:
    esc = "\\" + ch if ch in "]\\^-[/" else ch
    return f"[{'^' if negate else ''}{esc}]"


SMOLLM2 = ToolCallFormat("smollm2", "<tool_call>", "</tool_call>", "arguments", array=True)
HERMES = ToolCallFormat(
    "hermes", "<tool_call>\n", "\n</tool_call>", "arguments", False, "\n", fence="```json"
)
LLAMA3_JSON = ToolCallFormat("llama3_json", "", "", "parameters", False, "; ", calls_first=True)
MISTRAL = ToolCallFormat("mistral", "[TOOL_CALLS]", "", "arguments", array=True, call_id_chars=9)
GRANITE = ToolCallFormat("granite", "<|tool_call|>", "", "arguments", array=True)
PHI4_MINI = ToolCallFormat("phi4_mini", "functools", "", "arguments", True, system_tools=True)
FORMATS = {f.name: f for f in (SMOLLM2, HERMES, LLAMA3_JSON, MISTRAL, GRANITE, PHI4_MINI)}


def detect_format(tokenizer: Any) -> ToolCallFormat:
    """The family's call syntax, read from the chat template (what it renders past calls as)."""
    template = getattr(tokenizer, "chat_template", None)
    template = template if isinstance(template, str) else ""
    if "[TOOL_CALLS]" in template:
        return MISTRAL
    if "<|tool_call|>" in template:
        return GRANITE
    if "<|tool|>" in template and "message['tools']" in template:
        return PHI4_MINI
    if "<tool_call>" in template and "tools" in template:
        return HERMES
    if "<|python_tag|>" in template or '"parameters"' in template:
        return LLAMA3_JSON
    return SMOLLM2


def added_tokens(tokenizer: Any, fmt: ToolCallFormat) -> tuple[dict[str, int], bool]:
    """The pieces of ``fmt``'s syntax that the constraint names as single tokens (text -> id),
    and whether one of the pieces is a special added token (its text then shows only when
    special tokens are not skipped). Only the pieces llguidance treats as special tokens are
    named (``<[id]>``); a plain added token (Phi-4-mini's ``functools`` where it is one) is
    written as its text, as ``llg.token_refs`` explains. Builds a throwaway llguidance
    tokenizer when a piece is an added token: call once per model (``ModelInfo``)."""
    wanted = {fmt.trigger, fmt.close.strip()} - {""}
    found, special = {}, False
    for token_id, added in (getattr(tokenizer, "added_tokens_decoder", None) or {}).items():
        if added.content in wanted:
            found[added.content] = int(token_id)
            special = special or bool(added.special)
    named = special_token_ids(tokenizer, found.values()) if found else frozenset()
    return {text: i for text, i in found.items() if i in named}, special
