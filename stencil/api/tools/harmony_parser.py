"""A harmony reply (``harmony``), parsed as it streams: the ``analysis`` channel's text is
reasoning, the ``final`` channel's (and a ``commentary`` preamble's) is content, and a
``commentary`` message to ``functions.NAME`` is a tool call with JSON arguments.

The text is the detokenized output with its special tokens kept; a stop token (``<|return|>``,
``<|call|>``) ends the reply wherever it is. Text that could still grow into a special token is
held back until the next piece shows what it is.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from stencil.api.tools.harmony import SPECIALS, STOPS

_RECIPIENT = re.compile(r"to=([^\s<]+)")
_CHANNEL = re.compile(r"<\|channel\|>\s*([A-Za-z_]+)")
_ENDS = ("<|end|>", *STOPS)  # what ends a message (as openai-harmony reads it)
_MARKERS = SPECIALS + STOPS


@dataclass(slots=True)
class Piece:
    """New text of one kind: ``reasoning`` (analysis) or ``content``."""

    kind: str
    text: str


@dataclass(slots=True)
class HarmonyParser:
    """``feed(text)`` the reply as it grows, ``finish()`` once it ended; both return the new
    :class:`Piece`s. ``calls`` holds the tool calls (``{"name", "arguments"}``) found."""

    calls: list[dict[str, Any]] = field(default_factory=list)
    buf: str = ""
    in_body: bool = False  # past this message's <|message|>
    kind: str = "content"  # what this message's text is: reasoning | content | call
    recipient: str = ""
    args: str = ""
    done: bool = False  # a stop token was seen
    headerless: str = ""  # text that never became a message (a reply not in harmony)

    def feed(self, text: str) -> list[Piece]:
        if self.done:
            return []
        self.buf += text
        out: list[Piece] = []
        while not self.done and self._step(out):
            pass
        return _merged(out)

    def finish(self) -> list[Piece]:
        """The held-back tail, and the last message closed (a call is complete here)."""
        out = self.feed("")
        if not self.done:
            if self.in_body:
                self._emit(self.buf, out)
                self._close(out)
            else:
                self.headerless += self.buf
            self.buf = ""
        if self.headerless.strip() and not out and not self.calls:
            out.append(Piece("content", self.headerless))
        self.done = True
        return _merged(out)

    # ---- one step over the buffer -------------------------------------------------------------

    def _step(self, out: list[Piece]) -> bool:
        """Consume what the buffer makes certain; False when more text is needed."""
        if not self.in_body:
            at = self.buf.find("<|message|>")
            if at < 0:
                return self._stop_in_header()
            self._open(self.buf[:at])
            self.buf = self.buf[at + len("<|message|>") :]
            return True
        hits = [(self.buf.find(m), m) for m in _ENDS if m in self.buf]
        if hits:
            at, marker = min(hits)
            self._emit(self.buf[:at], out)
            self._close(out)
            self.buf = self.buf[at + len(marker) :]
            self.done = marker in STOPS
            return True
        safe = _safe_len(self.buf)
        self._emit(self.buf[:safe], out)
        self.buf = self.buf[safe:]
        return False

    def _stop_in_header(self) -> bool:
        hits = [self.buf.find(m) for m in STOPS if m in self.buf]
        if hits:
            self.headerless += self.buf[: min(hits)]
            self.buf, self.done = "", True
        return False

    def _open(self, header: str) -> None:
        """Start a message from its header (``<|start|>assistant to=...<|channel|>...``)."""
        channel = _CHANNEL.search(header)
        recipient = _RECIPIENT.search(header)
        name = channel.group(1) if channel else ""
        self.recipient = recipient.group(1) if recipient else ""
        if self.recipient.startswith("functions."):
            self.kind = "call"
        else:
            self.kind = "reasoning" if name == "analysis" else "content"
        self.in_body, self.args = True, ""

    def _emit(self, text: str, out: list[Piece]) -> None:
        if not text:
            return
        if self.kind == "call":
            self.args += text
        else:
            out.append(Piece(self.kind, text))

    def _close(self, out: list[Piece]) -> None:
        """End the message; a call whose arguments are not a JSON object is content."""
        if self.kind == "call":
            name = self.recipient[len("functions.") :]
            try:
                arguments = json.loads(self.args)
            except json.JSONDecodeError:
                arguments = None
            if name and isinstance(arguments, dict):
                self.calls.append({"name": name, "arguments": arguments})
            elif self.args:
                out.append(Piece("content", self.args))
        self.in_body, self.kind = False, "content"


def _safe_len(text: str) -> int:
    """How much of ``text`` cannot be the start of a special token (the rest is held back)."""
    at = text.rfind("<")
    if at >= 0 and any(m.startswith(text[at:]) for m in _MARKERS):
        return at
    return len(text)


def _merged(pieces: list[Piece]) -> list[Piece]:
    out: list[Piece] = []
    for p in pieces:
        if out and out[-1].kind == p.kind:
            out[-1].text += p.text
        else:
            out.append(p)
    return out
