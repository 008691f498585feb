"""Pydantic validation errors -> one OpenAI-style message and the offending field (``param``)."""

from __future__ import annotations

import re

from pydantic import ValidationError

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# Union-member tags pydantic puts into error locations; they are not field names.
_TAGS = {
    "str",
    "int",
    "float",
    "bool",
    "list",
    "dict",
    "none",
    "system",
    "developer",
    "user",
    "assistant",
    "tool",
    "text",
    "json_object",
    "json_schema",
    "refusal",
    "function",
    "custom",
    "allowed_tools",
}
_TAGGED = {"messages", "response_format", "content", "input", "tools", "tool_choice"}


def describe_validation_error(e: ValidationError) -> tuple[str, str | None]:
    """A readable message listing every problem, and the first problem's field path."""
    errors = e.errors(include_url=False)
    unknown = [_param(err["loc"]) for err in errors if err["type"] == "extra_forbidden"]
    if unknown:
        names = ", ".join(dict.fromkeys(unknown))
        return (
            f"unsupported field(s): {names} (this server does not honour them; "
            "remove them from the request)",
            unknown[0],
        )
    parts, first = [], None
    for err in errors[:8]:
        param = _param(err["loc"])
        first = first or param
        parts.append(f"{param or 'body'}: {err['msg']}")
    return "; ".join(dict.fromkeys(parts)), first


def _param(loc: tuple[int | str, ...]) -> str:
    out: list[str] = []
    prev: int | str | None = None
    for item in loc:
        if isinstance(item, int):
            out.append(str(item))
        elif not _IDENT.match(item):
            continue  # e.g. "list[TextPart]", "function-after[...]": not a field, nor a tag's parent
        elif item in _TAGS and (prev in _TAGGED or isinstance(prev, int)):
            pass
        else:
            out.append(item)
        prev = item
    return ".".join(out)
