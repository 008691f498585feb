"""Fixtures over the live server (``live_server``, in tests/conftest.py: shared with the
playground tests)."""

from __future__ import annotations

import pytest

from stencil.testing.live_server import LiveServer


@pytest.fixture(scope="session")
def client(live_server: LiveServer):
    """The ``openai`` SDK's client of the live server."""
    return live_server.openai()


@pytest.fixture(scope="session")
def model(live_server: LiveServer) -> str:
    return live_server.model
