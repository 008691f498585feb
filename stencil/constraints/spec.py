"""``Constraint``: what a request asks the output to match. Validated eagerly and cheaply."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal

from . import grounding, json_schema, stated, text_grammars
from .errors import ConstraintError, ConstraintTooLargeError, InvalidGrammarError, InvalidRegexError
from .json_schema import document
from .limits import DEFAULT_LIMITS, Limits
from .regex_check import check_regex
from .whitespace import POLICIES, guidance_options

Kind = Literal["json", "regex", "choice", "grammar"]
Whitespace = Literal["bounded", "compact"] | None


@dataclass(frozen=True, slots=True)
class Constraint:
    """A frozen, validated constraint. Build it with the class-method constructors.

    ``key`` is canonical (same constraint, same key) and is what compilers cache on.
    ``llg_grammar`` is the llguidance grammar the compiler turns into token masks.

    ``defer=True`` (every constructor) runs only the cheap checks (type, text size, JSON
    nesting) now and leaves the translation (``llg_grammar`` empty) to the compiler, which
    then runs it inside its time- and memory-bounded compile worker: use it for untrusted
    input, whose translation can be slow. ``translated()`` runs it here.
    """

    kind: Kind
    source: str
    """Canonical text of the user's input (schema JSON, regex, choice list, grammar)."""
    options: tuple[tuple[str, Any], ...] = ()
    llg_grammar: str = field(default="", repr=False, compare=False)
    warnings: tuple[str, ...] = field(default=(), repr=False, compare=False)
    limits: Limits = field(default=DEFAULT_LIMITS, repr=False, compare=False)
    checks: tuple[tuple[str, str], ...] = field(default=(), repr=False, compare=False)
    """JSON schemas: ``(pointer, keyword)`` of the keywords checked as values complete."""
    draft: int = field(default=2020, repr=False, compare=False)
    """JSON schemas: the draft the schema is read by."""
    spans: tuple[bytes, ...] = field(default=(), repr=False, compare=False)
    """Grounded JSON: the marked text of each co-matched grounded string (``grounding``)."""

    @property
    def is_translated(self) -> bool:
        return bool(self.llg_grammar)

    def translated(self) -> Constraint:
        """This constraint with its ``llg_grammar`` (self if already translated); raises
        ConstraintError like the eager constructors."""
        if self.is_translated:
            return self
        opts, limits = dict(self.options), self.limits
        if self.kind == "json":
            return Constraint.json_schema(self.source, **opts, limits=limits)
        if self.kind == "regex":
            return Constraint.regex(self.source, limits=limits)
        if self.kind == "choice":
            return Constraint.choice(json.loads(self.source), limits=limits)
        return Constraint.grammar(self.source, **opts, limits=limits)

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
        defer: bool = False,
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
        to ISO; left free when it states none or writes one ambiguously: see ``stated``)."""
        if whitespace not in POLICIES:
            raise ConstraintError(f"whitespace must be one of {POLICIES}, not {whitespace!r}")
        if whitespace_pattern is not None and not defer:
            check_regex(whitespace_pattern, limits, "whitespace_pattern")
        loaded, text = document.load(schema, limits, shallow=defer)
        options = (
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
        elif not defer and grounding.uses_grounding(loaded):
            raise ConstraintError(
                "the schema marks strings x-grounded but no source text was given"
            )
        if defer:
            return cls("json", text, options, limits=limits)
        marked, grounded = loaded, 0
        if source_text is not None:
            marked, grounded = grounding.mark_grounded(
                loaded,
                ground_strings=ground_strings,
                numbers=stated.numbers_in(source_text) if ground_numbers else None,
                dates=stated.dates_in(source_text) if ground_dates else None,
            )
        try:
            prepared = json_schema.prepare(
                marked,
                closed=not allow_undeclared_properties,
                guidance=guidance_options(whitespace, whitespace_pattern),
                limits=limits,
            )
        except RecursionError:
            raise ConstraintTooLargeError(
                "schema nesting exceeds the translator's recursion depth", "max_depth"
            ) from None
        llg, spans = prepared.grammar, ()
        if grounded:
            lark, spans = grounding.grounded_lark(prepared.schema, source_text)
            llg = text_grammars.validated_lark(lark, limits, "grounded schema")
        return cls(
            "json",
            text,
            options,
            llg,
            prepared.warnings,
            limits,
            prepared.checks,
            prepared.draft,
            spans,
        )

    @classmethod
    def json_object(
        cls,
        *,
        whitespace: Whitespace = "bounded",
        limits: Limits = DEFAULT_LIMITS,
        defer: bool = False,
    ) -> Constraint:
        """Any JSON object (``response_format: {"type": "json_object"}``)."""
        return cls.json_schema(
            {"type": "object"},
            allow_undeclared_properties=True,
            whitespace=whitespace,
            limits=limits,
            defer=defer,
        )

    @classmethod
    def regex(
        cls, pattern: str, *, limits: Limits = DEFAULT_LIMITS, defer: bool = False
    ) -> Constraint:
        """Text fully matching ``pattern`` (Rust ``regex`` syntax, the usual Perl-style subset)."""
        if defer:
            _check_text(pattern, limits.max_regex_bytes, "max_regex_bytes", InvalidRegexError)
            return cls("regex", pattern, (), limits=limits)
        return cls("regex", pattern, (), text_grammars.regex_grammar(pattern, limits), (), limits)

    @classmethod
    def choice(
        cls, choices: list[str], *, limits: Limits = DEFAULT_LIMITS, defer: bool = False
    ) -> Constraint:
        """Exactly one of ``choices``."""
        if defer:
            text_grammars.check_choices(choices, limits)
            return cls("choice", _choice_source(choices), (), limits=limits)
        grammar = text_grammars.choice_grammar(choices, limits)
        return cls("choice", _choice_source(choices), (), grammar, (), limits)

    @classmethod
    def grammar(
        cls,
        text: str,
        *,
        json_rules: dict[str, Any] | str | None = None,
        limits: Limits = DEFAULT_LIMITS,
        defer: bool = False,
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
        if defer:
            _check_text(text, limits.max_text_bytes, "max_text_bytes", InvalidGrammarError)
            for schema in (json_rules or {}).values():
                document.load(schema, limits, shallow=True)
            return cls("grammar", text, options, limits=limits)
        rules = {name: _rule_schema(schema, limits) for name, schema in (json_rules or {}).items()}
        llg = text_grammars.lark_grammar(text, limits, rules)
        return cls("grammar", text, options, llg, (), limits)


def _check_rule_names(json_rules: object) -> None:
    if not isinstance(json_rules, dict) or not all(
        isinstance(k, str) and k.isidentifier() and k.islower() for k in json_rules
    ):
        raise InvalidGrammarError("json_rules must map lower-case rule names to JSON Schemas")


def _rule_schema(schema: Any, limits: Limits) -> dict[str, Any]:
    """One ``json_rules`` schema translated for llguidance's ``%json``."""
    loaded, _ = document.load(schema, limits)
    guidance = guidance_options("bounded", None)
    return json_schema.prepare(loaded, closed=True, guidance=guidance, limits=limits).schema


def _check_grounding_source(source_text: object, limits: Limits) -> None:
    if not isinstance(source_text, str):
        raise ConstraintError("grounding needs a source text (a string)")
    if len(source_text.encode("utf-8", "surrogatepass")) > limits.max_text_bytes:
        raise ConstraintTooLargeError("the grounding source text is too long", "max_text_bytes")


def _check_text(text: object, max_bytes: int, budget: str, error: type[ConstraintError]) -> None:
    """The checks a deferred regex / grammar gets at construction: type and size."""
    if not isinstance(text, str):
        raise error("the constraint must be a string")
    if len(text.encode("utf-8", "surrogatepass")) > max_bytes:
        raise ConstraintTooLargeError("the constraint text is too long", budget)


def _choice_source(choices: list[str]) -> str:
    return json.dumps(list(choices), ensure_ascii=False)
