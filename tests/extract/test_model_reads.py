"""The model reads, rules assist: every field of the user's schema is asked (optional ones with
"not stated" as an answer, whatever labels the document prints), lists are kept as the document
states them, no prompt shows a value a model could copy, a base model gets a plain prompt, and
no grounded value is one the document does not state."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from stencil.extract.prompt import (
    DEFAULT_TEMPLATE,
    PromptTemplate,
    field_list,
    plain_prompt,
    record_line,
)
from stencil.extract.questions import (
    SYSTEM,
    USER,
    assemble,
    field_prefix,
    field_question,
    field_questions,
    narrow_schema,
)
from stencil.extract.regions import check_record
from stencil.extract.schema_library import list_schemas, resolve_schema

JOBS = {
    "type": "object",
    "properties": {
        "title": {"type": "string", "description": "The job title"},
        "company": {"type": "string", "description": "The hiring company"},
        "billing_contact": {"type": "string"},  # optional, no label in any lexicon
        "salary_min": {"type": "number", "description": "Lowest yearly salary"},
        "skills": {"type": "array", "items": {"type": "string"}},
        "start": {"type": "string", "pattern": "^[0-2][0-9]:[0-5][0-9]$"},
        "apply_by": {"type": "string", "format": "date"},
    },
    "required": ["title", "company"],
    "additionalProperties": False,
}
POSTING = """Data Engineer at Northwind Analytics (Denver)

Billing address: Initech LLC, 5 Elm St
You bring Python, Kafka and Terraform. Salary from $95k.
Interviews start at 9.30 am.
"""


def _asked(schema: dict) -> dict[str, dict[str, Any]]:
    """Each asked field -> its question's schema for the field."""
    return {q.key: q.schema["properties"][q.key] for q in field_questions(schema)}


def test_optional_fields_without_a_known_label_are_asked():
    asked = _asked(narrow_schema(JOBS, POSTING))
    assert {"billing_contact", "salary_min", "skills", "start"} <= set(asked)
    assert "apply_by" not in asked  # grounded: the posting states no date to copy
    assert asked["start"] == JOBS["properties"]["start"]  # 9.30 am: grounding reads 09:30


@pytest.mark.parametrize(
    ("schema", "doc"),
    [
        (resolve_schema("invoice")[1], "Plomberie Martin\nFacture F-7781\nMontant 1 234,56 €\n"),
        (resolve_schema("letter")[1], "Anna Berg\n\nDear Tom,\nthanks.\n"),
        (resolve_schema("receipt")[1], "Fresh Bakes\nCroissant 2.40\n4.50 paid\n"),
    ],
)
def test_every_field_is_asked_unless_grounding_leaves_nothing(schema, doc):
    asked = _asked(narrow_schema(schema, doc))
    left_out = set(schema["properties"]) - set(asked)
    for key in left_out:  # only fields of a kind the document never states
        sub = schema["properties"][key]
        assert sub.get("format") == "date" or "currency" in key, key


CV = "Ana Lima\nFarfetch, developer (2021 - now)\nBlip, web developer (2018 - 2021)\n"
JOBS_LIST = {
    "type": "array",
    "items": {
        "type": "object",
        "properties": {
            "employer": {"type": "string"},
            "from_year": {"type": ["integer", "null"]},
            "to_year": {"type": "integer", "description": "Leave out if still there"},
        },
        "required": ["employer"],
        "additionalProperties": False,
    },
}
_ITEMS = [  # a list's answer, whether its question's schema takes it
    ('{"jobs":[{"employer":"Farfetch","to_year":null}]}', True),  # an optional part: null
    ('{"jobs":[{"employer":"Blip","from_year":2018,"to_year":2021}]}', True),
    ('{"jobs":[{"employer":null,"to_year":2021}]}', False),  # a required part
    ('{"jobs":[{"employer":"Blip","to_year":"2021"}]}', False),
    ("{}", True),  # not stated
]


@pytest.fixture(scope="module")
def smol() -> tuple[Any, Any]:
    """The embedded model's tokenizer and a constraint compiler for its vocabulary."""
    from transformers import AutoTokenizer

    from stencil.constraints import ConstraintCompiler, TokenVocab
    from stencil.engine.models.default_model import default_model_path

    tokenizer = AutoTokenizer.from_pretrained(str(default_model_path()))
    return tokenizer, ConstraintCompiler(TokenVocab.from_hf(tokenizer))


@pytest.mark.parametrize(("answer", "taken"), _ITEMS)
def test_an_items_part_not_stated_is_null_in_the_answer(answer: str, taken: bool, smol):
    """A job still going on has no end year: the question's schema and its grounded
    constraint (the embedded model's vocabulary) take null for an optional part of a list's
    object items, never for a required one."""
    from stencil.constraints import Constraint

    q = field_question("jobs", JOBS_LIST, False)
    assert jsonschema.Draft202012Validator(q.schema).is_valid(json.loads(answer)) is taken
    constraint = Constraint.json_schema(
        q.schema, source_text=CV, ground_strings=True, ground_numbers=True, ground_dates=True
    )
    tokenizer, compiler = smol
    compiled = compiler.compile(constraint)
    matcher = compiled.new_matcher()
    tokens = tokenizer.encode(answer, add_special_tokens=False)
    eos = compiled.vocab.eos_token_ids[0]
    assert (all(matcher.accept_token(t) for t in tokens) and matcher.accept_token(eos)) is taken


def test_nulls_the_items_schema_does_not_allow_leave_the_item():
    schema = {"type": "object", "properties": {"jobs": JOBS_LIST}}
    answer = '{"jobs":[{"employer":"Farfetch","from_year":null,"to_year":null},{"employer":"Blip","to_year":2021}]}'
    data = assemble(schema, {"jobs": answer})
    assert data == {
        "jobs": [{"employer": "Farfetch", "from_year": None}, {"employer": "Blip", "to_year": 2021}]
    }  # from_year's schema allows null
    jsonschema.validate(data, schema)


def test_labels_neither_quoted_nor_imposed():
    doc = "ACME LTD\nSubtotal 1,580.00\nTotal due: £1,896.00\nThank you.\n"
    schema = {"type": "object", "properties": {"total": {"type": "number"}}}
    (q,) = field_questions(narrow_schema(schema, doc))
    assert "Total due" not in q.text and "1,896" not in q.text
    assert q.schema["properties"]["total"] == {"type": "number"}  # grounding: any stated number


def test_the_prefix_says_what_one_record_is():
    """The schema's own title and description (a paper's title is not its journal's)."""
    paper = {"title": "PaperMeta", "description": "Data from a paper's first page.", **JOBS}
    (_, user) = field_prefix([], True, paper, "p.txt", "DOC")
    assert user["content"].startswith("Record: PaperMeta: Data from a paper's first page.\n")
    (_, user) = field_prefix([], True, JOBS, "p.txt", "DOC")
    assert user["content"].startswith("Fields to extract:")


def test_a_question_keeps_the_kinds_its_siblings_claim():
    """A name asked apart from the email beside it never takes the address (as in one record)."""
    schema = {
        "type": "object",
        "properties": {"name": {"type": "string"}, "email": {"type": "string", "format": "email"}},
    }
    asked = {q.key: q.schema for q in field_questions(schema)}
    assert asked["name"]["x-claimed"] == ["email"]


def test_lists_of_strings_and_of_objects_without_numbers_are_kept():
    schema = {
        "type": "object",
        "properties": {
            "skills": {"type": "array", "items": {"type": "string"}},
            "jobs": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {"title": {"type": "string"}, "employer": {"type": "string"}},
                },
            },  # fmt: skip
        },
    }
    jobs = [{"title": "Data Engineer", "employer": "Northwind Analytics"}]
    data = {"skills": ["Python", "Kafka", "Python", "Terraform"], "jobs": jobs}
    assert check_record(schema, data, POSTING) == {
        "skills": ["Python", "Kafka", "Terraform"],  # a repeat the document does not repeat
        "jobs": jobs,
    }


# a JSON object written in a prompt: each must be one a model may give as its answer
_OBJECT = re.compile(r"\{[^{}\n]*\}")
_PLACEHOLDER = re.compile(
    r"^(value|string|number|integer|boolean|array|object|text|null\?|\.\.\.|…|<[^>]*>|"
    r"your .*|the .*|x+)$",
    re.IGNORECASE,
)


def _prompts() -> list[str]:
    """Every prompt text the templates give, rendered for each library schema's fields."""
    texts = [SYSTEM]
    for entry in list_schemas():
        schema = json.loads(entry.path.read_text())
        required = set(schema.get("required", ()))
        values = {"fields": field_list(schema), "document": "DOC", "filename": "f.txt"}
        texts += [m["content"] for m in PromptTemplate.parse(DEFAULT_TEMPLATE).messages(values)]
        texts.append(USER.format(record=record_line(schema), **values))
        for key, sub in schema["properties"].items():
            texts.append(field_question(key, sub, key in required).text)
            texts.append(field_question(key, sub, False).text)
    return texts


def test_no_prompt_shows_a_value_to_copy():
    texts = _prompts()
    assert len(texts) > 100
    for text in texts:
        for obj in _OBJECT.findall(text):
            value = json.loads(obj)  # a real JSON object, nothing left to fill in
            for v in value.values():
                assert v is None or not _PLACEHOLDER.match(str(v)), (obj, text)
        assert not re.search(r":\s*(value|\.\.\.|<\w+>)\b", text), text


def test_fields_of_a_kind_the_document_never_states():
    doc = "Team lunch next week, all welcome."
    schema = {
        "type": "object",
        "properties": {
            "date": {"type": "string", "format": "date"},
            "code": {"type": "string", "pattern": "^[A-Z]{2}-[0-9]+$"},
            "cost": {"type": "number"},
            "next": {"type": "string", "format": "date"},
            "ref": {"type": "string", "pattern": "^[A-Z]{2}-[0-9]+$"},
        },
        "required": ["date", "code", "cost"],
    }
    props = narrow_schema(schema, doc)["properties"]
    assert set(props) == {"date", "code", "cost"}  # optional, nothing to copy: absent
    stated = narrow_schema(schema, "On 2025-03-04, code AB-12 costs 4.50.")["properties"]
    assert set(stated) == set(schema["properties"])


def test_plain_prompt_for_a_base_model():
    messages = [{"role": "system", "content": "Sys."}, {"role": "user", "content": "Doc.\n"}]
    assert plain_prompt(messages) == "Sys.\n\nDoc.\n\nAnswer:"


@pytest.fixture(scope="module")
def base_model(tmp_path_factory) -> Path:
    import stencil
    from stencil.testing.tiny_dense import DENSE_BUILDERS, build_base_model

    config = DENSE_BUILDERS["gemma3"]()
    config.max_position_embeddings = 2048
    out = tmp_path_factory.mktemp("base") / "gemma3-base"
    return build_base_model(out, Path(stencil.default_model_path()), config)


def test_extract_runs_a_base_model_with_a_plain_prompt(base_model: Path, tmp_path: Path):
    from stencil.cli import build_parser
    from stencil.extract.command import run
    from stencil.testing.tiny_models import make_llm

    llm = make_llm(base_model, max_model_len=2048)
    assert not getattr(llm.get_tokenizer(), "chat_template", None)
    schema = {k: JOBS[k] for k in ("type", "required", "additionalProperties")}
    schema["properties"] = {k: JOBS["properties"][k] for k in ("title", "company", "skills")}
    (tmp_path / "schema.json").write_text(json.dumps(schema))
    (tmp_path / "posting.txt").write_text(POSTING)
    out = tmp_path / "out.jsonl"
    for flag in ("--per-field", "--no-per-field"):
        argv = ["extract", "--schema", str(tmp_path / "schema.json"), "--out", str(out),
                "--max-tokens", "24", "--overwrite", flag, str(tmp_path / "posting.txt")]  # fmt: skip
        run(build_parser().parse_args(argv), llm=llm)
        (record,) = [json.loads(line) for line in out.read_text().splitlines()]
        assert "chat template" not in str(record.get("error")), record
        if record["ok"]:  # random weights: a record, or a budget that ran out; never a crash
            jsonschema.validate(record["data"], schema)
            assert all(v in POSTING for v in record["data"].values() if isinstance(v, str))


@pytest.fixture(scope="module")
def llm() -> Any:
    from stencil import LLM

    return LLM(num_threads=2, max_model_len=1024, num_kv_blocks=512)


def _extract(llm: Any, schema: dict, doc: str, tmp_path: Path, ok: bool = True) -> dict[str, Any]:
    from stencil.cli import build_parser
    from stencil.extract.command import run

    (tmp_path / "schema.json").write_text(json.dumps(schema))
    (tmp_path / "doc.txt").write_text(doc, encoding="utf-8")
    out = tmp_path / "out.jsonl"
    argv = ["extract", "--schema", str(tmp_path / "schema.json"), "--out", str(out),
            "--max-tokens", "96", str(tmp_path / "doc.txt")]  # fmt: skip
    run(build_parser().parse_args(argv), llm=llm)
    (record,) = [json.loads(line) for line in out.read_text().splitlines()]
    assert record["ok"] is ok, record
    return record


def test_a_list_of_strings_is_filled_from_the_document(llm: Any, tmp_path: Path):
    schema = {
        "type": "object",
        "properties": {
            "skills": {
                "type": "array",
                "items": {"type": "string"},
                "description": "Programming languages and tools asked for",
            },  # fmt: skip
        },
        "required": ["skills"],
        "additionalProperties": False,
    }
    data = _extract(llm, schema, POSTING, tmp_path)["data"]
    # the listed tools are read (the 135M model may add a word of the document)
    assert len({"Python", "Kafka", "Terraform"} & set(data["skills"])) >= 2, data
    assert all(item in POSTING for item in data["skills"]), data


def test_a_time_is_one_the_document_states(llm: Any, tmp_path: Path):
    event = resolve_schema("event")[1]
    doc = "Sommerfest des Vereins\nam 14. Juni 2025 um 9.15 Uhr im Saal 20\n"
    record = _extract(llm, event, doc, tmp_path)
    assert record["data"].get("start_time", "09:15") == "09:15", record
    assert record["data"]["date"] == "2025-06-14"


@pytest.mark.parametrize("stated", [True, False])
def test_a_required_email_is_copied_or_the_record_says_it_is_not_stated(
    llm: Any, tmp_path: Path, stated: bool
):
    schema = {
        "type": "object",
        "properties": {"name": {"type": "string"}, "email": {"type": "string", "format": "email"}},
        "required": ["name", "email"],
        "additionalProperties": False,
    }
    doc = "Paid by Barbara Noether" + (", barbara.noether@example.com." if stated else ".")
    record = _extract(llm, schema, doc, tmp_path, ok=stated)
    if stated:
        assert record["data"]["email"] == "barbara.noether@example.com", record
    else:
        assert "no span of the source text is a(n) email" in record["error"], record
