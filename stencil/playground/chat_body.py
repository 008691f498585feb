"""The chat request the playground runs for one document: the prompt ``stencil extract`` writes
(its template and field list, the document cut to fit the context) and the constraint as the
OpenAI API takes it (``response_format``, or ``structured_outputs`` for grounding, regexes,
choice lists and Lark grammars). The page sends the body to ``/v1/chat/completions`` itself, or,
for a base model (no chat template), the same messages as one plain prompt to
``/v1/completions`` (``endpoint``)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from stencil.api.errors import bad_request
from stencil.extract.prompt import (
    DEFAULT_TEMPLATE,
    HFTokenCounter,
    PromptBuilder,
    PromptTemplate,
    plain_prompt,
)

KINDS = ("json", "regex", "choice", "grammar")
MAX_TOKENS = 1024
_CHAT_OVERHEAD_TOKENS = 32
_TEXT_TEMPLATE = "Answer from the document.\n---\nDocument ({filename}):\n{document}"


@dataclass(frozen=True, slots=True)
class RunSpec:
    """What the page asks for: a constraint of one kind, written as text, and one document."""

    kind: str
    spec: str  # JSON Schema text | a regex | one choice per line | a Lark grammar
    document: str = ""
    filename: str = "document.txt"
    grounding: bool = False
    max_tokens: int = 256

    @classmethod
    def read(cls, payload: Any) -> RunSpec:
        """The spec from a JSON body; 400 naming the field that is wrong."""
        if not isinstance(payload, dict):
            raise bad_request("the body must be a JSON object")
        kind = payload.get("kind", "json")
        if kind not in KINDS:
            raise bad_request(f"kind must be one of {', '.join(KINDS)}, got {kind!r}", "kind")
        fields = {"spec": str, "document": str, "filename": str, "grounding": bool}
        for name, typ in fields.items():
            if name in payload and not isinstance(payload[name], typ):
                raise bad_request(f"{name} must be a {typ.__name__}", name)
        max_tokens = payload.get("max_tokens", 256)
        if not isinstance(max_tokens, int) or not 1 <= max_tokens <= MAX_TOKENS:
            raise bad_request(f"max_tokens must be an integer in [1, {MAX_TOKENS}]", "max_tokens")
        known = {"kind", "max_tokens", *fields}
        unknown = sorted(set(payload) - known)
        if unknown:
            raise bad_request(f"unknown field {unknown[0]!r}", unknown[0])
        return cls(
            kind,
            payload.get("spec", ""),
            payload.get("document", ""),
            payload.get("filename") or "document.txt",
            bool(payload.get("grounding", False)),
            max_tokens,
        )


def chat_body(spec: RunSpec, tokenizer: Any, context: int) -> tuple[dict[str, Any], str, list[str]]:
    """(the chat completion body, the document as the model sees it, warnings)."""
    schema = parse_schema(spec.spec) if spec.kind == "json" else None
    prompt_schema = schema if isinstance(schema, dict) else {}
    template = PromptTemplate.parse(DEFAULT_TEMPLATE if spec.kind == "json" else _TEXT_TEMPLATE)
    counter = HFTokenCounter(tokenizer)
    builder = PromptBuilder(
        template,
        prompt_schema,
        "",
        spec.max_tokens,
        context,
        counter,
        lambda messages: sum(counter.count(m["content"]) for m in messages) + _CHAT_OVERHEAD_TOKENS,
    )
    try:
        prompt = builder.build(spec.filename, spec.document)
    except ValueError as e:
        raise bad_request(str(e), "max_tokens") from None
    chat = bool(getattr(tokenizer, "chat_template", None))
    body: dict[str, Any] = {
        **({"messages": prompt.messages} if chat else {"prompt": plain_prompt(prompt.messages)}),
        "max_tokens": spec.max_tokens,
        "temperature": 0,
        "stream": True,
        "stream_options": {"include_usage": True},
        **_constraint(spec, schema, prompt.document),
    }
    return body, prompt.document, prompt.warnings


def endpoint(body: dict[str, Any]) -> str:
    """Where the page sends ``body``: the chat endpoint, or completions for a plain prompt."""
    return "/v1/completions" if "prompt" in body else "/v1/chat/completions"


def parse_schema(text: str) -> Any:
    """The pasted schema as JSON; a 400 with line and column when it is not JSON."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise bad_request(
            f"the schema is not JSON: {e.msg} (line {e.lineno}, column {e.colno})", "schema"
        ) from None
    except RecursionError:
        raise bad_request("the schema is nested too deeply to read", "schema") from None


def _constraint(spec: RunSpec, schema: Any, document: str) -> dict[str, Any]:
    if spec.kind == "json" and spec.grounding:
        grounded = {
            "json": schema,
            "source_text": document,
            "ground_strings": True,
            "ground_numbers": True,
            "ground_dates": True,
            "disable_any_whitespace": True,
        }
        return {"structured_outputs": grounded}
    if spec.kind == "json":
        fmt = {"name": "playground", "schema": schema, "strict": True}
        return {"response_format": {"type": "json_schema", "json_schema": fmt}}
    if spec.kind == "choice":
        return {"structured_outputs": {"choice": [c for c in spec.spec.splitlines() if c]}}
    return {"structured_outputs": {spec.kind: spec.spec}}
