"""Structured-output fields of a request -> one ``Constraint``.

A request may name its constraint in several ways (``response_format``, vLLM's ``guided_*``,
``structured_outputs``, and tools); this module lists every one it finds (so two are
a 400) and builds the one constraint, mapping ``ConstraintError`` to a 400 naming the field.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from stencil.api.errors import bad_request
from stencil.api.openai.protocol import (
    ResponseFormatJsonObject,
    ResponseFormatJsonSchema,
    SamplingFields,
)
from stencil.constraints import Constraint, ConstraintError


@dataclass(slots=True, frozen=True)
class Source:
    """One constraint named by a request: where (``param``), what kind, and its value."""

    param: str
    kind: str  # json | json_object | regex | choice | grammar | tool_calls | calls_or_answer
    value: Any = None


@dataclass(slots=True, frozen=True)
class Whitespace:
    """Whitespace options for JSON constraints, and the field that set them."""

    param: str
    pattern: str | None = None
    compact: bool = False
    allow_undeclared: bool = False


@dataclass(slots=True, frozen=True)
class Grounding:
    """``structured_outputs.source_text`` / ``ground_strings`` / ``ground_numbers`` /
    ``ground_dates`` (Stencil's extension)."""

    source_text: str | None = None
    ground_strings: bool = False
    ground_numbers: bool = False
    ground_dates: bool = False

    @classmethod
    def of(cls, req: SamplingFields) -> Grounding | None:
        so = req.structured_outputs
        if so is None:
            return None
        flags = {
            k: bool(getattr(so, k)) for k in ("ground_strings", "ground_numbers", "ground_dates")
        }
        if so.source_text is None and not any(flags.values()):
            return None
        if so.source_text is None:
            name = next(k for k, on in flags.items() if on)
            raise bad_request(
                f"structured_outputs.{name} needs structured_outputs.source_text",
                "structured_outputs.source_text",
            )
        return cls(so.source_text, **flags)


def collect_sources(req: SamplingFields) -> list[Source]:
    """Every constraint the request names in its structured-output fields, in a fixed order
    (a tool plan adds its own: ``convert``)."""
    out: list[Source] = []
    rf = req.response_format
    if isinstance(rf, ResponseFormatJsonObject):
        out.append(Source("response_format", "json_object"))
    elif isinstance(rf, ResponseFormatJsonSchema):
        if rf.json_schema.schema_ is None:
            raise bad_request(
                "response_format.json_schema.schema is required",
                "response_format.json_schema.schema",
            )
        out.append(Source("response_format.json_schema.schema", "json", rf.json_schema.schema_))
    for kind in ("json", "regex", "choice", "grammar"):
        value = getattr(req, f"guided_{kind}")
        if value is not None:
            out.append(Source(f"guided_{kind}", kind, value))
    so = req.structured_outputs
    if so is not None:
        for kind, value in (
            ("json", so.json_),
            ("regex", so.regex),
            ("choice", so.choice),
            ("grammar", so.grammar),
        ):
            if value is not None:
                out.append(Source(f"structured_outputs.{kind}", kind, value))
        if so.json_object:
            out.append(Source("structured_outputs.json_object", "json_object"))
    return out


def whitespace_options(req: SamplingFields) -> Whitespace | None:
    """The JSON whitespace options the request sets, or None."""
    so = req.structured_outputs
    so_pattern = so.whitespace_pattern if so else None
    if req.guided_whitespace_pattern is not None and so_pattern is not None:
        raise bad_request(
            "set guided_whitespace_pattern or structured_outputs.whitespace_pattern, not both",
            "guided_whitespace_pattern",
        )
    if req.guided_whitespace_pattern is not None:
        return Whitespace("guided_whitespace_pattern", pattern=req.guided_whitespace_pattern)
    compact = bool(so and so.disable_any_whitespace)
    undeclared = bool(so and so.disable_additional_properties is False)
    if so_pattern is not None and compact:
        raise bad_request(
            "whitespace_pattern and disable_any_whitespace contradict each other",
            "structured_outputs.whitespace_pattern",
        )
    if so_pattern is not None or compact or undeclared:
        param = (
            "structured_outputs.whitespace_pattern"
            if so_pattern is not None
            else "structured_outputs.disable_any_whitespace"
            if compact
            else "structured_outputs.disable_additional_properties"
        )
        return Whitespace(param, so_pattern, compact, undeclared)
    return None


def build_constraint(
    src: Source, ws: Whitespace | None, grounding: Grounding | None = None
) -> Constraint:
    """Construct the constraint (its cheap checks: type, size, nesting); any ConstraintError
    is a 400 on its field. The translation (schema -> grammar, regex and grammar parsing) is the
    engine's compile, which runs it in a killable worker within the compile budget before the
    request is scheduled, so no request can hold the event loop; its errors are 400s too."""
    if grounding is not None and src.kind != "json":
        raise bad_request(
            f"structured_outputs.source_text grounds JSON schemas, not {src.param}",
            "structured_outputs.source_text",
        )
    try:
        return _build(src, ws, grounding)
    except ConstraintError as e:
        raise bad_request(f"invalid {src.param}: {e}", src.param) from None
    except (ValueError, TypeError, RecursionError) as e:
        raise bad_request(f"invalid {src.param}: {e}", src.param) from None


def _build(src: Source, ws: Whitespace | None, grounding: Grounding | None) -> Constraint:
    if src.kind == "regex":
        return Constraint.regex(_text(src))
    if src.kind == "grammar":
        return Constraint.grammar(_text(src))
    if src.kind == "tool_calls":  # (lark, json_rules) written by tool_formats
        lark, rules = src.value
        return Constraint.grammar(lark, json_rules=rules)
    if src.kind == "calls_or_answer":  # tools in auto with a JSON answer format (convert)
        lark, rules, answer, calls_only, after = src.value
        return Constraint.calls_or_answer(
            lark,
            json_rules=rules,
            answer=_build(answer, ws, None),
            calls_only=calls_only,
            answer_after=after,
        )
    if src.kind == "choice":
        choices = src.value
        if not choices or not all(isinstance(c, str) for c in choices):
            raise bad_request(f"{src.param} must be a non-empty list of strings", src.param)
        return Constraint.choice(list(choices))
    if src.kind == "json_object" and ws is None:
        return Constraint.json_object()
    schema = {"type": "object"} if src.kind == "json_object" else _schema(src)
    kwargs: dict[str, Any] = {}
    if src.kind == "json_object" or (ws and ws.allow_undeclared):
        kwargs["allow_undeclared_properties"] = True
    if ws and ws.compact:
        kwargs["whitespace"] = "compact"
    elif ws and ws.pattern is not None:
        kwargs["whitespace"] = None
        kwargs["whitespace_pattern"] = ws.pattern
    if grounding is not None:
        kwargs["source_text"] = grounding.source_text
        kwargs["ground_strings"] = grounding.ground_strings
        kwargs["ground_numbers"] = grounding.ground_numbers
        kwargs["ground_dates"] = grounding.ground_dates
    return Constraint.json_schema(schema, **kwargs)


def _text(src: Source) -> str:
    if not isinstance(src.value, str) or not src.value:
        raise bad_request(f"{src.param} must be a non-empty string", src.param)
    return src.value


def _schema(src: Source) -> dict[str, Any] | bool:
    value = src.value
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as e:
            raise bad_request(f"{src.param} is not valid JSON: {e}", src.param) from None
    if not isinstance(value, dict | bool):
        raise bad_request(f"{src.param} must be a JSON Schema object", src.param)
    return value
