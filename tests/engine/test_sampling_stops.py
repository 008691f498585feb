"""Sampler and stop conditions on a tiny random-weight model: stop strings across token boundaries
(held back while streaming, trimmed at finish), stop_token_ids, min_tokens, max_tokens, ignore_eos,
seeded sampling, logprobs, logit_bias, penalties and the top-k / top-p / min-p filters."""

from __future__ import annotations

import math

import pytest

from stencil import SamplingParams
from stencil.testing.tiny_models import make_llm

PROMPT = [1, 2, 3, 4, 5]
EOS = 2


@pytest.fixture(scope="module")
def llm(tiny_models):
    return make_llm(tiny_models["llama-tied"], block_size=4, num_kv_blocks=256, max_model_len=128)


@pytest.fixture(scope="module")
def tok(llm):
    return llm.get_tokenizer()


@pytest.fixture(scope="module")
def greedy(llm):
    """The reference greedy continuation of PROMPT (no stops)."""
    p = SamplingParams(temperature=0, max_tokens=24, ignore_eos=True)
    return llm.generate([PROMPT], p, use_tqdm=False)[0].outputs[0]


def run(llm, params, prompt=PROMPT):
    return llm.generate([prompt], params, use_tqdm=False)[0]


def stream(llm, rid, prompt, params):
    """Drive the engine step by step; every RequestOutput seen for ``rid``."""
    eng = llm.engine
    eng.add_request(rid, prompt, params)
    seen = []
    while eng.has_unfinished_requests():
        seen += [o for o in eng.step() if o.request_id == rid]
    assert seen and seen[-1].finished
    return seen


def assert_no_leak(llm):
    bm = llm.engine.block_manager
    assert bm.num_free_blocks == bm.num_blocks and not llm.engine.requests


def _boundary_stop(tok, ids, k):
    """A 4-character stop string made of the last 2 characters of ``ids[:k]``'s text and the
    first 2 of what follows; plus the index of the output token that completes it."""
    text = tok.decode(ids)
    cut = len(tok.decode(ids[:k]))
    stop = text[cut - 2 : cut + 2]
    assert len(stop) == 4
    first = text.find(stop)
    completing = next(j for j in range(1, len(ids) + 1) if stop in tok.decode(ids[:j]))
    return stop, first, completing


# ---- stop strings ---------------------------------------------------------------------------
@pytest.mark.parametrize("k", [3, 8, 13])
@pytest.mark.parametrize("include", [False, True])
def test_stop_string_across_token_boundary(llm, tok, greedy, k, include):
    full_text, ids = greedy.text, greedy.token_ids
    assert tok.decode(ids) == full_text
    stop, first, completing = _boundary_stop(tok, ids, k)
    params = SamplingParams(
        temperature=0,
        max_tokens=24,
        ignore_eos=True,
        stop=[stop],
        include_stop_str_in_output=include,
    )
    seen = stream(llm, f"stop-{k}-{include}", PROMPT, params)
    final = seen[-1].outputs[0]
    assert final.finish_reason == "stop" and final.stop_reason == stop
    want = full_text[: first + len(stop)] if include else full_text[:first]
    assert final.text == want
    assert final.token_ids == ids[:completing]
    # streaming: what was shown is never retracted and never shows a stop string that is cut
    for o in seen[:-1]:
        c = o.outputs[0]
        assert not c.finished
        assert final.text.startswith(c.text), f"streamed {c.text!r} not a prefix of {want!r}"
        assert stop not in c.text
    assert_no_leak(llm)


def test_stop_string_inside_one_token_and_earliest_of_many(llm, tok, greedy):
    ids = greedy.token_ids
    piece = tok.decode([ids[6]]).strip()
    assert len(piece) >= 3
    inner = piece[1:3]
    later = tok.decode(ids)[-6:]
    text = tok.decode(ids)
    out = run(
        llm, SamplingParams(temperature=0, max_tokens=24, ignore_eos=True, stop=[later, inner])
    ).outputs[0]
    assert out.finish_reason == "stop" and out.stop_reason == inner
    assert out.text == text[: text.find(inner)]


def test_stop_string_held_back_while_it_may_still_match(llm, tok, greedy):
    """A stop string that never completes: partial matches are held back while streaming, and
    the full text is released at the end (finish_reason length)."""
    text = greedy.text
    stop = text[10:14] + "\x00never"  # its prefix occurs, the whole never does
    seen = stream(
        llm,
        "holdback",
        PROMPT,
        SamplingParams(temperature=0, max_tokens=24, ignore_eos=True, stop=[stop]),
    )
    final = seen[-1].outputs[0]
    assert final.finish_reason == "length" and final.text == text
    shown = [o.outputs[0].text for o in seen[:-1]]
    assert all(text.startswith(t) for t in shown)
    assert all(len(t) < len(text) for t in shown)  # the tail is held back until the end
    assert_no_leak(llm)


# ---- token stops, lengths --------------------------------------------------------------------
def test_stop_token_ids(llm, greedy):
    ids = greedy.token_ids
    target = ids[6]
    first = ids.index(target)
    out = run(
        llm, SamplingParams(temperature=0, max_tokens=24, ignore_eos=True, stop_token_ids=[target])
    ).outputs[0]
    assert out.finish_reason == "stop" and out.stop_reason == target
    assert out.token_ids == ids[: first + 1]


@pytest.mark.parametrize("include", [False, True])
def test_stop_token_text_follows_include_stop_str_in_output(llm, tok, greedy, include):
    """vLLM semantics: the stop token's id is in token_ids, but its text is in the output text
    only with include_stop_str_in_output."""
    ids = greedy.token_ids
    target = ids[6]
    first = ids.index(target)
    out = run(
        llm,
        SamplingParams(
            temperature=0,
            max_tokens=24,
            ignore_eos=True,
            stop_token_ids=[target],
            include_stop_str_in_output=include,
        ),
    ).outputs[0]
    assert out.token_ids == ids[: first + 1]
    want = tok.decode(ids[: first + 1] if include else ids[:first])
    assert out.text == want


def test_eos_text_not_in_output_even_when_keeping_special_tokens(llm):
    """vLLM semantics: the EOS that ends a completion is in token_ids, not in the text."""
    out = run(
        llm,
        SamplingParams(
            temperature=0, max_tokens=5, logit_bias={EOS: 50.0}, skip_special_tokens=False
        ),
    ).outputs[0]
    assert out.token_ids == [EOS] and out.finish_reason == "stop"
    assert out.text == ""


def test_max_tokens_gives_length(llm, greedy):
    for m in (1, 2, 7):
        out = run(llm, SamplingParams(temperature=0, max_tokens=m, ignore_eos=True)).outputs[0]
        assert out.finish_reason == "length"
        assert out.token_ids == greedy.token_ids[:m]


def test_eos_stops_unless_ignored(llm):
    force_eos = {EOS: 50.0}
    out = run(llm, SamplingParams(temperature=0, max_tokens=10, logit_bias=force_eos)).outputs[0]
    assert out.finish_reason == "stop" and out.token_ids == [EOS] and out.text == ""
    out = run(
        llm, SamplingParams(temperature=0, max_tokens=5, logit_bias=force_eos, ignore_eos=True)
    ).outputs[0]
    assert out.finish_reason == "length" and out.token_ids == [EOS] * 5


@pytest.mark.parametrize("min_tokens", [1, 4])
def test_min_tokens_bans_eos_until_reached(llm, min_tokens):
    p = SamplingParams(temperature=0, max_tokens=10, logit_bias={EOS: 50.0}, min_tokens=min_tokens)
    out = run(llm, p).outputs[0]
    assert out.finish_reason == "stop"
    assert len(out.token_ids) == min_tokens + 1
    assert EOS not in out.token_ids[:-1] and out.token_ids[-1] == EOS


def test_min_tokens_bans_stop_token_ids_too(llm, greedy):
    t = greedy.token_ids[3]
    p = SamplingParams(
        temperature=0, max_tokens=10, logit_bias={t: 50.0}, stop_token_ids=[t], min_tokens=3
    )
    out = run(llm, p).outputs[0]
    assert out.finish_reason == "stop" and out.stop_reason == t
    assert len(out.token_ids) == 4 and t not in out.token_ids[:3]


# ---- sampling ---------------------------------------------------------------------------------
def test_seeded_sampling_is_reproducible_and_batch_invariant(llm):
    p = SamplingParams(temperature=1.0, seed=1234, max_tokens=12, ignore_eos=True)
    a = run(llm, p).outputs[0].token_ids
    b = run(llm, p).outputs[0].token_ids
    assert a == b
    # the same seeded request inside a batch of others
    others = SamplingParams(temperature=1.0, max_tokens=12, ignore_eos=True)
    outs = llm.generate([[9, 9, 9], PROMPT, [7] * 11], [others, p, others], use_tqdm=False)
    assert outs[1].outputs[0].token_ids == a
    c = run(llm, SamplingParams(temperature=1.0, seed=4321, max_tokens=12, ignore_eos=True))
    assert c.outputs[0].token_ids != a


def test_unseeded_sampling_varies(llm):
    p = SamplingParams(temperature=1.0, max_tokens=8, ignore_eos=True)
    outs = {tuple(run(llm, p).outputs[0].token_ids) for _ in range(3)}
    assert len(outs) > 1


def test_n_siblings_differ_and_are_seeded(llm):
    p = SamplingParams(n=3, temperature=1.0, seed=7, max_tokens=10, ignore_eos=True)
    out = run(llm, p)
    seqs = [tuple(c.token_ids) for c in out.outputs]
    assert [c.index for c in out.outputs] == [0, 1, 2]
    assert len(set(seqs)) == 3
    assert all(len(s) == 10 for s in seqs)
    again = run(llm, p)
    assert [tuple(c.token_ids) for c in again.outputs] == seqs
    assert_no_leak(llm)


def test_n_greedy_siblings_are_identical(llm, greedy):
    out = run(llm, SamplingParams(n=2, temperature=0, max_tokens=24, ignore_eos=True))
    assert [c.token_ids for c in out.outputs] == [greedy.token_ids] * 2


@pytest.mark.parametrize(
    "kw", [dict(top_k=1), dict(top_p=1e-6), dict(min_p=1.0)], ids=["top_k=1", "top_p~0", "min_p=1"]
)
def test_filters_that_keep_one_token_equal_greedy(llm, greedy, kw):
    p = SamplingParams(temperature=1.0, seed=5, max_tokens=24, ignore_eos=True, **kw)
    assert run(llm, p).outputs[0].token_ids == greedy.token_ids


def test_top_k_restricts_to_top_k(llm):
    """With top_k = 3 every sampled token is among the 3 most likely (logprobs=5 shows them)."""
    p = SamplingParams(
        temperature=1.5, seed=11, top_k=3, max_tokens=16, ignore_eos=True, logprobs=5
    )
    out = run(llm, p).outputs[0]
    for pos, t in zip(out.logprobs, out.token_ids, strict=True):
        assert t in [x.token_id for x in pos.top[:3]]


# ---- logprobs ----------------------------------------------------------------------------------
@pytest.mark.parametrize("k", [0, 1, 5, 20])
def test_logprobs_shape_and_order(llm, tok, k):
    out = run(
        llm, SamplingParams(temperature=0.7, seed=3, max_tokens=6, ignore_eos=True, logprobs=k)
    ).outputs[0]
    assert len(out.logprobs) == len(out.token_ids) == 6
    total = 0.0
    for pos, t in zip(out.logprobs, out.token_ids, strict=True):
        assert pos.chosen.token_id == t
        assert pos.chosen.token == tok.decode([t])
        assert pos.chosen.logprob <= 0.0
        assert len(pos.top) == k
        vals = [x.logprob for x in pos.top]
        assert vals == sorted(vals, reverse=True)
        assert len({x.token_id for x in pos.top}) == k
        if k and t in [x.token_id for x in pos.top]:
            assert any(
                math.isclose(x.logprob, pos.chosen.logprob, abs_tol=1e-6)
                for x in pos.top
                if x.token_id == t
            )
        total += pos.chosen.logprob
    assert math.isclose(out.cumulative_logprob, total, rel_tol=1e-5, abs_tol=1e-5)


def test_no_logprobs_by_default(llm):
    out = run(llm, SamplingParams(temperature=0, max_tokens=3, ignore_eos=True)).outputs[0]
    assert out.logprobs is None


def test_greedy_chosen_logprob_is_hf_log_softmax(llm, hf_models, greedy):
    import torch

    out = run(llm, SamplingParams(temperature=0, max_tokens=6, ignore_eos=True, logprobs=2))
    c = out.outputs[0]
    with torch.no_grad():
        logits = hf_models("llama-tied")(torch.tensor([PROMPT + c.token_ids])).logits[0]
    ref = torch.log_softmax(logits.float(), -1)
    for j, pos in enumerate(c.logprobs):
        row = ref[len(PROMPT) - 1 + j]
        assert pos.chosen.token_id == int(row.argmax()) == pos.top[0].token_id
        assert abs(pos.chosen.logprob - row[pos.chosen.token_id].item()) < 1e-4


# ---- logit bias, penalties -------------------------------------------------------------------
@pytest.mark.parametrize(
    "kw",
    [
        dict(logit_bias={5: 1.0}),
        dict(presence_penalty=0.5),
        dict(repetition_penalty=1.2),
        dict(min_tokens=2),
    ],
    ids=["logit_bias", "presence", "repetition", "min_tokens"],
)
def test_logits_processing_does_not_error(llm, kw):
    """Every parameter that edits the logits row must work (not finish with 'error')."""
    out = run(llm, SamplingParams(temperature=0, max_tokens=3, **kw)).outputs[0]
    assert out.error is None and out.finish_reason != "error", out.error
    assert len(out.token_ids) >= 1


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_logit_bias_forces_a_token(llm, temperature):
    p = SamplingParams(
        temperature=temperature, seed=0, max_tokens=6, ignore_eos=True, logit_bias={4242: 100.0}
    )
    assert run(llm, p).outputs[0].token_ids == [4242] * 6


def test_negative_logit_bias_bans_the_greedy_token(llm, greedy):
    first = greedy.token_ids[0]
    out = run(
        llm,
        SamplingParams(temperature=0, max_tokens=4, ignore_eos=True, logit_bias={first: -100.0}),
    ).outputs[0]
    assert out.token_ids[0] != first


BIAS = {4242: 1.5}  # the tiny model's logits spread ~0.5, so +1.5 makes 4242 the greedy pick


@pytest.mark.parametrize(
    "penalty",
    [dict(presence_penalty=2.0), dict(frequency_penalty=2.0), dict(repetition_penalty=10.0)],
    ids=["presence", "frequency", "repetition"],
)
def test_penalties_change_output(llm, penalty):
    base = SamplingParams(temperature=0, max_tokens=8, ignore_eos=True, logit_bias=BIAS)
    plain = run(llm, base).outputs[0].token_ids
    assert plain == [4242] * 8
    pen = (
        run(
            llm,
            SamplingParams(
                temperature=0, max_tokens=8, ignore_eos=True, logit_bias=BIAS, **penalty
            ),
        )
        .outputs[0]
        .token_ids
    )
    assert pen != plain
    assert pen[0] == 4242  # nothing generated yet: nothing to penalise
    assert pen.count(4242) < 8


def test_presence_and_frequency_count_output_tokens_only(llm):
    """vLLM semantics: presence/frequency penalties see generated tokens only; the repetition
    penalty also sees the prompt."""
    prompt = [4242] * 6 + [5, 6]
    for kw in (dict(presence_penalty=2.0), dict(frequency_penalty=2.0)):
        out = run(
            llm,
            SamplingParams(temperature=0, max_tokens=2, ignore_eos=True, logit_bias=BIAS, **kw),
            prompt,
        ).outputs[0]
        assert out.token_ids[0] == 4242, kw
    out = run(
        llm,
        SamplingParams(
            temperature=0, max_tokens=2, ignore_eos=True, logit_bias=BIAS, repetition_penalty=10.0
        ),
        prompt,
    ).outputs[0]
    assert out.token_ids[0] != 4242


def test_penalties_do_not_leak_between_rows(llm, greedy):
    """A penalised request batched with a plain one must not change the plain one's output."""
    plain = SamplingParams(temperature=0, max_tokens=24, ignore_eos=True)
    pen = SamplingParams(
        temperature=0,
        max_tokens=24,
        ignore_eos=True,
        frequency_penalty=2.0,
        repetition_penalty=3.0,
        logit_bias={4242: 5.0},
    )
    outs = llm.generate([PROMPT, PROMPT, [8, 9]], [pen, plain, pen], use_tqdm=False)
    assert outs[1].outputs[0].token_ids == greedy.token_ids
