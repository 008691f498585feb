"""The draft model of ``"method": "draft_model"``: a small model with the target's tokenizer
proposes k tokens per running sequence, greedily (argmax of its logits), masked by the
sequence's constraint, so a draft the grammar refuses is never proposed.

It keeps its own paged KV cache: its own ``ModelRunner`` and ``BlockManager``, and per drafting
sequence a shadow ``Sequence`` holding the tokens whose KV the draft has (the target's tokens,
then this step's drafts) and how many of them it has computed. Before proposing, the shadow
falls back to the longest prefix still equal to the target's tokens (rejected drafts are simply
recomputed later; blocks past the target's tokens go back), then the draft runs over what it has
not seen (the prompt on first use, in chunks of ``max_num_batched_tokens``; after that the
accepted drafts and the bonus token), then k - 1 more steps of one row per sequence (more where
the constraint forces tokens), batched over every drafting sequence. A shadow's blocks are freed
when its sequence finishes, is aborted or preempted.

KV budget: ``kv_cache_memory`` is split between the target and the draft in proportion to their
KV bytes per token, so both pools hold the same number of tokens (one budget for both, as in
vLLM); with ``num_kv_blocks`` set, each pool gets that many blocks.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from stencil.engine.block_manager import BlockManager
from stencil.engine.config import EngineConfig
from stencil.engine.errors import ConfigError
from stencil.engine.model_runner import ModelRunner
from stencil.engine.scheduler import ScheduledSeq, SchedulerOutput
from stencil.engine.sequence import Sequence
from stencil.engine.sliding_blocks import SlidingBlocks
from stencil.engine.spec_decode.config import SpeculativeConfig

Force = Callable[..., float]  # Drafter._force(matcher, drafts, room): append the forced tokens


@dataclass(slots=True, eq=False)
class _Draft:
    """One sequence's drafting this step."""

    seq: Sequence
    shadow: Sequence
    matcher: object | None
    k: int  # proposals wanted
    room: int  # drafts that fit (forced ones included)
    drafts: list[int] = field(default_factory=list)
    proposed: int = 0
    done: bool = False

    def wants_more(self) -> bool:
        return not self.done and self.proposed < self.k and len(self.drafts) < self.room


class DraftModel:
    def __init__(
        self,
        spec: SpeculativeConfig,
        config: EngineConfig,
        tokenizer,
        vocab_size: int,
        eos_token_ids: set[int],
        device: torch.device,
        dtype: torch.dtype,
        max_model_len: int,
    ) -> None:
        from stencil.engine.models.loader import load_config, load_model, resolve_model_path

        try:
            path = resolve_model_path(spec.model)
            hf_config = load_config(path)
        except ConfigError as e:
            raise ConfigError(f"speculative_config.model: {e}") from e
        check_same_vocab(path, hf_config, tokenizer, vocab_size)
        limit = getattr(hf_config, "max_position_embeddings", None) or max_model_len
        self.max_model_len = min(max_model_len, limit)
        self.model = load_model(
            path, hf_config, dtype, device, self.max_model_len, spec.quantization
        )
        self.config, self.device, self.dtype = config, device, dtype
        self.eos_token_ids = eos_token_ids
        self.runner: ModelRunner | None = None
        self.block_manager: BlockManager | None = None
        self.shadows: dict[int, Sequence] = {}  # seq_id -> its shadow in the draft's pool
        self.verified: dict[int, int] = {}  # seq_id -> its target tokens at the last sync

    def share_kv_budget(self, target_model) -> EngineConfig:
        """Build the draft's KV pool from its share of the budget; returns the engine config
        with the target's share."""
        cfg = self.config
        target_cfg = draft_cfg = dataclasses.replace(cfg, speculative_config=None)
        if cfg.num_kv_blocks is None:
            t = kv_bytes_per_token(target_model, self.dtype)
            d = kv_bytes_per_token(self.model, self.dtype)
            share = cfg.kv_cache_memory * t // (t + d)
            target_cfg = dataclasses.replace(cfg, kv_cache_memory=share)
            draft_cfg = dataclasses.replace(draft_cfg, kv_cache_memory=cfg.kv_cache_memory - share)
        self.runner = runner = ModelRunner(draft_cfg, self.model, self.device, self.dtype)
        sliding = None
        if runner.window is not None:
            sliding = SlidingBlocks(runner.num_sliding_blocks, cfg.block_size, runner.window)
        self.block_manager = BlockManager(
            runner.num_blocks, cfg.block_size, cfg.enable_prefix_caching, sliding
        )
        return target_cfg

    # ---- proposing ---------------------------------------------------------------------
    @torch.inference_mode()
    def propose(self, seqs: list[Sequence], k: int, force: Force) -> None:
        """Set the drafts of ``seqs`` (decoding, eligible): up to ``k`` proposals each, the
        tokens the constraint forces after each (``force``) on top; matchers rolled back."""
        work = [d for d in map(lambda s: self._start(s, k), seqs) if d is not None]
        try:
            for d in work:
                if d.matcher is not None:
                    force(d.matcher, d.drafts, d.room)  # forced text left by the last step
            for _ in range(k):
                active = [d for d in work if d.wants_more()]
                if not active:
                    break
                self._step(active, force)
        finally:
            for d in work:
                if d.matcher is not None:
                    d.matcher.rollback(len(d.drafts))
                d.seq.spec_token_ids = d.drafts

    def _start(self, seq: Sequence, k: int) -> _Draft | None:
        room = min(seq.max_len, self.max_model_len) - seq.num_tokens - 1  # the bonus must fit
        if min(k, room) <= 0:
            return None
        shadow = self._sync(seq)
        if shadow is None:
            return None
        matcher = seq.matcher if seq.reasoning_done else None
        return _Draft(seq, shadow, matcher, min(k, room), room)

    def _step(self, active: list[_Draft], force: Force) -> None:
        """One proposal for each of ``active``: the draft runs over its unseen tokens, its last
        row is masked by the constraint, and its argmax is appended."""
        for d in active:  # the shadow's tokens: the target's, then the drafts so far
            del d.shadow.token_ids[d.seq.num_tokens :]
            d.shadow.token_ids += d.drafts
        rows = self._run([d.shadow for d in active])
        ready = [d for d in active if d.seq.seq_id in rows]
        for d in active:
            d.done = d.done or d.seq.seq_id not in rows  # its KV did not fit
        if not ready:
            return
        logits = torch.stack([rows[d.seq.seq_id] for d in ready])  # [n, vocab]
        self._mask(logits, ready)
        for d, token in zip(ready, logits.argmax(dim=-1).tolist(), strict=True):
            if d.matcher is not None and not d.matcher.accept_token(token):
                d.done = True
                continue
            d.drafts.append(token)
            d.proposed += 1
            if token in self.eos_token_ids and not d.seq.params.ignore_eos:
                d.done = True
            elif d.matcher is not None:
                d.done = d.matcher.is_terminated()
                if not d.done:
                    force(d.matcher, d.drafts, d.room)

    def _mask(self, logits: torch.Tensor, ready: list[_Draft]) -> None:
        """-inf where each constrained row's matcher forbids a token; ``logits [n, vocab]``."""
        rows = [i for i, d in enumerate(ready) if d.matcher is not None]
        if not rows:
            return
        from stencil.constraints import allocate_token_bitmask

        bitmask = allocate_token_bitmask(logits.shape[0], logits.shape[1])
        for i in rows:
            ready[i].matcher.fill_next_token_bitmask(bitmask, i)
        self.runner.ops.apply_token_bitmask_inplace(
            logits,
            bitmask.to(logits.device),
            torch.tensor(rows, dtype=torch.int32, device=logits.device),
        )

    def _run(self, shadows: list[Sequence]) -> dict[int, torch.Tensor]:
        """Compute every shadow's unseen tokens, in forwards of at most
        ``max_num_batched_tokens``; returns each one's last logits row ``[vocab]`` by seq_id
        (none for a shadow whose KV does not fit: it is freed)."""
        bm, rows = self.block_manager, {}
        todo = [s for s in shadows if s.num_tokens > s.num_computed_tokens]
        while todo:
            sched, budget = SchedulerOutput(), self.config.max_num_batched_tokens
            for shadow in todo:
                n = min(shadow.num_tokens - shadow.num_computed_tokens, budget)
                if n <= 0:
                    break
                end = shadow.num_computed_tokens + n
                if not bm.can_fit(shadow, end):
                    self.release(shadow.seq_id)
                    continue
                sched.copies += bm.allocate(shadow, end)
                sched.sliding_copies += bm.allocate_sliding(shadow, end)
                sched.scheduled.append(ScheduledSeq(shadow, n))
                budget -= n
            if not sched.scheduled:
                break
            logits, sampled = self.runner.execute(sched)  # [rows, vocab]
            for s in sched.scheduled:
                s.seq.num_computed_tokens += s.num_new_tokens
            rows.update((s.seq_id, row) for s, row in zip(sampled, logits, strict=True))
            todo = [s for s in todo if s.seq_id not in rows and s.seq_id in self.shadows]
        return rows

    # ---- the draft's KV ----------------------------------------------------------------
    def _sync(self, seq: Sequence) -> Sequence | None:
        """``seq``'s shadow holding the target's tokens, its computed count cut back to the
        longest prefix it shares with them (a new one takes the prefix cache's blocks)."""
        shadow = self.shadows.get(seq.seq_id)
        if shadow is not None:
            computed = shadow.token_ids[: shadow.num_computed_tokens]
            common = _common_prefix(computed, seq.token_ids, self.verified[seq.seq_id])
            if common is None:  # the target's tokens changed under it: start over
                self.release(seq.seq_id)
                shadow = None
        if shadow is None:
            shadow = Sequence(
                seq.seq_id,
                seq.request_id,
                seq.index,
                list(seq.token_ids),
                seq.prompt_len,
                seq.params,
                seq.max_len,
                seq.generator,
            )
            matched = self.block_manager.match_prefix(shadow.token_ids)
            if not self.block_manager.can_admit(matched, shadow.num_tokens):
                return None
            self.block_manager.take_prefix(shadow, matched)
            common = shadow.num_computed_tokens
            self.shadows[seq.seq_id] = shadow
        del shadow.token_ids[common:]
        shadow.token_ids += seq.token_ids[common:]
        shadow.num_computed_tokens = min(common, seq.num_tokens - 1)  # its last row is needed
        self.block_manager.release_after(shadow, shadow.num_tokens)
        self.block_manager.commit(shadow)
        self.verified[seq.seq_id] = seq.num_tokens
        return shadow

    def release(self, seq_id: int) -> None:
        """Free ``seq_id``'s shadow and its blocks (finished, aborted, preempted, no room)."""
        shadow = self.shadows.pop(seq_id, None)
        self.verified.pop(seq_id, None)
        if shadow is not None:
            self.block_manager.free(shadow)

    def retain(self, live: set[int]) -> None:
        """Free every shadow whose sequence is not in ``live`` (no longer running)."""
        for seq_id in [i for i in self.shadows if i not in live]:
            self.release(seq_id)


def _common_prefix(a: list[int], b: list[int], known: int) -> int | None:
    """Length of the common prefix of ``a`` and ``b``, whose first ``known`` tokens (capped at
    both lengths) should agree; None where they do not."""
    n = min(known, len(a), len(b))
    if a[:n] != b[:n]:
        return None
    while n < len(a) and n < len(b) and a[n] == b[n]:
        n += 1
    return n


def check_same_vocab(path, hf_config, tokenizer, vocab_size: int) -> None:
    """ConfigError unless the draft at ``path`` has the target's vocabulary and tokenizer."""
    from transformers import AutoTokenizer

    if hf_config.vocab_size != vocab_size:
        raise ConfigError(
            f"speculative_config.model: the draft's vocabulary has {hf_config.vocab_size} "
            f"tokens, the target's {vocab_size}; a draft model needs the target's tokenizer"
        )
    draft_vocab = AutoTokenizer.from_pretrained(str(path)).get_vocab()
    target_vocab = tokenizer.get_vocab()
    if draft_vocab != target_vocab:
        diff = sorted(set(draft_vocab.items()) ^ set(target_vocab.items()), key=lambda x: x[1])
        raise ConfigError(
            "speculative_config.model: the draft's tokenizer differs from the target's "
            f"({len(diff)} differing (token, id) entries, e.g. {diff[:3]}); a draft model "
            "needs the target's tokenizer"
        )


def kv_bytes_per_token(model, dtype: torch.dtype) -> int:
    """K and V of one token over every layer (sliding-window layers counted in full)."""
    mc = model.config
    kv_heads = getattr(mc, "num_key_value_heads", None) or mc.num_attention_heads
    head_dim = getattr(mc, "head_dim", None) or mc.hidden_size // mc.num_attention_heads
    size = torch.tensor([], dtype=dtype).element_size()
    return 2 * mc.num_hidden_layers * kv_heads * head_dim * size
