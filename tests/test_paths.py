"""``stencil.paths``: the cache root, and a C source built and loaded once, or None (logged) where
it cannot build or this CPU cannot run it."""

from __future__ import annotations

import shutil

import pytest

from stencil.paths import build_library, cache_root, load_library

SOURCE = "int answer(void) { return 42; }\nint runs_here(void) { return %d; }\n"
FLAGS = ["-O1", "-shared", "-fPIC"]


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("STENCIL_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path


def _source(tmp_path, runs: int):
    path = tmp_path / f"probe{runs}.c"
    path.write_text(SOURCE % runs)
    return path


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler")
@pytest.mark.parametrize(
    ("runs", "requires", "loaded"),
    [(1, None, True), (1, ("runs_here", "X"), True), (0, ("runs_here", "X"), False)],
)
def test_load_library(cache, runs, requires, loaded):
    library = load_library(_source(cache, runs), FLAGS, "using the twin", requires)
    assert (library is not None) == loaded
    if loaded:
        assert library.answer() == 42
    built = build_library(_source(cache, runs), FLAGS)
    assert built.parent.parent == cache_root() and built.is_file()  # built once, in the cache


def test_no_compiler_is_none_not_an_error(cache, monkeypatch, caplog):
    monkeypatch.setenv("CC", str(cache / "no-such-cc"))
    monkeypatch.setenv("PATH", str(cache))
    assert load_library(_source(cache, 1), FLAGS, "using the twin") is None
    assert "using the twin" in caplog.text
