"""Fixtures: a real uvicorn server on 127.0.0.1 (random free port) around the embedded model."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from stencil.testing.live_server import LiveServer, serving

API_KEY = "sk-stencil-test"


@pytest.fixture(scope="session")
def live_server() -> Iterator[LiveServer]:
    from stencil.engine.async_engine import AsyncLLMEngine
    from stencil.engine.config import EngineConfig

    with serving(AsyncLLMEngine.from_config(EngineConfig(model=None, seed=0)), API_KEY) as live:
        yield live


@pytest.fixture(scope="session")
def client(live_server: LiveServer):
    """The ``openai`` SDK's client of the live server."""
    return live_server.openai()


@pytest.fixture(scope="session")
def model(live_server: LiveServer) -> str:
    return live_server.model
