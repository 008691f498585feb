"""Native tool-call syntax per model family: a tiny random-weight model per family, carrying that
family's chat template and special tokens, behind a real server. The constraint forces the syntax
(``required`` / named, or ``auto`` with the trigger token favoured by ``logit_bias``); the parsed
``tool_calls`` are checked against the tools' schemas with jsonschema."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import jsonschema
import pytest

from stencil.api.openai.tool_formats import FORMATS, detect_format

QWEN25_TEMPLATE = """{%- if tools %}<|im_start|>system
{{ messages[0].content if messages[0].role == 'system' else 'You are a helpful assistant.' }}

# Tools

You may call one or more functions to assist with the user query.

You are provided with function signatures within <tools></tools> XML tags:
<tools>{% for tool in tools %}
{{ tool | tojson }}{% endfor %}
</tools>

For each function call, return a json object with function name and arguments within \
<tool_call></tool_call> XML tags:
<tool_call>
{"name": <function-name>, "arguments": <args-json-object>}
</tool_call><|im_end|>
{% elif messages[0].role == 'system' %}<|im_start|>system
{{ messages[0].content }}<|im_end|>
{% endif %}
{%- for message in messages %}
{%- if message.role == 'user' or (message.role == 'system' and not loop.first) \
or (message.role == 'assistant' and not message.tool_calls) %}<|im_start|>{{ message.role }}
{{ message.content }}<|im_end|>
{% elif message.role == 'assistant' %}<|im_start|>assistant
{% if message.content %}{{ message.content }}{% endif %}
{%- for tool_call in message.tool_calls %}{% set tool_call = tool_call.function %}
<tool_call>
{"name": "{{ tool_call.name }}", "arguments": {{ tool_call.arguments | tojson }}}
</tool_call>{% endfor %}<|im_end|>
{% elif message.role == 'tool' %}<|im_start|>user
<tool_response>
{{ message.content }}
</tool_response><|im_end|>
{% endif %}{% endfor %}
{%- if add_generation_prompt %}<|im_start|>assistant
{% endif %}"""

LLAMA31_TEMPLATE = """{{- bos_token }}<|start_header_id|>system<|end_header_id|>

{% if tools %}Environment: ipython
{% endif %}Cutting Knowledge Date: December 2023
Today Date: 26 Jul 2024

{% if messages[0].role == 'system' %}{{ messages[0].content }}{% set messages = messages[1:] %}\
{% endif %}<|eot_id|>
{%- if tools %}{% set first = messages[0].content %}{% set messages = messages[1:] %}\
<|start_header_id|>user<|end_header_id|>

Given the following functions, please respond with a JSON for a function call with its proper \
arguments that best answers the given prompt.

Respond in the format {"name": function name, "parameters": dictionary of argument name and its \
value}. Do not use variables.

{% for t in tools %}{{ t | tojson(indent=4) }}

{% endfor %}{{ first }}<|eot_id|>
{%- endif %}
{%- for message in messages %}
{%- if message.role == 'assistant' and message.tool_calls %}\
<|start_header_id|>assistant<|end_header_id|>

{% for tc in message.tool_calls %}{% if builtin_tools is defined %}<|python_tag|>{% endif %}\
{"name": "{{ tc.function.name }}", "parameters": {{ tc.function.arguments | tojson }}}\
{% endfor %}<|eot_id|>
{%- elif message.role == 'tool' %}<|start_header_id|>ipython<|end_header_id|>

{{ message.content }}<|eot_id|>
{%- else %}<|start_header_id|>{{ message.role }}<|end_header_id|>

{{ message.content }}<|eot_id|>
{%- endif %}{% endfor %}
{%- if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>

{% endif %}"""

MISTRAL_TEMPLATE = """{{- bos_token }}{%- set users = messages | selectattr('role', 'equalto', \
'user') | list %}{%- for message in messages %}{%- if message.role == 'user' %}\
{%- if tools and message == users[-1] %}[AVAILABLE_TOOLS] {{ tools | tojson }}[/AVAILABLE_TOOLS]\
{%- endif %}[INST] {{ message.content }}[/INST]{%- elif message.role == 'assistant' and \
message.tool_calls %}[TOOL_CALLS] [{% for tc in message.tool_calls %}{"name": "\
{{ tc.function.name }}", "arguments": {{ tc.function.arguments | tojson }}}{% if not loop.last \
%}, {% endif %}{% endfor %}]{{ eos_token }}{%- elif message.role == 'assistant' %} \
{{ message.content }}{{ eos_token }}{%- elif message.role == 'tool' %}[TOOL_RESULTS] \
{"content": {{ message.content | tojson }}}[/TOOL_RESULTS]{%- endif %}{%- endfor %}"""

FAMILIES = {
    # name: (template, special tokens, plain added tokens, architecture, trigger text)
    "hermes": (QWEN25_TEMPLATE, [], ["<tool_call>", "</tool_call>"], "qwen2", "<tool_call>"),
    "llama3_json": (
        LLAMA31_TEMPLATE,
        ["<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>", "<|python_tag|>"],
        [],
        "llama",
        "{",
    ),
    "mistral": (
        MISTRAL_TEMPLATE,
        ["[INST]", "[/INST]", "[TOOL_CALLS]", "[AVAILABLE_TOOLS]", "[/AVAILABLE_TOOLS]"]
        + ["[TOOL_RESULTS]", "[/TOOL_RESULTS]"],
        [],
        "mistral",
        "[TOOL_CALLS]",
    ),
}

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather in a city",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "maxLength": 12},
                "unit": {"enum": ["c", "f"]},
            },
            "required": ["city", "unit"],
        },
    },
}
ADD = {
    "type": "function",
    "function": {
        "name": "add",
        "parameters": {
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "required": ["a", "b"],
        },
    },
}
TOOLS = [WEATHER, ADD]
SCHEMAS = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}
USER = [{"role": "user", "content": "Weather in Paris, and 2 + 3?"}]


def family_tokenizer(default_model_dir: Path, family: str, out: Path):
    from transformers import AddedToken, AutoTokenizer

    template, special, plain, _, _ = FAMILIES[family]
    tok = AutoTokenizer.from_pretrained(str(default_model_dir))
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in plain])
    tok.add_special_tokens({"additional_special_tokens": special})
    tok.chat_template = template
    tok.save_pretrained(out)
    return tok


def family_model(default_model_dir: Path, family: str, root: Path) -> Path:
    from transformers import LlamaConfig, MistralConfig, Qwen2Config

    from stencil.testing.tiny_models import _COMMON, build_tiny_model

    tok = family_tokenizer(default_model_dir, family, root / f"{family}-tok")
    config_cls = {"qwen2": Qwen2Config, "llama": LlamaConfig, "mistral": MistralConfig}
    config = config_cls[FAMILIES[family][3]](
        **{**_COMMON, "vocab_size": len(tok), "max_position_embeddings": 2048}
    )
    return build_tiny_model(family, root / family, root / f"{family}-tok", config)


@pytest.fixture(scope="module", params=list(FAMILIES))
def family_server(request, tmp_path_factory):
    import stencil
    from stencil.api.app import ServerConfig, create_app
    from stencil.api.uvicorn_server import StencilServer
    from stencil.engine.async_engine import AsyncLLMEngine
    from stencil.engine.config import EngineConfig
    from stencil.testing.serve_process import free_port

    default_dir = Path(stencil.default_model_path())
    if not (default_dir / "config.json").is_file():
        pytest.skip("embedded default model not available")
    family = request.param
    model_dir = family_model(default_dir, family, tmp_path_factory.mktemp("families"))
    engine = AsyncLLMEngine.from_config(
        EngineConfig(model=str(model_dir), seed=0, dtype="float32", device="cpu", num_threads=1)
    )
    settings = ServerConfig(port=free_port(), log_level="warning")
    server = StencilServer(create_app(engine, settings), settings)
    thread = threading.Thread(target=server.run, name="uvicorn", daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "server did not start"
        time.sleep(0.05)
    from openai import OpenAI

    client = OpenAI(base_url=f"http://127.0.0.1:{settings.port}/v1", api_key="x", max_retries=0)
    yield family, client, engine.tokenizer
    server.should_exit = True
    thread.join(10)
    engine.shutdown()


def _conform(calls, names=None) -> None:
    assert calls
    for call in calls:
        assert call.type == "function" and call.id.startswith("call_")
        assert names is None or call.function.name in names
        jsonschema.validate(json.loads(call.function.arguments), SCHEMAS[call.function.name])


def test_family_is_detected(family_server):
    family, _, tok = family_server
    assert detect_format(tok).name == family


def test_required_calls_conform(family_server):
    family, client, _ = family_server
    r = client.chat.completions.create(
        model=family, messages=USER, tools=TOOLS, tool_choice="required", max_tokens=120, seed=1
    )
    choice = r.choices[0]
    assert choice.finish_reason == "tool_calls" and not choice.message.content
    _conform(choice.message.tool_calls)


def test_named_call_streams(family_server):
    family, client, _ = family_server
    stream = client.chat.completions.create(
        model=family,
        messages=USER,
        tools=TOOLS,
        tool_choice={"type": "function", "function": {"name": "add"}},
        max_tokens=120,
        stream=True,
    )
    chunks = [c for c in stream if c.choices]
    deltas = [tc for c in chunks for tc in (c.choices[0].delta.tool_calls or [])]
    assert chunks[-1].choices[0].finish_reason == "tool_calls"
    assert [d.function.name for d in deltas] == ["add"]
    jsonschema.validate(json.loads(deltas[0].function.arguments), SCHEMAS["add"])


def _trigger_id(tok, family: str) -> int:
    ids = tok(FAMILIES[family][4], add_special_tokens=False).input_ids
    assert len(ids) == 1, ids
    return ids[0]


def test_auto_calls_when_the_model_writes_the_trigger(family_server):
    family, client, tok = family_server
    r = client.chat.completions.create(
        model=family,
        messages=USER,
        tools=TOOLS,
        tool_choice="auto",
        parallel_tool_calls=False,
        max_tokens=120,
        logit_bias={str(_trigger_id(tok, family)): 100},
    )
    choice = r.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert len(choice.message.tool_calls) == 1
    _conform(choice.message.tool_calls)
    assert FAMILIES[family][4] not in (choice.message.content or "")


def test_auto_answers_text_when_the_model_does_not(family_server):
    family, client, tok = family_server
    stream = client.chat.completions.create(
        model=family,
        messages=USER,
        tools=TOOLS,
        max_tokens=12,
        stream=True,
        logit_bias={str(_trigger_id(tok, family)): -100},
    )
    chunks = [c for c in stream if c.choices]
    text = "".join(c.choices[0].delta.content or "" for c in chunks)
    assert not any(c.choices[0].delta.tool_calls for c in chunks)
    assert text and chunks[-1].choices[0].finish_reason in ("stop", "length")


def test_history_renders_in_the_family_syntax(family_server):
    from stencil.api.openai.convert import ModelInfo, convert_chat
    from stencil.api.openai.protocol import ChatCompletionRequest

    family, _, tok = family_server
    call = {"id": "call_1", "type": "function"}
    call["function"] = {"name": "add", "arguments": '{"a": 2, "b": 3}'}
    messages = [
        *USER,
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_1", "content": "5"},
    ]
    req = ChatCompletionRequest(model="m", messages=messages, tools=TOOLS)
    text = convert_chat(req, ModelInfo(tok, 4096, len(tok))).prompt_text
    args = "parameters" if family == "llama3_json" else "arguments"
    assert f'{{"name": "add", "{args}": {{"a": 2, "b": 3}}}}' in text
    assert "get_weather" in text  # the tools, rendered by the template itself


# ---- parsing, no model --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "text", "content", "calls"),
    [
        ("hermes", 'Sure.<tool_call>\n{"name": "f", "arguments": {"x": 1}}\n</tool_call>', "Sure.",
         [("f", {"x": 1})]),
        ("hermes", '<tool_call>\n{"name": "f", "arguments": {}}\n</tool_call>\n<tool_call>\n'
         '{"name": "g", "arguments": {"y": [1]}}\n</tool_call>', "", [("f", {}), ("g", {"y": [1]})]),
        ("hermes", '<tool_call>\n{"name": "f", "argum', None, None),
        ("llama3_json", '{"name": "f", "parameters": {"x": 1}}; {"name": "g", "parameters": {}}',
         "", [("f", {"x": 1}), ("g", {})]),
        ("llama3_json", '<|python_tag|>{"name": "f", "parameters": {"x": 1}}', "", [("f", {"x": 1})]),
        ("llama3_json", "The answer is {x}.", None, None),
        ("mistral", '[TOOL_CALLS] [{"name": "f", "arguments": {"x": 1}}]', "", [("f", {"x": 1})]),
        ("smollm2", 'ok <tool_call>[{"name": "f", "arguments": {}}]</tool_call>', "ok ",
         [("f", {})]),
        ("smollm2", "no call here <tool", None, None),
    ],
)  # fmt: skip
def test_parse(name, text, content, calls):
    got_content, got = FORMATS[name].parse(text)
    if calls is None:
        assert got is None and got_content == text
    else:
        assert got_content == content
        assert [(c["name"], c["arguments"]) for c in got] == calls


@pytest.mark.parametrize(
    ("name", "text", "safe", "started"),
    [
        ("hermes", "Hello <tool", "Hello ", False),
        ("hermes", "Hello <tool_call>\n{", "Hello ", True),
        ("llama3_json", "  ", "", False),
        ("llama3_json", ' {"na', "", True),
        ("llama3_json", "Hi", "Hi", False),
        ("mistral", "[TOOL", "", False),
    ],
)
def test_split_holds_back_a_possible_trigger(name, text, safe, started):
    assert FORMATS[name].split(text) == (safe, started)
