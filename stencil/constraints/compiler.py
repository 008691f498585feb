"""``ConstraintCompiler``: Constraint -> CompiledConstraint, cached, time- and memory-bounded.

Two stages, both in the compile worker (or a bounded thread): ``translate`` (the constraint ->
an llguidance grammar) and the matcher template built and checked from that grammar."""

from __future__ import annotations

import ctypes
import json
import os
import threading
import time
from dataclasses import dataclass, field

import llguidance

from .bitmask import bitmask_words
from .branch_matcher import BranchMatcher
from .cache import ByteLRU
from .checked_matcher import CheckedMatcher
from .errors import CompileTimeoutError
from .grounding.grounded_spans import GroundedSpans
from .grounding.span_automaton import load_span_library
from .grounding.token_trie import TokenTrie
from .isolation import CompileWorkerPool
from .limits import DEFAULT_LIMITS, Limits
from .llg.limits import parser_limits
from .llg.template import build_template
from .matcher import Matcher
from .semantic.plan import SemanticPlan
from .semantic.tokens import TokenTable
from .spec import Constraint
from .thread_runner import CallTimeout, ThreadRunner
from .translation import Translation, translate
from .vocab import TokenVocab

_BASE_BYTES = 64 << 10  # fixed per-compile overhead in the size estimate
_BYTES_PER_CHAR = 96  # of llguidance grammar, in the estimate
_SPAN_BYTES = 128  # of suffix automaton per byte of a grounded string's marked text
_GROWTH = 1.5  # headroom for what a template's shared lexer caches while sequences decode


@dataclass(frozen=True, slots=True, eq=False)
class CompiledConstraint:
    """Immutable and shared: every ``new_matcher()`` is an independent cheap copy."""

    constraint: Constraint
    translation: Translation
    vocab: TokenVocab
    compile_ms: float
    size_bytes: int
    translated_in: int
    """The pid of the process that translated it (a compile worker, or this process)."""
    _template: llguidance.LLMatcher = field(repr=False)
    _plan: SemanticPlan | None = field(default=None, repr=False)
    _table: TokenTable | None = field(default=None, repr=False)
    _spans: GroundedSpans | None = field(default=None, repr=False)
    _branches: tuple[llguidance.LLMatcher, ...] = field(default=(), repr=False)

    @property
    def has_checks(self) -> bool:
        """Whether values are checked as they complete (``CheckedMatcher``)."""
        return self._plan is not None

    @property
    def has_spans(self) -> bool:
        """Whether grounded strings are co-matched (``GroundedSpans``)."""
        return self._spans is not None

    def new_matcher(self) -> Matcher:
        if self._branches and self._plan is not None and self._table is not None:
            after = dict(self.constraint.options).get("answer_after")
            calls, answer = (b.deep_copy() for b in self._branches)
            union = self._template.deep_copy()
            return BranchMatcher(union, calls, answer, after, self.vocab, self._plan, self._table)
        if self._plan is not None and self._table is not None:
            return CheckedMatcher(
                self._template.deep_copy(), self.vocab, self._plan, self._table, self._spans
            )
        return Matcher(self._template.deep_copy(), self.vocab, self._spans)


class ConstraintCompiler:
    """Compiles constraints for one vocabulary. Thread-safe.

    With ``workers`` > 0 every compile (the translation, llguidance's grammar build and the
    first-mask check) runs in one of ``workers`` worker processes, under
    a wall-clock budget ``timeout_s`` (past it the worker is SIGKILLed and replaced:
    ``CompileTimeoutError``) and an address-space budget ``memory_bytes`` beyond the worker's
    idle footprint (``CompileMemoryError``); the matcher is then rebuilt here from the
    validated grammar. ``close()`` stops the workers. With ``workers=0`` compiles run in a
    thread of this process: past ``timeout_s`` the caller gets ``CompileTimeoutError`` but the
    compile keeps running to its end (bounded only by llguidance's fuel), and there is no
    memory budget.

    Results are cached in an LRU bounded by ``cache_bytes``, keyed by the constraint's key and
    the vocabulary's fingerprint; an entry's size is its matcher's heap as measured in the
    worker (x1.5 for later lexer growth), or with ``workers=0`` an estimate from the grammar
    size.
    """

    def __init__(
        self,
        vocab: TokenVocab,
        *,
        cache_bytes: int = 256 << 20,
        timeout_s: float = 10.0,
        limits: Limits = DEFAULT_LIMITS,
        workers: int = 0,
        memory_bytes: int = 1 << 30,
    ) -> None:
        self.vocab = vocab
        self.timeout_s = timeout_s
        self.limits = limits
        self._cache: ByteLRU[CompiledConstraint] = ByteLRU(cache_bytes)
        self._parser_limits = parser_limits(limits)
        self._pool = (
            CompileWorkerPool(vocab, size=workers, memory_bytes=memory_bytes) if workers else None
        )
        self._table: TokenTable | None = None
        self._table_lock = threading.Lock()
        self._span_walk: tuple[TokenTrie, ctypes.CDLL | None] | None = None
        self._threads = ThreadRunner("stencil-compile")

    @property
    def cache(self) -> ByteLRU[CompiledConstraint]:
        return self._cache

    @property
    def pool(self) -> CompileWorkerPool | None:
        """The worker pool (None when compiles run in threads)."""
        return self._pool

    def compile(
        self, constraint: Constraint, *, cancel: threading.Event | None = None
    ) -> CompiledConstraint:
        """Compile (or fetch from the cache); raises a ConstraintError subclass. Setting
        ``cancel`` kills an isolated compile in flight (``CompileCancelledError``)."""
        key = f"{self.vocab.fingerprint}|{constraint.key}"
        cached = self._cache.get(key)
        if cached is not None:
            return cached
        start = time.perf_counter()
        heap, pid = 0, os.getpid()
        if self._pool is None:
            translation, template = self._build_bounded(constraint)
        else:
            translation, heap, pid = self._pool.compile(
                constraint, self.limits, self.timeout_s, cancel
            )
            template = build_template(
                self.vocab, constraint.kind, translation.grammar, self._parser_limits
            )
        plan = table = None
        if translation.checks:
            checked = constraint.answer or constraint
            schema = json.loads(checked.source)
            plan = SemanticPlan(schema, translation.draft, translation.checks)
            table = self.token_table()
        branches = tuple(
            build_template(self.vocab, "grammar", g, self._parser_limits)
            for g in translation.branches
        )
        spans = None
        if translation.spans:
            trie, library = self.span_walk()
            words = bitmask_words(self.vocab.vocab_size)
            tokenizer = self.vocab.llg_tokenizer
            spans = GroundedSpans(translation.spans, trie, library, tokenizer, words)
        elapsed = (time.perf_counter() - start) * 1e3
        size = _entry_bytes(constraint, translation, heap)
        compiled = CompiledConstraint(
            constraint,
            translation,
            self.vocab,
            elapsed,
            size,
            pid,
            template,
            plan,
            table,
            spans,
            branches,
        )
        self._cache.put(key, compiled, size)
        return compiled

    def validate(self, constraint: Constraint, *, cancel: threading.Event | None = None) -> None:
        """Raise now the ConstraintError that compiling ``constraint`` would raise (the compile
        runs where every compile runs, and its result is cached for the request's own)."""
        self.compile(constraint, cancel=cancel)

    def token_table(self) -> TokenTable:
        """The vocabulary's token facts for decode-time checks (built on first use)."""
        with self._table_lock:
            if self._table is None:
                self._table = TokenTable(self.vocab)
            return self._table

    def span_walk(self) -> tuple[TokenTrie, ctypes.CDLL | None]:
        """The vocabulary's token trie and the compiled span walk (None: no C compiler, the
        Python twin walks), for grounded strings (built on first use)."""
        with self._table_lock:
            if self._span_walk is None:
                self._span_walk = (TokenTrie.from_vocab(self.vocab), load_span_library())
            return self._span_walk

    def close(self) -> None:
        """Stop the compile workers (in-flight isolated compiles fail); idempotent."""
        self._threads.close()
        if self._pool is not None:
            self._pool.close()

    def __enter__(self) -> ConstraintCompiler:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _build_bounded(self, constraint: Constraint) -> tuple[Translation, llguidance.LLMatcher]:
        try:
            return self._threads.run(lambda: self._build(constraint), self.timeout_s)
        except CallTimeout:
            raise CompileTimeoutError(self.timeout_s) from None

    def _build(self, constraint: Constraint) -> tuple[Translation, llguidance.LLMatcher]:
        translation = translate(constraint)
        grammar = translation.grammar
        return translation, build_template(
            self.vocab, constraint.kind, grammar, self._parser_limits
        )


def _entry_bytes(constraint: Constraint, translation: Translation, heap_bytes: int) -> int:
    """A cache entry's size: the template's C heap as measured in the worker (with headroom
    for later lexer growth) plus the texts; without a measurement (small grammars, or
    ``workers=0``), an estimate from the grammar size (measured: ~60 KiB + 7-100 bytes per
    grammar character, the most for JSON schemas with many patterns)."""
    grammar_chars = len(translation.grammar) + sum(map(len, translation.branches))
    texts = 2 * (len(constraint.source) + grammar_chars)
    texts += _SPAN_BYTES * sum(len(t) for t in set(translation.spans))
    if heap_bytes:  # the branches' templates (``calls_or_answer``) are estimated
        branches = _BYTES_PER_CHAR * sum(map(len, translation.branches))
        return int(_GROWTH * heap_bytes) + branches + texts
    return _BASE_BYTES + _BYTES_PER_CHAR * grammar_chars + texts
