"""Differential exactness: valid instances of a schema must be accepted, invalid ones refused.

Instances come from a test suite's own cases, the schema's ``examples`` / ``default`` and a
schema-driven generator (schemathesis's JSON Schema strategies over hypothesis, derandomized);
``jsonschema`` (the schema's draft, formats asserted) decides which are valid. Each is written
in two separator styles and walked through the matcher. Object keys are placed by a search
(Stencil generates properties in declared order, so the order is the grammar's to choose: an
instance is accepted when some key order is), then the text found is re-tokenized canonically
and walked token by token, each token checked against the mask too.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import jsonschema
import jsonschema_rs
from constraint_helpers import canonical, schema_ordered

from stencil.constraints import (
    CompiledConstraint,
    Constraint,
    ConstraintCompiler,
    ConstraintError,
    Matcher,
    allocate_token_bitmask,
)

STYLES = {"default": (", ", ": "), "compact": (",", ":")}
"""Separator style (``json.dumps``'s default and compact) -> (item, key separator)."""
SEARCH_FEEDS = 600  # pieces fed per instance beyond its own count before the search gives up


def dumps_scalar(value: Any) -> str:
    """JSON text of a scalar or key, non-ASCII raw; a DEL (U+007F) is written escaped:
    llguidance's string lexeme refuses it raw (a documented departure)."""
    return json.dumps(value, ensure_ascii=False).replace("\x7f", "\\u007f")


class Oracle:
    """Two validators, the schema's draft, formats asserted: ``jsonschema`` (Python ``re``) and
    ``jsonschema_rs`` (ECMA-262 classes: ``\\s`` is not ``\\x1f``). An instance on which they
    disagree is left out (``None``): JSON Schema patterns are ECMA-262, and Python's ``re``
    differs from it on ``\\s``, ``\\d``, ``\\w`` over non-ASCII text."""

    def __init__(self, schema: Any):
        cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
        self.py = cls(schema, format_checker=cls.FORMAT_CHECKER)
        try:
            self.rs = jsonschema_rs.validator_for(schema, validate_formats=True)
        except Exception:  # noqa: BLE001 - a schema the Rust validator cannot build
            self.rs = None

    def __call__(self, value: Any) -> bool | None:
        try:
            verdict = self.py.is_valid(value)
        except Exception:  # noqa: BLE001 - the Python oracle cannot decide
            return None
        if self.rs is None:
            return verdict
        try:
            return verdict if self.rs.is_valid(value) == verdict else None
        except Exception:  # noqa: BLE001
            return None


def generated(schema: Any, count: int) -> list[Any]:
    """Up to ``count`` instances drawn (derandomized) from schemathesis's strategy; [] when
    it cannot model the schema."""
    from hypothesis import HealthCheck, Phase, given, settings
    from schemathesis.generation.jsonschema.builder import build

    draft = {4: 4, 6: 6, 7: 7}.get(draft_of(schema), 20)
    out: list[Any] = []
    try:
        strategy = build(schema, draft=draft, formats={})

        @settings(
            max_examples=count,
            derandomize=True,
            database=None,
            deadline=None,
            suppress_health_check=list(HealthCheck),
            phases=[Phase.generate],
        )
        @given(strategy)
        def draw(value: Any) -> None:
            out.append(value)

        draw()
    except Exception:  # noqa: BLE001 - the generator's own limits; its draws so far are kept
        pass
    return out


def draft_of(schema: Any) -> int:
    uri = schema.get("$schema", "") if isinstance(schema, dict) else ""
    for draft in (4, 6, 7):
        if f"draft-0{draft}" in uri:
            return draft
    return 2020


def mutants(value: Any) -> list[Any]:
    """Small edits of a valid instance, mostly invalid: a key dropped, a key added, a leaf of
    another type, an item dropped or repeated."""
    out: list[Any] = []
    if isinstance(value, dict):
        for key in list(value)[:2]:
            out.append({k: v for k, v in value.items() if k != key})
        out.append({**value, "zz_undeclared": 0})
        for key in list(value)[:2]:
            out += [{**value, key: m} for m in mutants(value[key])[:2]]
    elif isinstance(value, list):
        if value:
            out += [value[1:], [*value, value[0]]]
            out += [[m, *value[1:]] for m in mutants(value[0])[:2]]
    elif isinstance(value, bool) or value is None:
        out.append("x")
    elif isinstance(value, (int, float)):
        out += [str(value), value + 1, -value - 0.5]
    elif isinstance(value, str):
        out += [1, value + "~", value[:-1]]
    return out


def instances(schema: Any, cases: list[dict], generate: int) -> tuple[list[Any], list[Any]]:
    """``(valid, invalid)`` instances, each decided by the oracle, duplicates dropped."""
    check = Oracle(schema)
    pool = [c["data"] for c in cases]
    if isinstance(schema, dict):
        examples = schema.get("examples")
        pool += examples if isinstance(examples, list) else []
        pool += [schema["default"]] if "default" in schema else []
    pool += generated(schema, generate) if generate else []
    valid: dict[str, Any] = {}
    invalid: dict[str, Any] = {}
    for value in pool:
        verdict = check(value)
        if verdict is not None:
            (valid if verdict else invalid).setdefault(_key(value), value)
    for value in list(valid.values()):
        for m in mutants(value):
            if check(m) is False:
                invalid.setdefault(_key(m), m)
    return list(valid.values()), list(invalid.values())


def _key(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


@dataclass
class Verdict:
    accepted: bool
    text: str = ""
    """The serialization the search found (accepted) or the longest prefix it got to."""
    reason: str = ""
    feeds: int = field(default=0, repr=False)


class _Search:
    """Feed a value piece by piece (each piece tokenized alone), choosing object key orders by
    depth-first search with ``rollback``."""

    def __init__(
        self, compiled: CompiledConstraint, tokenizer: Any, style: str, budget: int, declared: set
    ):
        self.item_sep, self.key_sep = STYLES[style]
        self.matcher: Matcher = compiled.new_matcher()
        self.tokenizer = tokenizer
        self.pieces: list[str] = []
        self.best = ""
        self.feeds = 0
        self.budget = budget
        self.declared = declared

    def feed(self, text: str) -> int | None:
        self.feeds += 1
        if self.feeds > self.budget:
            raise _Exhausted
        tokens = self.tokenizer.encode(text, add_special_tokens=False)
        for i, token in enumerate(tokens):
            if not self.matcher.accept_token(token):
                self.matcher.rollback(i)
                return None
        self.pieces.append(text)
        if len("".join(self.pieces)) > len(self.best):
            self.best = "".join(self.pieces)
        return len(tokens)

    def undo(self, num_tokens: int, num_pieces: int) -> None:
        self.matcher.rollback(num_tokens)
        del self.pieces[len(self.pieces) - num_pieces :]

    def emit(self, value: Any) -> int | None:
        if isinstance(value, dict):
            return self._object(value)
        if isinstance(value, list):
            return self._array(value)
        got = self.feed(dumps_scalar(value))
        if got is None and isinstance(value, float) and "e" in repr(value):
            # bounded numbers are generated without an exponent (a documented departure)
            got = self.feed(format(Decimal(repr(value)), "f"))
        return got

    def _array(self, items: list) -> int | None:
        mark = len(self.pieces)
        total = self.feed("[")
        if total is None:
            return None
        for i, item in enumerate(items):
            step = self.feed(self.item_sep) if i else 0
            got = self.emit(item) if step is not None else None
            if got is None:
                self.undo(total + (step or 0), len(self.pieces) - mark)
                return None
            total += step + got
        end = self.feed("]")
        if end is None:
            self.undo(total, len(self.pieces) - mark)
            return None
        return total + end

    def _object(self, obj: dict) -> int | None:
        opened = self.feed("{")
        if opened is None:
            return None
        rest = self._place(obj, list(obj), first=True)
        if rest is None:
            self.undo(opened, 1)
            return None
        return opened + rest

    def _place(self, obj: dict, remaining: list[str], first: bool) -> int | None:
        if not remaining:
            return self.feed("}")
        # the grammar places undeclared keys after the declared ones: try those first
        for key in [k for k in remaining if k in self.declared] or remaining:
            mark = len(self.pieces)
            head = ("" if first else self.item_sep) + dumps_scalar(key)
            used = self.feed(head + self.key_sep)
            if used is None:
                continue
            got = self.emit(obj[key])
            rest = (
                self._place(obj, [k for k in remaining if k != key], False)
                if got is not None
                else None
            )
            if rest is not None:
                return used + got + rest
            self.undo(used + (got or 0), len(self.pieces) - mark)
        return None


class _Exhausted(Exception):
    pass


def verdict(
    compiled: CompiledConstraint, tokenizer: Any, value: Any, style: str, schema: Any = None
) -> Verdict:
    """Whether the matcher accepts ``value`` written in ``style`` (some key order), as a whole
    canonical tokenization with every token in the mask, then EOS. ``schema``'s declared
    property names guide the key-order search (undeclared keys are tried last)."""
    budget = SEARCH_FEEDS + 4 * _size(value)
    search = _Search(compiled, tokenizer, style, budget, _declared(schema))
    try:
        found = search.emit(value)
    except _Exhausted:
        return Verdict(False, search.best, "key-order search budget", search.feeds)
    if found is None:
        return Verdict(False, search.best, "refused", search.feeds)
    text = "".join(search.pieces)
    reason = _walk_canonical(compiled, tokenizer, text)
    return Verdict(not reason, text, reason, search.feeds)


@dataclass
class Outcome:
    """What ``run_differential`` saw: schema names compiled / refused / crashed, one name per
    valid (per style) and invalid instance checked, and the wrong verdicts."""

    compiled: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    crashes: list[str] = field(default_factory=list)
    valid: list[str] = field(default_factory=list)
    invalid: list[str] = field(default_factory=list)
    false_rejections: list[str] = field(default_factory=list)
    false_acceptances: list[str] = field(default_factory=list)


def run_differential(
    cases: list[tuple[str, Any, list[dict]]],
    compiler: ConstraintCompiler,
    tokenizer: Any,
    generate: int,
    departures: tuple[str, ...] = (),
) -> Outcome:
    """Compile each ``(name, schema, tests)`` case (exact semantics) and check its instances
    (``instances``: ``generate`` drawn per schema); a valid one refused is a false rejection
    unless ``name`` starts with one of ``departures``."""
    out = Outcome()
    for name, schema, tests in cases:
        try:
            compiled = compiler.compile(
                Constraint.json_schema(schema, allow_undeclared_properties=True)
            )
        except ConstraintError as exc:
            out.refused.append(f"{name}: {type(exc).__name__}")
            continue
        except Exception as exc:  # noqa: BLE001 - anything else is a crash to report
            out.crashes.append(f"{name}: {exc!r}")
            continue
        out.compiled.append(name)
        valid, invalid = instances(schema, tests, generate)
        for value in valid:
            value = ordered(value, schema, draft_of(schema))
            for style in STYLES:
                out.valid.append(name)
                result = verdict(compiled, tokenizer, value, style, schema)
                if not result.accepted and not name.startswith(departures):
                    out.false_rejections.append(
                        f"{name} [{style}] {result.reason}: {result.text[-120:]!r}"
                    )
        for value in invalid:
            out.invalid.append(name)
            if verdict(compiled, tokenizer, value, "default", schema).accepted:
                out.false_acceptances.append(f"{name}: {str(value)[:160]}")
    return out


def _size(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + sum(1 + _size(v) for v in value.values())
    if isinstance(value, list):
        return 1 + sum(_size(v) for v in value)
    return 1


def _walk_canonical(compiled: CompiledConstraint, tokenizer: Any, text: str) -> str:
    """ "" when every canonical token of ``text`` is in the mask and accepted, then EOS."""
    vocab = compiled.vocab
    matcher = compiled.new_matcher()
    mask = allocate_token_bitmask(1, vocab.vocab_size)
    tokens = tokenizer.encode(text, add_special_tokens=False)
    for i, token in enumerate([*tokens, vocab.eos_token_ids[0]]):
        matcher.fill_next_token_bitmask(mask, 0)
        if not (int(mask[0, token >> 5]) >> (token & 31)) & 1:
            return f"canonical token {i} ({vocab.token_bytes(token)!r}) not in the mask"
        if not matcher.accept_token(token):
            return f"canonical token {i} ({vocab.token_bytes(token)!r}) refused"
    return ""


def ordered(value: Any, schema: Any, draft: int) -> Any:
    """The value as a generator writes it (the search's first try): keys in schema order,
    then keys declared anywhere in the schema (another branch's, a ``$ref``'s), then the
    undeclared ones; integral floats as integers where the draft counts them as integers."""
    value = _declared_first(schema_ordered(value, schema, schema), _declared(schema))
    return canonical(value) if draft >= 6 else value


def _declared(schema: Any) -> set[str]:
    names: set[str] = set()
    stack = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            props = node.get("properties")
            names |= set(props) if isinstance(props, dict) else set()
            stack += list(node.values())
        elif isinstance(node, list):
            stack += node
    return names


def _declared_first(value: Any, names: set[str]) -> Any:
    if isinstance(value, list):
        return [_declared_first(v, names) for v in value]
    if not isinstance(value, dict):
        return value
    keys = [k for k in value if k in names] + [k for k in value if k not in names]
    return {k: _declared_first(value[k], names) for k in keys}
