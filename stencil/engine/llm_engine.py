"""The synchronous engine: add requests, call ``step()`` until done. One process, weights once."""

from __future__ import annotations

import logging
import random
import time

import torch

from stencil.engine.block_manager import BlockManager
from stencil.engine.config import EngineConfig
from stencil.engine.constraint_trace import ConstraintTrace
from stencil.engine.errors import ConfigError, QueueFullError, RequestError
from stencil.engine.guided import GuidedDecoding
from stencil.engine.metrics import EngineMetrics
from stencil.engine.model_runner import ModelRunner
from stencil.engine.models.default_model import NAME as DEFAULT_NAME
from stencil.engine.models.loader import load_config, load_model, resolve_dtype, resolve_model_path
from stencil.engine.output_processor import OutputProcessor
from stencil.engine.outputs import RequestOutput
from stencil.engine.pooling import Pooler
from stencil.engine.request import Request
from stencil.engine.sampler import Sampler, raw_logprobs
from stencil.engine.sampling_params import SamplingParams
from stencil.engine.scheduler import Scheduler
from stencil.engine.sequence import Sequence, SequenceStatus
from stencil.engine.sliding_blocks import SlidingBlocks
from stencil.engine.spec_decode.draft_model import DraftModel
from stencil.engine.spec_decode.drafter import Drafter
from stencil.engine.spec_decode.verifier import Verifier, split_rows
from stencil.engine.token_bytes import token_piece

logger = logging.getLogger(__name__)


class LLMEngine:
    def __init__(self, config: EngineConfig) -> None:
        from transformers import AutoTokenizer

        self.config = config
        if config.num_threads:
            torch.set_num_threads(config.num_threads)
        self.model_path = resolve_model_path(config.model)
        self.model_name = DEFAULT_NAME if config.model is None else self.model_path.name
        self.hf_config = load_config(self.model_path)
        self.tokenizer = AutoTokenizer.from_pretrained(str(self.model_path))
        self.device = _device(config.device)
        dtype = resolve_dtype(config.dtype, self.device)
        limit = getattr(self.hf_config, "max_position_embeddings", None) or 4096
        self.max_model_len = min(config.max_model_len or limit, limit)
        model = load_model(
            self.model_path,
            self.hf_config,
            dtype,
            self.device,
            self.max_model_len,
            config.quantization,
        )
        self.vocab_size = self.hf_config.vocab_size
        self.eos_token_ids = _eos_ids(self.model_path, self.tokenizer)
        spec = config.speculative_config
        draft, runner_config = None, config
        if spec is not None and spec.method == "draft_model":
            draft = DraftModel(
                spec,
                config,
                self.tokenizer,
                self.vocab_size,
                self.eos_token_ids,
                self.device,
                dtype,
                self.max_model_len,
            )
            runner_config = draft.share_kv_budget(model)  # the KV budget: the target's share
        self.runner = ModelRunner(runner_config, model, self.device, dtype)
        sliding = None
        if self.runner.window is not None:
            sliding = SlidingBlocks(
                self.runner.num_sliding_blocks, config.block_size, self.runner.window
            )
        self.block_manager = BlockManager(
            self.runner.num_blocks, config.block_size, config.enable_prefix_caching, sliding
        )
        self._fit_context_to_kv_cache()
        self.metrics = EngineMetrics()  # one owner: every component below adds to it
        self.scheduler = Scheduler(
            self.block_manager,
            config.max_num_seqs,
            config.max_num_batched_tokens,
            self.metrics,
            config.decode_prefill_budget,
        )
        self.sampler = Sampler(self.eos_token_ids, self._token_piece)
        self.guided = GuidedDecoding(
            self.tokenizer, self.vocab_size, self.eos_token_ids, config, self.metrics
        )
        self.requests: dict[str, Request] = {}
        self.rng = random.Random(config.seed)
        self._next_seq_id = 0
        self.output = OutputProcessor(
            self.tokenizer, self.vocab_size, self.eos_token_ids, config.reasoning_end, self.metrics
        )
        self.drafter = Drafter(spec, self.tokenizer, draft) if spec is not None else None
        self.verifier = Verifier(
            self.guided,
            self.sampler,
            self.output,
            self.block_manager,
            self.metrics,
            self.runner.ops,
        )

    def _fit_context_to_kv_cache(self) -> None:
        """A context longer than the whole KV cache is capped to it at start (logged), so a
        request that leaves ``max_tokens`` unset gets what fits instead of a refusal."""
        capacity = self.block_manager.num_blocks * self.config.block_size
        if self.max_model_len > capacity:
            logger.warning(
                "max_model_len %d is more than the KV cache holds (%d tokens): capped to %d; "
                "raise kv_cache_memory (--kv-cache-memory) for a longer context",
                self.max_model_len,
                capacity,
                capacity,
            )
            self.max_model_len = capacity

    # ---- requests ----------------------------------------------------------------------
    def add_request(
        self,
        request_id: str,
        prompt: str | list[int],
        params: SamplingParams | None = None,
        pooling: str | None = None,
    ) -> None:
        """Validate and enqueue; raises RequestError (or ConstraintError) before scheduling.
        ``pooling`` ("last" | "mean") makes it an embedding request: prefill only, the output's
        ``embedding`` is the L2-normalized pooled final hidden state; no KV is kept after it."""
        params = (params or SamplingParams()) if pooling is None else SamplingParams(max_tokens=1)
        if request_id in self.requests:
            raise RequestError(f"duplicate request id {request_id!r}")
        waiting = len(self.requests) - len({s.request_id for s in self.scheduler.running})
        if waiting >= self.config.max_waiting_requests:
            raise QueueFullError(f"the waiting queue is full ({waiting} requests); retry later")
        text, ids = self.validate(prompt, params)
        req = Request(request_id, text, ids, params)
        max_len = min(self.max_model_len, len(ids) + (params.max_tokens or self.max_model_len))
        req.seqs = [self._new_seq(req, i, max_len) for i in range(params.n)]
        req.seqs[0].pending_forks = req.seqs[1:]
        req.seqs[0].pooler = Pooler(pooling) if pooling is not None else None
        self.requests[request_id] = req
        self.metrics.prompt_tokens_total += len(ids)
        if params.constraint is not None:
            req.compile_future = self.guided.submit(params.constraint)
            for s in req.seqs:
                s.status = SequenceStatus.WAITING_FOR_CONSTRAINT
        else:
            self.scheduler.add(req.seqs[0])

    def validate(
        self, prompt: str | list[int], params: SamplingParams
    ) -> tuple[str | None, list[int]]:
        """Tokenize and check a request without adding it; raises RequestError."""
        if params.n > self.config.max_num_seqs:
            raise RequestError(f"n={params.n} exceeds max_num_seqs={self.config.max_num_seqs}")
        text, ids = self._tokenize(prompt)
        self._check(ids, params)
        return text, ids

    def _tokenize(self, prompt: str | list[int]) -> tuple[str | None, list[int]]:
        if isinstance(prompt, str):
            return prompt, self.tokenizer(prompt).input_ids
        ids = list(prompt)
        for i in ids:
            if not isinstance(i, int) or not 0 <= i < self.vocab_size:
                raise RequestError(
                    f"prompt token id {i!r} is outside the vocabulary [0, {self.vocab_size})"
                )
        return None, ids

    def _check(self, ids: list[int], params: SamplingParams) -> None:
        if not ids:
            raise RequestError("the prompt is empty")
        if len(ids) >= self.max_model_len:
            raise RequestError(
                f"the prompt has {len(ids)} tokens; max_model_len is {self.max_model_len}"
            )
        params.check_token_ids(self.vocab_size)

    def _new_seq(self, req: Request, index: int, max_len: int) -> Sequence:
        seed = req.params.seed
        gen = torch.Generator().manual_seed(
            (seed * 1_000_003 + index) % (1 << 63)
            if seed is not None
            else self.rng.randrange(1 << 63)
        )
        self._next_seq_id += 1
        seq = Sequence(
            self._next_seq_id,
            req.request_id,
            index,
            list(req.prompt_token_ids),
            len(req.prompt_token_ids),
            req.params,
            max_len,
            gen,
        )
        seq.reasoning_done = (req.params.reasoning_end or self.config.reasoning_end) is None
        seq.trace = ConstraintTrace() if req.params.trace else None
        return seq

    def abort_request(self, request_id: str) -> RequestOutput | None:
        req = self.requests.pop(request_id, None)
        if req is None:
            return None
        if req.compile_future is not None:  # stop its compile (kills an isolated worker)
            self.guided.cancel(req.compile_future)
        for seq in req.seqs:
            if not seq.is_finished:
                seq.finish("abort")
            self.scheduler.finish(seq)
            if self.drafter is not None:
                self.drafter.release(seq)
        return req.output()

    def has_unfinished_requests(self) -> bool:
        return bool(self.requests)

    # ---- the step ------------------------------------------------------------------------
    def step(self) -> list[RequestOutput]:
        touched = self._admit_compiled()
        if self.drafter is not None:
            self._propose()
        sched = self.scheduler.schedule()
        if self.drafter is not None:
            for seq in sched.preempted:
                self.drafter.release(seq)
        if sched.scheduled:
            touched |= self._run(sched)
        return self._collect(touched)

    def _propose(self) -> None:
        """Drafts are a speed-up only: a proposer's failure (a matcher raising mid-draft) costs
        this step its drafts, never the engine (each sequence's matcher is rolled back)."""
        try:
            self.drafter.propose(self.scheduler.running, self.scheduler.waiting)
        except Exception:
            logger.exception("drafting failed; this step runs without drafts")
            for seq in (*self.scheduler.running, *self.scheduler.waiting):
                seq.spec_token_ids = []

    def _run(self, sched) -> set[str]:
        try:  # per-row failures end only their own sequence (guided stage, sampler)
            with torch.inference_mode():
                start = time.perf_counter()
                logits, seqs = self.runner.execute(sched)
                if self.drafter is not None:
                    self.drafter.cost.observe(sched.num_tokens, time.perf_counter() - start)
                logits, seqs, drafting = split_rows(logits, seqs)
                unmasked = raw_logprobs(logits, seqs)
                self.guided.apply(logits, seqs, self.runner.ops, time.perf_counter() - start)
                rows = self.sampler(logits, seqs, unmasked)
        except Exception as e:  # a batch-wide failure (the forward): fail the batch, keep serving
            logger.exception("step failed")
            for s in sched.scheduled:
                s.seq.finish("error", error=f"internal error: {type(e).__name__}")
            return {s.seq.request_id for s in sched.scheduled}
        self.scheduler.after_step(sched)
        for s in sched.scheduled:
            if s.seq.pooler is not None and s.seq.num_computed_tokens >= s.seq.num_tokens:
                self.output.finish_embedding(s.seq)
        for seq, row in zip(seqs, rows, strict=True):
            if not row.failed and not seq.is_finished:
                self.output.append(seq, row.token, row.logprobs)
        with torch.inference_mode():
            for seq, seq_logits in drafting:
                drafted = len(seq.spec_token_ids)
                self.drafter.observe(seq, drafted, self.verifier.verify(seq, seq_logits))
        return {s.seq.request_id for s in sched.scheduled}

    def _admit_compiled(self) -> set[str]:
        touched = set()
        for req in list(self.requests.values()):
            fut = req.compile_future
            if fut is None or not fut.done():
                continue
            req.compile_future = None
            try:
                compiled = fut.result()
            except Exception as e:
                for s in req.seqs:
                    s.finish("error", error=str(e)[:500])
                touched.add(req.request_id)
                continue
            for s in req.seqs:
                s.matcher = compiled.new_matcher()
                s.status = SequenceStatus.WAITING
            self.scheduler.add(req.seqs[0])
        return touched

    def _collect(self, touched: set[str]) -> list[RequestOutput]:
        outs = []
        for rid in touched:
            req = self.requests.get(rid)
            if req is None:
                continue
            for seq in self.scheduler.free_finished(req.seqs):
                self.output.flush(seq)  # the final detokenization (a trailing partial character)
                if self.drafter is not None:
                    self.drafter.release(seq)
            outs.append(req.output())
            if req.finished:
                del self.requests[rid]
                self.metrics.requests_finished_total += 1
        return outs

    # ---- introspection ------------------------------------------------------------------
    def _token_piece(self, token_id: int) -> tuple[str, bytes | None]:
        return token_piece(self.tokenizer, token_id)

    def get_metrics(self) -> dict[str, float]:
        running = len({s.request_id for s in self.scheduler.running})
        return self.metrics.snapshot(
            running=running,
            waiting=len(self.requests) - running,
            kv_cache_usage=self.block_manager.usage(),
            prefix_cache_hits=self.block_manager.prefix_hits,
        )

    def kv_slot_utilization(self) -> tuple[int, int]:
        """(slots holding real tokens, slots allocated) over the running sequences, now."""
        used = sum(min(s.num_computed_tokens, s.num_tokens) for s in self.scheduler.running)
        alloc = (
            self.block_manager.num_blocks - self.block_manager.num_free_blocks
        ) * self.config.block_size
        return used, alloc

    def shutdown(self) -> None:
        self.guided.shutdown()


def _device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(name)
    except RuntimeError as e:
        raise ConfigError(f"invalid device {name!r}") from e
    if device.type == "cuda" and (
        not torch.cuda.is_available() or (device.index or 0) >= torch.cuda.device_count()
    ):
        raise ConfigError(f"device {name!r} is not available on this machine")
    if device.type not in ("cpu", "cuda"):
        raise ConfigError(f"unsupported device {name!r} (cpu or cuda)")
    return device


def _eos_ids(path, tokenizer) -> set[int]:
    from transformers import GenerationConfig

    ids: set[int] = set()
    try:
        eos = GenerationConfig.from_pretrained(str(path)).eos_token_id
        ids |= set(eos if isinstance(eos, list) else [eos] if eos is not None else [])
    except OSError:
        pass
    if tokenizer.eos_token_id is not None:
        ids.add(tokenizer.eos_token_id)
    return ids
