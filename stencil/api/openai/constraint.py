"""A request's constraint sources (``structured_output``, ``tools.constraint``) -> at most one
``Constraint``: two sources are a 400, and so is every constraint the engine cannot build (a
``ConstraintError`` becomes a 400 naming the field)."""

from __future__ import annotations

import json
from typing import Any

from stencil.api.errors import bad_request
from stencil.api.openai.structured_output import Grounding, Source, Whitespace
from stencil.constraints import Constraint, ConstraintError


def single_constraint(
    sources: list[Source], ws: Whitespace | None, grounding: Grounding | None
) -> Constraint | None:
    """The one constraint ``sources`` name (None when none), with the whitespace options and
    grounding applied; a 400 for two, or for options without a JSON constraint to apply to."""
    if len(sources) > 1:
        names = " and ".join(s.param for s in sources)
        raise bad_request(
            f"only one structured-output constraint per request, got {names}", sources[1].param
        )
    if not sources:
        if ws:
            raise bad_request(
                "a whitespace option needs a JSON constraint (json schema or json object)",
                ws.param,
            )
        if grounding:
            raise bad_request(
                "structured_outputs.source_text needs a JSON schema to ground",
                "structured_outputs.source_text",
            )
        return None
    src = sources[0]
    if ws and src.kind not in ("json", "json_object", "calls_or_answer"):
        raise bad_request(f"{ws.param} applies only to JSON constraints", ws.param)
    return build_constraint(src, ws, grounding)


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
    if src.kind == "tool_calls":  # (lark, json_rules) written by tools.constraint
        lark, rules = src.value
        return Constraint.grammar(lark, json_rules=rules)
    if src.kind == "calls_or_answer":  # tools in auto with a JSON answer format
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
