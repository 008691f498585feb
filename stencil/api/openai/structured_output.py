"""The structured-output fields of a request, read once into plain values.

A request may name its constraint in several ways (``response_format``, vLLM's ``guided_*``,
``structured_outputs``, and tools); this module lists every one it finds (``Source``: so two are
a 400 later), with the JSON whitespace options and the grounding text. ``openai.constraint``
builds the one constraint from them (after ``tools.constraint`` adds the tools' own).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from stencil.api.errors import bad_request
from stencil.api.openai.protocol import (
    ResponseFormatJsonObject,
    ResponseFormatJsonSchema,
    SamplingFields,
    StructuredOutputs,
)


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
    def of(cls, so: StructuredOutputs | None) -> Grounding | None:
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


@dataclass(slots=True, frozen=True)
class StructuredOutput:
    """What a request asks of its output's structure, as plain values."""

    sources: list[Source]
    whitespace: Whitespace | None
    grounding: Grounding | None


def structured_output(req: SamplingFields) -> StructuredOutput:
    """Read the request's structured-output fields (``response_format``, ``guided_*``,
    ``structured_outputs``) once."""
    so = req.structured_outputs
    return StructuredOutput(_sources(req), _whitespace(req), Grounding.of(so))


def _sources(req: SamplingFields) -> list[Source]:
    """Every constraint the request names in its structured-output fields, in a fixed order
    (a tool plan adds its own: ``tools.constraint``)."""
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


def _whitespace(req: SamplingFields) -> Whitespace | None:
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
