"""A real headless Chromium (Debian's ``chromium``, driven by Playwright with that executable;
``playwright install`` is never needed) on the live server's playground page. CI (``.ci/run``,
which installs chromium and sets ``STENCIL_CI=1``) fails without it; elsewhere the browser tests
skip, naming what is missing."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from stencil.testing.live_server import LiveServer


def _missing(reason: str) -> None:
    if os.environ.get("STENCIL_CI"):
        pytest.fail(f"browser tests must run in CI: {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def chromium() -> Iterator[object]:
    path = os.environ.get("STENCIL_CHROMIUM") or shutil.which("chromium")
    if path is None:
        _missing("no chromium on PATH (apt-get install chromium, or set STENCIL_CHROMIUM)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _missing("the playwright package is not installed (pip install -e '.[test]')")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=path, args=["--no-sandbox"])
        yield browser
        browser.close()


@pytest.fixture(scope="session")
def shots(tmp_path_factory) -> Path:
    """Where the browser tests' screenshots go: docs/playground/ (what docs/playground.md shows)
    with ``STENCIL_SCREENSHOTS=1``, else a temporary folder, so a test run leaves the tree as it
    was."""
    if os.environ.get("STENCIL_SCREENSHOTS") == "1":
        return Path(__file__).resolve().parents[2] / "docs" / "playground"
    return tmp_path_factory.mktemp("playground-shots")


@pytest.fixture
def page(chromium, live_server: LiveServer) -> Iterator[object]:
    """A fresh page on ``/``, logged in the way a person's browser is (HTTP Basic, the API key
    as password), with the schema check done; page errors fail the test."""
    context = chromium.new_context(
        http_credentials={"username": "me", "password": live_server.api_key},
        viewport={"width": 1440, "height": 900},
        accept_downloads=True,
    )
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(live_server.base_url + "/")
    page.wait_for_selector("#spec-status.ok", timeout=60_000)
    yield page
    context.close()
    assert errors == [], errors
