"""Fixtures: a real uvicorn server on 127.0.0.1 (random free port) around the embedded model."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any

import pytest

from stencil.testing.serve_process import free_port

API_KEY = "sk-stencil-test"


@dataclass
class LiveServer:
    base_url: str  # http://127.0.0.1:PORT
    api_key: str
    model: str
    engine: Any

    @property
    def v1(self) -> str:
        return f"{self.base_url}/v1"

    def openai(self, **kwargs: Any) -> Any:
        from openai import OpenAI

        return OpenAI(base_url=self.v1, api_key=self.api_key, max_retries=0, **kwargs)

    def metrics(self) -> dict[str, float]:
        import httpx

        text = httpx.get(
            f"{self.base_url}/metrics", headers={"Authorization": f"Bearer {self.api_key}"}
        ).text
        out = {}
        for line in text.splitlines():
            if line.startswith("stencil:") and "{" in line and "_bucket" not in line:
                name = line.split("{", 1)[0][len("stencil:") :]
                out.setdefault(name, float(line.rsplit(" ", 1)[1]))
        return out


@pytest.fixture(scope="session")
def live_server() -> LiveServer:
    from stencil.api.app import ServerConfig, create_app
    from stencil.api.uvicorn_server import StencilServer
    from stencil.engine.async_engine import AsyncLLMEngine
    from stencil.engine.config import EngineConfig

    engine = AsyncLLMEngine.from_config(EngineConfig(model=None, seed=0))
    port = free_port()
    settings = ServerConfig(api_key=API_KEY, port=port, log_level="warning")
    server = StencilServer(create_app(engine, settings), settings)
    thread = threading.Thread(target=server.run, name="uvicorn", daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the test server did not start")
        time.sleep(0.05)
    yield LiveServer(f"http://127.0.0.1:{port}", API_KEY, engine.model_name, engine)
    server.should_exit = True
    thread.join(10)
    engine.shutdown()


@pytest.fixture(scope="session")
def ray_address() -> Any:
    """A real local Ray cluster (2 CPUs, head on 127.0.0.1), shared by the Ray tests; shut down
    (and its processes reaped) at the end of the session."""
    from stencil.testing.ray_cluster import local_cluster

    with local_cluster(num_cpus=2) as address:
        yield address
