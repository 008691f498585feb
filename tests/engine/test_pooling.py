"""Offline embeddings (``LLM.embed``): pooled final hidden states against transformers'
``output_hidden_states[-1]`` (same pooling, L2-normalized), batch == single, chunked prefill,
no KV kept after the request, and embeddings beside generation."""

from __future__ import annotations

import random

import pytest
import torch

from stencil import SamplingParams
from stencil.engine.errors import RequestError
from stencil.testing.tiny_models import ARCHS, VOCAB, make_llm

LENGTHS = (1, 3, 9, 17, 30)
TOL = 1e-4


def _prompts(seed: int = 7) -> list[list[int]]:
    rng = random.Random(seed)
    return [[rng.randrange(3, VOCAB) for _ in range(n)] for n in LENGTHS]


def _hf_embed(hf_model, ids: list[int], pooling: str) -> torch.Tensor:
    with torch.no_grad():
        out = hf_model(torch.tensor([ids]), output_hidden_states=True)
    hidden = out.hidden_states[-1][0]  # [n, hidden]
    vec = hidden.mean(0) if pooling == "mean" else hidden[-1]
    return torch.nn.functional.normalize(vec, dim=0)


def _max_diff(ours: list[list[float]], ref: list[torch.Tensor]) -> float:
    return max((torch.tensor(a) - b).abs().max().item() for a, b in zip(ours, ref, strict=True))


@pytest.mark.parametrize("pooling", ["last", "mean"])
@pytest.mark.parametrize("arch", ARCHS)
def test_matches_transformers_hidden_states(tiny_models, hf_models, arch, pooling):
    prompts = _prompts()
    llm = make_llm(tiny_models[arch], block_size=4, num_kv_blocks=64, pooling=pooling)
    ours = llm.embed(prompts)
    ref = [_hf_embed(hf_models(arch), p, pooling) for p in prompts]
    assert _max_diff(ours, ref) < TOL
    assert all(abs(sum(x * x for x in v) - 1.0) < 1e-5 for v in ours)
    assert len(ours[0]) == 64


@pytest.mark.parametrize("pooling", ["last", "mean"])
def test_batch_equals_single_and_chunked(tiny_models, pooling):
    prompts = _prompts(11)
    model = tiny_models["llama-tied"]
    llm = make_llm(model, block_size=4, num_kv_blocks=64, pooling=pooling)
    batch = llm.embed(prompts)
    single = [llm.embed(p)[0] for p in prompts]
    assert _max_diff(batch, [torch.tensor(v) for v in single]) < TOL
    # chunked prefill: every prompt above 8 tokens is prefilled over several steps
    chunked = make_llm(
        model, block_size=4, num_kv_blocks=64, pooling=pooling, max_num_batched_tokens=8
    )
    assert _max_diff(chunked.embed(prompts), [torch.tensor(v) for v in single]) < TOL


def test_text_input_and_order(tiny_models, tokenizer):
    llm = make_llm(tiny_models["llama-tied"], block_size=4, num_kv_blocks=64)
    texts = ["hello world", "a somewhat longer sentence about paged attention", "x"]
    by_text = llm.embed(texts)
    by_ids = llm.embed([tokenizer(t).input_ids for t in texts])
    assert _max_diff(by_text, [torch.tensor(v) for v in by_ids]) < TOL
    assert llm.embed(texts[1])[0] == pytest.approx(by_text[1], abs=TOL)


def test_no_kv_kept_and_no_prefix_reuse(tiny_models):
    llm = make_llm(tiny_models["llama-tied"], block_size=4, num_kv_blocks=64)
    bm = llm.engine.block_manager
    prompt = _prompts()[-1]
    first = llm.embed(prompt)[0]
    # generation on the same prompt fills the prefix cache; the embedding must not reuse it
    llm.generate([prompt], SamplingParams(max_tokens=2, temperature=0.0), use_tqdm=False)
    again = llm.embed(prompt)[0]
    assert again == pytest.approx(first, abs=TOL)
    assert not llm.engine.has_unfinished_requests()
    assert bm.num_free_blocks == bm.num_blocks
    bm.check_integrity([])


def test_embeddings_beside_generation(tiny_models):
    """Embedding and generation requests in one continuous batch give the same results as
    either alone."""
    llm = make_llm(
        tiny_models["llama-tied"], block_size=4, num_kv_blocks=128, max_num_batched_tokens=16
    )
    prompts = _prompts(3)
    alone = llm.embed(prompts)
    greedy = SamplingParams(max_tokens=6, temperature=0.0)
    gen_alone = [o.outputs[0].token_ids for o in llm.generate(prompts, greedy, use_tqdm=False)]
    engine = llm.engine
    for i, p in enumerate(prompts):
        engine.add_request(f"g{i}", p, greedy)
        engine.add_request(f"e{i}", p, pooling="last")
    done = {}
    while engine.has_unfinished_requests():
        for out in engine.step():
            if out.finished:
                done[out.request_id] = out
    mixed = [done[f"e{i}"].embedding for i in range(len(prompts))]
    assert _max_diff(mixed, [torch.tensor(v) for v in alone]) < TOL
    assert [done[f"g{i}"].outputs[0].token_ids for i in range(len(prompts))] == gen_alone


@pytest.mark.parametrize(
    "prompt, match",
    [
        ("", "empty"),
        ([], "empty"),
        ([VOCAB + 5], "outside the vocabulary"),
        ([5] * 300, "max_model_len"),
    ],
)
def test_bad_input_raises_before_scheduling(tiny_models, prompt, match):
    llm = make_llm(tiny_models["llama-tied"], block_size=4, num_kv_blocks=128, max_model_len=256)
    with pytest.raises(RequestError, match=match):
        llm.embed([prompt] if isinstance(prompt, list) else prompt)
    assert not llm.engine.has_unfinished_requests()
