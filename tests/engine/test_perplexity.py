"""Perplexity of the embedded model on a fixed public-domain English text
(``tests/data/perplexity``): its native Q4_1 weights (kept quantized) within +1% of the same file
dequantized to float32."""

from __future__ import annotations

import gc
import math
from pathlib import Path

import pytest
import torch

from stencil import SamplingParams
from stencil.testing.tiny_models import make_llm

TEXT = Path(__file__).parents[1] / "data" / "perplexity" / "declaration_gettysburg.txt"


def perplexity(llm, ids: list[int]) -> float:
    """exp(mean NLL of each next token), the whole text prefilled in one step."""
    eng = llm.engine
    model = eng.runner.model
    seen: list[torch.Tensor] = []
    handle = model.register_forward_hook(lambda m, a, out: seen.append(out.detach().clone()))
    try:
        eng.add_request("ppl", ids, SamplingParams(temperature=0, max_tokens=1))
        eng.step()
    finally:
        handle.remove()
    while eng.has_unfinished_requests():
        eng.step()
    hidden, target = seen[0][:-1], torch.tensor(ids[1:])
    nll = 0.0
    with torch.no_grad():
        for i in range(0, len(target), 256):
            logits = model.compute_logits(hidden[i : i + 256], eng.runner.ops)
            nll += torch.nn.functional.cross_entropy(logits, target[i : i + 256], reduction="sum")
    return math.exp(float(nll) / len(target))


@pytest.fixture(scope="module")
def embedded_gguf(default_model_dir) -> Path:
    from stencil.engine.models.default_model import _fetch_gguf
    from stencil.paths import cache_root

    return _fetch_gguf(cache_root() / "downloads")


def test_q4_1_perplexity_within_one_percent_of_fp32(embedded_gguf, tokenizer):
    ids = tokenizer(TEXT.read_text())["input_ids"]
    assert 1500 < len(ids) < 4096
    kw = dict(max_num_batched_tokens=4096, max_model_len=4096, num_kv_blocks=300, block_size=16)
    fp32 = perplexity(make_llm(embedded_gguf, quantization="none", **kw), ids)
    gc.collect()  # the fp32 engine freed before the Q4_1 one loads: the test process stays small
    q4 = perplexity(make_llm(embedded_gguf, **kw), ids)
    print(f"perplexity: Q4_1 kept {q4:.4f}, dequantized fp32 {fp32:.4f}")
    assert q4 <= 1.01 * fp32, f"Q4_1 {q4:.4f} vs fp32 {fp32:.4f}"
    assert 1.5 < fp32 < 30, fp32  # a sane English perplexity for a 135M model
