"""Constraint-aware drafts for each running sequence, set on ``seq.spec_token_ids`` before the
scheduler runs.

Drafts mirror what the non-speculative engine would append: a proposed token, then the tokens
the constraint forces after it (jump-forward, free: they need no proposal), then the next
proposal from the context so far. Where the constraint forces text but no token (``":"`` after a
key could also start a longer token), the text's own tokenization is drafted too. Proposals come
from prompt lookup (tokens, then text), under a JSON schema from the schema's next key, and from
the request's own ``SamplingParams.proposer`` (``proposer.py``: the caller's knowledge of its
source, such as a document's labels and table rows); each is checked against the sequence's
matcher (a token it refuses is never drafted). A copied value stops where it most likely ends
(``VALUE_END``), so the next proposal closes it. Drafting stops where the chain's chance of being
accepted no longer pays for its rows (``chance.py``). The matcher is rolled back to where it was
(only verified tokens are ever accepted for good)."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from stencil.engine.sequence import Sequence
from stencil.engine.spec_decode.chance import (
    FORCED_TEXT,
    KEY,
    KEY_AFTER_VALUE,
    TEXT,
    Guess,
    forced_run_pays,
    ngram_chance,
)
from stencil.engine.spec_decode.config import SpeculativeConfig
from stencil.engine.spec_decode.key_proposer import KeyProposer, fits, property_names
from stencil.engine.spec_decode.ngram_proposer import NgramProposer
from stencil.engine.spec_decode.proposer import Proposal, Proposer
from stencil.engine.spec_decode.spacing import STRUCTURE, Spaced, Spacing, compact
from stencil.engine.spec_decode.spelling import Spelling
from stencil.engine.spec_decode.step_cost import PRIOR_ACCEPTANCE, StepCost
from stencil.engine.spec_decode.text_proposer import TextProposer
from stencil.engine.spec_decode.text_tokens import TextTokens

# where a value copied from a document most likely ends: a line's end, a gap between columns, a
# sentence's end, a colon or semicolon before a blank (``Meetup: Structured Output``)
VALUE_END = re.compile(r"\n|\t| {2}|[.!?](?=\s+[A-Z]|\s*\n)|[.!?]\"|[;:](?=\s)")
IN_VALUE = re.compile(r'":\s*"(?:[^"\\]|\\.)*$')  # the tail ends inside a string value
MAX_FORCED = 64  # forced tokens taken as drafts per step, on top of num_speculative_tokens
# forced closers the model writes merged with what follows (``},{"``, a value's ``",``)
MERGED = ("}", "]", '"')
CLOSING = ("}", "]")
MAX_GAPS = 4  # runs of whitespace drafted per forced text (``{\n  "a": "``: 2)
TAIL_TOKENS = 16  # the output tokens whose text the key proposer reads
CHARS_PER_TOKEN = 8  # text a request's proposer may propose, per token wanted
OWN_PRIOR_DRAFTS = 8  # drafts' worth of trust in the priors before a request's own count

logger = logging.getLogger(__name__)


@dataclass(slots=True)
class _Sources:
    """What a running sequence's drafts come from besides its tokens (built once)."""

    names: tuple[str, ...]  # its JSON schema's property names, declared order
    document: str | None  # its grounded constraint's source text
    proposer: Proposer | None  # its ``SamplingParams.proposer`` (dropped where it raised)
    prompt: str | None = None  # its prompt's text (on first use)
    spelled: dict[str, list[int]] = field(default_factory=dict)  # ``spelling.py``
    spelled_to: int = 0  # its tokens ``spelled`` and ``spaced`` have seen
    spaced: Spaced = field(default_factory=Spaced)  # ``spacing.py``
    drafted: int = 0  # its drafts verified so far
    accepted: int = 0  # those the model wrote


def own_trust(sources: _Sources) -> float:
    """How far a request's verified drafts bear out the chances' priors: its acceptance,
    smoothed by ``OWN_PRIOR_DRAFTS`` drafts at ``PRIOR_ACCEPTANCE``, over that prior (at most
    1: the priors are never raised)."""
    own = (sources.accepted + OWN_PRIOR_DRAFTS * PRIOR_ACCEPTANCE) / (
        sources.drafted + OWN_PRIOR_DRAFTS
    )
    return min(1.0, own / PRIOR_ACCEPTANCE)


class Drafter:
    def __init__(self, config: SpeculativeConfig, tokenizer: Any, draft_model=None) -> None:
        self.config = config
        self.proposer = NgramProposer(config.prompt_lookup_min or 1, config.prompt_lookup_max or 1)
        self.draft_model = draft_model  # a DraftModel (draft_model.py) proposes instead
        self.tokenizer = tokenizer
        self.text_proposer = TextProposer(tokenizer)
        self.key_proposer = KeyProposer(tokenizer)
        self.spelling = Spelling(tokenizer)
        self.spacing = Spacing()
        self._text_tokens = TextTokens(tokenizer)  # forced text -> its tokens
        self._sources: dict[int, _Sources] = {}  # seq_id -> its sources, while it runs
        self.cost = StepCost()  # the engine reports its forwards and verifications
        self.step_rows = self.cost.step_rows()  # as of this step's propose

    def propose(self, running: list[Sequence], waiting: Iterable[Sequence] = ()) -> None:
        """Set every running sequence's drafts (none while the batch is too large), and those
        of the waiting ones the batch has room for: drafts computed in the step that computes
        the rest of their prompt (the scheduler drops them where it does not)."""
        self.step_rows = self.cost.step_rows()
        limit = self.config.disable_by_batch_size or self.cost.max_batch()
        off = len(running) > limit
        room = limit - len(running)
        room = 0 if self.draft_model is not None else room
        for i, seq in enumerate(waiting):
            seq.spec_token_ids = self.drafts(seq) if i < room and _admissible(seq) else []
        live = {seq.seq_id for seq in (*running, *waiting)}
        self._sources = {i: t for i, t in self._sources.items() if i in live}
        if self.draft_model is not None:
            self.draft_model.retain(live)
            for seq in running:
                seq.spec_token_ids = []
            seqs = [] if off else [s for s in running if _eligible(s)]
            self.draft_model.propose(seqs, self.config.num_speculative_tokens, self._force)
            return
        for seq in running:
            seq.spec_token_ids = [] if off or not _eligible(seq) else self.drafts(seq)

    @property
    def min_chance(self) -> float:
        """A chain of drafts pays while its chance of acceptance is above this."""
        return 1 / (1 + self.step_rows)

    def release(self, seq: Sequence) -> None:
        """``seq`` finished, was aborted or preempted: free what the draft model holds for it;
        where it stopped, record how its output ended (``Spacing.end``)."""
        if self.draft_model is not None:
            self.draft_model.release(seq.seq_id)
        sources = self._sources.get(seq.seq_id)
        if sources is not None and seq.finish_reason == "stop":
            new = seq.token_ids[max(sources.spelled_to, seq.prompt_len) :]
            self.spacing.end(sources.spaced, self._decoded(new))

    def drafts(self, seq: Sequence) -> list[int]:
        room = seq.max_len - seq.num_tokens - 1  # the bonus token must fit too
        k = min(self.config.num_speculative_tokens, room)
        if k <= 0:
            return []
        matcher = seq.matcher if seq.reasoning_done else None
        if matcher is None:
            return self._free(seq, k)
        drafts: list[int] = []
        sources = self._sources_of(seq)
        self.spelling.update(sources.spelled, seq.token_ids, sources.spelled_to, seq.prompt_len)
        new = seq.token_ids[max(sources.spelled_to, seq.prompt_len) :]
        self.spacing.update(sources.spaced, self._decoded(new))
        sources.spelled_to = seq.num_tokens
        try:
            self._guided(seq, sources, matcher, drafts, k, room)
        finally:
            matcher.rollback(len(drafts))
        return drafts

    def observe(self, seq: Sequence, drafted: int, accepted: int) -> None:
        """A verification of ``seq``'s drafts: ``accepted`` of the ``drafted`` were what the
        model wrote (the step cost's acceptance and the request's own)."""
        self.cost.observe_drafts(drafted, accepted)
        sources = self._sources.get(seq.seq_id)
        if sources is not None:
            sources.drafted += drafted
            sources.accepted += accepted

    def _free(self, seq: Sequence, k: int) -> list[int]:
        """Unconstrained: the first proposal, as far as its chain's chance holds. The chances
        are priors; a request whose own drafts fail more often than they say (free chat on a
        model the priors were not measured on) drafts only where they are surer."""
        guess = next((g for g in self._candidates(seq, None, seq.token_ids, k) if g.tokens), None)
        if guess is None:
            return []
        floor = self.min_chance / own_trust(self._sources_of(seq))
        chance, p, n = 1.0, guess.first, 0
        while n < len(guess.tokens) and chance * p >= floor:
            chance, p, n = chance * p, guess.rest, n + 1
        return guess.tokens[:n]

    def _guided(
        self, seq: Sequence, sources: _Sources, matcher, drafts: list[int], k: int, room: int
    ) -> None:
        """Proposals the matcher accepts, each followed by the tokens it then forces; a forced
        run, or a proposal the matcher refuses, makes the next proposal come from the longer
        context. Drafting stops where the chain's chance falls below ``min_chance``."""
        proposed = 0
        last, spelled, spaced = seq.token_ids[-1], sources.spelled, sources.spaced
        chance = self._force(matcher, drafts, room, 1.0, last, spelled, spaced)  # the last step's
        while proposed < k and len(drafts) < room and chance >= self.min_chance:
            guess = self._fit(seq, matcher, seq.token_ids + drafts, k - proposed, chance)
            if guess is None:
                return
            p = guess.first
            for i, token in enumerate(guess.tokens):  # the first is accepted already
                if i and (proposed >= k or chance * p < self.min_chance):
                    return  # the chain is not worth more rows
                if i and (len(drafts) >= room or not matcher.accept_token(token)):
                    break  # refused: propose again from here
                drafts.append(token)
                proposed += 1
                chance, p = chance * p, guess.rest
                if matcher.is_terminated():
                    return
                before = len(drafts)
                chance = self._force(matcher, drafts, room, chance, last, spelled, spaced)
                if len(drafts) > before:
                    break  # propose again after the forced run

    def _fit(self, seq: Sequence, matcher, context: list[int], k: int, chance: float):
        """The first candidate worth drafting whose first token ``matcher`` accepts (accepted),
        or None."""
        for guess in self._candidates(seq, matcher, context, k):
            if (
                guess.tokens
                and chance * guess.first >= self.min_chance
                and matcher.accept_token(guess.tokens[0])
            ):
                return guess
        return None

    def _candidates(self, seq: Sequence, matcher, context: list[int], k: int):
        """Proposals (``Guess``) in order of trust: the request's proposer's leading ones (a
        table's next row); token n-grams found by 2 or more tokens; the same lookup on text;
        the request's proposer's others (the text after a label naming the key); the schema's
        next key; n-grams found by one token."""
        tokens, n = self.proposer.lookup(context, k)
        ngram = Guess(tokens, *ngram_chance(n, matcher is not None))
        sources = self._sources_of(seq)
        if matcher is None or not (sources.names or sources.document or sources.proposer):
            yield ngram
            yield self._text(seq, sources, context, k)
            return
        tail = self.tokenizer.decode(context[-TAIL_TOKENS:])
        copy = bool(sources.document and IN_VALUE.search(tail))  # copying a value: stop at its end
        if copy:
            ngram = Guess(self._to_value_end(ngram.tokens), ngram.first, ngram.rest)
        leading, others = self._lent(seq, sources, context, k)
        yield from leading
        if n >= 2:
            yield ngram
        text = self._text(seq, sources, context, k)
        yield Guess(self._to_value_end(text.tokens), text.first, text.rest) if copy else text
        yield from others
        spaced = sources.spaced
        if self.spacing.spaces:
            spaced = self.spacing.read(spaced, self._decoded(context[seq.num_tokens :]))
        tokens = self.key_proposer.propose(
            matcher, sources.names, tail, sources.spelled, self.spacing, spaced
        )
        yield Guess(tokens, *(KEY if tail.endswith('"') else KEY_AFTER_VALUE))
        if n < 2:
            yield ngram

    def _lent(
        self, seq: Sequence, sources: _Sources, context: list[int], k: int
    ) -> tuple[list[Guess], list[Guess]]:
        """The request's proposer's proposals for what follows ``context``, tokenized: (the
        leading ones, the others); none without a proposer. A proposer that raises or returns
        something else than ``Proposal``s is dropped, with a warning."""
        if sources.proposer is None:
            return [], []
        output = self.tokenizer.decode(context[seq.prompt_len :])
        try:
            proposals: list[Proposal] = list(sources.proposer.propose(output, CHARS_PER_TOKEN * k))
            guesses = [(p.lead, Guess(self._tokens(p.text, k), p.first, p.rest)) for p in proposals]
        except Exception:  # the caller's code: drafts are hints, the request goes on
            logger.warning(
                "request %s: its proposer failed; no more drafts from it",
                seq.request_id,
                exc_info=True,
            )
            sources.proposer = None
            return [], []
        return [g for lead, g in guesses if lead], [g for lead, g in guesses if not lead]

    def _decoded(self, tokens: list[int]) -> str:
        return "".join(self.spelling.piece(t) for t in tokens)

    def _tokens(self, text: str, k: int) -> list[int]:
        return self.tokenizer.encode(text, add_special_tokens=False)[:k]

    def _to_value_end(self, tokens: list[int]) -> list[int]:
        """``tokens`` (a copy of document text) up to the token where the value most likely
        ends (``VALUE_END``), so the next proposal closes it."""
        pieces = [self.spelling.piece(t) for t in tokens]
        found = VALUE_END.search("".join(pieces))
        if found is None:
            return tokens
        n, chars = 0, 0
        while chars + len(pieces[n]) <= found.start():
            chars += len(pieces[n])
            n += 1
        return tokens[:n]

    def _sources_of(self, seq: Sequence) -> _Sources:
        sources = self._sources.get(seq.seq_id)
        if sources is None:
            constraint = seq.params.constraint
            options = dict(constraint.options) if constraint is not None else {}
            document = options.get("source_text")
            sources = self._sources[seq.seq_id] = _Sources(
                property_names(constraint),
                document if isinstance(document, str) else None,
                seq.params.proposer,
            )
        return sources

    def _text(self, seq: Sequence, sources: _Sources, context: list[int], k: int) -> Guess:
        """The lookup on text (``text_proposer.py``) in the grounded constraint's document, where
        values are copied from (the instructions around it are not: ``"Extra`` would find
        ``Extract the``), else in the prompt."""
        if sources.document:
            return Guess(self.text_proposer.propose(sources.document, context, k), *TEXT)
        if sources.prompt is None:
            sources.prompt = self.tokenizer.decode(seq.token_ids[: seq.prompt_len])
        return Guess(self.text_proposer.propose(sources.prompt, context, k), *TEXT)

    def _force(
        self,
        matcher,
        drafts: list[int],
        room: int,
        chance: float = 1.0,
        last: int | None = None,
        spelled: dict[str, list[int]] | None = None,
        spaced: Spaced | None = None,
    ) -> float:
        """Append the tokens the constraint forces now (as jump-forward would: certain once the
        drafts before them are), then the text it forces beyond them, tokenized (``_encode``;
        ``FORCED_TEXT``), where the run pays (``forced_run_pays``); returns the chain's chance.
        ``last``: the token before the drafts; ``spelled``, ``spaced``: the sequence's
        spellings and spacing."""
        start = len(drafts)
        run_chance = chance
        while len(drafts) - start < MAX_FORCED and len(drafts) < room:
            forced = matcher.jump_forward_tokens()
            if not forced:
                before = drafts[-1] if drafts else last
                forced = self._encode(matcher, before, spelled or {}, spaced, drafts)
                if not forced:
                    break
                run_chance *= FORCED_TEXT
            n = 0
            for t in forced[: room - len(drafts)]:
                if not matcher.accept_token(t):
                    break
                drafts.append(t)
                n += 1
            if n < len(forced):
                break
        if len(drafts) > start and not forced_run_pays(chance, len(drafts) - start, self.step_rows):
            matcher.rollback(len(drafts) - start)
            del drafts[start:]
            return 0.0  # not worth its rows: the drafts end before it
        return run_chance

    def _encode(
        self,
        matcher,
        before: int | None,
        spelled: dict[str, list[int]],
        spaced: Spaced | None = None,
        drafts: list[int] | None = None,
    ) -> list[int]:
        """The tokens of the text every continuation starts with, with the run of structure
        the output writes there (``_spaced``; ``spaced``: its reading before ``drafts``): where
        the output writes it for the first time, as the latest output first did
        (``Spelling.first_time``), else as the tokenizer does. [] where there is none, or
        where it is a closer (``MERGED``): a quote only opens a value after a colon, the
        token ``before``."""
        forced = text = matcher.find_jump_forward_string()
        piece = self.spelling.piece(before) if before is not None else ""
        # a run of structure may go on where none is forced (``": "``), not inside a value
        inside = not text and piece[-1:] not in STRUCTURE and not piece.endswith('"')
        if spaced is not None and not inside and self.spacing.spaces:
            ahead = self.spacing.read(spaced, self._decoded(drafts or []))
            text = self._spaced(matcher, text, ahead)
        opens = text == '"' and piece.endswith(":")
        if not text or (text == forced and text in MERGED and not opens):
            return []
        return self.spelling.first_time(text, spelled) or self._text_tokens(text)

    def _spaced(self, matcher, text: str, spaced: Spaced) -> str:
        """``text`` (forced, after the drafts ``spaced`` has read) with the run of structure
        the output writes next (``_next_run``) and the text forced after it (a string value's
        opening quote), as long as one fits; a run that ends in whitespace only where
        something is forced after it (a token may hold that whitespace and what follows)."""
        for _ in range(MAX_GAPS):
            run = self._next_run(matcher, text, self.spacing.read(spaced, text))
            if run is None:
                return text
            gap, more = run
            if not more and gap[-1].isspace():
                return text
            text += gap + more
            if not more:
                return text
        return text

    def _next_run(self, matcher, text: str, ahead: Spaced) -> tuple[str, str] | None:
        """After ``text`` (``ahead``: the output read up to its end): the rest of the run of
        structure it stands in, else the run a key's end (``": "``) or a value's end where no
        ``,`` can follow (``"\n}"``) starts, as the output wrote it, and the text forced after
        it; None outside runs, where the output wrote no such run, or where the constraint
        refuses it."""
        if ahead.value_open():
            return None
        for form in ("",) if compact(ahead.run) else (":", "}", "]"):
            gap = self.spacing.rest(ahead, form)
            if not gap or (form in CLOSING and fits(matcher, self._text_tokens(text + ","))):
                continue
            tokens = self._text_tokens(text + gap)
            n = 0
            while n < len(tokens) and matcher.accept_token(tokens[n]):
                n += 1
            more = matcher.find_jump_forward_string() if n == len(tokens) else None
            matcher.rollback(n)
            if more is not None:
                return gap, more
        return None


def _admissible(seq: Sequence) -> bool:
    """Waiting to be admitted, with its constraint compiled where it has one."""
    compiled = seq.matcher is not None or seq.params.constraint is None
    return compiled and _draftable(seq)


def _eligible(seq: Sequence) -> bool:
    """Decoding (its prompt computed)."""
    return seq.num_computed_tokens >= seq.prompt_len and _draftable(seq)


def _draftable(seq: Sequence) -> bool:
    """Not finished, not an embedding, no siblings waiting to fork from it."""
    return (
        not seq.is_finished and seq.pooler is None and not seq.pending_forks and seq.fork_of is None
    )
