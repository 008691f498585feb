"""Translate a JSON Schema into the subset llguidance enforces exactly, or raise.

Every keyword is enforced, rewritten into enforced keywords, accepted as an annotation, or
rejected with ``UnsupportedSchemaError(keyword, pointer)``: nothing is silently ignored.
``$ref`` targets are hoisted into ``$defs`` under generated names, so recursion is kept and
``$id`` / anchor / draft-specific resolution is done here, once.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..errors import ConstraintTooLargeError, InvalidSchemaError, UnsupportedSchemaError
from ..limits import Limits
from ..llg.regex_check import parsed_regexes
from . import document, logic, objects, recursion, refusals
from .approximate import Approximations
from .keywords import (
    ANNOTATIONS,
    ENFORCED,
    UNSUPPORTED,
)
from .presence import Presence, presence_of
from .productive import has_finite_instance
from .refs import DEFAULT_BASE, RefIndex, escape

Schema = dict[str, Any] | bool


@dataclass(slots=True)
class Normalized:
    schema: dict[str, Any]
    warnings: list[str] = field(default_factory=list)
    one_of_pointers: list[str] = field(default_factory=list)
    """``oneOf``s left to llguidance (not shown equivalent to an ``anyOf`` here)."""
    keyword_pointers: dict[str, str] = field(default_factory=dict)
    """First pointer of each keyword passed on, to name the place of a later llguidance error."""
    checks: list[tuple[str, str]] = field(default_factory=list)
    """``(node pointer, keyword)``: over-approximated in the grammar, checked at decode time."""
    def_pointers: dict[str, str] = field(default_factory=dict)
    """Generated ``$defs`` name -> pointer of the node it translates (to name llguidance's
    errors in the user's terms), and -> pointer of the first ``$ref`` to it (``ref_sites``)."""
    ref_sites: dict[str, str] = field(default_factory=dict)


class Normalizer(Approximations):
    """One use: ``Normalizer(root, ...).run()``."""

    def __init__(
        self,
        root: Any,
        *,
        draft: int,
        closed: bool,
        limits: Limits,
        loose_refs: bool = False,
        canonical_keys: bool = True,
    ) -> None:
        self.draft, self.closed, self.limits = draft, closed, limits
        self.canonical_keys = canonical_keys
        """Undeclared keys as a pattern every key matches (``objects.canonical_keys``)."""
        self.loose_refs = loose_refs
        """A ``$ref`` with sibling keywords becomes the ``$ref`` alone plus a decode-time check
        of the node (llguidance cannot intersect a recursive target with siblings); so do the
        other intersections with a ``$ref`` (``recursion``)."""
        self.index = RefIndex(root, id_key="id" if draft <= 4 else "$id").build()
        self.root = root
        self.defs: dict[str, Schema] = {}
        self.def_names: dict[tuple[str, bool], str] = {}
        self.out = Normalized(schema={})
        self.parsed_patterns = parsed_regexes(document.patterns(root), limits)
        """The document's patterns known to parse (one grammar build for all of them)."""
        self.presence = Presence()
        """What the next ``node`` call's instance satisfies whatever the node says (set for
        members of ``allOf`` / ``anyOf`` / ``oneOf`` only: the same instance)."""

    def run(self) -> Normalized:
        top = self.node(self.root, "", DEFAULT_BASE, in_all_of=False)
        if top is False:
            raise InvalidSchemaError("the schema is `false`: no instance is valid")
        top = {} if top is True else top
        if not has_finite_instance(top, self.defs):
            raise InvalidSchemaError("no finite instance: recursion through required values")
        if self.defs:
            top = {**top, "$defs": self.defs}
        self.out.schema = top
        return self.out

    # -- references -------------------------------------------------------------------------

    def lookup(self, ref: str) -> Schema | None:
        name = ref.rsplit("/", 1)[-1]
        value = self.defs.get(name)
        return None if value is None or value == {"$stencil_pending": True} else value

    def ref(self, ref: str, base: str, pointer: str, in_all_of: bool) -> str:
        target = self.index.resolve(ref, base, f"{pointer}/$ref")
        seen = {target.pointer}
        while isinstance(target.node, dict) and _pure_ref(target.node):
            inner_base = self.index.base_of(target.node, target.base)
            target = self.index.resolve(target.node["$ref"], inner_base, target.pointer)
            if target.pointer in seen:
                raise InvalidSchemaError(f"$ref cycle through {ref!r} derives no value", pointer)
            seen.add(target.pointer)
        key = (target.pointer, in_all_of)
        if key not in self.def_names:
            name = f"d{len(self.def_names)}"
            self.def_names[key] = name
            self.out.def_pointers[name] = target.pointer
            self.out.ref_sites[name] = f"{pointer}/$ref"
            self.defs[name] = {"$stencil_pending": True}
            self.defs[name] = self.node(target.node, target.pointer, target.base, in_all_of)
        return "#/$defs/" + self.def_names[key]

    # -- one schema node --------------------------------------------------------------------

    def node(self, schema: Any, ptr: str, base: str, in_all_of: bool) -> Schema:
        if isinstance(schema, bool):
            return schema
        if not isinstance(schema, dict):
            raise InvalidSchemaError("a schema must be an object or a boolean", ptr)
        base = self.index.base_of(schema, base)
        inherited, self.presence = self.presence, Presence()
        presence = inherited & presence_of(schema, lambda ref: self.raw(ref, base, ptr))
        out: dict[str, Any] = {}
        extra: list[Schema] = []
        if "$ref" in schema:
            target = self.ref(schema["$ref"], base, ptr, in_all_of)
            resolved = self.defs[target.rsplit("/", 1)[-1]]
            if resolved is False or (self.draft <= 7 and isinstance(resolved, bool)):
                return resolved  # inline: llguidance rejects refs to boolean schemas
            if resolved is not True:
                out["$ref"] = target
            if self.draft <= 7:
                return out  # siblings of $ref are ignored before 2019-09
            if (
                self.loose_refs
                and resolved is not True
                and any(k != "$ref" and k not in ANNOTATIONS for k in schema)
            ):
                for key, value in schema.items():  # still translated: errors surface
                    if key != "$ref":
                        self.keyword(key, value, schema, {}, [], ptr, base, presence)
                self.check(ptr, "$ref")
                return out
        for key, value in schema.items():
            if key != "$ref":
                self.keyword(key, value, schema, out, extra, ptr, base, presence)
        objects.close_object(schema, out, closed=self.closed, in_all_of=in_all_of)
        if "propertyNames" in schema:
            here = f"{ptr}/propertyNames"
            names = self.node(schema["propertyNames"], here, base, False)
            try:
                objects.property_names(schema, out, logic.deref(names, self.lookup), here)
            except UnsupportedSchemaError:
                self.check(ptr, "propertyNames")
        if schema.get("uniqueItems") is True and not _at_most_one_item(schema):
            self.unique_items(schema, out, ptr)
        objects.property_counts(out)
        if self.canonical_keys:
            objects.canonical_keys(schema, out)
        for key in objects.counts_left_to_check(out):
            self.check(ptr, key)
        if False in extra:
            return False
        if extra:
            out["allOf"] = [*out.get("allOf", []), *extra]
        if self.loose_refs:
            return recursion.loosened(out, schema, lambda keyword: self.check(ptr, keyword))
        return out

    def keyword(
        self,
        key: str,
        value: Any,
        schema: dict,
        out: dict,
        extra: list,
        ptr: str,
        base: str,
        presence: Presence,
    ) -> None:
        here = f"{ptr}/{escape(key)}"
        if key == "pattern":
            self.out.keyword_pointers.setdefault(key, here)
            self.string_pattern(value, out, extra, ptr)
        elif key in ENFORCED:
            self.enforced(key, value, schema, out, here)
        elif key in ANNOTATIONS or key in (
            "then",
            "else",
            "propertyNames",
            "minContains",
            "maxContains",
        ):
            return
        elif key in ("unevaluatedProperties", "unevaluatedItems"):
            self.unevaluated(key, value, schema, out, ptr, base)
        elif key in UNSUPPORTED:
            raise refusals.dynamic_ref(key, value, here, self.root)
        elif key == "patternProperties":
            self.out.keyword_pointers.setdefault(key, here)
            out[key] = self.pattern_properties(value, here, base)
        elif key == "properties":
            self.out.keyword_pointers.setdefault(key, here)
            out[key] = {
                k: self.node(v, f"{here}/{escape(k)}", base, False) for k, v in value.items()
            }
        elif key in ("additionalProperties", "additionalItems", "items"):
            self.items_like(key, value, schema, out, here, base)
        elif key == "prefixItems":
            out[key] = [self.node(v, f"{here}/{i}", base, False) for i, v in enumerate(value)]
        elif key in ("anyOf", "allOf"):
            sub = [
                self.member(presence, v, f"{here}/{i}", base, key == "allOf")
                for i, v in enumerate(value)
            ]
            self.applicator(key, sub, out, extra)
        elif key == "oneOf":
            self.one_of(value, out, _typing(schema), ptr, base, presence)
        elif key == "not":
            self.negation(value, extra, ptr, base)
        elif key == "contains":
            self.contains(value, schema, out, ptr, base)
        elif key in ("dependencies", "dependentRequired", "dependentSchemas"):
            for name, dep in value.items():
                dep_ptr = f"{here}/{escape(name)}"
                dep = dep if isinstance(dep, list) else self.node(dep, dep_ptr, base, True)
                extra.append(logic.dependency(name, dep))
        elif key == "format":
            self.format(value, out, extra, ptr)
        elif key == "uniqueItems":
            return  # after the other keywords (it reads ``items``)
        elif key == "if":
            self.conditional(schema, extra, ptr, base)
        else:
            self.out.warnings.append(f"unknown keyword {key!r} at {here!r} ignored (annotation)")

    def member(self, presence: Presence, schema: Any, ptr: str, base: str, in_all: bool):
        """``node`` of a subschema applying to the same instance as its parent."""
        self.presence = presence
        return self.node(schema, ptr, base, in_all)

    def raw(self, ref: str, base: str, pointer: str) -> Any:
        return self.index.resolve(ref, base, pointer).node

    def enforced(self, key: str, value: Any, schema: dict, out: dict, here: str) -> None:
        self.out.keyword_pointers.setdefault(key, here)
        if key in ("exclusiveMinimum", "exclusiveMaximum") and isinstance(value, bool):
            bound = "minimum" if key == "exclusiveMinimum" else "maximum"
            if value and bound in schema:  # draft-04 boolean form
                out[key] = schema[bound]
                out.pop(bound, None)
            return
        if key in ("minimum", "maximum") and schema.get("exclusiveM" + key[1:]) is True:
            return
        if key == "enum" and len(value) > self.limits.max_enum:
            raise ConstraintTooLargeError(f"enum at {here!r} has {len(value)} members", "max_enum")
        if (
            key in _MINIMUM_COUNTS
            and isinstance(value, int | float)
            and value > self.limits.max_repetition
        ):
            raise ConstraintTooLargeError(
                f"{key} {value} at {here!r} exceeds the repetition limit "
                f"{self.limits.max_repetition}",
                "max_repetition",
            )
        if key in _COUNTS and isinstance(value, float) and value.is_integer():
            value = int(value)
        out[key] = value

    def pattern_properties(self, value: dict, here: str, base: str) -> dict[str, Schema]:
        """Keys as ECMA patterns; two that read the same once rewritten (``\\d`` and
        ``[0-9]``) both apply to a key they match."""
        keys = [self.key_pattern(p, here) for p in value]
        out: dict[str, Schema] = {}
        for key, (pattern, sub) in zip(keys, value.items(), strict=True):
            sub = self.node(sub, f"{here}/{escape(pattern)}", base, False)
            out[key] = {"allOf": [out[key], sub]} if key in out else sub
        return out

    def items_like(
        self, key: str, value: Any, schema: dict, out: dict, here: str, base: str
    ) -> None:
        if key == "items" and isinstance(value, list):  # draft <= 2019-09 tuple form
            out["prefixItems"] = [
                self.node(v, f"{here}/{i}", base, False) for i, v in enumerate(value)
            ]
            return
        if key == "additionalItems":
            if isinstance(schema.get("items"), list):
                out["items"] = self.node(value, here, base, False)
            return  # without tuple-form items, additionalItems has no effect
        out[key] = self.node(value, here, base, False)

    def applicator(self, key: str, sub: list[Schema], out: dict, extra: list) -> None:
        """``anyOf`` / ``allOf`` with boolean members folded away."""
        if key == "allOf":
            if False in sub:
                extra.append(False)
            out["allOf"] = [*out.get("allOf", []), *(s for s in sub if s is not True)]
            if not out["allOf"]:
                del out["allOf"]
            return
        if True in sub:
            return
        kept = [s for s in sub if s is not False]
        if kept:
            out["anyOf"] = kept
        else:
            extra.append(False)

    def unevaluated(
        self, key: str, value: Any, schema: dict, out: dict, ptr: str, base: str
    ) -> None:
        """Without in-place applicators, ``unevaluated*`` means ``additionalProperties`` /
        ``items``; with them it depends on annotations: checked as the value completes."""
        here = f"{ptr}/{escape(key)}"
        if any(k in schema for k in _IN_PLACE):
            self.node(value, here, base, False)  # the subschema must be readable
            self.check(ptr, key)
            return
        same = "additionalProperties" if key == "unevaluatedProperties" else "items"
        if same not in schema and not (same == "items" and "additionalItems" in schema):
            out[same] = self.node(value, here, base, False)


_TYPING = ("type", "enum", "const")
_IN_PLACE = frozenset(
    {
        "allOf",
        "anyOf",
        "oneOf",
        "not",
        "$ref",
        "$dynamicRef",
        "if",
        "then",
        "else",
        "dependentSchemas",
        "dependencies",
        "contains",
    }
)
_MINIMUM_COUNTS = frozenset(
    {"minLength", "minItems", "minProperties"}
)  # each forces that many repeats
_COUNTS = frozenset(
    {"minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties"}
)


def _typing(schema: dict) -> dict:
    return {k: schema[k] for k in _TYPING if k in schema}


def _pure_ref(node: dict) -> bool:
    return "$ref" in node and all(k == "$ref" or k in ANNOTATIONS for k in node)


def _at_most_one_item(schema: dict) -> bool:
    kind = schema.get("type")
    return schema.get("maxItems", 2) <= 1 or (isinstance(kind, str) and kind != "array")
