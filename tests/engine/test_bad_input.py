"""Bad input: typed errors (ConfigError / RequestError, both ValueError) with clear messages,
raised before anything is scheduled; abort frees every block; the engine keeps serving."""

from __future__ import annotations

import json
import logging

import pytest

from stencil import SamplingParams
from stencil.engine.errors import ConfigError, RequestError
from stencil.testing.tiny_models import VOCAB, make_llm

GOOD = SamplingParams(temperature=0, max_tokens=4, ignore_eos=True)


@pytest.fixture(scope="module")
def llm(tiny_models):
    # 32 blocks x 4 = 128 KV slots; max_model_len 64
    return make_llm(
        tiny_models["llama-tied"],
        block_size=4,
        num_kv_blocks=32,
        max_model_len=64,
        max_num_batched_tokens=16,
    )


def assert_clean(llm) -> None:
    eng = llm.engine
    assert not eng.requests, "a rejected or aborted request is still registered"
    assert not eng.scheduler.waiting and not eng.scheduler.running
    bm = eng.block_manager
    bm.check_integrity([])
    assert bm.num_free_blocks == bm.num_blocks


def assert_still_serves(llm) -> None:
    out = llm.generate([[1, 2, 3, 4, 5]], GOOD, use_tqdm=False)[0]
    assert out.finished and out.outputs[0].finish_reason == "length"
    assert len(out.outputs[0].token_ids) == 4
    assert_clean(llm)


# ---- configuration / model loading ---------------------------------------------------------
def test_unknown_model_path(tmp_path):
    missing = tmp_path / "no" / "such" / "model"
    with pytest.raises(ConfigError, match="not found") as e:
        make_llm(missing)
    assert str(missing) in str(e.value)
    assert isinstance(e.value, ValueError)


def test_unknown_plain_model_name():
    with pytest.raises(ConfigError, match="not-a-model"):
        make_llm("not-a-model")


def test_hub_id_offline_is_a_clear_config_error(monkeypatch):
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ConfigError, match="no-such-org/no-such-model"):
        make_llm("no-such-org/no-such-model")


def test_corrupt_gguf_is_a_config_error_and_leaves_no_debris(tmp_path, monkeypatch):
    monkeypatch.setenv("STENCIL_CACHE_DIR", str(tmp_path / "cache"))
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"NOTAGGUF" + bytes(range(256)) * 8)
    with pytest.raises(ConfigError, match="bad.gguf"):
        make_llm(bad)
    leftovers = list((tmp_path / "cache").rglob("*.tmp*"))
    assert not leftovers, f"half-converted directories left in the cache: {leftovers}"


def test_missing_gguf_file(tmp_path):
    with pytest.raises(ConfigError, match="missing.gguf"):
        make_llm(tmp_path / "missing.gguf")


def test_directory_without_config(tmp_path):
    with pytest.raises(ConfigError, match="config.json"):
        make_llm(tmp_path)


@pytest.mark.parametrize("archs", [None, ["GPT2LMHeadModel"]])
def test_unsupported_architecture(tmp_path, archs, default_model_dir):
    from transformers import GPT2Config

    cfg = GPT2Config(n_layer=1, n_embd=32, n_head=2, vocab_size=VOCAB)
    cfg.architectures = archs
    cfg.save_pretrained(tmp_path)
    for f in ("tokenizer.json", "tokenizer_config.json"):
        (tmp_path / f).write_bytes((default_model_dir / f).read_bytes())
    with pytest.raises(ConfigError, match="unsupported architecture") as e:
        make_llm(tmp_path)
    assert "LlamaForCausalLM" in str(e.value)  # says what is supported


def test_missing_weights(tmp_path, tiny_models):
    src = tiny_models["llama-tied"]
    for f in src.iterdir():
        if f.suffix != ".safetensors":
            (tmp_path / f.name).write_bytes(f.read_bytes())
    with pytest.raises(ConfigError, match="safetensors"):
        make_llm(tmp_path)


def test_unsupported_rope_type(tmp_path, tiny_models):
    src = tiny_models["llama-tied"]
    for f in src.iterdir():
        (tmp_path / f.name).write_bytes(f.read_bytes())
    cfg = json.loads((tmp_path / "config.json").read_text())
    cfg["rope_parameters"] = {"rope_type": "dynamic", "factor": 2.0, "rope_theta": 10000.0}
    cfg.pop("rope_scaling", None)
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(ConfigError, match="rope"):
        make_llm(tmp_path)


@pytest.mark.parametrize("flag", ["attention_bias", "mlp_bias"])
def test_llama_bias_variants_match_or_are_refused(tmp_path, flag, default_model_dir):
    """Llama configs with attention_bias / mlp_bias: either served exactly or a ConfigError."""
    from transformers import AutoModelForCausalLM, LlamaConfig

    import stencil.testing.tiny_models as h

    config = LlamaConfig(**h._COMMON, **{flag: True})
    path = h.build_tiny_model(f"llama-{flag}", tmp_path / flag, default_model_dir, config)
    try:
        llm = make_llm(path, block_size=4, num_kv_blocks=64)
    except ConfigError as e:
        assert "bias" in str(e)
        return
    hf = AutoModelForCausalLM.from_pretrained(path, attn_implementation="eager").eval()
    prompt = list(range(30, 45))
    out = llm.generate(
        [prompt], SamplingParams(temperature=0, max_tokens=8, ignore_eos=True), use_tqdm=False
    )[0]
    assert out.outputs[0].token_ids == h.hf_greedy(hf, prompt, 8)


@pytest.mark.parametrize(
    "field, value",
    [
        ("dtype", "float8"),
        ("block_size", 0),
        ("max_num_seqs", 0),
        ("max_num_batched_tokens", -1),
        ("num_kv_blocks", 1),
        ("max_model_len", 0),
    ],
)
def test_bad_engine_config(field, value, tiny_models):
    with pytest.raises(ConfigError, match=field if field != "dtype" else "dtype"):
        make_llm(tiny_models["llama-tied"], **{field: value})


@pytest.mark.parametrize("device", ["cuda", "cuda:63", "bogus"])
def test_unavailable_device_is_a_config_error(device, tiny_models):
    import torch

    if device == "cuda" and torch.cuda.is_available():
        pytest.skip("CUDA is available here")
    with pytest.raises(ConfigError, match="device"):
        make_llm(tiny_models["llama-tied"], device=device, num_kv_blocks=8)


def test_unknown_config_field(tiny_models):
    with pytest.raises(TypeError):
        make_llm(tiny_models["llama-tied"], no_such_field=1)


# ---- sampling parameters ---------------------------------------------------------------------
@pytest.mark.parametrize(
    "kw, needle",
    [
        ({"max_tokens": 0}, "max_tokens"),
        ({"max_tokens": -5}, "max_tokens"),
        ({"temperature": -0.1}, "temperature"),
        ({"temperature": float("nan")}, "temperature"),
        ({"top_p": 0.0}, "top_p"),
        ({"top_p": 1.5}, "top_p"),
        ({"top_p": -0.2}, "top_p"),
        ({"top_p": float("nan")}, "top_p"),
        ({"n": 0}, "n must"),
        ({"n": -1}, "n must"),
        ({"top_k": -2}, "top_k"),
        ({"min_p": 1.5}, "min_p"),
        ({"min_tokens": -1}, "min_tokens"),
        ({"min_tokens": 5, "max_tokens": 2}, "min_tokens"),
        ({"repetition_penalty": 0.0}, "repetition_penalty"),
        ({"presence_penalty": 3.0}, "presence_penalty"),
        ({"frequency_penalty": -3.0}, "frequency_penalty"),
        ({"logprobs": -1}, "logprobs"),
        ({"logprobs": 10_000}, "logprobs"),
        ({"logprobs_mode": "raw_logits"}, "logprobs_mode"),
        ({"stop": [""]}, "stop"),
        ({"logit_bias": {5: 1e9}}, "logit_bias"),
        ({"logit_bias": {5: float("nan")}}, "logit_bias"),
    ],
)
def test_bad_sampling_params(kw, needle):
    with pytest.raises(RequestError, match=needle):
        SamplingParams(**kw)


# ---- requests (validated by the engine before scheduling) -------------------------------------
@pytest.mark.parametrize(
    "prompt, params, needle",
    [
        ([1, 2, VOCAB], GOOD, str(VOCAB)),
        ([1, -1, 3], GOOD, "-1"),
        ([1, "x", 3], GOOD, "vocabulary"),
        ([], GOOD, "empty"),
        ([1, 2, 3], SamplingParams(logit_bias={VOCAB: 5.0}), str(VOCAB)),
        ([1, 2, 3], SamplingParams(logit_bias={-3: 5.0}), "-3"),
        ([1, 2, 3], SamplingParams(stop_token_ids=[VOCAB + 7]), str(VOCAB + 7)),
        ([1] * 64, GOOD, "max_model_len"),  # == max_model_len: no room for one token
        ([1] * 200, GOOD, "max_model_len"),
        ("hello " * 100, GOOD, "max_model_len"),
    ],
    ids=[
        "prompt-oov",
        "prompt-negative",
        "prompt-non-int",
        "prompt-empty",
        "logit-bias-oov",
        "logit-bias-negative",
        "stop-token-oov",
        "prompt-eq-max-model-len",
        "prompt-gt-max-model-len",
        "text-prompt-too-long",
    ],
)
def test_bad_request_rejected_before_scheduling(llm, prompt, params, needle):
    before = dict(llm.get_metrics())
    with pytest.raises(RequestError, match=needle):
        llm.engine.add_request("bad", prompt, params)
    assert_clean(llm)
    assert llm.get_metrics()["prompt_tokens_total"] == before["prompt_tokens_total"]
    assert_still_serves(llm)


def test_context_longer_than_kv_cache_is_capped_at_start(tiny_models, caplog):
    # 8 blocks x 4 = 32 slots; max_model_len 256 asked: capped to the 32 the cache holds, logged
    with caplog.at_level(logging.WARNING, logger="stencil.engine.llm_engine"):
        llm = make_llm(tiny_models["llama-tied"], block_size=4, num_kv_blocks=8, max_model_len=256)
    assert llm.engine.max_model_len == 32
    assert "capped to 32" in caplog.text
    with pytest.raises(RequestError, match="max_model_len is 32"):
        llm.engine.add_request("big", [1] * 32, SamplingParams(max_tokens=1))
    assert_clean(llm)
    # max_tokens unset (or past the context): the request gets what fits, the whole cache
    for max_tokens in (None, 13):
        params = SamplingParams(temperature=0, max_tokens=max_tokens, ignore_eos=True)
        out = llm.generate([[1] * 20], params, use_tqdm=False)[0]
        assert out.outputs[0].finish_reason == "length"
        assert len(out.outputs[0].token_ids) == 12
        assert_clean(llm)


def test_max_tokens_none_is_bounded_by_max_model_len(llm):
    out = llm.generate(
        [[1, 2, 3]], SamplingParams(temperature=0, max_tokens=None, ignore_eos=True), use_tqdm=False
    )[0]
    c = out.outputs[0]
    assert c.finish_reason == "length" and len(c.token_ids) + 3 == 64
    assert_clean(llm)


def test_duplicate_request_id_leaves_the_first_alone(llm):
    llm.engine.add_request("dup", [1, 2, 3], GOOD)
    with pytest.raises(RequestError, match="dup"):
        llm.engine.add_request("dup", [4, 5, 6], GOOD)
    outs = []
    while llm.engine.has_unfinished_requests():
        outs += llm.engine.step()
    final = [o for o in outs if o.finished]
    assert len(final) == 1 and final[0].prompt_token_ids == [1, 2, 3]
    assert_clean(llm)


def test_generate_with_one_bad_prompt_adds_nothing(llm):
    with pytest.raises(RequestError):
        llm.generate([[1, 2, 3], [VOCAB + 1], [4, 5]], GOOD, use_tqdm=False)
    assert_clean(llm)
    assert_still_serves(llm)


def test_n_above_max_num_seqs_is_rejected_or_served(tiny_models):
    """n = 3 siblings can never all be admitted with max_num_seqs = 2: the engine must reject
    the request up front (or serve it) -- not leave it waiting forever."""
    llm = make_llm(tiny_models["llama-tied"], block_size=4, num_kv_blocks=32, max_num_seqs=2)
    eng = llm.engine
    params = SamplingParams(n=3, temperature=0.8, seed=1, max_tokens=3, ignore_eos=True)
    try:
        eng.add_request("wide", [1, 2, 3], params)
    except RequestError as e:
        assert "max_num_seqs" in str(e) or "n " in str(e)
        assert_clean(llm)
        return
    for _ in range(50):
        if not eng.has_unfinished_requests():
            break
        eng.step()
    assert not eng.has_unfinished_requests(), (
        "request with n > max_num_seqs was accepted but never scheduled (waits forever)"
    )


# ---- abort ----------------------------------------------------------------------------------
def test_abort_frees_every_block_in_any_phase(llm):
    eng = llm.engine
    long = SamplingParams(temperature=0, max_tokens=30, ignore_eos=True)
    eng.add_request("a-decode", [1, 2, 3, 4, 5, 6], long)
    eng.add_request("a-prefill", list(range(10, 40)), long)  # 30 tokens, budget 16: chunked
    eng.add_request(
        "a-n3",
        list(range(50, 59)),
        SamplingParams(n=3, temperature=1.0, seed=3, max_tokens=20, ignore_eos=True),
    )
    eng.step()
    eng.step()
    assert eng.block_manager.num_free_blocks < eng.block_manager.num_blocks
    eng.add_request("a-waiting", [7, 7, 7], long)
    for rid in ["a-prefill", "a-decode", "a-waiting", "a-n3"]:
        out = eng.abort_request(rid)
        assert out is not None and out.finished
        assert all(c.finish_reason == "abort" for c in out.outputs)
        live = [s for r in eng.requests.values() for s in r.seqs if not s.is_finished]
        eng.block_manager.check_integrity(live)
    assert eng.abort_request("a-decode") is None  # twice: harmless
    assert eng.abort_request("never-existed") is None
    assert_clean(llm)
    assert_still_serves(llm)


def test_abort_n_request_after_fork(llm):
    eng = llm.engine
    eng.add_request(
        "fork",
        [1, 2, 3, 4, 5],
        SamplingParams(n=4, temperature=1.0, seed=0, max_tokens=30, ignore_eos=True),
    )
    for _ in range(3):
        eng.step()
    assert len(eng.scheduler.running) == 4
    eng.abort_request("fork")
    assert_clean(llm)


def test_internal_error_in_one_step_fails_that_batch_only(llm, monkeypatch):
    """A bug inside the step must not kill the engine: the batch finishes with 'error'."""
    eng = llm.engine
    calls = {"n": 0}
    real = eng.sampler.__class__.__call__

    def flaky(self, logits, seqs):
        calls["n"] += 1
        if calls["n"] == 2:
            raise RuntimeError("injected")
        return real(self, logits, seqs)

    monkeypatch.setattr(eng.sampler.__class__, "__call__", flaky)
    outs = llm.generate([[1, 2, 3], [4, 5, 6, 7]], GOOD, use_tqdm=False)
    assert [o.outputs[0].finish_reason for o in outs] == ["error", "error"]
    assert all(o.outputs[0].error for o in outs)
    assert_clean(llm)
    monkeypatch.undo()
    assert_still_serves(llm)


def test_sampling_error_in_one_row_fails_only_that_request(tiny_models, monkeypatch):
    """design.md: inside the step nothing raises for one bad request -- it finishes with
    finish_reason='error' and the batch goes on. A failure while sampling one row must not take
    down the other requests of the batch."""
    from stencil.engine.sampler import Sampler

    llm = make_llm(tiny_models["llama-tied"], block_size=4, num_kv_blocks=32, max_model_len=64)
    real = Sampler._sample_row

    def bad_row(row, seq):
        if seq.token_ids[:3] == [9, 9, 9]:
            raise FloatingPointError("injected: row is all -inf")
        return real(row, seq)

    monkeypatch.setattr(Sampler, "_sample_row", staticmethod(bad_row))
    # random sampling: every row takes its own path (plain greedy rows share one batched argmax,
    # whose failure sends them all down this path: tests/engine/test_sampler.py)
    sampled = SamplingParams(temperature=0.8, seed=0, max_tokens=4, ignore_eos=True)
    outs = llm.generate([[9, 9, 9], [4, 5, 6, 7]], sampled, use_tqdm=False)
    assert outs[0].outputs[0].finish_reason == "error"
    assert outs[1].outputs[0].finish_reason == "length", outs[1].outputs[0].error
    monkeypatch.undo()
    assert_clean(llm)


@pytest.mark.parametrize("when", ["incremental", "final"])
def test_post_processing_error_fails_only_that_request(tiny_models, monkeypatch, when):
    """An exception while detokenizing one sequence finishes it with 'error'; the other request
    and the engine go on. ``final``: the flush in ``_collect`` (outside the step's guard)."""
    llm = make_llm(tiny_models["llama-tied"], block_size=4, num_kv_blocks=32, max_model_len=64)
    eng = llm.engine
    real = eng.output.detokenizer.step

    def bad_for_one(seq, final=False):
        if seq.token_ids[:3] == [9, 9, 9] and final == (when == "final"):
            raise UnicodeDecodeError("utf-8", b"\xff", 0, 1, "injected")
        return real(seq, final)

    monkeypatch.setattr(eng.output.detokenizer, "step", bad_for_one)
    try:
        outs = llm.generate([[9, 9, 9], [4, 5, 6, 7]], GOOD, use_tqdm=False)
    except UnicodeDecodeError:
        pytest.fail("an exception in one request's post-processing escaped LLMEngine.step()")
    assert outs[0].outputs[0].finish_reason == "error"
    assert outs[1].outputs[0].finish_reason == "length"
    assert len(outs[1].outputs[0].token_ids) == 4
    monkeypatch.undo()
    assert_clean(llm)
    assert_still_serves(llm)


def test_drafting_error_costs_only_the_drafts(tiny_models, monkeypatch):
    """A proposer raising for one sequence (after its matcher took and undid the drafts) must
    not stop the engine: those steps run without drafts and every request, constrained or not,
    finishes token for token as it does without speculation."""
    from stencil.constraints import Constraint
    from stencil.engine.spec_decode.drafter import Drafter

    spec = {"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 3}
    kw = dict(block_size=4, num_kv_blocks=64, max_model_len=64)
    plain = make_llm(tiny_models["llama-tied"], **kw)
    llm = make_llm(tiny_models["llama-tied"], speculative_config=spec, **kw)
    prompts = [[7, 8, 9, 7, 8, 9, 7, 8], [5, 6, 5, 6, 5, 6, 5], [9, 9, 9, 4]]
    regex = Constraint.regex(r"([a-c]{1,3} ){2,12}")
    params = [
        SamplingParams(temperature=0, max_tokens=24, ignore_eos=True, constraint=c)
        for c in (None, regex, regex)
    ]
    want = [o.outputs[0].token_ids for o in plain.generate(prompts, params, use_tqdm=False)]
    real, raised = Drafter.drafts, []

    def flaky(self, seq):
        drafts = real(self, seq)  # the matcher accepted them and is rolled back
        if seq.token_ids[:3] == [9, 9, 9] and drafts:
            raised.append(drafts)
            raise RuntimeError("injected: the proposer failed")
        return drafts

    monkeypatch.setattr(Drafter, "drafts", flaky)
    outs = llm.generate(prompts, params, use_tqdm=False)
    assert [o.outputs[0].token_ids for o in outs] == want
    assert raised and llm.get_metrics()["spec_decode_num_draft_tokens_total"] > 0
    monkeypatch.undo()
    assert_clean(llm)
    assert_still_serves(llm)
