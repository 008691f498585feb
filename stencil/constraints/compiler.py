"""``ConstraintCompiler``: Constraint -> CompiledConstraint, cached and time-bounded."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

import llguidance

from .cache import ByteLRU
from .errors import CompileTimeoutError, ConstraintError, InvalidGrammarError, InvalidSchemaError
from .limits import DEFAULT_LIMITS, Limits
from .llg_errors import grammar_error, short
from .llg_limits import parser_limits
from .matcher import Matcher
from .spec import Constraint
from .vocab import TokenVocab

_BASE_BYTES = 64 << 10  # fixed per-compile overhead in the size estimate


@dataclass(frozen=True, slots=True, eq=False)
class CompiledConstraint:
    """Immutable and shared: every ``new_matcher()`` is an independent cheap copy."""

    constraint: Constraint
    vocab: TokenVocab
    compile_ms: float
    size_bytes: int
    _template: llguidance.LLMatcher = field(repr=False)

    def new_matcher(self) -> Matcher:
        return Matcher(self._template.deep_copy(), self.vocab)


class ConstraintCompiler:
    """Compiles constraints for one vocabulary. Thread-safe.

    Each compile runs under llguidance's parser limits (from ``limits``) and a wall-clock
    budget ``timeout_s``; past it ``CompileTimeoutError`` is raised (the bounded llguidance
    build finishes in the background and is dropped). Results are cached in an LRU bounded
    by ``cache_bytes`` (an estimate: grammar size plus a fixed overhead), keyed by the
    constraint's key and the vocabulary's fingerprint.
    """

    def __init__(
        self,
        vocab: TokenVocab,
        *,
        cache_bytes: int = 256 << 20,
        timeout_s: float = 10.0,
        limits: Limits = DEFAULT_LIMITS,
    ) -> None:
        self.vocab = vocab
        self.timeout_s = timeout_s
        self.limits = limits
        self._cache: ByteLRU[CompiledConstraint] = ByteLRU(cache_bytes)
        self._parser_limits = parser_limits(limits)

    @property
    def cache(self) -> ByteLRU[CompiledConstraint]:
        return self._cache

    def compile(self, constraint: Constraint) -> CompiledConstraint:
        key = f"{self.vocab.fingerprint}|{constraint.key}"
        cached = self._cache.get(key)
        if cached is not None:
            return cached
        start = time.perf_counter()
        template = self._build_bounded(constraint)
        elapsed = (time.perf_counter() - start) * 1e3
        size = _BASE_BYTES + 16 * len(constraint.llg_grammar)
        compiled = CompiledConstraint(constraint, self.vocab, elapsed, size, template)
        self._cache.put(key, compiled, size)
        return compiled

    def _build_bounded(self, constraint: Constraint) -> llguidance.LLMatcher:
        result: list[llguidance.LLMatcher | BaseException] = []
        done = threading.Event()

        def work() -> None:
            try:
                result.append(self._build(constraint))
            except BaseException as exc:  # handed to the caller's thread
                result.append(exc)
            finally:
                done.set()

        threading.Thread(target=work, name="stencil-compile", daemon=True).start()
        if not done.wait(self.timeout_s):
            raise CompileTimeoutError(self.timeout_s)
        if isinstance(result[0], BaseException):
            raise result[0]
        return result[0]

    def _build(self, constraint: Constraint) -> llguidance.LLMatcher:
        matcher = llguidance.LLMatcher(
            self.vocab.llg_tokenizer,
            constraint.llg_grammar,
            log_level=0,
            limits=self._parser_limits,
        )
        if matcher.is_error():
            raise _error(constraint, matcher.get_error())
        probe = matcher.deep_copy()
        first = probe.compute_bitmask()  # also warms the lexer for later copies
        stuck = probe.is_error() and probe.get_error().startswith("NoExtension")
        empty = not any(first) or stuck
        if empty and not probe.is_accepting():
            raise _error(constraint, "the constraint derives no string (its language is empty)")
        if probe.is_error():
            raise _error(constraint, probe.get_error())
        return matcher


def _error(constraint: Constraint, message: str) -> ConstraintError:
    if constraint.kind == "json":
        return InvalidSchemaError(short(message))
    if "derives no string" in message:
        return InvalidGrammarError(f"invalid {constraint.kind}: {message}")
    return grammar_error(message, constraint.kind)
