"""Output processing of one step: append sampled and jump-forward tokens, run the constraint
matcher, detokenize incrementally, check every stop condition, close structures near max_tokens."""

from __future__ import annotations

import dataclasses
import logging
import time

from stencil.engine.closing import (
    CloseSearch,
    Snapshot,
    closer_token_ids,
    grammar_token_ids,
    in_window,
    shortest_close,
)
from stencil.engine.detokenizer import Detokenizer, find_stop
from stencil.engine.metrics import EngineMetrics
from stencil.engine.outputs import Logprob, PositionLogprobs
from stencil.engine.sequence import Sequence
from stencil.engine.token_bytes import token_piece

logger = logging.getLogger(__name__)


class OutputProcessor:
    def __init__(
        self,
        tokenizer,
        vocab_size: int,
        eos_token_ids: set[int],
        reasoning_end: str | None,
        metrics: EngineMetrics,
    ) -> None:
        self.tokenizer = tokenizer
        self.vocab_size = vocab_size
        self.eos_token_ids = eos_token_ids
        self.reasoning_end = reasoning_end
        self.metrics = metrics
        self.detokenizer = Detokenizer(tokenizer)
        self.close_search = CloseSearch(
            closer_token_ids(tokenizer), self._encode, self._allowed, self._signature
        )

    def flush(self, seq: Sequence) -> None:
        """The final detokenization of a finished sequence (a trailing partial character)."""
        try:
            if not seq.text_flushed:
                self.detokenizer.step(seq, final=True)
        except Exception as e:
            logger.exception("final detokenization failed for %s", seq.request_id)
            seq.finish("error", error=f"internal error while detokenizing: {type(e).__name__}")

    def append(self, seq: Sequence, token: int, lp: PositionLogprobs | None) -> None:
        """Add a sampled token (and any jump-forward tokens), then check every stop condition."""
        try:
            if seq.first_token_time is None:
                seq.first_token_time = time.monotonic()
            guided = seq.matcher is not None and seq.reasoning_done
            closing = (
                guided
                and seq.params.close_on_length
                and not seq.close_hopeless
                and in_window(seq, self._search(seq))
            )
            snapshot = Snapshot.take(seq) if closing else None
            start, closed = seq.num_tokens, False
            if lp is not None:
                seq.logprobs.append(lp)
                seq.cumulative_logprob += lp.chosen.logprob
            self._push(seq, token)
            if guided and not seq.params.asks_raw_logprobs:
                self._jump_forward(seq)  # raw logprobs: every token from a forward, none jumped
            if closing and (not seq.is_finished or seq.finish_reason == "length"):
                closed = self._close(seq, snapshot)
            if seq.trace is not None:
                seq.trace.on_tokens(seq.token_ids[start:], closed)
        except Exception as e:
            logger.exception("post-processing failed for %s", seq.request_id)
            seq.finish("error", error=f"internal error: {type(e).__name__}")

    def finish_embedding(self, seq: Sequence) -> None:
        seq.embedding = seq.pooler.embedding()
        seq.finish("stop")

    def _jump_forward(self, seq: Sequence) -> None:
        """Append the tokens the constraint forces next, without sampling them. With logprobs
        asked, each gets its entry: logprob 0 (probability 1 under the constraint's mask), the
        only alternative itself, so the entries cover the output's text as sampled ones do."""
        while not seq.is_finished:
            forced = seq.matcher.jump_forward_tokens()[: seq.max_len - seq.num_tokens]
            if not forced:
                return
            for t in forced:
                self.metrics.jump_forward_tokens_total += 1
                if seq.logprobs is not None:
                    text, raw = token_piece(self.tokenizer, t)
                    sure = Logprob(t, text, 0.0, raw)
                    seq.logprobs.append(PositionLogprobs(sure, [sure]))
                self._push(seq, t)
                if seq.is_finished:
                    return

    def _close(self, seq: Sequence, snapshot: Snapshot) -> bool:
        """close_on_length: the model goes on while a closing path fits the budget; once this
        step's tokens leave none (or stopped at the budget mid-structure), undo them and append
        the path that fitted before. When none fits either way (a budget too small for the
        structure), generate on as plain max_tokens would. True when a closing path replaced
        this step's tokens."""
        left = seq.max_len - seq.num_tokens
        search = self._search(seq)
        if not seq.is_finished and shortest_close(seq.matcher, search, left) is not None:
            return False
        path = self._close_before_step(seq, snapshot)
        if path is None:
            seq.close_hopeless = True
            return False
        for token in path:
            self._push(seq, token)
            if seq.is_finished:
                return True
        seq.finish("stop")
        return True

    def _close_before_step(self, seq: Sequence, snapshot: Snapshot) -> list[int] | None:
        """A closing path from before this step's tokens, which are then undone; None (and the
        step kept) when there is none."""
        step = seq.token_ids[
            len(seq.token_ids) - (seq.matcher.num_tokens - snapshot.matcher_tokens) :
        ]
        seq.matcher.rollback(len(step))
        path = shortest_close(seq.matcher, self._search(seq), seq.max_len - snapshot.num_tokens)
        if path is None:
            for token in step:
                seq.matcher.accept_token(token)
            return None
        snapshot.restore(seq)
        return path

    def _push(self, seq: Sequence, token: int) -> None:
        p = seq.params
        seq.token_ids.append(token)
        self.metrics.generation_tokens_total += 1
        guided = seq.matcher is not None and seq.reasoning_done
        if guided and not seq.matcher.accept_token(token):
            why = seq.matcher.error()  # set: no token was allowed (the sampled one is moot)
            error = f"the constraint could go no further: {why}" if why else None
            error = error or f"token {token} rejected by the constraint"
            seq.finish("error", error=error, error_type="constraint")
            return
        if token in p.stop_token_ids:
            return self._finish_on_token(seq, token, keep_text=p.include_stop_str_in_output)
        if token in self.eos_token_ids and not p.ignore_eos:
            return self._finish_on_token(seq, None, keep_text=False)
        old = len(seq.text)
        delta = self.detokenizer.step(seq)
        if not seq.reasoning_done and (p.reasoning_end or self.reasoning_end) in seq.text:
            seq.reasoning_done = True
        if p.stop and delta and (hit := find_stop(seq.text, len(seq.text) - old, p.stop)):
            i, s = hit
            seq.text = seq.text[: i + len(s)] if p.include_stop_str_in_output else seq.text[:i]
            return seq.finish("stop", stop_reason=s)
        if guided and seq.matcher.is_terminated():
            return seq.finish("stop")
        if seq.num_tokens >= seq.max_len:
            complete = guided and p.close_on_length and seq.matcher.is_accepting()
            seq.finish("stop" if complete else "length")

    def _finish_on_token(self, seq: Sequence, stop_reason: int | None, keep_text: bool) -> None:
        """Finish on a stop/EOS token; its text is kept only when asked (vLLM semantics)."""
        self.detokenizer.step(seq, final=True, end=None if keep_text else -1)
        seq.finish("stop", stop_reason=stop_reason)
        seq.text_flushed = True

    def _search(self, seq: Sequence) -> CloseSearch:
        """The close search for ``seq``: the tokens its grammar names (``<[id]>``) come first,
        since free text in such a grammar (harmony's analysis) ends only at one of them."""
        named = grammar_token_ids(seq.params.constraint)
        if not named:
            return self.close_search
        candidates = named + [t for t in self.close_search.candidates if t not in named]
        return dataclasses.replace(self.close_search, candidates=candidates)

    def _allowed(self, matcher) -> list[int]:
        """Token ids the matcher allows next, ascending, EOS excluded."""
        from stencil.constraints import allocate_token_bitmask, bitmask_to_bool

        bitmask = allocate_token_bitmask(1, self.vocab_size)
        matcher.fill_next_token_bitmask(bitmask, 0)
        ids = bitmask_to_bool(bitmask, self.vocab_size)[0].nonzero().flatten().tolist()
        return [i for i in ids if i not in self.eos_token_ids]

    def _signature(self, matcher) -> bytes:
        """The matcher's allowed-token mask, as bytes (equal masks: likely the same state)."""
        from stencil.constraints import allocate_token_bitmask

        bitmask = allocate_token_bitmask(1, self.vocab_size)
        matcher.fill_next_token_bitmask(bitmask, 0)
        return bitmask.numpy().tobytes()

    def _encode(self, text: str) -> list[int]:
        return self.tokenizer.encode(text, add_special_tokens=False)
