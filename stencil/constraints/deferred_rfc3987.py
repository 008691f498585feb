"""``rfc3987_syntax`` (jsonschema's ``iri`` / ``iri-reference`` format checks) builds an Earley
parser when imported, and jsonschema imports it with itself: 1.7 s of CPU in every process that
imports jsonschema (each ``stencil`` command, each compile worker: ``python -m
bench.constraints.import_bench``). ``install()``, before jsonschema loads, puts a
stand-in in its place that imports the real module at its first use and hands every call to it:
the checks answer as before, and a process that checks no ``iri`` never builds the parser.

Importing this module installs it (``stencil.constraints`` does first thing; so does the compile
worker's bootstrap): light imports only."""

from __future__ import annotations

import importlib
import importlib.util
import sys
import threading
import types
from typing import Any

NAME = "rfc3987_syntax"


def install() -> None:
    """The stand-in, unless the module is loaded already or not installed."""
    if NAME in sys.modules or importlib.util.find_spec(NAME) is None:
        return
    sys.modules[NAME] = stand_in()


def stand_in() -> types.ModuleType:
    """A module whose ``is_valid_syntax`` (all jsonschema imports from it) and every other
    attribute come from the real module, imported on first use."""
    module = types.ModuleType(NAME, __doc__)
    lock = threading.Lock()

    def real() -> types.ModuleType:
        loaded = sys.modules.get(NAME)
        if loaded is not None and loaded is not module:
            return loaded
        with lock:
            if sys.modules.get(NAME) is module:
                del sys.modules[NAME]
            return importlib.import_module(NAME)

    def is_valid_syntax(term: str, value: str) -> bool:
        return real().is_valid_syntax(term, value)

    def __getattr__(name: str) -> Any:  # noqa: N807 (PEP 562's module hook)
        if name.startswith("__"):  # the import system's probes (``__path__``): no import
            raise AttributeError(name)
        return getattr(real(), name)

    module.is_valid_syntax = is_valid_syntax
    module.__getattr__ = __getattr__
    return module


install()
