"""One request's walk through the server's conversion: every call into a function of
``stencil/api``, read with ``sys.setprofile``, as the sequence of files entered (consecutive
calls in one file are one visit). The path runs one way: each file is visited once, so the walk
never returns to a file it has left (``docs/server.md``, "How a request runs")."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from transformers import AutoTokenizer

import stencil
from stencil.api.model_info import ModelInfo
from stencil.api.openai.convert import convert_chat, convert_completion
from stencil.api.openai.protocol import ChatCompletionRequest, CompletionRequest
from stencil.api.responses_api.convert import to_turn
from stencil.api.responses_api.protocol import ResponsesRequest
from stencil.api.responses_api.surface import check_responses_surface
from stencil.engine.models.default_model import default_model_path

API = Path(stencil.__file__).parent / "api"
PERSON = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
SCHEMA_FORMAT = {"type": "json_schema", "json_schema": {"name": "p", "schema": PERSON}}
TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}
CALL = {"name": "get_weather", "arguments": '{"city": "Paris"}'}
HISTORY = [
    {"role": "system", "content": "be brief"},
    {"role": "user", "content": "weather in Paris?"},
    {"role": "assistant", "content": None, "tool_calls": [{"id": "call_1", "function": CALL}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "20C"},
    {"role": "user", "content": "and Rome?"},
]
USER = [{"role": "user", "content": "hi"}]
CHATS = {
    "plain": {"messages": USER, "temperature": 0, "stop": ["\n"]},
    "json schema": {"messages": USER, "response_format": SCHEMA_FORMAT},
    "guided regex": {"messages": USER, "guided_regex": "[a-z]+", "logprobs": True},
    "tools auto, past calls": {"messages": HISTORY, "tools": [TOOL]},
    "tools auto or the answer": {
        "messages": HISTORY,
        "tools": [TOOL],
        "response_format": SCHEMA_FORMAT,
    },
    "named tool": {
        "messages": HISTORY,
        "tools": [TOOL],
        "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
    },
}
COMPLETIONS = {
    "prompts": {"prompt": ["a", "b"], "guided_choice": ["x", "y"]},
    "token ids": {"prompt": [1, 2, 3], "echo": True},
}
RESPONSES = {
    "text format": {"input": "hi", "text": {"format": {"type": "json_schema", "schema": PERSON}}},
    "function tools": {
        "input": [{"role": "user", "content": "weather?"}],
        "tools": [{"type": "function", **TOOL["function"]}],
        "tool_choice": "required",
    },
}


def walk(fn: Callable[[], Any]) -> list[str]:
    """The files of ``stencil/api`` that ``fn`` enters, in order, one entry per visit."""
    visits: list[str] = []

    def profile(frame: Any, event: str, _arg: Any) -> None:
        path = Path(frame.f_code.co_filename)
        if event == "call" and path.is_relative_to(API):
            name = str(path.relative_to(API))
            if not visits or visits[-1] != name:
                visits.append(name)

    sys.setprofile(profile)
    try:
        fn()
    finally:
        sys.setprofile(None)
    return visits


@pytest.fixture(scope="module")
def model() -> ModelInfo:
    tok = AutoTokenizer.from_pretrained(str(default_model_path()))
    return ModelInfo(tok, 8192, 49152)


def _chat(body: dict[str, Any], model: ModelInfo) -> Callable[[], Any]:
    req = ChatCompletionRequest.model_validate(body)
    return lambda: convert_chat(req, model)


def _completion(body: dict[str, Any], model: ModelInfo) -> Callable[[], Any]:
    req = CompletionRequest.model_validate(body)
    return lambda: convert_completion(req, model)


def _response(body: dict[str, Any], model: ModelInfo) -> Callable[[], Any]:
    req = ResponsesRequest.model_validate(body)

    def route() -> None:  # as ``responses_api.routes`` does
        check_responses_surface(req)
        to_turn(req, [], model)

    return route


CASES = (
    [(f"chat: {k}", _chat, b) for k, b in CHATS.items()]
    + [(f"completion: {k}", _completion, b) for k, b in COMPLETIONS.items()]
    + [(f"responses: {k}", _response, b) for k, b in RESPONSES.items()]
)


@pytest.mark.parametrize(("case", "build", "body"), CASES, ids=[c[0] for c in CASES])
def test_the_walk_never_returns_to_a_file_it_left(case, build, body, model):
    visits = walk(build(body, model))
    returns = [f for i, f in enumerate(visits) if f in visits[:i]]
    assert visits, "the tracer saw no call into stencil/api"
    assert not returns, f"{case} returns to {returns}: " + " > ".join(visits)


def test_the_tracer_sees_a_return():
    """Guards the measure itself: a walk that goes back is reported as one."""
    from stencil.api.openai import messages, surface

    def back_and_forth() -> None:
        surface.check_completion_surface(CompletionRequest.model_validate({"prompt": "a"}))
        messages.content_text("a")
        surface.check_completion_surface(CompletionRequest.model_validate({"prompt": "b"}))

    visits = walk(back_and_forth)
    assert visits == ["openai/surface.py", "openai/messages.py", "openai/surface.py"]


if __name__ == "__main__":  # the figures of docs/server.md: visits, files, returns per case
    info = ModelInfo(AutoTokenizer.from_pretrained(str(default_model_path())), 8192, 49152)
    for case, build, body in CASES:
        v = walk(build(body, info))
        print(f"{case}: {len(v)} visits, {len(set(v))} files, {len(v) - len(set(v))} returns")
