"""The suite's memory release (``stencil.testing.memory.release_memory``) frees an app it served:
FastAPI keeps every endpoint in module-level caches, and the endpoint's closure holds what the
app serves (a test server's engine). Fails where a FastAPI upgrade moves those caches and the
clearing silently does nothing."""

from __future__ import annotations

import gc
import weakref

from fastapi import FastAPI
from fastapi.testclient import TestClient

from stencil.testing.memory import release_memory


class Engine:
    """Stands for what a served app holds (an engine): only its lifetime is checked."""


def _serve_once() -> weakref.ref:
    engine = Engine()
    app = FastAPI()

    @app.get("/health")
    async def health() -> dict:
        return {"engine": type(engine).__name__}

    with TestClient(app) as client:
        assert client.get("/health").json() == {"engine": "Engine"}
    return weakref.ref(engine)


def test_a_served_app_is_freed() -> None:
    ref = _serve_once()
    release_memory()
    gc.collect()
    assert ref() is None, "FastAPI's caches still hold the app: update release_memory"
