"""The llama.cpp peer: ``llama-server`` (built from the registry's ``llama-cpp-python`` sdist, see
docs/engine.md) on a GGUF file, continuous batching over ``-np`` slots, and a workload of token-id
prompts sent all at once through its native ``/completion`` endpoint (temperature 0, optionally
``json_schema``). Never a dependency of Stencil: the binary path comes from ``$LLAMA_SERVER``."""

from __future__ import annotations

import asyncio
import os
import shutil
import time
from pathlib import Path

import httpx

from stencil.testing.serve_process import ServeProcess, free_port, start_process

# the peer's binary: $LLAMA_SERVER, else llama-server on PATH
LLAMA_SERVER = os.environ.get("LLAMA_SERVER") or shutil.which("llama-server") or ""


def available() -> bool:
    return Path(LLAMA_SERVER).is_file()


def start(
    gguf: Path, threads: int, slots: int = 16, ctx_per_slot: int = 1024, extra: tuple = ()
) -> ServeProcess:
    port = free_port()
    cmd = [
        LLAMA_SERVER,
        "-m",
        str(gguf),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "-t",
        str(threads),
        "-np",
        str(slots),
        "-c",
        str(slots * ctx_per_slot),
        "--cont-batching",
        "--no-webui",
        *extra,
    ]
    return start_process(cmd, port, timeout=600)


async def _complete(http: httpx.AsyncClient, url: str, ids: list[int], n: int, schema, eos) -> int:
    body = {"prompt": ids, "n_predict": n, "temperature": 0, "ignore_eos": not eos, "seed": 0}
    if schema is not None:
        body["json_schema"] = schema
    r = await http.post(url, json=body)
    r.raise_for_status()
    return int(r.json()["tokens_predicted"])


async def _run(url: str, items, schema, eos: bool) -> tuple[int, float]:
    async with httpx.AsyncClient(timeout=3600, limits=httpx.Limits(max_connections=256)) as http:
        t = time.perf_counter()
        counts = await asyncio.gather(
            *(_complete(http, url, it.prompt_ids, it.max_tokens, schema, eos) for it in items)
        )
        return sum(counts), time.perf_counter() - t


def output_tok_s(
    server: ServeProcess, items, schema: dict | None = None, eos: bool = False
) -> float:
    """Output tokens/s of ``items`` (``prompt_ids``, ``max_tokens``) sent at once; EOS ignored
    unless ``eos`` (a JSON schema run stops where the JSON closes)."""
    tokens, seconds = asyncio.run(_run(server.url("/completion"), items, schema, eos))
    return tokens / seconds
