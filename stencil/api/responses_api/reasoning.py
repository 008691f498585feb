"""A reasoning model's output split at its end marker (``EngineConfig.reasoning_end``, e.g.
``</think>``): the text before it is the ``reasoning`` item, the text after it the message (where
the engine starts applying the constraint). Streamed text is split as it arrives, holding back
what may be the start of the marker."""

from __future__ import annotations


class ReasoningSplit:
    """``feed(text) -> (reasoning, answer)``: the new pieces of each; ``flush()`` at the end."""

    def __init__(self, end: str | None) -> None:
        self.end = end
        # the opening tag a template may leave to the model (``<think>`` for ``</think>``)
        self.start = "<" + end[2:] if end and end.startswith("</") else None
        self.done = end is None  # past the marker (or no reasoning at all)
        self.head = self.start is None  # the opening tag has been looked for
        self.answer_started = False
        self.buf = ""

    def feed(self, text: str) -> tuple[str, str]:
        if self.done:
            return "", self._answer(text)
        assert self.end is not None
        self.buf += text
        if not self.head:
            lead = self.buf.lstrip()
            assert self.start is not None
            if len(lead) < len(self.start) and self.start.startswith(lead):
                return "", ""  # may still become the opening tag
            self.head = True
            if lead.startswith(self.start):
                self.buf = lead[len(self.start) :]
        k = self.buf.find(self.end)
        if k >= 0:
            reasoning, rest = self.buf[:k], self.buf[k + len(self.end) :]
            self.done, self.buf = True, ""
            return reasoning, self._answer(rest)
        safe = max(0, len(self.buf) - len(self.end) + 1)
        while safe < len(self.buf) and not self.end.startswith(self.buf[safe:]):
            safe += 1  # the held-back tail is only what could begin the marker
        out, self.buf = self.buf[:safe], self.buf[safe:]
        return out, ""

    def flush(self) -> str:
        """Reasoning still held back when the output ended (it never reached the marker)."""
        out, self.buf = self.buf, ""
        return out

    def _answer(self, text: str) -> str:
        if not self.answer_started and self.end is not None:
            text = text.lstrip()  # the blank line models write after the marker
            self.answer_started = bool(text)
        return text
