"""The offline API surface: text prompts, prompt order, prefix-cache reporting, metrics names,
bfloat16 on CPU, the progress bar, and the edge of max_model_len."""

from __future__ import annotations

import pytest
import torch

from stencil import LLM, EngineConfig, SamplingParams
from stencil.testing.tiny_models import make_llm

METRICS = (
    "num_requests_running",
    "num_requests_waiting",
    "kv_cache_usage",
    "num_preemptions_total",
    "prefix_cache_hits_total",
    "prompt_tokens_total",
    "generation_tokens_total",
)
G = SamplingParams(temperature=0, max_tokens=4, ignore_eos=True)


@pytest.fixture(scope="module")
def llm(tiny_models):
    return make_llm(tiny_models["qwen3-qknorm"], block_size=4, num_kv_blocks=128, max_model_len=128)


def test_engine_config_fields_are_accepted_by_llm():
    names = set(EngineConfig.field_names())
    for f in (
        "model",
        "dtype",
        "max_model_len",
        "block_size",
        "num_kv_blocks",
        "kv_cache_memory",
        "max_num_seqs",
        "max_num_batched_tokens",
        "enable_prefix_caching",
        "seed",
    ):
        assert f in names
    assert LLM.__init__.__code__.co_varnames[:2] == ("self", "model")


def test_text_prompts_in_order(llm):
    tok = llm.get_tokenizer()
    prompts = ["Hello world", "The quick brown fox", "a"]
    outs = llm.generate(prompts, G, use_tqdm=False)
    assert [o.prompt for o in outs] == prompts
    for p, o in zip(prompts, outs, strict=True):
        assert o.prompt_token_ids == tok(p).input_ids
        assert o.finished and len(o.outputs[0].token_ids) == 4
    single = llm.generate("The quick brown fox", G, use_tqdm=False)
    assert len(single) == 1 and single[0].outputs[0].token_ids == outs[1].outputs[0].token_ids
    ids = llm.generate([5, 6, 7], G, use_tqdm=False)  # one token-id prompt, not three prompts
    assert len(ids) == 1 and ids[0].prompt_token_ids == [5, 6, 7]


def test_per_prompt_params(llm):
    outs = llm.generate(
        [[1, 2], [1, 2]],
        [G, SamplingParams(temperature=0, max_tokens=2, ignore_eos=True)],
        use_tqdm=False,
    )
    assert [len(o.outputs[0].token_ids) for o in outs] == [4, 2]
    with pytest.raises(ValueError):
        llm.generate([[1, 2], [3]], [G], use_tqdm=False)


def test_progress_bar_does_not_break(llm, capsys):
    outs = llm.generate([[1, 2, 3]] * 2, G, use_tqdm=True)
    assert len(outs) == 2


def test_prefix_cache_reported(llm):
    prompt = list(range(200, 222))
    first = llm.generate([prompt], G, use_tqdm=False)[0]
    before = llm.get_metrics()["prefix_cache_hits_total"]
    again = llm.generate([prompt], G, use_tqdm=False)[0]
    assert again.num_cached_tokens == 20  # 5 full blocks of 4; the last token is recomputed
    assert llm.get_metrics()["prefix_cache_hits_total"] == before + 20
    assert again.outputs[0].token_ids == first.outputs[0].token_ids


def test_metrics_names_and_counters(llm):
    m0 = llm.get_metrics()
    for name in METRICS:
        assert isinstance(m0[name], float), name
    llm.generate([[1, 2, 3], [4, 5]], G, use_tqdm=False)
    m1 = llm.get_metrics()
    assert m1["prompt_tokens_total"] - m0["prompt_tokens_total"] == 5
    assert m1["generation_tokens_total"] - m0["generation_tokens_total"] == 8
    assert m1["num_requests_running"] == m1["num_requests_waiting"] == 0
    assert m1["kv_cache_usage"] == 0.0


def test_metrics_while_running(llm):
    eng = llm.engine
    eng.add_request("m1", [1, 2, 3], SamplingParams(temperature=0, max_tokens=8, ignore_eos=True))
    eng.add_request(
        "m2", [1, 2, 3, 4], SamplingParams(temperature=0, max_tokens=8, ignore_eos=True)
    )
    eng.step()
    m = llm.get_metrics()
    assert m["num_requests_running"] == 2 and m["num_requests_waiting"] == 0
    assert 0.0 < m["kv_cache_usage"] <= 1.0
    eng.abort_request("m1")
    eng.abort_request("m2")
    assert llm.get_metrics()["kv_cache_usage"] == 0.0


def test_prompt_one_short_of_max_model_len(llm):
    out = llm.generate(
        [[3] * 127], SamplingParams(temperature=0, max_tokens=10, ignore_eos=True), use_tqdm=False
    )[0]
    assert out.outputs[0].finish_reason == "length" and len(out.outputs[0].token_ids) == 1


def test_chat_applies_the_template(llm):
    tok = llm.get_tokenizer()
    msgs = [{"role": "user", "content": "hi"}]
    out = llm.chat(msgs, G, use_tqdm=False)
    assert len(out) == 1
    want = tok.apply_chat_template(msgs, add_generation_prompt=True, return_dict=True)
    assert out[0].prompt_token_ids == list(want["input_ids"])
    two = llm.chat(
        [msgs, msgs + [{"role": "assistant", "content": "yo"}, {"role": "user", "content": "ok"}]],
        G,
        use_tqdm=False,
    )
    assert len(two) == 2 and two[0].outputs[0].token_ids == out[0].outputs[0].token_ids


def test_bfloat16_on_cpu(tiny_models, hf_models):
    llm = make_llm(
        tiny_models["llama3-rope-untied"], dtype="bfloat16", block_size=4, num_kv_blocks=64
    )
    eng = llm.engine
    assert eng.runner.kv_caches[0][0].dtype == torch.bfloat16
    seen = []
    h = eng.runner.model.register_forward_hook(lambda m, a, o: seen.append(o.detach()))
    prompt = list(range(40, 57))
    try:
        out = llm.generate([prompt], G, use_tqdm=False)[0]
    finally:
        h.remove()
    assert len(out.outputs[0].token_ids) == 4
    with torch.no_grad():
        ours = eng.runner.model.compute_logits(seen[0], eng.runner.ops)
        ref = hf_models("llama3-rope-untied")(torch.tensor([prompt])).logits[0].float()
    assert torch.isfinite(ours).all()
    assert (ours - ref).abs().max().item() < 0.05


def test_queue_limit_applies_to_add_request(tiny_models):
    from stencil.engine.errors import QueueFullError

    llm = make_llm(
        tiny_models["llama-tied"], block_size=4, num_kv_blocks=64, max_waiting_requests=2
    )
    eng = llm.engine
    eng.add_request("q1", [1, 2], G)
    eng.add_request("q2", [1, 2], G)
    with pytest.raises(QueueFullError):
        eng.add_request("q3", [1, 2], G)
    assert set(eng.requests) == {"q1", "q2"}
    eng.abort_request("q1")
    eng.add_request("q3", [1, 2], G)  # room again
    while eng.has_unfinished_requests():
        eng.step()
    assert eng.block_manager.num_free_blocks == eng.block_manager.num_blocks


def test_offline_generate_is_not_limited_by_the_waiting_queue(tiny_models):
    """LLM.generate is a batch API: more prompts than max_waiting_requests must still all run
    (fed in as the queue drains), not fail with QueueFullError."""
    llm = make_llm(
        tiny_models["llama-tied"], block_size=4, num_kv_blocks=64, max_waiting_requests=2
    )
    outs = llm.generate([[1, 2, i] for i in range(5)], G, use_tqdm=False)
    assert len(outs) == 5 and all(o.finished for o in outs)


def test_generate_leaves_the_callers_float_mode_alone(llm):
    """The forward flushes denormals for speed; the caller's thread gets subnormals back after
    (hypothesis and numpy refuse to run under flush-to-zero)."""
    import sys

    tiny = sys.float_info.min
    (out,) = llm.generate(["a b c"], G)
    assert len(out.outputs[0].token_ids) == G.max_tokens
    assert tiny / 2 > 0.0
