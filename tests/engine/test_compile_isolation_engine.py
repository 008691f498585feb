"""Compile isolation through the engine: a pathological constraint fails only its own request,
with the typed timeout error, within the compile budget + 0.5 s, while the batch keeps stepping
and every other request's output is token-identical to a clean run; its worker is killed; an
abort kills a running compile; shutdown leaves no compile worker behind."""

from __future__ import annotations

import os
import time

import psutil
import pytest

from stencil import SamplingParams
from stencil.constraints import Constraint
from stencil.testing.pathological import pathological
from stencil.testing.tiny_models import make_llm

BUDGET_S = 1.0


def _requests() -> list[tuple[str, list[int], SamplingParams]]:
    schema = {
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "string"}},
        "required": ["a", "b"],
    }
    constraints = [
        Constraint.json_schema(schema),
        Constraint.regex(r"[a-z]{2,6}-[0-9]{2}"),
        Constraint.choice(["alpha", "beta", "gamma"]),
        None,
        None,
    ]
    return [
        (f"good-{i}", [3 + i, 7, 9, 11], SamplingParams(temperature=0, max_tokens=20, constraint=c))
        for i, c in enumerate(constraints)
    ]


@pytest.fixture(scope="module")
def llm(tiny_models):
    llm = make_llm(
        tiny_models["llama-tied"],
        block_size=8,
        num_kv_blocks=256,
        max_model_len=256,
        constraint_compile_timeout=BUDGET_S,
        constraint_compile_workers=2,
    )
    yield llm
    llm.engine.shutdown()


def _run(engine, requests, hostile: bool) -> tuple[dict, dict]:
    """Step until every request is done; returns (outputs by id, timing facts)."""
    facts: dict = {}
    if hostile:
        engine.add_request(
            "hostile", [5, 6, 7], SamplingParams(max_tokens=8, constraint=pathological())
        )
        facts["added"] = time.perf_counter()
    for rid, prompt, params in _requests():
        engine.add_request(rid, prompt, params)
    done: dict = {}
    deadline = time.monotonic() + 60
    while engine.has_unfinished_requests():
        assert time.monotonic() < deadline, "the engine did not finish"
        outs = engine.step()
        for out in outs:
            if out.finished:
                done[out.request_id] = out
                if out.request_id == "hostile":
                    facts["failed"] = time.perf_counter()
                    facts["good_done_before"] = len(done) - 1
        if not outs:
            time.sleep(0.005)
    return done, facts


def test_pathological_constraint_fails_alone_within_budget(llm):
    engine = llm.engine
    clean, _ = _run(engine, _requests(), hostile=False)  # also starts a compile worker
    workers = set(engine.guided.worker_pids())
    stopped = engine.guided.compiler.pool.workers_stopped
    got, facts = _run(engine, _requests(), hostile=True)
    hostile = got.pop("hostile").outputs[0]
    assert hostile.finish_reason == "error"
    assert "exceeded the timeout_s=1s budget" in hostile.error
    assert BUDGET_S <= facts["failed"] - facts["added"] < BUDGET_S + 0.5
    assert facts["good_done_before"] >= 1  # the batch kept stepping while the compile burned
    assert {r: o.outputs[0].token_ids for r, o in got.items()} == {
        r: o.outputs[0].token_ids for r, o in clean.items()
    }
    assert all(
        o.outputs[0].finish_reason in ("stop", "length") and o.outputs[0].token_ids
        for o in got.values()
    )
    assert engine.guided.compiler.pool.workers_stopped == stopped + 1
    killed = workers - set(engine.guided.worker_pids())
    assert len(killed) == 1 and not any(os.path.exists(f"/proc/{p}") for p in killed)  # reaped
    cpu = time.process_time()
    time.sleep(0.3)
    assert time.process_time() - cpu < 0.1  # nothing of ours computes for the failed request


def test_abort_kills_the_running_compile(llm):
    engine = llm.engine
    _run(engine, _requests()[:1], hostile=False)
    engine.add_request("doomed", [5, 6, 7], SamplingParams(max_tokens=8, constraint=pathological()))
    _wait_for(lambda: len(engine.guided.worker_pids()) >= 1)
    time.sleep(0.2)  # the compile is running
    before = set(engine.guided.worker_pids())
    start = time.perf_counter()
    out = engine.abort_request("doomed")
    assert out.outputs[0].finish_reason == "abort"
    _wait_for(lambda: any(not os.path.exists(f"/proc/{p}") for p in before), timeout_s=0.5)
    assert time.perf_counter() - start < 0.5


def test_async_caller_gone_kills_its_precompile(tiny_models):
    """AsyncLLMEngine compiles before adding (so a bad constraint is a 400): a caller cancelled
    meanwhile (a client that disconnected) kills that compile too."""
    import asyncio

    from stencil.engine.async_engine import AsyncLLMEngine

    llm = make_llm(
        tiny_models["llama-tied"],
        block_size=8,
        num_kv_blocks=64,
        max_model_len=128,
        constraint_compile_timeout=BUDGET_S,
    )
    _run(llm.engine, _requests()[:1], hostile=False)  # starts the workers
    front = AsyncLLMEngine(llm.engine)  # steps the engine from now on
    before = set(llm.engine.guided.worker_pids())

    async def consume() -> None:
        params = SamplingParams(max_tokens=8, constraint=pathological())
        async for _ in front.generate([5, 6, 7], params):
            pass

    async def main() -> float:
        task = asyncio.create_task(consume())
        await asyncio.sleep(0.3)  # the compile is running in a worker
        task.cancel()
        start = time.perf_counter()
        with pytest.raises(asyncio.CancelledError):
            await task
        await asyncio.to_thread(
            _wait_for, lambda: bool(before - set(llm.engine.guided.worker_pids())), 0.5
        )
        return time.perf_counter() - start

    try:
        assert asyncio.run(main()) < 0.5
        killed = before - set(llm.engine.guided.worker_pids())
        assert killed and not any(os.path.exists(f"/proc/{p}") for p in killed)
    finally:
        front.shutdown()


def test_shutdown_leaves_no_compile_worker(tiny_models):
    llm = make_llm(tiny_models["llama-tied"], block_size=8, num_kv_blocks=64, max_model_len=128)
    out = llm.generate(
        [[3, 4, 5]],
        SamplingParams(temperature=0, max_tokens=8, constraint=Constraint.regex("[0-9]{4}")),
        use_tqdm=False,
    )
    assert out[0].outputs[0].finish_reason == "stop"
    pids = llm.engine.guided.worker_pids()
    assert pids and set(pids) <= _children()
    llm.engine.shutdown()
    assert llm.engine.guided.worker_pids() == []
    assert not set(pids) & _children() and not any(os.path.exists(f"/proc/{p}") for p in pids)


def _children() -> set[int]:
    return {c.pid for c in psutil.Process().children()}


def _wait_for(condition, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.01)
