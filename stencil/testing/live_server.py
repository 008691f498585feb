"""A real uvicorn server on 127.0.0.1 (a free port) around an engine, in a thread of the test
process: what the API tests talk to with real clients."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from stencil.testing.serve_process import free_port


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

    def langchain(self, **kwargs: Any) -> Any:
        """LangChain's ``ChatOpenAI`` on this server, greedy."""
        from langchain_openai import ChatOpenAI

        return ChatOpenAI(
            base_url=self.v1,
            api_key=self.api_key,
            model=self.model,
            temperature=0,
            max_retries=0,
            **kwargs,
        )

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

    def wait_idle(self, timeout: float = 15.0) -> dict[str, float]:
        """The metrics once nothing runs and no KV block is held (AssertionError after
        ``timeout`` seconds)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            m = self.metrics()
            if m["num_requests_running"] == 0 and m["kv_cache_usage_perc"] == 0:
                return m
            time.sleep(0.1)
        raise AssertionError(f"blocks not freed: {self.metrics()}")


@contextlib.contextmanager
def serving(
    engine: Any, api_key: str | None = None, playground: bool = False
) -> Iterator[LiveServer]:
    """``engine`` behind a real uvicorn server on a free port, in a thread; shut down after.
    ``playground``: mount the playground page as ``stencil serve`` does."""
    from stencil.api.app import ServerConfig, create_app
    from stencil.api.uvicorn_server import StencilServer
    from stencil.cli import extra_routes

    port = free_port()
    settings = ServerConfig(api_key=api_key, port=port, log_level="warning", playground=playground)
    server = StencilServer(create_app(engine, settings, extra_routes(settings)), settings)
    thread = threading.Thread(target=server.run, name="uvicorn", daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the test server did not start")
        time.sleep(0.05)
    try:
        yield LiveServer(f"http://127.0.0.1:{port}", api_key or "x", engine.model_name, engine)
    finally:
        server.should_exit = True
        thread.join(10)
        engine.shutdown()
