"""``Constraint``: what a request asks the output to match, as a plain frozen value.

Construction runs only the cheap checks (types, text sizes, JSON nesting). The translation
(JSON Schema -> grammar, grounding, regex and Lark parsing) is the compiler's first stage
(``translate``), run for every caller in the same place: the compiler's time- and
memory-bounded worker. ``ConstraintCompiler.validate`` surfaces its errors early.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal

from .errors import ConstraintError, ConstraintTooLargeError, InvalidGrammarError, InvalidRegexError
from .json_schema import document
from .limits import DEFAULT_LIMITS, Limits
from .llg.text_grammars import check_choices
from .llg.whitespace import POLICIES

Kind = Literal["json", "regex", "choice", "grammar"]
Whitespace = Literal["bounded", "compact"] | None


@dataclass(frozen=True, slots=True)
class Constraint:
    """A frozen constraint value. Build it with the class-method constructors.

    ``key`` is canonical (same constraint, same key) and is what compilers cache on;
    ``limits`` bound its checks and its translation."""

    kind: Kind
    source: str
    """Canonical text of the user's input (schema JSON, regex, choice list, grammar)."""
    options: tuple[tuple[str, Any], ...] = ()
    limits: Limits = field(default=DEFAULT_LIMITS, repr=False, compare=False)

    @property
    def key(self) -> str:
        opts = json.dumps(dict(self.options), sort_keys=True, separators=(",", ":"))
        return f"{self.kind}|{opts}|{self.source}"

    @classmethod
    def json_schema(
        cls,
        schema: dict | str | bool,
        *,
        allow_undeclared_properties: bool = False,
        whitespace: Whitespace = "bounded",
        whitespace_pattern: str | None = None,
        limits: Limits = DEFAULT_LIMITS,
        source_text: str | None = None,
        ground_strings: bool = False,
        ground_numbers: bool = False,
        ground_dates: bool = False,
    ) -> Constraint:
        """JSON matching ``schema``. Objects with declared ``properties`` and no
        ``additionalProperties`` admit only the declared keys unless
        ``allow_undeclared_properties`` (exact JSON Schema semantics).

        Grounding: with ``source_text``, every string subschema marked ``"x-grounded": true``
        (with ``ground_strings``, every string without ``format``, ``pattern``, ``enum`` or
        ``const``; ``format: email`` included) only admits a verbatim span of ``source_text``;
        with ``ground_numbers`` every free number is one that ``source_text`` states, with
        ``ground_dates`` every free ``format: date`` string one of the dates it states (normalized
        to ISO; left free when it states none or writes one ambiguously: see
        ``grounding.stated``)."""
        if whitespace not in POLICIES:
            raise ConstraintError(f"whitespace must be one of {POLICIES}, not {whitespace!r}")
        if whitespace_pattern is not None and not isinstance(whitespace_pattern, str):
            raise InvalidRegexError("whitespace_pattern must be a string")
        _, text = document.load(schema, limits, shallow=True)
        options: tuple[tuple[str, Any], ...] = (
            ("allow_undeclared_properties", allow_undeclared_properties),
            ("whitespace", whitespace),
            ("whitespace_pattern", whitespace_pattern),
        )
        if source_text is not None or ground_strings or ground_numbers or ground_dates:
            _check_grounding_source(source_text, limits)
            options += (
                ("source_text", source_text),
                ("ground_strings", ground_strings),
                ("ground_numbers", ground_numbers),
                ("ground_dates", ground_dates),
            )
        return cls("json", text, options, limits)

    @classmethod
    def json_object(
        cls, *, whitespace: Whitespace = "bounded", limits: Limits = DEFAULT_LIMITS
    ) -> Constraint:
        """Any JSON object (``response_format: {"type": "json_object"}``)."""
        return cls.json_schema(
            {"type": "object"},
            allow_undeclared_properties=True,
            whitespace=whitespace,
            limits=limits,
        )

    @classmethod
    def regex(cls, pattern: str, *, limits: Limits = DEFAULT_LIMITS) -> Constraint:
        """Text fully matching ``pattern`` (Rust ``regex`` syntax, the usual Perl-style subset)."""
        _check_text(pattern, limits.max_regex_bytes, "max_regex_bytes", InvalidRegexError)
        return cls("regex", pattern, (), limits)

    @classmethod
    def choice(cls, choices: list[str], *, limits: Limits = DEFAULT_LIMITS) -> Constraint:
        """Exactly one of ``choices``."""
        check_choices(choices, limits)
        return cls("choice", json.dumps(list(choices), ensure_ascii=False), (), limits)

    @classmethod
    def grammar(
        cls,
        text: str,
        *,
        json_rules: dict[str, Any] | str | None = None,
        limits: Limits = DEFAULT_LIMITS,
    ) -> Constraint:
        """Text derived from the ``start`` rule of a Lark grammar (GBNF ``root ::=`` grammars
        are translated to Lark).

        ``json_rules`` names rules the grammar uses but does not define, each a JSON Schema:
        each is translated as ``json_schema`` translates it (declared properties only, bounded
        whitespace) and joined to the grammar as ``name: %json {...}``."""
        options: tuple[tuple[str, Any], ...] = ()
        if isinstance(json_rules, str):  # the canonical text kept in ``options``
            json_rules = json.loads(json_rules)
        if json_rules:
            _check_rule_names(json_rules)
            ordered = {k: json_rules[k] for k in sorted(json_rules)}  # property order is kept
            options = (("json_rules", json.dumps(ordered, ensure_ascii=False)),)
        _check_text(text, limits.max_text_bytes, "max_text_bytes", InvalidGrammarError)
        for schema in (json_rules or {}).values():
            document.load(schema, limits, shallow=True)
        return cls("grammar", text, options, limits)

    @classmethod
    def calls_or_answer(
        cls,
        grammar: str,
        *,
        json_rules: dict[str, Any],
        answer: Constraint,
        calls_only: str,
        answer_after: int | None = None,
        limits: Limits = DEFAULT_LIMITS,
    ) -> Constraint:
        """A turn that ends in tool calls or in an answer (one grammar, one mask per step).

        ``grammar`` (Lark) derives the calls through its ``json_rules`` (as ``grammar`` takes
        them) and the answer through the rule ``answer``, which it uses but does not define:
        ``answer`` (a ``json_schema`` constraint) translated as ``json_schema`` translates it
        (its whitespace and declared-properties options). ``calls_only`` is the same grammar
        without the answer branch: where the schema has decode-time checks, a matcher follows
        it to tell the branches apart (the checks apply to the answer only). ``answer_after``:
        the answer begins after this (special) token, not at the start of the output (GPT-OSS's
        final channel)."""
        if answer.kind != "json" or "source_text" in dict(answer.options):
            raise ConstraintError("the answer of calls_or_answer must be an ungrounded JSON schema")
        base = cls.grammar(grammar, json_rules=json_rules, limits=limits)
        _check_text(calls_only, limits.max_text_bytes, "max_text_bytes", InvalidGrammarError)
        spec = {"source": answer.source, "options": dict(answer.options)}
        options = base.options + (
            ("answer", json.dumps(spec, ensure_ascii=False)),
            ("calls_only", calls_only),
            ("answer_after", answer_after),
        )
        return cls("grammar", grammar, options, limits)

    @property
    def answer(self) -> Constraint | None:
        """The JSON-schema branch of a ``calls_or_answer`` constraint (else None)."""
        spec = dict(self.options).get("answer")
        if spec is None:
            return None
        data = json.loads(spec)
        return Constraint("json", data["source"], tuple(data["options"].items()), self.limits)


def _check_rule_names(json_rules: object) -> None:
    if not isinstance(json_rules, dict) or not all(
        isinstance(k, str) and k.isidentifier() and k.islower() for k in json_rules
    ):
        raise InvalidGrammarError("json_rules must map lower-case rule names to JSON Schemas")


def _check_grounding_source(source_text: object, limits: Limits) -> None:
    if not isinstance(source_text, str):
        raise ConstraintError("grounding needs a source text (a string)")
    if len(source_text.encode("utf-8", "surrogatepass")) > limits.max_text_bytes:
        raise ConstraintTooLargeError("the grounding source text is too long", "max_text_bytes")


def _check_text(text: object, max_bytes: int, budget: str, error: type[ConstraintError]) -> None:
    """Type and size: what a regex or grammar is checked for when constructed."""
    if not isinstance(text, str):
        raise error("the constraint must be a string")
    if len(text.encode("utf-8", "surrogatepass")) > max_bytes:
        raise ConstraintTooLargeError("the constraint text is too long", budget)
