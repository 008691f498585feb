"""Compile isolation: compiles run in worker processes that are SIGKILLed past the wall-time
budget (or when cancelled), cannot exceed their memory budget, leave nothing running after
``close()``, and give the same typed errors and the same masks as in-process compiles.

The pathological constraint is real: a ``oneOf`` of 3,000 closed objects, each requiring a key
of its own (an externally tagged union; 360 KB of JSON, under every size budget). No
discriminator value tells the branches apart, so Stencil's front end proves them disjoint pair
by pair (``_excludes``): 4.5 M pairs, ~25 s without a budget on this machine.
"""

from __future__ import annotations

import os
import threading
import time

import psutil
import pytest

from stencil.constraints import (
    CompileCancelledError,
    CompileMemoryError,
    CompileTimeoutError,
    CompileWorkerError,
    Constraint,
    ConstraintCompiler,
    ConstraintError,
    ConstraintTooLargeError,
    InvalidGrammarError,
    InvalidRegexError,
    InvalidSchemaError,
    UnsupportedSchemaError,
    allocate_token_bitmask,
)
from stencil.constraints.isolation import CompileWorkerPool
from stencil.constraints.limits import Limits
from stencil.testing.pathological import pathological

BUDGET_S = 1.0
SLACK_S = 0.5

GOOD = [
    Constraint.json_schema(
        {
            "type": "object",
            "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
            "required": ["name", "age"],
        },
    ),
    Constraint.regex(r"[0-9]{3}-[0-9]{4}"),
    Constraint.choice(["red", "green", "blue"]),
    Constraint.grammar('start: "(" NUM ("+" NUM)* ")"\nNUM: /[0-9]{1,3}/\n'),
]
TEXTS = ['{"name": "Ada", "age": 36}', "555-1234", "green", "(1+22+333)"]


@pytest.fixture(scope="module")
def isolated(smol_vocab):
    with ConstraintCompiler(smol_vocab, workers=2, timeout_s=BUDGET_S, cache_bytes=0) as c:
        c.compile(GOOD[1])  # start a worker outside the measured calls
        yield c


def gone(pid: int) -> bool:
    return not os.path.exists(f"/proc/{pid}")


def test_pathological_compile_is_killed_within_budget(isolated):
    before = set(isolated.pool.pids())
    start = time.perf_counter()
    with pytest.raises(CompileTimeoutError, match=r"timeout_s=1s budget"):
        isolated.compile(pathological())
    elapsed = time.perf_counter() - start
    assert BUDGET_S <= elapsed < BUDGET_S + SLACK_S
    killed = before - set(isolated.pool.pids())
    assert len(killed) == 1 and all(gone(pid) for pid in killed)  # SIGKILLed and reaped
    cpu = time.process_time()
    time.sleep(0.3)
    assert time.process_time() - cpu < 0.1  # no thread of ours computes for it either
    start = time.perf_counter()
    assert isolated.compile(GOOD[0]).new_matcher() is not None  # a spare worker serves
    assert time.perf_counter() - start < 0.2  # without waiting for a worker to start


def test_good_compiles_during_a_pathological_one_match_in_process(
    isolated, smol_compiler, smol_tokenizer
):
    _wait_for(lambda: isolated.pool.idle_workers == 2)  # both started (a start is not a compile)
    failure: list[BaseException] = []
    bad = threading.Thread(target=_expect_timeout, args=(isolated, failure))
    bad.start()
    time.sleep(0.1)
    start = time.perf_counter()
    compiled = [isolated.compile(c) for c in GOOD]
    assert time.perf_counter() - start < BUDGET_S  # not queued behind the pathological one
    bad.join(BUDGET_S + SLACK_S + 1)
    assert not bad.is_alive() and isinstance(failure[0], CompileTimeoutError)
    for c, text in zip(compiled, TEXTS, strict=True):
        reference = smol_compiler.compile(c.constraint)  # translated in this process
        assert _masks(c, smol_tokenizer, text) == _masks(reference, smol_tokenizer, text)


def test_cancel_kills_the_running_compile(isolated):
    _wait_for(lambda: isolated.pool.idle_workers == 2)
    cancel = threading.Event()
    threading.Timer(0.2, cancel.set).start()
    before = set(isolated.pool.pids())
    start = time.perf_counter()
    with pytest.raises(CompileCancelledError):
        isolated.compile(pathological(), cancel=cancel)
    assert time.perf_counter() - start < 0.2 + 0.3
    assert all(gone(pid) for pid in before - set(isolated.pool.pids()))


def test_memory_budget_kills_a_compile_that_exceeds_it(smol_vocab, isolated):
    big = Constraint.choice([f"{i}_" + "y" * 150 for i in range(10_000)])
    with ConstraintCompiler(smol_vocab, workers=1, memory_bytes=8 << 20, cache_bytes=0) as small:
        with pytest.raises(CompileMemoryError, match="memory budget of 8 MiB"):
            small.compile(big)
        assert small.pool.workers_stopped == 1
        assert small.compile(GOOD[2]).new_matcher() is not None  # replaced, still serving
    assert isolated.compile(big).new_matcher() is not None  # fits the default 1 GiB


@pytest.mark.parametrize(
    "make, error",
    [
        (lambda: Constraint.json_schema({"type": "strin"}), InvalidSchemaError),
        (
            lambda: Constraint.json_schema(
                {"type": "object", "properties": {"a": {"$dynamicRef": "#x"}}}
            ),
            UnsupportedSchemaError,
        ),
        (lambda: Constraint.json_schema(_nested(150)), ConstraintTooLargeError),
        (lambda: Constraint.regex("a{2,1}("), InvalidRegexError),
        (lambda: Constraint.regex("a{20000}"), ConstraintTooLargeError),
        (lambda: Constraint.grammar('start: start "a"\n'), InvalidGrammarError),
        (lambda: Constraint.choice(["x"] * 20_000), ConstraintTooLargeError),
    ],
)
def test_worker_errors_are_typed_as_in_process(isolated, smol_compiler, make, error):
    try:
        expected = smol_compiler.compile(make())
        pytest.fail(f"expected {error.__name__}, compiled {expected}")
    except ConstraintError as e:
        assert type(e) is error
        in_process = e
    with pytest.raises(error) as info:
        isolated.compile(make())
    assert str(info.value) == str(in_process) and vars(info.value) == vars(in_process)


def test_close_kills_busy_workers_and_leaves_no_child(smol_vocab):
    compiler = ConstraintCompiler(smol_vocab, workers=2, timeout_s=30)
    failure: list[BaseException] = []
    bad = threading.Thread(target=_expect_timeout, args=(compiler, failure))
    bad.start()
    compiler.compile(GOOD[1])
    _wait_for(lambda: len(compiler.pool.pids()) == 2)
    pids = compiler.pool.pids()
    start = time.perf_counter()
    compiler.close()
    bad.join(5)
    assert not bad.is_alive() and time.perf_counter() - start < 2
    assert isinstance(failure[0], CompileWorkerError)  # the in-flight compile failed at once
    assert all(gone(pid) for pid in pids) and not set(pids) & _children()
    with pytest.raises(CompileWorkerError, match="closed"):
        compiler.compile(GOOD[3])


def test_flood_of_distinct_schemas_keeps_cache_and_memory_bounded(smol_vocab):
    budget = 2 << 20
    with ConstraintCompiler(smol_vocab, workers=1, cache_bytes=budget) as compiler:
        for i in range(2000):
            compiler.compile(Constraint.json_schema(_small_schema(i)))
            assert compiler.cache.size_bytes <= budget
            if i == 299:
                warm = _rss(os.getpid()), _rss(compiler.pool.pids()[0])
        assert compiler.cache.misses >= 2000 and 0 < len(compiler.cache) < 100
        grown = _rss(os.getpid()) - warm[0], _rss(compiler.pool.pids()[0]) - warm[1]
    assert grown[0] < 24 << 20, f"engine process RSS grew by {grown[0] >> 20} MiB"
    assert grown[1] < 16 << 20, f"worker RSS grew by {grown[1] >> 20} MiB"


def test_start_launches_the_workers_before_any_compile(smol_vocab):
    with ConstraintCompiler(smol_vocab, workers=2) as compiler:
        compiler.pool.start()
        _wait_for(lambda: compiler.pool.idle_workers == 2)
        compiler.pool.start()  # a full pool starts nothing more
        assert compiler.compile(GOOD[2]).constraint.kind == "choice"
        assert compiler.pool.workers_started == 2


# A worker's interpreter made slow to start, or to die at start, by a ``sitecustomize`` on its
# PYTHONPATH (run before the worker's own code: the real process, nothing of the pool replaced)
START_HOOKS = {
    "slow": "import time\ntime.sleep(2.0)\n",
    "dies": "import os, sys\nsys.stderr.write('cannot map the vocabulary\\n')\nos._exit(3)\n",
}


@pytest.mark.parametrize(
    ("hook", "error"),
    [("slow", None), ("dies", r"it exited \(exit code 3\): cannot map the vocabulary")],
)
def test_a_starting_worker_is_waited_for_while_it_lives(
    smol_vocab, tmp_path, monkeypatch, caplog, hook: str, error: str | None
):
    (tmp_path / "sitecustomize.py").write_text(START_HOOKS[hook])
    path = os.environ.get("PYTHONPATH")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path), *([path] if path else [])]))
    pool = CompileWorkerPool(smol_vocab, size=1, slow_start_s=0.5)
    try:
        if error is None:
            translation, _, _ = pool.compile(GOOD[1], Limits(), timeout_s=30)
            assert translation.grammar
            assert "still starting after 0.5 s" in caplog.text  # slow, logged, not failed
        else:
            with pytest.raises(CompileWorkerError, match=error):
                pool.compile(GOOD[1], Limits(), timeout_s=30)
    finally:
        pool.close()


# ---- helpers ------------------------------------------------------------------------------
def _expect_timeout(compiler: ConstraintCompiler, failure: list[BaseException]) -> None:
    try:
        compiler.compile(pathological())
    except (ConstraintError, CompileWorkerError) as e:
        failure.append(e)


def _masks(compiled, tokenizer, text: str) -> list[bytes]:
    """Every mask along the canonical tokens of ``text`` (and the final accept)."""
    matcher = compiled.new_matcher()
    mask = allocate_token_bitmask(1, compiled.vocab.vocab_size)
    out = []
    for token in tokenizer.encode(text, add_special_tokens=False):
        matcher.fill_next_token_bitmask(mask, 0)
        out.append(mask.numpy().tobytes())
        assert matcher.accept_token(token)
    assert matcher.accept_token(compiled.vocab.eos_token_ids[0])
    return out


def _nested(depth: int) -> dict:
    schema: dict = {"type": "string"}
    for _ in range(depth):
        schema = {"type": "object", "properties": {"a": schema}}
    return schema


def _small_schema(i: int) -> dict:
    return {
        "type": "object",
        "properties": {
            f"f{i}": {"type": "string", "maxLength": i % 50 + 1},
            "n": {"type": "integer"},
        },
        "required": [f"f{i}"],
    }


def _rss(pid: int) -> int:
    with open(f"/proc/{pid}/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _children() -> set[int]:
    return {c.pid for c in psutil.Process().children()}


def _wait_for(condition, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.02)
