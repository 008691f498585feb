"""Parse, size-check and meta-validate a schema document before any translation."""

from __future__ import annotations

import json
import re
from itertools import accumulate
from typing import Any

import jsonschema
from jsonschema import validators

from ..errors import ConstraintTooLargeError, InvalidSchemaError
from ..limits import Limits
from .meta import fast_meta_validator

_DRAFTS = (
    ("draft-03", 3),
    ("draft-04", 4),
    ("draft-06", 6),
    ("draft-07", 7),
    ("2019-09", 2019),
    ("2020-12", 2020),
)
_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"')
_BRACKET = re.compile(r"[\[\]{}]")
_NESTING = {"[": 1, "{": 1, "]": -1, "}": -1}
_FAST_META = {
    cls: fast_meta_validator(cls)
    for cls in (jsonschema.Draft201909Validator, jsonschema.Draft202012Validator)
}


def load(schema: dict | str | bool, limits: Limits, *, shallow: bool = False) -> tuple[Any, str]:
    """``(document, canonical text)``; property order is kept (it is the generation order).

    ``shallow`` (constructing a Constraint) checks only size and nesting, in C speed, and leaves
    the walk over every node to the translation, which repeats ``load`` in full."""
    from_text = isinstance(schema, str)
    if from_text:
        _check_size(schema, limits)
        check_depth_text(schema, limits)
        try:
            schema = json.loads(schema)
        except json.JSONDecodeError as exc:
            raise InvalidSchemaError(f"not valid JSON: {exc}") from None
    if not isinstance(schema, dict | bool):
        raise InvalidSchemaError("a schema must be a JSON object or a boolean")
    if not shallow:
        check_depth(schema, limits)
    try:
        text = json.dumps(schema, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise InvalidSchemaError(f"not representable as JSON: {exc}") from None
    except RecursionError:
        raise _too_deep(limits) from None
    _check_size(text, limits)
    if shallow and not from_text:  # text input had its depth checked before parsing
        check_depth_text(text, limits)
    return schema, text


def _check_size(text: str, limits: Limits) -> None:
    if len(text) > limits.max_text_bytes or len(text.encode()) > limits.max_text_bytes:
        raise ConstraintTooLargeError("schema text is too large", "max_text_bytes")


def _too_deep(limits: Limits) -> ConstraintTooLargeError:
    return ConstraintTooLargeError(f"schema nested deeper than {limits.max_depth}", "max_depth")


def check_depth_text(text: str, limits: Limits) -> None:
    """Reject over-deep JSON text before the recursive parser sees it (strings removed by a
    regex, then a running sum over the brackets: no Python loop over every character)."""
    brackets = _BRACKET.findall(_STRING.sub("", text))
    if brackets and max(accumulate(map(_NESTING.__getitem__, brackets))) > limits.max_depth:
        raise _too_deep(limits)


def check_depth(document: Any, limits: Limits) -> None:
    """Iterative depth check (a 10,000-deep dict must not hit Python's recursion limit); the
    depth counts objects and arrays, as ``check_depth_text`` does."""
    stack: list[tuple[Any, int]] = [(document, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            children = node.values()
        elif isinstance(node, list):
            if len(node) > limits.max_enum:
                raise ConstraintTooLargeError(f"schema array of {len(node)} items", "max_enum")
            children = node
        else:
            continue
        if depth > limits.max_depth:
            raise _too_deep(limits)
        stack.extend((child, depth + 1) for child in children)


def draft_of(document: Any) -> int:
    """The draft a document declares in ``$schema`` (2020-12 when it declares none)."""
    declared = document.get("$schema", "") if isinstance(document, dict) else ""
    for marker, draft in _DRAFTS:
        if isinstance(declared, str) and marker in declared:
            return draft
    return 2020


def check_meta(document: Any, draft: int) -> int:
    """Validate against the declared draft's meta-schema; return the draft to interpret it by.

    A document without ``$schema`` that only fits draft-07 (``items`` as a list,
    ``definitions``) is read as draft-07.
    """
    cls = validators.validator_for(document, default=jsonschema.Draft202012Validator)
    fast = _FAST_META.get(cls)
    if fast is not None and all(_harmless(e) for e in fast.iter_errors(document)):
        return draft  # the same verdict as the dynamic meta-schema's, 5x sooner (see meta)
    errors = [e for e in cls(cls.META_SCHEMA).iter_errors(document) if not _harmless(e)]
    error = jsonschema.exceptions.best_match(errors)
    if error is None:
        return draft
    if draft == 2020 and "$schema" not in (document if isinstance(document, dict) else {}):
        if jsonschema.Draft7Validator(jsonschema.Draft7Validator.META_SCHEMA).is_valid(document):
            return 7
    where = "/" + "/".join(str(p) for p in error.absolute_path)
    raise InvalidSchemaError(f"not a valid JSON Schema: {error.message[:300]}", where)


def _harmless(error: jsonschema.exceptions.ValidationError) -> bool:
    """Duplicate ``enum`` / ``required`` / ``type`` entries: invalid per the meta-schema, but
    meaning the same as without the duplicates."""
    return (
        error.validator == "uniqueItems"
        and bool(error.absolute_path)
        and (error.absolute_path[-1] in ("enum", "required", "type"))
    )


def patterns(root: Any) -> list[str]:
    """Every ``pattern`` string and ``patternProperties`` key in the document (a superset of
    the patterns the translation checks: values that are not schemas may add some)."""
    out: list[str] = []
    stack = [root]
    while stack:
        node = stack.pop()
        if isinstance(node, list):
            stack.extend(node)
        elif isinstance(node, dict):
            if isinstance(node.get("pattern"), str):
                out.append(node["pattern"])
            if isinstance(node.get("patternProperties"), dict):
                out.extend(node["patternProperties"])
            stack.extend(node.values())
    return out
