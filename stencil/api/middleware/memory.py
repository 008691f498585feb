"""Giving memory back after large requests, and keeping the garbage collector off the hot path.

A large JSON body becomes tens of megabytes of short-lived Python objects (a 2 MB schema
with 60,000 properties: ~56 MiB). Once the request is done they are free, but the C allocator
keeps the pages, so each new high-water mark stays in the server's RSS. After a request whose
body was larger than ``threshold`` bytes, :class:`TrimAfterLargeBodies` asks glibc to return free
pages to the system (``malloc_trim``); elsewhere it does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
from collections.abc import Callable

from stencil.api.asgi import ASGIApp, Message, Receive, Scope, Send

LARGE_BODY = 64 << 10


def malloc_trim() -> Callable[[], object] | None:
    """glibc's ``malloc_trim(0)``, or None where there is no glibc."""
    name = ctypes.util.find_library("c")
    if not name:
        return None
    try:
        trim = ctypes.CDLL(name).malloc_trim
    except (OSError, AttributeError):
        return None
    trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
    return lambda: trim(0)


def freeze_heap() -> None:
    """Move every object alive now (the model, tokenizer, imported modules: millions of them)
    to the collector's permanent generation, as vLLM does once its engine is up. A full
    (generation 2) collection then walks only what requests allocate: it took ~0.2 s per
    collection before, a pause for the event loop and the engine's step loop alike, which a
    large request body (tens of thousands of parsed objects) set off."""
    gc.collect()
    gc.freeze()


class TrimAfterLargeBodies:
    def __init__(self, app: ASGIApp, threshold: int = LARGE_BODY) -> None:
        self.app = app
        self.threshold = threshold
        self.trim = malloc_trim()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or self.trim is None:
            await self.app(scope, receive, send)
            return
        size = 0

        async def counting_receive() -> Message:
            nonlocal size
            message = await receive()
            size += len(message.get("body", b""))
            return message

        try:
            await self.app(scope, counting_receive, send)
        finally:
            if size > self.threshold:
                gc.collect(1)  # young cycles (an exception's frames) may hold the parsed body
                self.trim()
