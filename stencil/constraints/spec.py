"""``Constraint``: what a request asks the output to match. Validated eagerly and cheaply."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal

from . import json_schema, text_grammars
from .errors import ConstraintError
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
    """

    kind: Kind
    source: str
    """Canonical text of the user's input (schema JSON, regex, choice list, grammar)."""
    options: tuple[tuple[str, Any], ...] = ()
    llg_grammar: str = field(default="", repr=False, compare=False)
    warnings: tuple[str, ...] = field(default=(), repr=False, compare=False)

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
    ) -> Constraint:
        """JSON matching ``schema``. Objects with declared ``properties`` and no
        ``additionalProperties`` admit only the declared keys unless
        ``allow_undeclared_properties`` (exact JSON Schema semantics)."""
        if whitespace not in POLICIES:
            raise ConstraintError(f"whitespace must be one of {POLICIES}, not {whitespace!r}")
        if whitespace_pattern is not None:
            check_regex(whitespace_pattern, limits, "whitespace_pattern")
        loaded, text = document.load(schema, limits)
        prepared = json_schema.prepare(
            loaded,
            closed=not allow_undeclared_properties,
            guidance=guidance_options(whitespace, whitespace_pattern),
            limits=limits,
        )
        options = (
            ("allow_undeclared_properties", allow_undeclared_properties),
            ("whitespace", whitespace),
            ("whitespace_pattern", whitespace_pattern),
        )
        return cls("json", text, options, prepared.grammar, prepared.warnings)

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
        return cls("regex", pattern, (), text_grammars.regex_grammar(pattern, limits))

    @classmethod
    def choice(cls, choices: list[str], *, limits: Limits = DEFAULT_LIMITS) -> Constraint:
        """Exactly one of ``choices``."""
        grammar = text_grammars.choice_grammar(choices, limits)
        return cls("choice", json.dumps(list(choices), ensure_ascii=False), (), grammar)

    @classmethod
    def grammar(cls, text: str, *, limits: Limits = DEFAULT_LIMITS) -> Constraint:
        """Text derived from the ``start`` rule of a Lark grammar (GBNF ``root ::=`` grammars
        are translated to Lark)."""
        return cls("grammar", text, (), text_grammars.lark_grammar(text, limits))
