"""Stencil's grounding extension on the OpenAI surface: ``structured_outputs.source_text`` /
``ground_strings`` / ``ground_numbers`` / ``ground_dates`` become a grounded JSON constraint; every misuse is a 400 naming the field."""

from __future__ import annotations

import pytest
from transformers import AutoTokenizer

from stencil.api.errors import APIError
from stencil.api.model_info import ModelInfo
from stencil.api.openai.convert import convert_chat
from stencil.api.openai.protocol import ChatCompletionRequest
from stencil.constraints import translate
from stencil.engine.models.default_model import default_model_path

SCHEMA = {
    "type": "object",
    "properties": {"seller": {"type": "string", "x-grounded": True}},
    "required": ["seller"],
}
DOC = "From: Acme Cloud Services Ltd."


@pytest.fixture(scope="module")
def model() -> ModelInfo:
    tok = AutoTokenizer.from_pretrained(str(default_model_path()))
    return ModelInfo(tok, 8192, 49152)


def chat(model: ModelInfo, **body):
    body.setdefault("messages", [{"role": "user", "content": "extract"}])
    return convert_chat(ChatCompletionRequest.model_validate(body), model)


def test_source_text_grounds_the_schema(model):
    plan = chat(model, structured_outputs={"json": SCHEMA, "source_text": DOC})
    c = plan.params.constraint
    assert dict(c.options)["source_text"] == DOC
    t = translate(c)
    assert "GROUNDED_1" in t.grammar and t.spans  # co-matched over the source


def test_ground_strings_with_response_format(model):
    plain = {"type": "object", "properties": {"seller": {"type": "string"}}}
    plan = chat(
        model,
        response_format={"type": "json_schema", "json_schema": {"name": "x", "schema": plain}},
        structured_outputs={"source_text": DOC, "ground_strings": True},
    )
    assert translate(plan.params.constraint).spans  # the plain string is co-matched


def test_ground_numbers_and_dates_narrow_to_what_the_source_states(model):
    schema = {
        "type": "object",
        "properties": {"total": {"type": "number"}, "paid": {"type": "string", "format": "date"}},
    }
    so = {"json": schema, "source_text": "Paid 1,580.00 on 4 March 2024."}
    plan = chat(model, structured_outputs={**so, "ground_numbers": True, "ground_dates": True})
    c = plan.params.constraint
    assert dict(c.options)["ground_numbers"] and dict(c.options)["ground_dates"]
    grammar = translate(c).grammar
    assert "1580.0" in grammar and "2024-03-04" in grammar
    plain = translate(chat(model, structured_outputs=so).params.constraint)
    assert "2024-03-04" not in plain.grammar


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"structured_outputs": {"source_text": DOC}}, "structured_outputs.source_text"),
        ({"structured_outputs": {"ground_strings": True, "json": SCHEMA}},
         "structured_outputs.source_text"),
        ({"structured_outputs": {"ground_dates": True, "json": SCHEMA}},
         "structured_outputs.source_text"),
        ({"structured_outputs": {"regex": "a+", "source_text": DOC}},
         "structured_outputs.source_text"),
    ],
)  # fmt: skip
def test_misuse_is_a_400_naming_the_field(model, body, param):
    with pytest.raises(APIError) as info:
        chat(model, **body)
    assert info.value.status == 400 and info.value.param == param, info.value


def test_x_grounded_without_a_source_fails_the_compile():
    from stencil.constraints import Constraint, ConstraintError

    c = Constraint.json_schema(SCHEMA)  # what the server builds: the cheap checks pass
    with pytest.raises(ConstraintError, match="no source text"):
        translate(c)  # what the compile worker runs: a 400 for the request
