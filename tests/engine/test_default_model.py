"""The embedded SmolLM2-135M-Instruct end to end: ``LLM()`` greedy chat output is identical to
transformers' ``generate`` on the same weights (the converted HF directory)."""

from __future__ import annotations

import json

import pytest
import torch

from stencil import SamplingParams

MAX_NEW = 32
CONVERSATIONS = [
    [{"role": "user", "content": "Extract name and age as JSON: 'Ada Lovelace was 36 years old.'"}],
    [{"role": "user", "content": "What is the capital of France? Answer in one word."}],
    [
        {"role": "system", "content": "You are a terse assistant."},
        {"role": "user", "content": "List three colors, comma separated."},
    ],
]


@pytest.fixture(scope="module")
def smol():
    from stencil import LLM

    return LLM(num_threads=1, seed=0, kv_cache_memory=64 << 20)


@pytest.fixture(scope="module")
def hf_smol(default_model_dir):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(default_model_dir, dtype=torch.float32).eval()
    return model, AutoTokenizer.from_pretrained(str(default_model_dir))


def test_default_model_is_the_embedded_smollm2(smol, default_model_dir):
    assert smol.engine.model_path.resolve() == default_model_dir.resolve()
    assert smol.engine.vocab_size == 49152
    assert 2 in smol.engine.eos_token_ids


def test_greedy_chat_matches_transformers(smol, hf_smol):
    model, tok = hf_smol
    params = SamplingParams(temperature=0, max_tokens=MAX_NEW)
    outs = smol.chat(CONVERSATIONS, params, use_tqdm=False)
    assert len(outs) == len(CONVERSATIONS)
    for conv, out in zip(CONVERSATIONS, outs, strict=True):
        ids = tok.apply_chat_template(conv, add_generation_prompt=True, return_dict=True)
        ids = ids["input_ids"]
        assert out.prompt_token_ids == list(ids)
        x = torch.tensor([ids])
        with torch.no_grad():
            ref = model.generate(
                x, attention_mask=torch.ones_like(x), do_sample=False, max_new_tokens=MAX_NEW
            )[0, len(ids) :].tolist()
        c = out.outputs[0]
        assert c.token_ids == ref, (c.text, tok.decode(ref))
        assert c.text == tok.decode(ref, skip_special_tokens=True)
        assert c.finish_reason == ("stop" if ref[-1] == 2 else "length")
    # the greedy answer is (pretty-printed) {"name": "Ada Lovelace", "age": 36}
    assert json.loads(outs[0].outputs[0].text) == {"name": "Ada Lovelace", "age": 36}
