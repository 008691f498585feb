"""A chat template without a system role (Gemma's shape: the system message folded into the first
user turn, roles strictly alternating, the assistant called "model"): the server renders with it
as it is, a system message and a prompt-based tool system prompt included."""

from __future__ import annotations

from pathlib import Path

import pytest
from transformers import AutoTokenizer

from stencil.api.model_info import ModelInfo
from stencil.api.openai.convert import convert_chat
from stencil.api.openai.protocol import ChatCompletionRequest
from stencil.engine.models.default_model import default_model_path

# Gemma's rule, written for this test: no system turn; it prefixes the first user turn
FOLDING_TEMPLATE = (
    "{{ bos_token }}"
    "{% if messages[0]['role'] == 'system' %}"
    "{% set prefix = messages[0]['content'] + '\\n\\n' %}{% set turns = messages[1:] %}"
    "{% else %}{% set prefix = '' %}{% set turns = messages %}{% endif %}"
    "{% for m in turns %}"
    "{% if (m['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    "{{ raise_exception('Conversation roles must alternate user/assistant') }}{% endif %}"
    "{{ '<start_of_turn>' + ('model' if m['role'] == 'assistant' else m['role']) + '\\n' }}"
    "{{ (prefix if loop.first else '') + m['content'] + '<end_of_turn>\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<start_of_turn>model\\n' }}{% endif %}"
)
TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}


GEMMA2 = Path(__file__).parent / "chat_templates" / "gemma-2-2b-it.jinja"


@pytest.fixture(scope="module", params=["written", "gemma-2-2b-it"])
def model(request) -> ModelInfo:
    """The rule above, and Gemma 2's own template, which raises on a system message (the
    server folds it into the first user turn itself, as Gemma 3's template does)."""
    tok = AutoTokenizer.from_pretrained(str(default_model_path()))
    tok.chat_template = FOLDING_TEMPLATE if request.param == "written" else GEMMA2.read_text()
    return ModelInfo(tok, 8192, 49152)


@pytest.mark.parametrize("tools", [None, [TOOL]])
def test_system_message_folds_into_the_first_user_turn(model, tools):
    body = {
        "messages": [
            {"role": "system", "content": "Answer in French."},
            {"role": "user", "content": "Weather in Paris?"},
        ],
        "tools": tools,
    }
    plan = convert_chat(ChatCompletionRequest.model_validate(body), model)
    text = plan.prompt_text
    assert "<start_of_turn>system" not in text
    first_user = text.split("<start_of_turn>user\n", 1)[1].split("<end_of_turn>", 1)[0]
    assert first_user.startswith("Answer in French.")
    assert first_user.endswith("Weather in Paris?")
    if tools:  # the tools' prompt joins the one system message, so it folds in too
        assert "get_weather" in first_user
    assert text.endswith("<start_of_turn>model\n")
