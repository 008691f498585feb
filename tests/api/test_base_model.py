"""A base model (no chat template; here a tiny Gemma 3): ``/v1/chat/completions`` is a 400 that
says so, ``/v1/completions`` and ``LLM.generate`` work, ``LLM.chat`` raises ``RequestError``."""

from __future__ import annotations

from pathlib import Path

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
    with serving(engine) as live:
        client = live.openai()
        with pytest.raises(openai.BadRequestError, match="no chat template"):
            client.chat.completions.create(
                model=live.model, messages=[{"role": "user", "content": "hi"}], max_tokens=4
            )
        done = client.completions.create(model=live.model, prompt="Hello", max_tokens=4)
        assert done.choices[0].finish_reason == "length"
