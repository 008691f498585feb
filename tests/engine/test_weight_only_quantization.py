"""``quantization="int8" | "int4"`` on a safetensors model: weights quantized at load (int8 with
per-32 scales; int4 with per-32 scale and minimum, embedding and lm_head at int8), checked against
transformers' forward of the same weights dequantized (an HF model whose parameters are replaced),
on the reference kernels (fp32 matmul of the dequantized weight) and the C kernel (activations
rounded to int8 per block of 32 with AVX512-VNNI, else to bf16)."""

from __future__ import annotations

import pytest
import torch
from transformers import AutoModelForCausalLM

from stencil import SamplingParams
from stencil.engine.models.quantized import dequantize_codes, quantize_weights
from stencil.kernels.quant_weight import is_quantized
from stencil.testing.tiny_models import hf_greedy, make_llm, prefill_logits

PROMPTS = [[1, 100, 2000, 300, 4000, 50, 6000, 70], list(range(300, 330))]
# max |logit diff| / max |logit|, as the GGUF tests; the C kernel's int8 activations measured
# 3.3e-2 (int8) / 2.9e-2 (int4), its bf16 ones < 2e-2
BOUNDS = {"torch": 2e-3, "auto": 5e-2}


def dequantized_hf(model_dir, mode: str):
    hf = AutoModelForCausalLM.from_pretrained(
        model_dir, dtype=torch.float32, attn_implementation="eager"
    ).eval()
    state = {k: v.numpy() for k, v in hf.state_dict().items()}
    with torch.no_grad():
        for name, w in quantize_weights(state.items(), mode):
            if not hasattr(w, "codes"):
                continue
            hf.get_parameter(name).copy_(torch.from_numpy(dequantize_codes(w)))
    return hf


@pytest.mark.parametrize("mode", ["int8", "int4"])
@pytest.mark.parametrize("backend", ["torch", "auto"])
def test_weight_only_quantization_matches_the_dequantized_forward(tiny_models, mode, backend):
    model_dir = tiny_models["qwen2-bias"]
    llm = make_llm(
        model_dir, quantization=mode, block_size=4, num_kv_blocks=64, attention_backend=backend
    )
    model = llm.engine.runner.model
    assert is_quantized(model.layers[0].self_attn.qkv_proj.weight)
    hf = dequantized_hf(model_dir, mode)
    with torch.no_grad():
        for p, ours in zip(PROMPTS, prefill_logits(llm, PROMPTS), strict=True):
            ref = hf(torch.tensor([p])).logits[0].float()
            rel = (ours - ref).abs().max().item() / ref.abs().max().item()
            assert rel < BOUNDS[backend], f"{mode}/{backend}: {rel:.2e} relative"
    if backend == "torch":
        params = SamplingParams(temperature=0, max_tokens=8, ignore_eos=True)
        for p, out in zip(PROMPTS, llm.generate(PROMPTS, params, use_tqdm=False), strict=True):
            assert out.outputs[0].token_ids == hf_greedy(hf, p, 8), f"{mode}: prompt {p}"
