"""The server's engine interface: ``AsyncLLMEngine`` and the tests' ``FakeEngine`` both provide every
member of ``ServingEngine``, with the protocol's parameters, so the fast HTTP tests exercise the
surface the real engine has."""

from __future__ import annotations

import inspect

import pytest
from fake_engine import FakeEngine

from stencil.engine.async_engine import AsyncLLMEngine
from stencil.engine.serving_engine import ServingEngine

MEMBERS = [
    name
    for name, value in vars(ServingEngine).items()
    if not name.startswith("_") and (callable(value) or isinstance(value, property))
]


def test_the_protocol_names_the_server_surface() -> None:
    assert set(MEMBERS) >= {"generate", "embed", "abort", "get_metrics", "is_healthy", "shutdown"}
    assert set(MEMBERS) >= {"tokenizer", "model_name", "max_model_len", "vocab_size"}


@pytest.mark.parametrize("impl", [AsyncLLMEngine, FakeEngine], ids=lambda c: c.__name__)
@pytest.mark.parametrize("name", MEMBERS)
def test_engine_provides_the_member(impl: type, name: str) -> None:
    proto = vars(ServingEngine)[name]
    if isinstance(proto, property):  # a plain attribute set in __init__ also provides it
        assert isinstance(getattr(impl, name, None), property) or name in _init_attrs(impl)
        return
    method = getattr(impl, name)
    want = list(inspect.signature(proto).parameters)
    have = list(inspect.signature(method).parameters)
    assert have[: len(want)] == want, f"{impl.__name__}.{name}{inspect.signature(method)}"
    extra = [inspect.signature(method).parameters[p] for p in have[len(want) :]]
    assert all(p.default is not inspect.Parameter.empty for p in extra)
    assert inspect.isasyncgenfunction(method) or inspect.iscoroutinefunction(method) == (
        inspect.iscoroutinefunction(proto)
    )


def test_fake_engine_is_a_serving_engine() -> None:
    assert isinstance(FakeEngine(tokenizer=None, reply=lambda ids, p: "x"), ServingEngine)


def _init_attrs(impl: type) -> set[str]:
    source = inspect.getsource(impl.__init__)
    return {
        line.split("=")[0].strip()[len("self.") :]
        for line in source.splitlines()
        if line.strip().startswith("self.") and "=" in line
    }
