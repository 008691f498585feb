"""A base model (no chat template; here a tiny Gemma 3): ``/v1/chat/completions`` is a 400 that
says so, ``/v1/completions`` and ``LLM.generate`` work, ``LLM.chat`` raises ``RequestError``."""

from __future__ import annotations

import json
from pathlib import Path

import openai
import pytest

from stencil import SamplingParams
from stencil.engine.errors import RequestError
from stencil.testing.live_server import serving
from stencil.testing.tiny_dense import DENSE_BUILDERS
from stencil.testing.tiny_models import build_tiny_model, make_llm


@pytest.fixture(scope="module")
def base_model(tmp_path_factory) -> Path:
    import stencil

    out = tmp_path_factory.mktemp("base") / "gemma3-base"
    build_tiny_model("gemma3", out, Path(stencil.default_model_path()), DENSE_BUILDERS["gemma3"]())
    (out / "chat_template.jinja").unlink(missing_ok=True)
    config = json.loads((out / "tokenizer_config.json").read_text())
    config.pop("chat_template", None)
    (out / "tokenizer_config.json").write_text(json.dumps(config))
    return out


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
