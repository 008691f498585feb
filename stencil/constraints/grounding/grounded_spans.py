"""``GroundedSpans``: the co-matcher of a constraint's co-matched grounded strings (see
``grounding``). The grammar lets llguidance check a grounded value's first bytes and then treat
it as a free string (its cheap, cached mask); this tracks, per accepted token, whether the output
is inside grounded string k and where in the document's suffix automaton, and inside one ANDs
into llguidance's mask the tokens that continue a span.

A state is ``(mode, alive)``: ``mode`` is the JSON byte state (0 outside a string, 1 inside,
2 after a backslash inside) and ``alive`` the ``(k, position)`` pairs of the grounded strings
the open string may be (one, unless a union offers two). Which grounded string a token opens,
llguidance says before the token is consumed: grounded lexeme k alone admits ``PROBE k
PROBE_END`` right after its opening quote (control bytes no JSON holds raw, never let through
here), so the token's bytes up to its quote (retokenized), then that probe, validate."""

from __future__ import annotations

import ctypes

import llguidance
import numpy as np

from ..errors import ConstraintError
from .lark_writer import PROBE, PROBE_END
from .span_automaton import SpanAutomaton
from .span_automaton_ref import SpanAutomatonRef
from .token_trie import TokenTrie

Position = bytes | tuple[int, ...]  # SpanAutomaton's, or SpanAutomatonRef's
State = tuple[int, tuple[tuple[int, Position], ...]]
OUTSIDE: State = (0, ())
_QUOTE, _BACKSLASH = ord('"'), ord("\\")


class GroundedSpans:
    """Immutable and shared by a compiled constraint's matchers."""

    __slots__ = ("_automata", "_probes", "_tokenizer", "_words")

    def __init__(
        self,
        marked: tuple[bytes, ...],
        trie: TokenTrie,
        lib: ctypes.CDLL | None,
        tokenizer: llguidance.LLTokenizer,
        words: int,
    ) -> None:
        built: dict[bytes, SpanAutomaton | SpanAutomatonRef] = {}
        for text in marked:
            if text not in built:
                built[text] = (
                    SpanAutomaton(lib, text, trie, words)
                    if lib
                    else SpanAutomatonRef(text, trie, words)
                )
        self._automata = [built[text] for text in marked]
        self._probes = [
            [trie.byte_token(b) for b in f"{PROBE}{k}{PROBE_END}".encode()]
            for k in range(len(marked))
        ]
        self._tokenizer = tokenizer
        self._words = words
        if any(t < 0 for p in self._probes for t in p):
            raise ConstraintError("grounding needs single-byte tokens (a byte-level vocabulary)")

    @property
    def num_states(self) -> int:
        """Automaton states over the distinct marked texts (a size measure)."""
        return sum(a.num_states for a in {id(a): a for a in self._automata}.values())

    def advance(self, state: State, data: bytes) -> tuple[State, int] | None:
        """The state after ``data`` (one token's bytes) as far as the bytes tell, and where the
        content of a string opened in them starts (-1: none is open at their end); None: the
        bytes leave every grounded string's spans."""
        mode, alive = state
        i = 0
        if alive:
            fed = [(k, *self._automata[k].feed(pos, data)) for k, pos in alive]
            fed = [(k, pos, used) for k, pos, used in fed if pos is not None]
            if not fed:
                return None
            inside = [(k, pos) for k, pos, used in fed if used == len(data)]
            if inside:
                return (1, tuple(inside)), -1
            mode, i = 0, min(used for _, _, used in fed) + 1  # past the closing quote
        opened = -1
        for j in range(i, len(data)):
            b = data[j]
            if mode == 0:
                if b == _QUOTE:
                    mode, opened = 1, j + 1
            elif mode == 2:
                mode = 1
            elif b == _BACKSLASH:
                mode = 2
            elif b == _QUOTE:
                mode, opened = 0, -1
        return (mode, ()), opened

    def enter(
        self, state: State, data: bytes, opened: int, matcher: llguidance.LLMatcher
    ) -> State | None:
        """``state`` (from ``advance``) with the grounded strings a string opened in ``data`` at
        ``opened`` may be, asked of ``matcher`` (which has not consumed ``data`` yet); None:
        its first bytes are no span's."""
        if opened < 0:
            return state
        head = self._tokenizer.tokenize_bytes(data[:opened])
        if matcher.validate_tokens([*head, self._probes[0][0]]) != len(head) + 1:
            return state  # not a grounded string
        alive = []
        for k, probe in enumerate(self._probes):
            if matcher.validate_tokens(head + probe) == len(head) + len(probe):
                automaton = self._automata[k]
                pos, used = automaton.feed(automaton.start(), data[opened:])
                if pos is not None and used == len(data) - opened:
                    alive.append((k, pos))
        return (state[0], tuple(alive)) if alive else None

    def restrict(self, state: State, row: int, scratch: int) -> None:
        """AND into the bitmask row at address ``row`` the tokens that continue a span, when
        ``state`` is inside a grounded string; ``scratch`` addresses as many spare words."""
        alive = state[1]
        if len(alive) == 1:
            k, pos = alive[0]
            self._automata[k].walk_and(pos, scratch, row)
        elif alive:  # a union of grounded strings: any of their spans
            union = np.zeros(self._words, np.uint32)
            for k, pos in alive:
                self._automata[k].walk(pos, union)
            words = np.ctypeslib.as_array((ctypes.c_uint32 * self._words).from_address(row))
            words &= union
