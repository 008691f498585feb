"""Native tool-call syntax per model family: a tiny random-weight model per family, carrying that
family's real chat template and special tokens, behind a real server. The constraint forces the
syntax (``required`` / named, or ``auto`` with the trigger token favoured by ``logit_bias``); the
parsed ``tool_calls`` are checked against the tools' schemas with jsonschema.

The templates in ``chat_templates/`` are the ``chat_template`` of each model's
tokenizer_config.json as shipped: Qwen/Qwen2.5-7B-Instruct (the whole Qwen2.5-Instruct line),
meta-llama/Llama-3.1-8B-Instruct, mistralai/Mistral-7B-Instruct-v0.3,
ibm-granite/granite-3.3-2b-instruct and google/gemma-2-2b-it (as llama.cpp's
models/templates ships them) and microsoft/Phi-4-mini-instruct. Gemma 2's template has no tool
format and refuses a system message: the tools' prompt (SmolLM2's format) is folded into the
first user turn; its ``<tool_call>`` is added as a token here only so that ``logit_bias`` can
favour it. Phi-4-mini's ``functools`` is one token of its own vocabulary and two of SmolLM2's:
a BPE merge appended to SmolLM2's makes it one regular token here (``phi4_mini``), and an added
plain token in ``phi4_mini_added``, as other vocabularies have it (llguidance cannot undo such a
token named ``<[id]>``: the constraint writes it as text, ``llg/token_refs.py``), and three
tokens of Phi-4-mini's own vocabulary, o200k_base (``fun`` ``ct`` ``ools``), in
``phi4_mini_o200k`` (its special tokens after the ranks, the embedding padded to 200,064 rows as
Phi-4-mini's; a trigger of three tokens cannot be favoured by ``logit_bias``, so the ``auto``
tests skip it)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import NamedTuple

import jsonschema
import pytest

from stencil.api.tools.formats import FORMATS, detect_format
from stencil.testing.tool_specs import SCHEMAS, TOOLS, USER

TEMPLATES = Path(__file__).parent / "chat_templates"


class Family(NamedTuple):
    template: str  # a file in chat_templates/
    special: list[str]  # added special tokens
    plain: list[str]  # added non-special tokens (Qwen's <tool_call> is one)
    architecture: str
    trigger: str  # the text that starts a call in auto
    format: str | None = None  # the format's name, when not the family's
    merges: tuple = ()  # BPE merges appended to SmolLM2's (each pair's join a token of its own)
    base: str = "smollm2"  # the vocabulary: SmolLM2's, or "o200k" (o200k_base + PHI4_O200K)


PHI4_O200K = {  # Phi-4-mini's special tokens after o200k_base's ranks (the rest: reserved)
    199999: "<|endoftext|>",
    200018: "<|endofprompt|>",
    200019: "<|assistant|>",
    200020: "<|end|>",
    200021: "<|user|>",
    200022: "<|system|>",
    200023: "<|tool|>",
    200024: "<|/tool|>",
    200025: "<|tool_call|>",
    200026: "<|/tool_call|>",
    200027: "<|tool_response|>",
    200028: "<|tag|>",
}
PHI4_VOCAB = 200_064  # Phi-4-mini's embedding rows


FAMILIES = {
    "hermes": Family(
        "qwen2.5-instruct.jinja", [], ["<tool_call>", "</tool_call>"], "qwen2", "<tool_call>"
    ),
    "llama3_json": Family(
        "llama-3.1-instruct.jinja",
        ["<|begin_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"]
        + ["<|eom_id|>", "<|python_tag|>"],
        [],
        "llama",
        "{",
    ),
    "mistral": Family(
        "mistral-7b-instruct-v0.3.jinja",
        ["[INST]", "[/INST]", "[TOOL_CALLS]", "[AVAILABLE_TOOLS]", "[/AVAILABLE_TOOLS]"]
        + ["[TOOL_RESULTS]", "[/TOOL_RESULTS]"],
        [],
        "mistral",
        "[TOOL_CALLS]",
    ),
    "granite": Family(
        "granite-3.3-2b-instruct.jinja",
        ["<|start_of_role|>", "<|end_of_role|>", "<|end_of_text|>", "<|tool_call|>"],
        [],
        "llama",
        "<|tool_call|>",
    ),
    "phi4_mini": Family(
        "phi-4-mini-instruct.jinja",
        ["<|system|>", "<|user|>", "<|assistant|>", "<|end|>", "<|tool|>", "<|/tool|>"],
        [],
        "llama",
        "functools",
        merges=(("fun", "ctools"),),  # one BPE token, as in Phi-4-mini's vocabulary
    ),
    "phi4_mini_added": Family(  # one added plain token
        "phi-4-mini-instruct.jinja",
        ["<|system|>", "<|user|>", "<|assistant|>", "<|end|>", "<|tool|>", "<|/tool|>"],
        ["functools"],
        "llama",
        "functools",
        "phi4_mini",
    ),
    "phi4_mini_o200k": Family(
        "phi-4-mini-instruct.jinja", [], [], "llama", "functools", "phi4_mini", base="o200k"
    ),
    "gemma2": Family(
        "gemma-2-2b-it.jinja",
        ["<start_of_turn>", "<end_of_turn>"],
        ["<tool_call>", "</tool_call>"],
        "llama",
        "<tool_call>",
        "smollm2",
    ),
}


def family_tokenizer(default_model_dir: Path, family: str, out: Path):
    from transformers import AddedToken, AutoTokenizer

    spec = FAMILIES[family]
    if spec.base == "o200k":
        pytest.importorskip("quicktok")  # its copy of o200k_base (the test extras)
        from stencil.testing.harmony_model import o200k_tokenizer

        template = (TEMPLATES / spec.template).read_text()
        return o200k_tokenizer(out, PHI4_O200K, PHI4_VOCAB, template, eos_token="<|endoftext|>")
    tok = AutoTokenizer.from_pretrained(str(default_model_dir))
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in spec.plain])
    tok.add_special_tokens({"additional_special_tokens": spec.special})
    tok.chat_template = (TEMPLATES / spec.template).read_text()
    tok.save_pretrained(out)
    if not spec.merges:
        return tok
    # the merged tokens take the ids after SmolLM2's vocabulary; the added tokens move past them
    data = json.loads((out / "tokenizer.json").read_text())
    model, shift = data["model"], len(spec.merges)
    base = len(model["vocab"])
    for t in data["added_tokens"]:
        t["id"] += shift if t["id"] >= base else 0
    for i, (a, b) in enumerate(spec.merges):
        model["vocab"][a + b] = base + i
        model["merges"].append([a, b] if isinstance(model["merges"][0], list) else f"{a} {b}")
    (out / "tokenizer.json").write_text(json.dumps(data))
    config = json.loads((out / "tokenizer_config.json").read_text())
    config["added_tokens_decoder"] = {
        str(int(i) + (shift if int(i) >= base else 0)): t
        for i, t in config.get("added_tokens_decoder", {}).items()
    }
    (out / "tokenizer_config.json").write_text(json.dumps(config))
    return AutoTokenizer.from_pretrained(str(out))


def family_model(default_model_dir: Path, family: str, root: Path) -> Path:
    from transformers import GenerationConfig, LlamaConfig, MistralConfig, Qwen2Config

    from stencil.testing.tiny_models import _COMMON, build_tiny_model

    spec = FAMILIES[family]
    tok = family_tokenizer(default_model_dir, family, root / f"{family}-tok")
    kw = {**_COMMON, "vocab_size": len(tok), "max_position_embeddings": 2048}
    stops = []
    if spec.base == "o200k":  # Phi-4-mini stops at <|endoftext|> and <|end|>
        stops = [tok.convert_tokens_to_ids(t) for t in ("<|endoftext|>", "<|end|>")]
        kw |= {"bos_token_id": None, "eos_token_id": stops, "pad_token_id": stops[0]}
    config_cls = {"qwen2": Qwen2Config, "llama": LlamaConfig, "mistral": MistralConfig}
    out = build_tiny_model(
        family, root / family, root / f"{family}-tok", config_cls[spec.architecture](**kw)
    )
    if stops:
        GenerationConfig(eos_token_id=stops, pad_token_id=stops[0]).save_pretrained(out)
    return out


class FamilyServer(NamedTuple):
    family: str
    client: object  # openai.OpenAI
    tokenizer: object

    def chat(self, **kwargs):
        """A chat completion for ``USER`` with ``TOOLS`` (each overridable)."""
        body = {"messages": USER, "tools": TOOLS, "max_tokens": 120} | kwargs
        return self.client.chat.completions.create(model=self.family, **body)

    def trigger_bias(self, bias: float) -> dict[str, float]:
        ids = self.tokenizer(FAMILIES[self.family].trigger, add_special_tokens=False).input_ids
        if len(ids) > 1:  # logit_bias favours one token; the model would not write the rest
            pytest.skip(f"{self.family}'s trigger is {len(ids)} tokens")
        return {str(ids[0]): bias}


@pytest.fixture(scope="module", params=list(FAMILIES))
def family_server(request, tmp_path_factory):
    import stencil
    from stencil.engine.async_engine import AsyncLLMEngine
    from stencil.engine.config import EngineConfig
    from stencil.testing.live_server import serving
    from stencil.testing.tiny_models import TEST_KV_BYTES

    default_dir = Path(stencil.default_model_path())
    if not (default_dir / "config.json").is_file():
        pytest.skip("embedded default model not available")
    family = request.param
    model_dir = family_model(default_dir, family, tmp_path_factory.mktemp("families"))
    engine = AsyncLLMEngine.from_config(
        EngineConfig(
            model=str(model_dir),
            seed=0,
            dtype="float32",
            device="cpu",
            num_threads=1,
            kv_cache_memory=TEST_KV_BYTES,
        )
    )
    with serving(engine) as live:
        yield FamilyServer(family, live.openai(), engine.tokenizer)


def _conform(calls, names=None) -> None:
    assert calls
    for call in calls:
        assert call.type == "function" and call.id.startswith("call_")
        assert names is None or call.function.name in names
        jsonschema.validate(json.loads(call.function.arguments), SCHEMAS[call.function.name])


def test_family_is_detected(family_server):
    spec = FAMILIES[family_server.family]
    assert detect_format(family_server.tokenizer).name == (spec.format or family_server.family)


def test_required_calls_conform(family_server):
    choice = family_server.chat(tool_choice="required", seed=1).choices[0]
    assert choice.finish_reason == "tool_calls" and not choice.message.content
    _conform(choice.message.tool_calls)


def test_named_call_streams(family_server):
    named = {"type": "function", "function": {"name": "add"}}
    chunks = [c for c in family_server.chat(tool_choice=named, stream=True) if c.choices]
    deltas = [tc for c in chunks for tc in (c.choices[0].delta.tool_calls or [])]
    assert chunks[-1].choices[0].finish_reason == "tool_calls"
    assert [d.function.name for d in deltas] == ["add"]
    jsonschema.validate(json.loads(deltas[0].function.arguments), SCHEMAS["add"])


def test_auto_calls_when_the_model_writes_the_trigger(family_server):
    r = family_server.chat(
        tool_choice="auto", parallel_tool_calls=False, logit_bias=family_server.trigger_bias(100)
    )
    choice = r.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert len(choice.message.tool_calls) == 1
    _conform(choice.message.tool_calls)
    assert FAMILIES[family_server.family].trigger not in (choice.message.content or "")


def test_auto_answers_text_when_the_model_does_not(family_server):
    stream = family_server.chat(
        max_tokens=12, stream=True, logit_bias=family_server.trigger_bias(-100)
    )
    chunks = [c for c in stream if c.choices]
    text = "".join(c.choices[0].delta.content or "" for c in chunks)
    assert not any(c.choices[0].delta.tool_calls for c in chunks)
    assert text and chunks[-1].choices[0].finish_reason in ("stop", "length")


def test_langchain_bind_tools_auto_parses_the_call(family_server):
    """LangChain's ``bind_tools(tool_choice="auto")`` reads the family's call back as
    ``AIMessage.tool_calls`` (the trigger favoured, as above)."""
    from langchain_openai import ChatOpenAI

    client = family_server.client
    chat = ChatOpenAI(
        base_url=str(client.base_url),
        api_key=client.api_key,
        model=family_server.family,
        max_tokens=120,
        max_retries=0,
        logit_bias={int(k): v for k, v in family_server.trigger_bias(100).items()},
    )
    out = chat.bind_tools(TOOLS, tool_choice="auto").invoke(USER[0]["content"])
    assert out.response_metadata["finish_reason"] == "tool_calls" and out.tool_calls
    for call in out.tool_calls:
        assert call["id"].startswith("call_")
        jsonschema.validate(call["args"], SCHEMAS[call["name"]])


def _split_choice(choice) -> tuple[str, list, str]:
    """One choice of a response: (content, tool calls, finish_reason), each checked alone."""
    calls = choice.message.tool_calls or []
    if choice.finish_reason == "tool_calls":
        _conform(calls)
    else:
        assert not calls
        assert choice.finish_reason in ("stop", "length")
    return choice.message.content or "", calls, choice.finish_reason


def _stream_choices(stream) -> dict[int, tuple[str, list, str]]:
    """Streamed chunks reassembled per choice index: (content, [(name, arguments)], finish)."""
    text: dict[int, str] = {}
    calls: dict[int, dict[int, list[str]]] = {}
    finish: dict[int, str] = {}
    for chunk in stream:
        for c in chunk.choices:
            assert c.index not in finish, "a delta after the choice finished"
            text[c.index] = text.get(c.index, "") + (c.delta.content or "")
            for tc in c.delta.tool_calls or []:
                name, args = calls.setdefault(c.index, {}).setdefault(tc.index, ["", ""])
                calls[c.index][tc.index] = [
                    name + (tc.function.name or ""),
                    args + (tc.function.arguments or ""),
                ]
            if c.finish_reason is not None:
                finish[c.index] = c.finish_reason
    return {
        i: (text.get(i, ""), [tuple(v) for _, v in sorted(calls.get(i, {}).items())], finish[i])
        for i in sorted(finish)
    }


def test_auto_with_n_choices_parses_each_choice_alone(family_server):
    """``n`` > 1 in ``auto``: the trigger and the end token are each made about as likely as
    all other tokens together (a bias of ln V on a random model's near-flat logits), so a
    choice calls when the trigger comes before the end (even odds): among 16 sampled choices
    some call and some answer text. Each is parsed alone, finishes with its own reason, and
    streaming gives the same choices under their own indexes."""
    tok = family_server.tokenizer
    even = math.log(len(tok))
    body = {
        "tool_choice": "auto",
        "n": 16,
        "seed": 7,
        "max_tokens": 80,
        "logit_bias": family_server.trigger_bias(even) | {str(tok.eos_token_id): even},
    }
    r = family_server.chat(**body)
    assert sorted(c.index for c in r.choices) == list(range(16))
    choices = {c.index: _split_choice(c) for c in r.choices}
    reasons = [finish for _, _, finish in choices.values()]
    assert "tool_calls" in reasons and {"stop", "length"} & set(reasons), reasons
    streamed = _stream_choices(family_server.chat(**body, stream=True))
    expected = {
        i: (text, [(c.function.name, c.function.arguments) for c in calls], finish)
        for i, (text, calls, finish) in choices.items()
    }
    assert streamed == expected


ANSWER = {  # the response format beside the tools; a set (uniqueItems: a decode-time check)
    "type": "object",
    "properties": {
        "city": {"type": "string", "maxLength": 12},
        "tags": {"type": "array", "items": {"type": "string", "maxLength": 8}, "uniqueItems": True,
                 "maxItems": 3},
    },
    "required": ["city", "tags"],
}  # fmt: skip
ANSWER_FORMAT = {"type": "json_schema", "json_schema": {"name": "answer", "schema": ANSWER}}


def _branch_bias(server: FamilyServer, branch: str) -> dict[str, float]:
    """``logit_bias`` that takes ``branch`` in ``auto`` with a response format: for the trigger
    (``calls``) or a code block's backticks (``fence``), or against every token that writes the
    first letter of either; in ``llama3_json`` both branches open a JSON object and the first
    key decides (the call's ``name``, or any key of the answer)."""
    tok = server.tokenizer
    if branch == "calls" and server.family == "llama3_json":
        (token,) = tok("name", add_special_tokens=False).input_ids
        return {str(token): 100}
    if branch == "calls":
        return server.trigger_bias(100)
    if branch == "fence":
        (token,) = tok("```", add_special_tokens=False).input_ids
        return {str(token): 100}
    start = '{"name"' if server.family == "llama3_json" else FAMILIES[server.family].trigger
    letter = start.index("n") if server.family == "llama3_json" else 0
    starts = [start, detect_format(tok).fence]  # a code block is a call too
    banned = {
        i
        for text, i in tok.get_vocab().items()
        for first in filter(None, starts)
        for k in range(letter + 1)
        if first[k:].startswith(text) and len(text) > letter - k
    }
    return {str(t): -100 for t in banned}


def test_auto_with_a_response_format_calls(family_server):
    choice = family_server.chat(
        tool_choice="auto", response_format=ANSWER_FORMAT, parallel_tool_calls=False,
        logit_bias=_branch_bias(family_server, "calls"),
    ).choices[0]  # fmt: skip
    assert choice.finish_reason == "tool_calls" and len(choice.message.tool_calls) == 1
    _conform(choice.message.tool_calls)
    assert not choice.message.content


def test_auto_with_a_response_format_calls_in_a_code_block(family_server):
    """Hermes beside a response format: a call written as a ```` ```json ```` code block (how
    Qwen2.5-Coder writes its calls) is constrained as the tags' call and parsed into
    ``tool_calls``, streamed alike."""
    if family_server.family != "hermes":
        pytest.skip(f"{family_server.family} has no code-block calls")
    body = {
        "tool_choice": "auto",
        "response_format": ANSWER_FORMAT,
        "logit_bias": _branch_bias(family_server, "fence"),
        "temperature": 0,
    }
    choice = family_server.chat(**body).choices[0]
    assert choice.finish_reason == "tool_calls" and not choice.message.content
    _conform(choice.message.tool_calls)
    streamed = _stream_choices(family_server.chat(**body, stream=True))
    calls = [(c.function.name, c.function.arguments) for c in choice.message.tool_calls]
    assert streamed == {0: ("", calls, "tool_calls")}


def test_auto_with_a_response_format_answers_and_streams(family_server):
    body = {
        "tool_choice": "auto",
        "response_format": ANSWER_FORMAT,
        "logit_bias": _branch_bias(family_server, "answer"),
        "temperature": 0,
    }
    choice = family_server.chat(**body).choices[0]
    assert choice.finish_reason == "stop" and not choice.message.tool_calls
    jsonschema.validate(json.loads(choice.message.content), ANSWER)
    streamed = _stream_choices(family_server.chat(**body, stream=True))
    assert streamed == {0: (choice.message.content, [], "stop")}


def test_history_renders_in_the_family_syntax(family_server):
    from stencil.api.model_info import ModelInfo
    from stencil.api.openai.convert import convert_chat
    from stencil.api.openai.protocol import ChatCompletionRequest
    from stencil.api.tools.calls import new_call_id

    family, tok = family_server.family, family_server.tokenizer
    if family == "gemma2":
        pytest.skip("Gemma 2's template takes alternating user/model turns only: no tool turn")
    call_id = new_call_id()  # what this server hands out: "call_" + 24 characters
    call = {"id": call_id, "type": "function"}
    call["function"] = {"name": "add", "arguments": '{"a": 2, "b": 3}'}
    messages = [
        *USER,
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": call_id, "content": "5"},
    ]
    req = ChatCompletionRequest(model="m", messages=messages, tools=TOOLS)
    text = convert_chat(req, ModelInfo(tok, 4096, len(tok))).prompt_text
    args = "parameters" if family == "llama3_json" else "arguments"
    assert f'{{"name": "add", "{args}": {{"a": 2, "b": 3}}' in text
    assert "get_weather" in text  # the tools, rendered by the template itself
    if detect_format(tok).name == "phi4_mini":  # the tools as JSON in the system's ``tools``
        assert '<|system|><|tool|>[{"name": "get_weather"' in text
    if family == "mistral":  # Mistral's template takes 9-character ids only
        assert f'"id": "{call_id[-9:]}"' in text and f'"call_id": "{call_id[-9:]}"' in text


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
        ("granite", '<|tool_call|>[{"name": "f", "arguments": {"x": 1}}, {"name": "g", '
         '"arguments": {}}]', "", [("f", {"x": 1}), ("g", {})]),
        ("phi4_mini", 'functools[{"name": "f", "arguments": {"x": "a"}}]', "", [("f", {"x": "a"})]),
        ("phi4_mini", "functools[{", None, None),
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


@pytest.mark.parametrize(
    ("text", "fenced", "calls"),
    [
        ('```json\n{"name": "f", "arguments": {"x": 1}}\n```', True, [("f", {"x": 1})]),
        ('```json\n{\n  "name": "f",\n  "arguments": {}\n}\n```\n```json\n{"name": "g", '
         '"arguments": {"y": [2]}}\n```', True, [("f", {}), ("g", {"y": [2]})]),
        ('```json\n{"name": "f", "arguments": {"x": 1}}\n```', False, None),  # text, no format
        ('```json\n{"name": "f", "argu', True, None),
        ('```json\n{"name": "h", "arguments": {}}\n```', True, None),  # not a tool offered
        ('{"name": "f", "arguments": {}}', True, None),  # bare JSON: the answer
    ],
)  # fmt: skip
def test_parse_a_call_in_a_code_block(text, fenced, calls):
    content, got = FORMATS["hermes"].parse(text, names=("f", "g"), fenced=fenced)
    if calls is None:
        assert got is None and content == text
    else:
        assert content == "" and [(c["name"], c["arguments"]) for c in got] == calls


@pytest.mark.parametrize(
    ("text", "fenced", "safe", "started"),
    [
        ("`", True, "", True),
        ('```json\n{"na', True, "", True),
        ('{"city', True, '{"city', False),
        ("```json", False, "```json", False),
    ],
)
def test_split_a_code_block_beside_an_answer(text, fenced, safe, started):
    assert FORMATS["hermes"].split(text, fenced=fenced) == (safe, started)
