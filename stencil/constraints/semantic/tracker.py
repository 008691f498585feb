"""An incremental JSON reader over the output bytes that reports every completed value.

The grammar (llguidance) has already made the bytes a prefix of valid JSON; the tracker only
follows the structure: where each value starts, at which instance location it sits, and the
moment it completes (a string at its closing quote, a container at its closing bracket, a
literal at its last letter, a number at the first byte after it, or at the end of output for
a number at the root). At each completion it asks a ``Checks`` object whether the value is
allowed; a refusal makes the whole feed fail, so the caller can refuse the token.

States are immutable: feeding returns a new ``State`` (or None), so a matcher keeps one per
accepted token and a candidate token is tried without copying anything.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Any, Protocol

_STRUCT, _STRING, _ESCAPE, _NUMBER, _LITERAL = range(5)
_OBJECT, _ARRAY = 0, 1
# object phases: expecting a key (or "}"), a colon, a value, "," (or "}"); arrays: 0 and 3
_KEY, _COLON, _VALUE, _AFTER = range(4)
_WHITESPACE = frozenset(b" \t\n\r")
_NUMBER_BYTES = frozenset(b"0123456789+-.eE")
_LITERAL_LENGTH = {ord("t"): 4, ord("f"): 5, ord("n"): 4}
_VERDICTS = 1024  # value verdicts remembered per matcher (then forgotten at once)
_VERDICT_TEXT = 4096  # longest value text remembered


class Checks(Protocol):
    """What the tracker asks at each step (``Loc`` is opaque to it; None = nothing to check)."""

    def root(self) -> Any: ...

    def child(self, loc: Any, key: str | int) -> Any: ...

    def unique(self, loc: Any) -> bool: ...

    def value_ok(self, loc: Any, value: Any) -> bool: ...

    def canonical(self, value: Any) -> str: ...


@dataclass(frozen=True, slots=True)
class Frame:
    kind: int
    start: int
    loc: Any
    phase: int
    index: int = 0
    key: str | None = None
    seen: frozenset[str] | None = None
    """Canonical texts of the completed items (arrays whose location has ``uniqueItems``)."""


@dataclass(frozen=True, slots=True)
class State:
    stack: tuple[Frame, ...] = ()
    mode: int = _STRUCT
    start: int = 0
    """Offset where the scalar or string being read starts."""
    loc: Any = None
    """Location of the scalar being read."""
    is_key: bool = False
    left: int = 0
    """Letters of a literal still to come."""
    done: bool = False
    """The root value is complete."""
    offset: int = 0
    """Bytes read so far."""

    @property
    def in_value_string(self) -> bool:
        return self.mode == _STRING and not self.is_key

    @property
    def in_string(self) -> bool:
        return self.mode in (_STRING, _ESCAPE)

    @property
    def in_number(self) -> bool:
        return self.mode == _NUMBER

    @property
    def in_literal(self) -> bool:
        return self.mode == _LITERAL

    def armed(self, root_checked: bool) -> bool:
        """Whether some completion from here on may be checked: a location with checks is
        open, or (``root_checked``) the root value is yet to come."""
        if self.loc is not None or any(f.loc is not None for f in self.stack):
            return True
        return root_checked and not self.stack and not self.done


class Tracker:
    """Feeds bytes through ``State``s, consulting ``checks`` at every completion."""

    __slots__ = ("checks", "failure", "verdicts")

    def __init__(self, checks: Checks) -> None:
        self.checks = checks
        self.failure: Any = None
        """The location of the last refused completion (for error messages)."""
        self.verdicts: dict[tuple[Any, bytes], bool] = {}
        """``value_ok`` per (location, value text): a mask tries many tokens that complete the
        same value (``"}``, ``"},``, ``"}]`` after one string), validated once."""

    def value_ok(self, loc: Any, text: bytes) -> tuple[bool, Any]:
        """``(verdict, parsed value or None)`` for the value ``text`` at ``loc``."""
        key = (loc, text)  # the key holds ``loc``: its id is never reused while cached
        verdict = self.verdicts.get(key)
        if verdict is not None:
            return verdict, None
        value = json.loads(text)
        verdict = self.checks.value_ok(loc, value)
        if len(text) <= _VERDICT_TEXT:
            if len(self.verdicts) >= _VERDICTS:
                self.verdicts.clear()
            self.verdicts[key] = verdict
        return verdict, value

    def initial(self) -> State:
        return State(loc=None)

    def feed(self, state: State, data: bytes, history: bytes) -> State | None:
        """The state after ``data``; ``history`` holds the bytes before it (``state.offset``
        of them, or at least those since the oldest open value). None: a completed value was
        refused."""
        reader = _Reader(self, state, data, history)
        return reader.run()

    def finish(self, state: State, history: bytes) -> bool:
        """Whether the output may end here (a number at the root completes now)."""
        if state.mode == _NUMBER and not state.stack:
            reader = _Reader(self, state, b"", history)
            done = reader.complete(state.start, state.offset, state.loc)
            return done
        return state.done and state.mode == _STRUCT


class _Reader:
    """One feed: mutable locals over an immutable start state."""

    def __init__(self, tracker: Tracker, state: State, data: bytes, history: bytes) -> None:
        self.t = tracker
        self.checks = tracker.checks
        self.stack = list(state.stack)
        self.s = state
        self.data = data
        self.history = history
        self.base = state.offset  # offset of data[0]

    def text(self, start: int, end: int) -> bytes:
        base = self.base
        if start >= base:
            return self.data[start - base : end - base]
        head = self.history[len(self.history) - (base - start) :]
        return head + self.data[: end - base]

    def run(self) -> State | None:
        s = self.s
        mode, start, loc, is_key, left, done = s.mode, s.start, s.loc, s.is_key, s.left, s.done
        data, i, n = self.data, 0, len(self.data)
        while i < n:
            b = data[i]
            pos = self.base + i
            if mode == _STRING:
                if b == 0x5C:
                    mode = _ESCAPE
                elif b == 0x22:
                    mode = _STRUCT
                    if is_key:
                        self.set_key(json.loads(self.text(start, pos + 1)))
                    elif not self.complete(start, pos + 1, loc):
                        return None
                i += 1
                continue
            if mode == _ESCAPE:
                mode = _STRING
                i += 1
                continue
            if mode == _NUMBER:
                if b in _NUMBER_BYTES:
                    i += 1
                    continue
                mode = _STRUCT
                if not self.complete(start, pos, loc):
                    return None
                continue  # the byte after a number is structure: read it again
            if mode == _LITERAL:
                left -= 1
                if not left:
                    mode = _STRUCT
                    if not self.complete(start, pos + 1, loc):
                        return None
                i += 1
                continue
            i += 1
            if b in _WHITESPACE:
                continue
            top = self.stack[-1] if self.stack else None
            if b == 0x2C:  # ","
                self.stack[-1] = replace(top, phase=_KEY if top.kind == _OBJECT else _VALUE)
            elif b == 0x3A:  # ":"
                self.stack[-1] = replace(top, phase=_VALUE)
            elif b in (0x7D, 0x5D):  # "}" "]"
                frame = self.stack.pop()
                if not self.complete(frame.start, pos + 1, frame.loc):
                    return None
            elif b == 0x22 and top is not None and top.kind == _OBJECT and top.phase == _KEY:
                mode, start, is_key = _STRING, pos, True
            else:
                child = self.next_loc(top)
                if b in (0x7B, 0x5B):  # "{" "["
                    kind = _OBJECT if b == 0x7B else _ARRAY
                    seen = frozenset() if kind == _ARRAY and self.checks.unique(child) else None
                    self.stack.append(Frame(kind, pos, child, _KEY, seen=seen))
                elif b == 0x22:
                    mode, start, is_key, loc = _STRING, pos, False, child
                elif b in _LITERAL_LENGTH:
                    mode, start, loc, left = _LITERAL, pos, child, _LITERAL_LENGTH[b] - 1
                else:
                    mode, start, loc = _NUMBER, pos, child
        done = done or (not self.stack and self.finished)
        return State(tuple(self.stack), mode, start, loc, is_key, left, done, self.base + n)

    finished = False

    def next_loc(self, top: Frame | None) -> Any:
        if top is None:
            return self.checks.root()
        if top.loc is None:
            return None
        key = top.key if top.kind == _OBJECT else top.index
        return self.checks.child(top.loc, key)

    def set_key(self, key: str) -> None:
        self.stack[-1] = replace(self.stack[-1], key=key, phase=_COLON)

    def complete(self, start: int, end: int, loc: Any) -> bool:
        """A value completed: check it against its own location and its array's items."""
        parent = self.stack[-1] if self.stack else None
        seen = parent.seen if parent is not None else None
        if loc is not None or seen is not None:
            text, value = bytes(self.text(start, end)), None
            if loc is not None:
                ok, value = self.t.value_ok(loc, text)
                if not ok:
                    self.t.failure = loc
                    return False
            if seen is not None:
                value = json.loads(text) if value is None else value
                canon = self.checks.canonical(value)
                if canon in seen:
                    self.t.failure = ("uniqueItems", parent.loc)
                    return False
                seen = seen | {canon}
        if parent is None:
            self.finished = True
        elif parent.kind == _ARRAY:
            self.stack[-1] = replace(parent, phase=_AFTER, index=parent.index + 1, seen=seen)
        else:
            self.stack[-1] = replace(parent, phase=_AFTER, key=None)
        return True
