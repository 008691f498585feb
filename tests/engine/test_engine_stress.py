"""Seeded random add / abort / step against the real engine with a tiny model and a tiny KV
cache (so preemption, prefix caching and copy-on-write forks all happen): block integrity after
every step, every request finishes, no leaked block, and every greedy completion that was not
aborted equals the same prompt run alone on a roomy engine."""

from __future__ import annotations

import random

import pytest

from stencil import SamplingParams
from stencil.testing.tiny_models import make_llm

SHARED = [[], [1, 11, 21, 31, 41, 51, 61, 71], [1, 11, 21, 31, 41, 51, 61, 71, 81, 91, 3, 5]]


@pytest.fixture(scope="module")
def roomy(tiny_models):
    return make_llm(
        tiny_models["qwen2-bias"], block_size=4, num_kv_blocks=512, enable_prefix_caching=False
    )


def _random_request(rng: random.Random) -> tuple[list[int], SamplingParams]:
    prompt = SHARED[rng.randrange(len(SHARED))] + [
        rng.randrange(100, 5000) for _ in range(rng.randint(1, 10))
    ]
    greedy = rng.random() < 0.6
    params = SamplingParams(
        n=rng.choice([1, 1, 2, 3]),
        temperature=0.0 if greedy else 1.0,
        seed=None if greedy else rng.randrange(1000),
        max_tokens=rng.randint(1, 16),
        ignore_eos=True,
        stop_token_ids=[] if greedy else [rng.randrange(100, 5000)],
    )
    return prompt, params


def _live(eng):
    return [s for r in eng.requests.values() for s in r.seqs if not s.is_finished]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_random_add_abort_all_finish_no_leak(tiny_models, roomy, seed):
    rng = random.Random(seed)
    llm = make_llm(
        tiny_models["qwen2-bias"],
        block_size=4,
        num_kv_blocks=16,
        max_num_seqs=4,
        max_num_batched_tokens=12,
        enable_prefix_caching=True,
    )
    eng = llm.engine
    bm = eng.block_manager
    submitted: dict[str, tuple[list[int], SamplingParams]] = {}
    final = {}
    aborted = set()
    for _ in range(120):
        r = rng.random()
        if r < 0.4 and len(submitted) < 40:
            rid = f"s{seed}-{len(submitted)}"
            prompt, params = _random_request(rng)
            eng.add_request(rid, prompt, params)
            submitted[rid] = (prompt, params)
        elif r < 0.47 and eng.requests:
            rid = rng.choice(sorted(eng.requests))
            out = eng.abort_request(rid)
            assert out is not None and out.finished
            aborted.add(rid)
            final[rid] = out
        for out in eng.step():
            if out.finished:
                final[out.request_id] = out
        bm.check_integrity(_live(eng))
    for _ in range(2000):
        if not eng.has_unfinished_requests():
            break
        for out in eng.step():
            if out.finished:
                final[out.request_id] = out
        bm.check_integrity(_live(eng))
    assert not eng.has_unfinished_requests(), "requests left unfinished (starvation)"
    assert set(final) == set(submitted)
    assert bm.num_free_blocks == bm.num_blocks
    m = llm.get_metrics()
    assert m["num_requests_running"] == 0 and m["num_requests_waiting"] == 0
    assert m["kv_cache_usage"] == 0.0
    assert m["num_preemptions_total"] > 0
    assert m["prefix_cache_hits_total"] > 0
    # completions that ran to the end are right
    checked = 0
    for rid, out in final.items():
        prompt, params = submitted[rid]
        if rid in aborted:
            assert all(c.finish_reason in ("abort", "length", "stop") for c in out.outputs)
            continue
        assert len(out.outputs) == params.n
        for c in out.outputs:
            assert c.finish_reason in ("length", "stop"), c.error
            if c.finish_reason == "length":
                assert len(c.token_ids) == params.max_tokens
        if params.temperature == 0:
            ref = roomy.generate(
                [prompt],
                SamplingParams(temperature=0, max_tokens=params.max_tokens, ignore_eos=True),
                use_tqdm=False,
            )[0]
            for c in out.outputs:
                assert c.token_ids == ref.outputs[0].token_ids, f"{rid}: KV corrupted"
            checked += 1
    assert checked > 0


def test_seeded_outputs_do_not_depend_on_scheduling(tiny_models):
    """Seeded sampling (n up to 3) gives the same completions on a roomy engine and on one that
    chunks every prefill and preempts / recomputes sequences: recompute must not consume the
    per-sequence generator, and forks must keep their own streams."""
    prompts = [list(range(10, 23)), [1, 11, 21, 31, 41, 51, 61, 71, 5], [7, 7, 7, 7, 7, 7, 7]]
    params = [
        SamplingParams(n=3, temperature=1.0, seed=10, max_tokens=14, ignore_eos=True),
        SamplingParams(n=1, temperature=0.8, top_p=0.9, seed=11, max_tokens=16, ignore_eos=True),
        SamplingParams(n=2, temperature=1.2, top_k=50, seed=12, max_tokens=12, ignore_eos=True),
    ]
    path = tiny_models["mistral-swa8"]
    roomy = make_llm(path, block_size=4, num_kv_blocks=256, enable_prefix_caching=False)
    want = [
        [c.token_ids for c in o.outputs] for o in roomy.generate(prompts, params, use_tqdm=False)
    ]
    tight = make_llm(path, block_size=4, num_kv_blocks=12, max_num_batched_tokens=5)
    got = [
        [c.token_ids for c in o.outputs] for o in tight.generate(prompts, params, use_tqdm=False)
    ]
    assert tight.get_metrics()["num_preemptions_total"] > 0
    assert got == want
