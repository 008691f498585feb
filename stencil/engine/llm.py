"""The offline API: ``LLM(model=None, **EngineConfig fields).generate(prompts, params)``."""

from __future__ import annotations

import itertools
from collections.abc import Sequence as Seq

from tqdm.auto import tqdm

from stencil.engine.config import EngineConfig
from stencil.engine.errors import RequestError
from stencil.engine.llm_engine import LLMEngine
from stencil.engine.outputs import RequestOutput
from stencil.engine.sampling_params import SamplingParams


class LLM:
    """Holds one engine; every call runs its prompts as one continuous batch."""

    def __init__(self, model: str | None = None, **fields) -> None:
        self.engine = LLMEngine(EngineConfig(model=model, **fields))
        self._ids = itertools.count()

    def get_tokenizer(self):
        return self.engine.tokenizer

    def get_metrics(self) -> dict[str, float]:
        return self.engine.get_metrics()

    def generate(
        self,
        prompts: str | list[int] | Seq[str | list[int]],
        sampling_params: SamplingParams | Seq[SamplingParams] | None = None,
        use_tqdm: bool = True,
    ) -> list[RequestOutput]:
        """Generate for every prompt (strings or token-id lists); outputs in prompt order."""
        if isinstance(prompts, str) or (prompts and isinstance(prompts[0], int)):
            prompts = [prompts]
        params = sampling_params or SamplingParams()
        params = [params] * len(prompts) if isinstance(params, SamplingParams) else list(params)
        if len(params) != len(prompts):
            raise ValueError("sampling_params must be one value or one per prompt")
        ids = [f"offline-{next(self._ids)}" for _ in prompts]
        for prompt, p in zip(prompts, params, strict=True):  # fail fast, before any work
            self.engine.validate(prompt, p)
        self._compile(params)
        return self._run(list(zip(ids, prompts, params, strict=True)), use_tqdm)

    def embed(
        self, texts: str | list[int] | Seq[str | list[int]], use_tqdm: bool = False
    ) -> list[list[float]]:
        """L2-normalized embeddings (pooling per ``EngineConfig.pooling``), in input order, computed
        by the engine's batched prefill."""
        if isinstance(texts, str) or (texts and isinstance(texts[0], int)):
            texts = [texts]
        pooling = self.engine.config.pooling
        for t in texts:
            self.engine.validate(t, SamplingParams(max_tokens=1))
        work = [(f"embed-{next(self._ids)}", t, None) for t in texts]
        outs = self._run(work, use_tqdm, pooling=pooling)
        return [o.embedding for o in outs]

    def chat(
        self,
        messages: list[dict] | list[list[dict]],
        sampling_params: SamplingParams | Seq[SamplingParams] | None = None,
        use_tqdm: bool = True,
        **template_kwargs,
    ) -> list[RequestOutput]:
        """Apply the model's chat template to one conversation (or a list of them) and generate."""
        convs = [messages] if messages and isinstance(messages[0], dict) else messages
        tok = self.engine.tokenizer
        if not getattr(tok, "chat_template", None):
            raise RequestError(
                "the model has no chat template (a base model): use LLM.generate with a prompt"
            )
        prompts = [
            tok(
                tok.apply_chat_template(
                    c, tokenize=False, add_generation_prompt=True, **template_kwargs
                ),
                add_special_tokens=False,
            ).input_ids
            for c in convs
        ]
        return self.generate(prompts, sampling_params, use_tqdm)

    def _compile(self, params: list[SamplingParams]) -> None:
        """Compile every constraint before any request is added (in parallel, where the server
        compiles them: the engine's compile workers), so a bad one raises its ConstraintError
        here as the server answers 400; the requests then find them in the compiler's cache."""
        constraints = {p.constraint.key: p.constraint for p in params if p.constraint is not None}
        futures = [self.engine.guided.submit(c) for c in constraints.values()]
        try:
            for fut in futures:
                fut.result()
        finally:
            for fut in futures:
                self.engine.guided.cancel(fut)

    def _run(
        self, work: list[tuple], use_tqdm: bool, pooling: str | None = None
    ) -> list[RequestOutput]:
        """Feed requests as the waiting queue allows; step until every one has finished."""
        done: dict[str, RequestOutput] = {}
        pending = iter(work)
        room = self.engine.config.max_waiting_requests
        bar = tqdm(total=len(work), desc="generate", unit="req", disable=not use_tqdm)
        try:
            while len(done) < len(work):
                for rid, prompt, p in itertools.islice(
                    pending, max(room - len(self.engine.requests), 0)
                ):
                    self.engine.add_request(rid, prompt, p, pooling=pooling)
                for out in self.engine.step():
                    if out.finished:
                        done[out.request_id] = out
                        bar.update(1)
        finally:
            bar.close()
            for rid, _, _ in work:
                if rid not in done:
                    self.engine.abort_request(rid)
        return [done[rid] for rid, _, _ in work]
