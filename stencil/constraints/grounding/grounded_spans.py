"""``GroundedSpans``: the co-matcher of a constraint's co-matched grounded strings (see
``grounding``). The grammar lets llguidance check a grounded value's first ``WINDOW`` bytes and
then treat it as a free string (its cheap, cached mask); this tracks, per accepted token, whether
the output is inside grounded string k and where in the document's suffix automaton, and inside
one ANDs into llguidance's mask the tokens that continue a span.

A state is ``(mode, alive)``: ``mode`` is the JSON byte state (0 outside a string, 1 inside,
2 after a backslash inside) and ``alive`` the ``(k, position)`` pairs of the grounded strings
the open string may be (one, unless a union offers two). Which grounded string a token opens,
llguidance says before the token is consumed: grounded lexeme k alone admits ``PROBE k
PROBE_END`` right after its opening quote (control bytes no JSON holds raw, never let through
here), so the token's bytes up to its quote (retokenized), then that probe, validate. Every
string a token opens is fed to its automata from the quote on (to the token's end, or through
a closing quote and on).

A token with at most ``WINDOW`` bytes after a quote is checked there by llguidance's window
trie; the few longer ones a vocabulary has (Qwen2.5: 7, up to 32 bytes; Gemma 3: 5, two of them
a whole quoted string) would pass llguidance's free-string tail unchecked, so each mask clears
those of them that ``step`` refuses (``refuse_long``): exact for any vocabulary, at no cost to
one without them."""

from __future__ import annotations

import ctypes

import llguidance
import numpy as np

from ..errors import ConstraintError
from .lark_writer import PROBE, PROBE_END, WINDOW
from .span_automaton import SpanAutomaton
from .span_automaton_ref import SpanAutomatonRef
from .token_trie import TokenTrie

Position = bytes | tuple[int, ...]  # SpanAutomaton's, or SpanAutomatonRef's
State = tuple[int, tuple[tuple[int, Position], ...]]
OUTSIDE: State = (0, ())
_QUOTE, _BACKSLASH = ord('"'), ord("\\")


class GroundedSpans:
    """Immutable and shared by a compiled constraint's matchers."""

    __slots__ = ("_automata", "_long", "_probes", "_row", "_tokenizer", "_words")

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
        long = trie.quoted[trie.reach > WINDOW].tolist()
        self._long = [(t >> 5, 1 << (t & 31), tokenizer.decode_bytes([t])) for t in long]
        self._row = ctypes.c_uint32 * words
        if any(t < 0 for p in self._probes for t in p):
            raise ConstraintError("grounding needs single-byte tokens (a byte-level vocabulary)")

    @property
    def num_states(self) -> int:
        """Automaton states over the distinct marked texts (a size measure)."""
        return sum(a.num_states for a in {id(a): a for a in self._automata}.values())

    def step(self, state: State, data: bytes, matcher: llguidance.LLMatcher) -> State | None:
        """The state after a token's bytes ``data``, ``matcher`` (llguidance's) not yet past
        them; None: they leave a grounded string's spans, or open one with no span's bytes."""
        return self._step(state, data, matcher, {})

    def refuse_long(self, state: State, row: int, matcher: llguidance.LLMatcher) -> None:
        """Clear from the bitmask row at address ``row`` the tokens with more than ``WINDOW``
        bytes after a quote that ``step`` refuses (the grammar checks no more of a value)."""
        if not self._long:
            return
        words = self._row.from_address(row)
        probed: dict[bytes, tuple[int, ...]] = {}
        for word, bit, data in self._long:
            if words[word] & bit and self._step(state, data, matcher, probed) is None:
                words[word] &= ~bit

    def _step(
        self,
        state: State,
        data: bytes,
        matcher: llguidance.LLMatcher,
        probed: dict[bytes, tuple[int, ...]],
    ) -> State | None:
        mode, alive = state
        i = 0
        while True:
            if alive:  # inside grounded strings: their automata take the bytes to the quote
                alive, used = self._feed(alive, data[i:])
                if alive is None:
                    return None
                if i + used == len(data):
                    return (1, alive)
                mode, i, alive = 0, i + used + 1, ()  # past the closing quote
            while i < len(data) and not alive:
                b = data[i]
                i += 1
                if mode == 2:
                    mode = 1
                elif mode == 1:
                    mode = 2 if b == _BACKSLASH else 0 if b == _QUOTE else 1
                elif b == _QUOTE:  # a string opens: grounded ones go to their automata
                    mode, alive = 1, self._opened(data[:i], matcher, probed)
            if not alive:
                return (mode, ())

    def _opened(
        self, head: bytes, matcher: llguidance.LLMatcher, probed: dict[bytes, tuple[int, ...]]
    ) -> tuple[tuple[int, Position], ...]:
        """The grounded strings (each at its automaton's start) a string opened by the quote
        ending ``head`` may be, asked of ``matcher`` (cached in ``probed`` by ``head``)."""
        if head not in probed:
            tokens = self._tokenizer.tokenize_bytes(head)
            ks: tuple[int, ...] = ()
            if matcher.validate_tokens([*tokens, self._probes[0][0]]) == len(tokens) + 1:
                ks = tuple(
                    k
                    for k, probe in enumerate(self._probes)
                    if matcher.validate_tokens(tokens + probe) == len(tokens) + len(probe)
                )
            probed[head] = ks
        return tuple((k, self._automata[k].start()) for k in probed[head])

    def _feed(
        self, alive: tuple[tuple[int, Position], ...], data: bytes
    ) -> tuple[tuple[tuple[int, Position], ...] | None, int]:
        """``alive`` advanced by ``data`` up to a closing quote, and how many bytes that took
        (``len(data)`` without one); None: no span goes on with them."""
        fed = [(k, *self._automata[k].feed(pos, data)) for k, pos in alive]
        fed = [(k, pos, used) for k, pos, used in fed if pos is not None]
        if not fed:
            return None, 0
        used = max(used for _, _, used in fed)  # the same for all: a quote closes every span
        return tuple((k, pos) for k, pos, u in fed if u == used), used

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
