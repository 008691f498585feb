"""A base model (no chat template; here a tiny Gemma 3): ``/v1/chat/completions`` is a 400 that
says so, ``/v1/completions`` and ``LLM.generate`` work, ``LLM.chat`` raises ``RequestError``."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import openai
import pytest

from stencil import SamplingParams
from stencil.engine.errors import RequestError
from stencil.testing.live_server import serving
from stencil.testing.tiny_dense import build_base_model
from stencil.testing.tiny_models import make_llm


@pytest.fixture(scope="module")
def base_model(tmp_path_factory) -> Path:
    import stencil

    out = tmp_path_factory.mktemp("base") / "gemma3-base"
    return build_base_model(out, Path(stencil.default_model_path()))


def test_base_model_offline(base_model):
    llm = make_llm(base_model, block_size=4, num_kv_blocks=64)
    out = llm.generate([[1, 2, 3]], SamplingParams(temperature=0, max_tokens=4), use_tqdm=False)
    assert len(out[0].outputs[0].token_ids) == 4
    with pytest.raises(RequestError, match="no chat template"):
        llm.chat([{"role": "user", "content": "hi"}], use_tqdm=False)


def test_base_model_server(base_model):
    from stencil.engine.async_engine import AsyncLLMEngine
    from stencil.engine.config import EngineConfig

    engine = AsyncLLMEngine.from_config(
        EngineConfig(model=str(base_model), seed=0, block_size=4, num_kv_blocks=64)
    )
    with serving(engine, playground=True) as live:
        client = live.openai()
        with pytest.raises(openai.BadRequestError, match="no chat template"):
            client.chat.completions.create(
                model=live.model, messages=[{"role": "user", "content": "hi"}], max_tokens=4
            )
        done = client.completions.create(model=live.model, prompt="Hello", max_tokens=4)
        assert done.choices[0].finish_reason == "length"
        _playground_runs_a_plain_prompt(live)


def _playground_runs_a_plain_prompt(live) -> None:
    """The playground asks a base model through /v1/completions with one plain prompt (its
    check and trace read the same body), not the chat endpoint that refuses it."""
    schema = {"type": "object", "properties": {"name": {"type": "string"}}}
    spec = {"kind": "json", "spec": json.dumps(schema), "document": "Ada Lovelace, 36.",
            "grounding": True, "max_tokens": 8}  # fmt: skip
    prepared = httpx.post(live.base_url + "/v1/playground/request", json=spec, timeout=60).json()
    assert prepared["endpoint"] == "/v1/completions", prepared
    body = {k: v for k, v in prepared["body"].items() if k != "stream_options"}
    assert "messages" not in body and body["prompt"].endswith("Answer:")
    assert "Ada Lovelace" in body["prompt"]
    for path, sent in [("/v1/completions", body | {"stream": False}),
                       ("/v1/playground/trace", body), ("/v1/playground/check", spec)]:  # fmt: skip
        r = httpx.post(live.base_url + path, json=sent, timeout=60)
        assert r.status_code == 200, (path, r.text)
