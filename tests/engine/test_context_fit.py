"""A context longer than the KV cache (the 1.5B Qwen file's 32k with the default cache) is capped
at start, so the OpenAI clients' requests without ``max_tokens`` get what fits (as vLLM derives
it), not a 400 each."""

from __future__ import annotations

from stencil.testing.live_server import serving


def test_request_without_max_tokens_gets_what_fits(tiny_models):
    from stencil.engine.async_engine import AsyncLLMEngine
    from stencil.engine.config import EngineConfig

    # 16 blocks x 4 = 64 KV slots, far below the tiny model's position limit
    model = str(tiny_models["llama-tied"])
    config = EngineConfig(model=model, seed=0, block_size=4, num_kv_blocks=16)
    engine = AsyncLLMEngine.from_config(config)
    assert engine.max_model_len == 64
    with serving(engine) as live:
        client = live.openai()
        card = client.models.list().data[0]
        assert card.model_dump()["max_model_len"] == 64
        chat = client.chat.completions.create(
            model=live.model, messages=[{"role": "user", "content": "hi"}], temperature=0
        )
        done = client.completions.create(model=live.model, prompt="Hello", temperature=0)
    usage = chat.usage
    assert chat.choices[0].finish_reason in ("stop", "length")
    assert usage.prompt_tokens + usage.completion_tokens <= 64
    if chat.choices[0].finish_reason == "length":
        assert usage.prompt_tokens + usage.completion_tokens == 64
    assert done.usage.prompt_tokens + done.usage.completion_tokens <= 64
