"""The hostile corpus (``bench/hostile_corpus.py``) against a real ``stencil serve`` process: every
payload gets the 4xx it should (never a 5xx), with an OpenAI-shaped, sanitized error; a canary
request right after each succeeds; 8 streaming canaries running meanwhile give exactly the
output of a clean run; server RSS stays bounded.

Latency bounds here are looser than the benchmark's (250 ms, compile budget + 0.5 s): CI shares
two cores. ``python -m bench.server.reliability_bench --only corpus`` prints the real figures.
"""

from __future__ import annotations

import asyncio

import httpx
import pytest

from stencil.testing.hostile_corpus import build_corpus
from stencil.testing.hostile_runner import over_budget, run_corpus, send
from stencil.testing.serve_process import start_serve

KEY = "sk-hostile"
COMPILE_TIMEOUT = 2.0
MIB = 1 << 20


@pytest.fixture(scope="module")
def server():
    flags = ("--constraint-compile-timeout", str(COMPILE_TIMEOUT))
    with start_serve(*flags, api_key=KEY) as proc:
        yield proc


@pytest.fixture(scope="module")
def corpus(server):
    card = httpx.get(server.url("/v1/models"), headers=server.headers()).json()["data"][0]
    return build_corpus(vocab_size=49152, max_model_len=card["max_model_len"])


def test_the_corpus_is_large_enough(corpus):
    refusals = [p for p in corpus if 200 not in p.expect and not p.known_bug]
    assert len(refusals) >= 40
    assert len({p.name for p in corpus}) == len(corpus)


def test_every_hostile_payload_is_refused_cleanly(server, corpus):
    clean = [p for p in corpus if not p.known_bug]
    run = asyncio.run(
        run_corpus(server.base_url, server.headers(), clean, pause=3.0, rss=server.rss_bytes)
    )
    growth = run.rss_growth
    problems = {o.payload.name: o.problems for o in run.outcomes if o.problems}
    assert problems == {}
    assert [o.payload.name for o in run.outcomes if o.status >= 500 or o.status == 0] == []
    slow = [
        (o.payload.name, round(o.latency, 2))
        for o in run.outcomes
        if over_budget(o, COMPILE_TIMEOUT, plain=2.0, compile_slack=8.0)
    ]
    assert slow == []
    assert run.canary_failures == []
    streaming = run.streaming
    assert streaming.errors == [] and streaming.mismatches == []
    assert streaming.runs >= len(streaming.reference)
    assert growth <= 100 * MIB, f"RSS grew {growth / MIB:.0f} MiB over the corpus"
    assert httpx.get(server.url("/health")).status_code == 200


KNOWN_BUGS = [p.name for p in build_corpus(49152, 8192) if p.known_bug]


def _known_bug_still_open(server, corpus, name):
    """Payloads an open bug answers wrongly: strict xfail, so a fix shows up as a failure here
    (then drop ``known_bug`` from the payload)."""
    payload = next(p for p in corpus if p.name == name)

    async def one():
        async with httpx.AsyncClient(timeout=120) as client:
            return await send(client, server.base_url, server.headers(), payload)

    outcome = asyncio.run(one())
    if outcome.problems:
        pytest.xfail(f"{payload.known_bug} ({'; '.join(outcome.problems)})")
    pytest.fail(f"fixed: {name} now answers {outcome.status}; drop known_bug from the payload")


if KNOWN_BUGS:  # collected only while a payload has one: an empty parameter set is a skip
    test_known_bugs_still_open = pytest.mark.parametrize("name", KNOWN_BUGS)(_known_bug_still_open)
