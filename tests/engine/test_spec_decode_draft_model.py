"""Speculative decoding with a draft model (``"method": "draft_model"``): greedy output identical
to decoding without it across constraint kinds, batched, with prefix caching and under
preemption, for a draft with the target's weights (acceptance near 100%), a random-weight draft
of another architecture, one with sliding-window layers (their own KV pool) and the embedded
Q4_1 GGUF kept quantized; the draft's KV blocks all
free at the end; config errors."""

from __future__ import annotations

import json
import shutil

import pytest
from spec_decode_helpers import (
    PROMPTS,
    check_greedy_identity_batched,
    check_greedy_identity_under_preemption,
    requests,
    tokens,
)

from stencil import SamplingParams
from stencil.engine.errors import ConfigError
from stencil.testing.tiny_models import make_llm

TARGET = "llama-tied"
KW = dict(block_size=4, num_kv_blocks=512, max_model_len=256)
SMALL = dict(block_size=4, max_model_len=128)  # with 24 blocks: the preemption tests
DRAFTS = ["same-weights", "random-qwen2", "gguf-q4_1", "sliding-window"]
TINY_DRAFTS = {
    "same-weights": TARGET,
    "random-qwen2": "qwen2-bias",
    "sliding-window": "mistral-swa8",
}


def _draft_path(name, tiny_models):
    if name == "gguf-q4_1":  # the embedded SmolLM2 file, kept quantized: same tokenizer
        from stencil.engine.models.default_model import default_model_file

        return str(default_model_file())
    return str(tiny_models[TINY_DRAFTS[name]])


def _spec(path, **kw):
    return {"method": "draft_model", "model": path, "num_speculative_tokens": 3, **kw}


@pytest.fixture(scope="module")
def plain(tiny_models):
    return make_llm(tiny_models[TARGET], **KW)


@pytest.fixture(scope="module")
def drafted(tiny_models):
    """name -> a speculative engine over the target with that draft (built on first use)."""
    cache = {}

    def get(name):
        if name not in cache:
            spec = _spec(_draft_path(name, tiny_models))
            cache[name] = make_llm(tiny_models[TARGET], speculative_config=spec, **KW)
        return cache[name]

    return get


def _draft_kv_free(llm) -> None:
    """Every block of the draft's pool is free and no shadow is left."""
    draft = llm.engine.drafter.draft_model
    draft.block_manager.check_integrity([])
    assert draft.block_manager.num_free_blocks == draft.block_manager.num_blocks
    assert not draft.shadows


def _acceptance(llm) -> float:
    m = llm.get_metrics()
    return m["spec_decode_num_accepted_tokens_total"] / m["spec_decode_num_draft_tokens_total"]


# the default run: a draft of another architecture and a quantized one; the rest in -m slow
@pytest.mark.parametrize(
    "draft",
    [pytest.param(d, marks=pytest.mark.slow) if d in DRAFTS[::3] else d for d in DRAFTS],
)
def test_greedy_identity_one_at_a_time(plain, drafted, draft):
    spec = drafted(draft)
    params, prompts = requests()
    step = len(PROMPTS) if draft == "gguf-q4_1" else 1  # the 135M draft: one prompt per kind
    for p, prompt in list(zip(params, prompts, strict=True))[::step]:
        assert tokens(spec, [prompt], [p]) == tokens(plain, [prompt], [p]), p.constraint
    assert spec.get_metrics()["spec_decode_num_draft_tokens_total"] > 0
    spec.engine.block_manager.check_integrity([])
    _draft_kv_free(spec)


def test_same_weights_accepts_nearly_every_draft(tiny_models):
    """A draft with the target's weights proposes the target's greedy tokens."""
    spec = make_llm(tiny_models[TARGET], speculative_config=_spec(str(tiny_models[TARGET])), **KW)
    p = SamplingParams(temperature=0, max_tokens=48, ignore_eos=True)
    spec.generate(PROMPTS, p, use_tqdm=False)
    assert spec.get_metrics()["spec_decode_num_draft_tokens_total"] >= 3 * 30  # 3 per step
    assert _acceptance(spec) >= 0.95
    _draft_kv_free(spec)


@pytest.mark.parametrize("draft", DRAFTS[:2])
def test_greedy_identity_batched_with_prefix_cache(plain, drafted, draft):
    spec = drafted(draft)
    check_greedy_identity_batched(plain, spec)
    assert spec.engine.drafter.draft_model.block_manager.prefix_hits > 0
    _draft_kv_free(spec)


@pytest.fixture(scope="module")
def small_plain(tiny_models):
    """The target without speculation on 24 KV blocks: it preempts too."""
    return make_llm(tiny_models[TARGET], num_kv_blocks=24, **SMALL)


@pytest.mark.parametrize("num_kv_blocks", [24, None])
def test_greedy_identity_under_preemption(tiny_models, small_plain, num_kv_blocks):
    """A KV cache too small for the batch preempts (the draft's shadows freed with it); output
    stays the same. None: the budget split between target and draft (``kv_cache_memory``)."""
    size = {"num_kv_blocks": 24} if num_kv_blocks else {"kv_cache_memory": 2 * 24 * 4 * 512}
    draft = str(tiny_models["qwen2-bias"])  # 512 bytes of KV per token, as the target's
    spec = make_llm(tiny_models[TARGET], speculative_config=_spec(draft), **SMALL, **size)
    assert spec.engine.block_manager.num_blocks == 24
    check_greedy_identity_under_preemption(small_plain, spec)
    _draft_kv_free(spec)


def test_abort_frees_the_draft_kv(drafted):
    spec = drafted("random-qwen2")
    engine = spec.engine
    engine.add_request("a", PROMPTS[0], SamplingParams(temperature=0, max_tokens=40))
    for _ in range(4):
        engine.step()
    assert engine.drafter.draft_model.shadows  # drafting
    engine.abort_request("a")
    _draft_kv_free(spec)


def _edited_copy(src, dst, edit_file, edit):
    """``src`` copied to ``dst`` with one JSON file edited."""
    shutil.copytree(src, dst)
    data = json.loads((dst / edit_file).read_text())
    edit(data)
    (dst / edit_file).write_text(json.dumps(data))
    return str(dst)


def _swap_two_tokens(tok):
    vocab = tok["model"]["vocab"]
    vocab["hello"], vocab["world"] = vocab["world"], vocab["hello"]


@pytest.mark.parametrize(
    ("make", "field"),
    [
        (lambda src, tmp: _edited_copy(src, tmp / "v", "config.json",
                                       lambda c: c.update(vocab_size=50000)), "50000 tokens"),
        (lambda src, tmp: _edited_copy(src, tmp / "t", "tokenizer.json", _swap_two_tokens),
         "tokenizer differs"),
        (lambda src, tmp: str(tmp / "missing"), "speculative_config.model: model path not found"),
    ],
)  # fmt: skip
def test_draft_model_mismatch_is_a_config_error(tiny_models, tmp_path, make, field):
    path = make(tiny_models["qwen2-bias"], tmp_path)
    with pytest.raises(ConfigError, match=field):
        make_llm(tiny_models[TARGET], speculative_config=_spec(path), **KW)


@pytest.mark.parametrize(
    ("value", "field"),
    [
        ({"method": "draft_model"}, "speculative_config.model"),
        ({"method": "draft_model", "model": ""}, "speculative_config.model"),
        ({"method": "draft_model", "model": "x", "prompt_lookup_max": 3}, "prompt_lookup_max"),
        ({"method": "draft_model", "model": "x", "quantization": "q2"}, "quantization"),
        ({"method": "draft_model", "model": "x", "draft_tp": 1}, "draft_tp"),
        ({"method": "ngram", "model": "x"}, "speculative_config.model"),
        ({"method": "ngram", "quantization": "int8"}, "quantization"),
    ],
)
def test_bad_draft_config_names_the_field(value, field):
    from stencil import EngineConfig

    with pytest.raises(ConfigError, match=field):
        EngineConfig(speculative_config=value)
