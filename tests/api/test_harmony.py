"""GPT-OSS's harmony format end to end: a tiny random-weight GPT-OSS carrying GPT-OSS's real
tokenizer (o200k_harmony, built offline: ``stencil.testing.harmony_model``) and its published
chat template (``chat_templates/openai-gpt-oss-120b.jinja``, the ``chat_template`` of
openai/gpt-oss-120b as llama.cpp ships it), behind a real server and the real openai client.

OpenAI's own ``openai-harmony`` package is the oracle: the prompts the template renders equal
its ``render_conversation_for_completion`` token for token, and the parser's reasoning /
content / calls equal its ``parse_messages_from_completion_tokens`` on replies fed token by
token. The model's greedy path is steered (``steer``: after ``assistant`` it writes
``<|channel|>final<|message|>``) so that the answer channel's constraint is exercised.
"""

from __future__ import annotations

import datetime
import json
from pathlib import Path

import jsonschema
import pytest

from stencil.api.tools.harmony_parser import HarmonyParser
from stencil.testing.tool_specs import SCHEMAS, TOOLS, USER, WEATHER

openai_harmony = pytest.importorskip("openai_harmony")
pytest.importorskip("quicktok")

TEMPLATE = Path(__file__).parent / "chat_templates" / "openai-gpt-oss-120b.jinja"
PERSON = {
    "type": "object",
    "properties": {"name": {"type": "string", "maxLength": 10}, "age": {"type": "integer"}},
    "required": ["name", "age"],
    "additionalProperties": False,
}


@pytest.fixture(scope="module")
def harmony_dir(tmp_path_factory, monkeypatch_module):
    from stencil.testing.harmony_model import build_tiny_gpt_oss, steer

    root = tmp_path_factory.mktemp("gpt-oss-harmony")
    model = build_tiny_gpt_oss(root, TEMPLATE.read_text())
    monkeypatch_module.setenv("TIKTOKEN_ENCODINGS_BASE", str(root / "tokenizer" / "tiktoken"))
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model)
    ids = [tok.convert_tokens_to_ids(t) for t in ("<|channel|>", "<|message|>")]
    final, assistant = (tok(w, add_special_tokens=False).input_ids for w in ("final", "assistant"))
    assert len(final) == len(assistant) == 1
    steer(model, [(assistant[0], ids[0]), (ids[0], final[0]), (final[0], ids[1])])
    return model


@pytest.fixture(scope="module")
def monkeypatch_module():
    with pytest.MonkeyPatch.context() as mp:
        yield mp


@pytest.fixture(scope="module")
def tokenizer(harmony_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(harmony_dir)


@pytest.fixture(scope="module")
def encoding(harmony_dir):
    return openai_harmony.load_harmony_encoding(openai_harmony.HarmonyEncodingName.HARMONY_GPT_OSS)


# ---- the prompt: the template against openai-harmony -------------------------------------------


def test_template_renders_what_openai_harmony_renders(tokenizer, encoding):
    h = openai_harmony
    params = WEATHER["function"]["parameters"]
    system = (
        h.SystemContent.new()
        .with_conversation_start_date(datetime.date.today().isoformat())
        .with_reasoning_effort(h.ReasoningEffort.LOW)
    )
    developer = (
        h.DeveloperContent.new()
        .with_instructions("Be brief.")
        .with_function_tools(
            [h.ToolDescription.new("get_weather", "Current weather in a city", parameters=params)]
        )
    )
    conv = h.Conversation.from_messages(
        [
            h.Message.from_role_and_content(h.Role.SYSTEM, system),
            h.Message.from_role_and_content(h.Role.DEVELOPER, developer),
            h.Message.from_role_and_content(h.Role.USER, USER[0]["content"]),
        ]
    )
    expected = encoding.render_conversation_for_completion(conv, h.Role.ASSISTANT)
    text = tokenizer.apply_chat_template(
        [{"role": "developer", "content": "Be brief."}, *USER],
        tools=[WEATHER],
        tokenize=False,
        add_generation_prompt=True,
        reasoning_effort="low",
    )
    assert tokenizer(text, add_special_tokens=False).input_ids == expected


def test_past_reasoning_goes_back_as_thinking(tokenizer):
    """An assistant message sent back with this server's ``reasoning_content`` (the SDK keeps
    it on the message): GPT-OSS's template shows it as the analysis before that turn's call."""
    from stencil.api.model_info import ModelInfo
    from stencil.api.openai.convert import convert_chat
    from stencil.api.openai.protocol import ChatCompletionRequest

    call = {"id": "call_1", "type": "function"}
    call["function"] = {"name": "add", "arguments": '{"a": 2, "b": 3}'}
    history = [
        *USER,
        {"role": "assistant", "content": None, "reasoning_content": "I add.", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_1", "content": "5"},
    ]
    req = ChatCompletionRequest(model="m", messages=history, tools=TOOLS)
    text = convert_chat(req, ModelInfo(tokenizer, 4096, len(tokenizer))).prompt_text
    assert "<|channel|>analysis<|message|>I add.<|end|><|start|>assistant to=functions.add" in text
    assert text.endswith("<|start|>assistant")


# ---- the reply: the parser against openai-harmony ----------------------------------------------

REPLIES = {
    "analysis then final": "<|channel|>analysis<|message|>User asks 2+2. <|start|> is a "
    "token.<|end|><|start|>assistant<|channel|>final<|message|>It is 4 <b>.<|return|>",
    "final only": '<|channel|>final<|message|>{"name": "Ada", "age": 36}<|return|>',
    "call, recipient in the channel": "<|channel|>analysis<|message|>Need weather.<|end|>"
    "<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json"
    '<|message|>{"city": "Paris", "unit": "c"}<|call|>',
    "call, recipient in the header": "<|channel|>commentary<|message|>Checking.<|end|>"
    '<|start|>assistant to=functions.add<|channel|>commentary json<|message|>{"a": 2, "b": 3}'
    "<|call|>",
}


def _oracle(encoding, tokens: list[int]) -> tuple[str, str, list[dict]]:
    messages = encoding.parse_messages_from_completion_tokens(tokens, openai_harmony.Role.ASSISTANT)
    reasoning = content = ""
    calls = []
    for m in messages:
        text = "".join(c.text for c in m.content)
        if m.recipient and m.recipient.startswith("functions."):
            calls.append({"name": m.recipient[len("functions.") :], "arguments": json.loads(text)})
        elif m.channel == "analysis":
            reasoning += text
        else:
            content += text
    return reasoning, content, calls


@pytest.mark.parametrize("name", list(REPLIES))
def test_parser_agrees_with_openai_harmony(name, tokenizer, encoding):
    tokens = encoding.encode(REPLIES[name], allowed_special="all")
    assert tokenizer(REPLIES[name], add_special_tokens=False).input_ids == tokens
    parser, got = HarmonyParser(), {"reasoning": "", "content": ""}
    for t in tokens[:-1]:  # the stop token is not in the text (it ends the sequence)
        for piece in parser.feed(tokenizer.decode([t], skip_special_tokens=False)):
            got[piece.kind] += piece.text
    for piece in parser.finish():
        got[piece.kind] += piece.text
    assert (got["reasoning"], got["content"], parser.calls) == _oracle(encoding, tokens)


# ---- through the server -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def client(harmony_dir):
    from stencil.engine.async_engine import AsyncLLMEngine
    from stencil.engine.config import EngineConfig
    from stencil.testing.live_server import serving
    from stencil.testing.tiny_models import TEST_KV_BYTES

    engine = AsyncLLMEngine.from_config(
        EngineConfig(
            model=str(harmony_dir),
            seed=0,
            dtype="float32",
            device="cpu",
            num_threads=1,
            max_model_len=1024,
            kv_cache_memory=TEST_KV_BYTES,
        )  # fmt: skip
    )
    with serving(engine) as live:
        yield live.openai()


def _no_markers(text: str | None) -> None:
    assert not any(m in (text or "") for m in ("<|channel|>", "<|message|>", "<|end|>"))


def test_response_format_constrains_the_final_channel(client):
    fmt = {"type": "json_schema", "json_schema": {"name": "Person", "schema": PERSON}}
    r = client.chat.completions.create(
        model="model", messages=USER, response_format=fmt, max_tokens=60, temperature=0
    )
    choice = r.choices[0]
    assert choice.finish_reason == "stop"
    jsonschema.validate(json.loads(choice.message.content), PERSON)


def test_response_format_streams_and_parses(client):
    class Person(__import__("pydantic").BaseModel):
        name: str
        age: int

    parsed = client.chat.completions.parse(
        model="model", messages=USER, response_format=Person, max_tokens=60, temperature=0
    )
    assert isinstance(parsed.choices[0].message.parsed, Person)
    fmt = {"type": "json_schema", "json_schema": {"name": "Person", "schema": PERSON}}
    chunks = list(
        client.chat.completions.create(
            model="model", messages=USER, response_format=fmt, max_tokens=60, stream=True, seed=3
        )
    )
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    jsonschema.validate(json.loads(text), PERSON)


@pytest.mark.parametrize("stream", [False, True])
def test_required_call_after_free_analysis(client, tokenizer, stream):
    """The analysis channel is favoured (``logit_bias``), its text free; the call follows
    (closed within max_tokens when the analysis runs on)."""
    (analysis,) = tokenizer("analysis", add_special_tokens=False).input_ids
    kwargs = dict(
        model="model", messages=USER, tools=TOOLS, tool_choice="required", max_tokens=80,
        logit_bias={str(analysis): 30},
    )  # fmt: skip
    if not stream:
        choice = client.chat.completions.create(**kwargs, seed=1).choices[0]
        calls, message = choice.message.tool_calls, choice.message
        reasoning, finish = message.reasoning_content, choice.finish_reason
        _no_markers(message.content)
    else:
        chunks = [c for c in client.chat.completions.create(**kwargs, seed=1, stream=True)]
        deltas = [c.choices[0].delta for c in chunks if c.choices]
        calls = [tc for d in deltas for tc in (d.tool_calls or [])]
        reasoning = "".join(getattr(d, "reasoning_content", None) or "" for d in deltas)
        finish = chunks[-1].choices[0].finish_reason
        _no_markers("".join(d.content or "" for d in deltas))
    assert finish == "tool_calls" and len(calls) == 1
    assert calls[0].id.startswith("call_")
    jsonschema.validate(json.loads(calls[0].function.arguments), SCHEMAS[calls[0].function.name])
    assert "analysis" in reasoning
    _no_markers(reasoning)


def test_named_call_then_the_result_in_history(client):
    named = {"type": "function", "function": {"name": "add"}}
    r = client.chat.completions.create(
        model="model", messages=USER, tools=TOOLS, tool_choice=named, max_tokens=80, seed=2
    )
    call = r.choices[0].message.tool_calls[0]
    assert call.function.name == "add"
    jsonschema.validate(json.loads(call.function.arguments), SCHEMAS["add"])
    history = [
        *USER,
        {"role": "assistant", "content": None, "tool_calls": [call.model_dump()]},
        {"role": "tool", "tool_call_id": call.id, "content": "5"},
    ]
    fmt = {"type": "json_schema", "json_schema": {"name": "Person", "schema": PERSON}}
    r = client.chat.completions.create(
        model="model", messages=history, tools=TOOLS, tool_choice="none", response_format=fmt,
        max_tokens=60, temperature=0,
    )  # fmt: skip
    jsonschema.validate(json.loads(r.choices[0].message.content), PERSON)


def test_auto_answers_on_the_final_channel(client):
    r = client.chat.completions.create(
        model="model", messages=USER, tools=TOOLS, tool_choice="auto", max_tokens=12, temperature=0
    )
    choice = r.choices[0]
    assert not choice.message.tool_calls and choice.message.content
    _no_markers(choice.message.content)


def test_a_later_system_message_is_a_400(client):
    import openai

    messages = [*USER, {"role": "system", "content": "Be brief."}]
    with pytest.raises(openai.BadRequestError) as err:
        client.chat.completions.create(model="model", messages=messages, max_tokens=4)
    assert "messages.1.role" in str(err.value)


def test_responses_api_reasoning_and_function_call(client):
    tools = [{"type": "function", **t["function"]} for t in TOOLS]
    r = client.responses.create(
        model="model", input=USER[0]["content"], tools=tools, tool_choice="required",
        max_output_tokens=80, reasoning={"effort": "low"},
    )  # fmt: skip
    kinds = [item.type for item in r.output]
    assert kinds[-1] == "function_call" and "message" not in kinds
    call = r.output[-1]
    jsonschema.validate(json.loads(call.arguments), SCHEMAS[call.name])
    fmt = {"type": "json_schema", "name": "Person", "schema": PERSON}
    r = client.responses.create(
        model="model", input=USER[0]["content"], text={"format": fmt}, max_output_tokens=60,
        temperature=0,
    )  # fmt: skip
    jsonschema.validate(json.loads(r.output_text), PERSON)


TAGGED = {  # a set: uniqueItems is a decode-time check, applied on the final channel only
    **PERSON,
    "properties": {**PERSON["properties"], "tags": {"type": "array", "items": {"type": "string",
    "maxLength": 6}, "uniqueItems": True, "maxItems": 3}},
    "required": ["name", "age", "tags"],
}  # fmt: skip


@pytest.mark.parametrize("schema", [PERSON, TAGGED], ids=["plain", "checked"])
def test_auto_with_a_response_format_answers_on_the_final_channel(client, schema):
    """Tools in ``auto`` and a response format: the calls or the answer, and the (steered)
    model takes the final channel, where the answer is the format's."""
    fmt = {"type": "json_schema", "json_schema": {"name": "Person", "schema": schema}}
    r = client.chat.completions.create(
        model="model", messages=USER, tools=TOOLS, tool_choice="auto", response_format=fmt,
        max_tokens=80, temperature=0,
    )  # fmt: skip
    choice = r.choices[0]
    assert choice.finish_reason == "stop" and not choice.message.tool_calls
    jsonschema.validate(json.loads(choice.message.content), schema)


@pytest.mark.parametrize("schema", [PERSON, TAGGED], ids=["plain", "checked"])
def test_auto_with_a_response_format_takes_either_branch(tokenizer, schema):
    """The constraint of that request (``convert_chat``, compiled on GPT-OSS's vocabulary)
    against harmony replies, token by token: a call on ``commentary``, an answer on ``final``
    after free analysis; an answer that breaks the format is refused (a repeated tag: the
    decode-time check, on the final channel only), and so is free text on ``final``."""
    from stencil.api.model_info import ModelInfo
    from stencil.api.openai.convert import convert_chat
    from stencil.api.openai.protocol import ChatCompletionRequest
    from stencil.constraints import ConstraintCompiler, TokenVocab

    fmt = {"type": "json_schema", "json_schema": {"name": "Person", "schema": schema}}
    body = {"model": "m", "messages": USER, "tools": TOOLS, "response_format": fmt}
    plan = convert_chat(
        ChatCompletionRequest.model_validate(body), ModelInfo(tokenizer, 1024, len(tokenizer))
    )
    stops = [tokenizer.convert_tokens_to_ids(t) for t in ("<|return|>", "<|call|>")]
    vocab = TokenVocab.from_hf(tokenizer, len(tokenizer), eos_token_ids=stops)
    compiled = ConstraintCompiler(vocab).compile(plan.params.constraint)
    tags = ', "tags": ["a", "b"]' if schema is TAGGED else ""
    repeated = ', "tags": ["a", "a"]' if schema is TAGGED else ', "tags": []'
    analysis = "<|channel|>analysis<|message|>Paris, then.<|end|><|start|>assistant"
    replies = {
        "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>"
        '{"city": "Paris", "unit": "c"}<|call|>': True,
        f'{analysis}<|channel|>final<|message|>{{"name": "Ada", "age": 36{tags}}}<|return|>': True,
        f'<|channel|>final<|message|>{{"name": "Ada", "age": 36{repeated}}}<|return|>': False,
        "<|channel|>final<|message|>Ada is 36.<|return|>": False,
    }
    for reply, valid in replies.items():
        m = compiled.new_matcher()
        ids = tokenizer(reply, add_special_tokens=False).input_ids
        assert all(m.accept_token(t) for t in ids) == valid, reply
