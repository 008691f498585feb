"""Field-by-field extraction: one short constrained question per top-level field of the schema,
each over the same document prefix (so the engine's prefix cache computes the document once),
then one record assembled from the answers.

Every field of the schema is asked, optional ones too: "not stated" is an answer (``{}``, or
``null`` where the schema allows it; an optional field of a list's object items may be null,
left out of the item where the user's schema does not allow it). A question names the field,
its kind, whether it is required and the schema's ``description`` (an array's item fields with
theirs), and says how to answer; it shows no example value a model could copy. A question's
answer is a one-key JSON object, ``{"total":1190.0}``, under the field's own (grounded)
schema. Fields the document cannot fill are not asked: an optional free number, date or
currency field when the document states no number, date or currency, or nothing its
``pattern`` allows (a required one is asked; a value the document does not state then makes
the record an error: ``merge``). A currency field (a three-letter code, or an enum of them)
only takes the currencies the document states by code, sign or name (``stated.currencies_in``,
``currencies_named``), an IBAN, DOI or phone field only the IBANs, DOIs or phone numbers it
states (``shaped_reader``); another field named for a code (``order_id``) only spans with a
digit in each part, no amount or two-digit number (``CODE_PATTERN``).
"""

from __future__ import annotations

import copy
import itertools
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from stencil.constraints import (
    LEXICON,
    claimed_kinds,
    currencies_in,
    currencies_named,
    dates_in,
    dois_in,
    ibans_in,
    number_enum,
    numbers_in,
    numbers_in_units,
    phones_in,
    readings_in,
)
from stencil.extract.prompt import document_name, field_list, record_line

SYSTEM = "You extract data from documents. Copy values exactly as written in the document."
# the document first (shared by every question), then the one field asked
USER = "{record}Fields to extract:\n{fields}\n\nDocument ({filename}):\n{document}\n\n"
QUESTION = "Field: {key} ({kind}{required}){description}\n{answer}"
ANSWER = 'Reply with JSON, key "{key}"{items}, copied from the document.'
ITEMS = ": every item it lists, in order"
NOT_STATED = {"optional": " Not stated: {{}}.", "null": ' Not stated: {{"{key}": null}}.'}
CURRENCY_PATTERN = "^[A-Z]{3}$"
_NO_CODE = r"\s,;:()\[\]{}<>\"'@"  # blanks, sentence punctuation, brackets, quotes, ``@``
_CODE_CHAR = rf"[^{_NO_CODE}]"
_MARK = rf"[^\d{_NO_CODE}.$€£¥₹%]"  # a code's letter or joiner: no digit, decimal mark, currency
_PART = rf"{_CODE_CHAR}*\d{_CODE_CHAR}*"
CODE_PATTERN = (
    rf"^(?:{_PART}{_MARK}{_CODE_CHAR}*|{_CODE_CHAR}*{_MARK}{_PART}|\d{{3,}}|{_PART}(?: {_PART})+)$"
)
"""A code: space-separated parts of letters, digits and joiners (no sentence punctuation,
bracket, quote or ``@``), each with a digit (``BK-558213``, ``812 345 678``); a code of one
part also a letter or joiner other than a decimal mark, currency or ``%`` (``2026/7``,
``#4471``), or three digits or more: no amount (``14.99``), time (``19:04``), e-mail, share
or house number (``20``)."""
LIST_PENALTY = 1.0
_RUN_WORDS = 8
_AMOUNT = re.compile(r"\d[.,]\d\d(?!\d|[.,]\d)")
"""An amount with cents (``13.77``, ``1.190,00``; not a date's ``04.12.2026``)."""
_AROUND = ".,;:!?()[]{}\"'«»“”"
_BARE_DOLLAR = re.compile(r"(?<![^\W\d_])\$")
"""A ``$`` of no named country (not ``R$``, ``C$``, ``US$``)."""


@dataclass(frozen=True, slots=True)
class FieldQuestion:
    key: str
    schema: dict[str, Any]
    """The answer's schema: an object with just this field."""
    text: str
    """The question, appended to the document prefix."""
    frequency_penalty: float = 0.0
    """For a list of strings: each item written lowers its tokens' odds (a small model repeats
    the first item until the token budget ends; the penalty also lets a long list end). Not for
    a list of objects, whose items repeat their keys."""


def field_prefix(
    prompt: list[dict[str, str]],
    default: bool,
    schema: dict[str, Any],
    filename: str,
    document: str,
) -> list[dict[str, str]]:
    """The chat every question of one document starts with: the default template's short
    form (system line, field list, document), or a custom template's rendered ``prompt``."""
    if not default:
        return prompt
    head = USER.format(
        record=record_line(schema),
        fields=field_list(schema),
        filename=document_name(filename),
        document=document,
    )
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": head}]


def field_messages(prefix: list[dict[str, str]], q: FieldQuestion) -> list[dict[str, str]]:
    """``prefix`` with the question after its last message (the shared part stays a prefix)."""
    *rest, last = prefix
    sep = "" if last["content"].endswith("\n\n") else "\n\n"
    return [*rest, {**last, "content": last["content"] + sep + q.text}]


def longest_question(schema: dict[str, Any]) -> str:
    """The longest question text the schema's fields can ask (the prompt's budget keeps room
    for it)."""
    return max((q.text for q in field_questions(schema)), key=len, default="")


def narrow_schema(schema: dict[str, Any], document: str) -> dict[str, Any]:
    """The schema for one document: currency fields narrowed to the currencies it states, and
    optional fields it has no value for (no number, date or currency stated) left out."""
    required = set(schema.get("required", ()))
    props = {}
    for key, sub in schema.get("properties", {}).items():
        narrowed = _narrowed(key, sub, document) if isinstance(sub, dict) else sub
        if narrowed is not None or key in required:
            props[key] = sub if narrowed is None else narrowed
    return {**schema, "properties": props}


def field_questions(schema: dict[str, Any]) -> list[FieldQuestion]:
    """One question per top-level field of ``schema`` (a window's, narrowed to what it states:
    ``narrow_schema``), in the schema's order. No question depends on another's answer, so a
    document's questions go in together (the first alone, to leave the prefix in the cache)."""
    props = schema.get("properties", {})
    required = set(schema.get("required", ()))
    claimed = frozenset(claimed_kinds(props))
    return [
        field_question(key, sub, key in required, claimed=claimed)
        for key, sub in props.items()
        if isinstance(sub, dict)
    ]


def field_question(
    key: str,
    sub: dict[str, Any],
    required: bool,
    claimed: frozenset[str] = frozenset(),
) -> FieldQuestion:
    """The question for one field (``sub``: its schema for this document; ``claimed``: the
    kinds of value the record's other fields take by type or format, which a grounded string
    then never holds, as in a whole-record answer: ``claimed_kinds``)."""
    asked, array = sub, sub.get("type") == "array"
    if array and isinstance(sub.get("items"), dict):  # not stated: {} or [] (no item forced)
        asked = {**sub, "items": _null_when_not_stated(sub["items"])}
    answer = {"type": "object", "properties": {key: asked}, "additionalProperties": False}
    if claimed:
        answer["x-claimed"] = sorted(claimed)
    if required and not (array and sub.get("minItems", 0) == 0):
        answer["required"] = [key]
    objects = array and isinstance(sub.get("items"), dict) and sub["items"].get("type") == "object"
    penalty = LIST_PENALTY if array and not objects else 0.0
    text = _question(key, sub, required)
    return FieldQuestion(key, answer, text, penalty)


def is_currency(key: str, sub: dict[str, Any]) -> bool:
    """A three-letter currency code field (by its pattern and its name or description)."""
    named = "currency" in key.lower() or "currency" in str(sub.get("description", "")).lower()
    return named and sub.get("type") == "string" and sub.get("pattern") in (CURRENCY_PATTERN, None)


def shaped_reader(key: str, sub: dict[str, Any]) -> Callable[[str], list[str]] | None:
    """For a free string field that holds an IBAN or a DOI (a word of its name or description)
    or a phone number (its name's lexicon concept): what reads the values of that shape a
    document states (``ibans_in``, ``dois_in``, ``phones_in``); None for any other field."""
    if not _free_string(sub):
        return None
    words = {*LEXICON.words(key), *LEXICON.words(str(sub.get("description", "")))}
    for word, read in (("iban", ibans_in), ("doi", dois_in)):
        if word in words:
            return read
    return phones_in if "phone" in (LEXICON.concepts_for(key) or ()) else None


def is_code(key: str, sub: dict[str, Any]) -> bool:
    """A free string field whose name ends with a word that asks for a code (``order_id``,
    ``invoice_no``, ``reference``: the lexicon's ``[kinds] code``)."""
    words = LEXICON.words(key)
    return _free_string(sub) and bool(words) and words[-1] in LEXICON.code_words


def _free_string(sub: dict[str, Any]) -> bool:
    """A string without a ``pattern``, ``format``, ``enum`` or ``const`` of its own."""
    return sub.get("type") == "string" and not {"pattern", "format", "enum", "const"} & sub.keys()


def _narrowed(key: str, sub: dict[str, Any], document: str) -> dict[str, Any] | None:
    """The field's schema for this document, or None when the document has no value for it."""
    if is_currency(key, sub) and "enum" in sub:
        return _stated_currencies(sub, document)
    if "enum" in sub or "const" in sub:
        return sub
    if read := shaped_reader(key, sub):
        stated = read(document)
        return {**sub, "enum": stated} if stated else None
    if is_currency(key, sub):
        signed = currencies_in(document)
        codes = signed + sorted(currencies_named(document) - set(signed))
        return (
            {**{k: v for k, v in sub.items() if k != "pattern"}, "enum": codes} if codes else None
        )
    if is_code(key, sub):  # after the currency: a ``currency_code`` is a currency
        sub = {**sub, "pattern": CODE_PATTERN}
    if sub.get("type") in ("number", "integer"):
        return _stated_numbers(key, sub, document)
    if sub.get("format") == "date" and not dates_in(document):
        return None
    if sub.get("type") == "string" and "pattern" in sub and not states_match(document, sub):
        return None
    return sub


def _stated_numbers(key: str, sub: dict[str, Any], document: str) -> dict[str, Any] | None:
    """A number field for this document: None where it states no number (in the field's
    units, where the field's name or description names any: ``yearly``, ``per month``,
    ``sqm``); narrowed to those where it states others in other units (``16 € pro Stunde``,
    ``12 % pension``, ``850 sq ft``: ``numbers_in_units``)."""
    stated = numbers_in(document)
    named = LEXICON.units_in(" ".join([*LEXICON.words(key), str(sub.get("description", ""))]))
    if not named or not stated:
        return sub if stated else None
    kept = numbers_in_units(document, frozenset(unit for _, unit in named))
    if len(kept) == len(stated):
        return sub
    kept = number_enum(sub, kept)
    return {**sub, "enum": kept} if kept else None


def _stated_currencies(sub: dict[str, Any], document: str) -> dict[str, Any] | None:
    """A currency enum narrowed to the codes the document states by code, sign (a ``$``
    stands for every dollar in the enum) or name (``euros``, ``dollars``); None where it
    states only others (``R$``, ``zł``: no value of the enum); the whole enum where it states
    none but states an amount of money (``13.77``: a receipt whose place says its currency);
    None where it states neither (not asked where optional: a free event)."""
    stated = set(currencies_in(document)) | currencies_named(document)
    dollar = _BARE_DOLLAR.search(document) is not None
    kept = [c for c in sub["enum"] if c in stated or (dollar and c in LEXICON.dollars)]
    if kept:
        return {**sub, "enum": kept}
    return sub if not (stated or dollar) and _AMOUNT.search(document) else None


def states_match(document: str, sub: dict[str, Any]) -> bool:
    """Whether the document states a value a ``pattern`` string may take: a run of up to
    ``_RUN_WORDS`` words (without the punctuation around it), or a date or time it states
    (``readings_in``). A pattern Python cannot read: True (grounding decides)."""
    try:
        pattern = re.compile(sub["pattern"])
    except re.error:
        return True
    words = [w.strip(_AROUND) for w in document.split()]
    runs = (" ".join(words[i : i + n]) for i in range(len(words)) for n in range(1, _RUN_WORDS + 1))
    return any(pattern.search(v) for v in itertools.chain(readings_in(document), runs) if v)


def _question(key: str, sub: dict[str, Any], required: bool) -> str:
    kind = _kind(sub)
    items = sub.get("items") if isinstance(sub.get("items"), dict) else {}
    description = f": {sub['description']}" if sub.get("description") else ""
    if isinstance(items.get("properties"), dict):
        parts = [
            f"{k} ({v['description']})" if isinstance(v, dict) and v.get("description") else k
            for k, v in items["properties"].items()
        ]
        description += f" (each with {', '.join(parts)})"
    elif items.get("description"):
        description += f" (each: {items['description']})"
    answer = ANSWER.format(key=key, items=ITEMS if kind.startswith("list") else "")
    if kind == "boolean" or "enum" in sub:
        answer = answer.replace(", copied from the document", "")
    if not required or (kind.startswith("list") and sub.get("minItems", 0) == 0):
        answer += NOT_STATED["optional"].format()
    elif _nullable(sub):
        answer += NOT_STATED["null"].format(key=key)
    return QUESTION.format(
        key=key,
        kind=kind,
        required=", required" if required else "",
        description=description,
        answer=answer,
    )


def _kind(sub: dict[str, Any]) -> str:
    """The field's kind in words: ``number``, ``date``, ``list of strings``, ``list of objects``."""
    kind = sub.get("type", "value")
    kind = "/".join(k for k in kind if k != "null") if isinstance(kind, list) else str(kind)
    if sub.get("format") in ("date", "date-time", "time", "email", "uri"):
        return sub["format"]
    if "enum" in sub and kind not in ("number", "integer"):  # a number: the document's, unlisted
        return "one of " + ", ".join(json.dumps(v, ensure_ascii=False) for v in sub["enum"][:12])
    if kind == "array":
        items = sub.get("items") if isinstance(sub.get("items"), dict) else {}
        return f"list of {_kind(items)}s" if items else "list"
    return kind


def _or_null(sub: dict[str, Any]) -> dict[str, Any]:
    """``sub`` or null (a schema that already allows null as it is)."""
    return sub if _nullable(sub) else {"anyOf": [sub, {"type": "null"}]}


def _null_when_not_stated(items: dict[str, Any]) -> dict[str, Any]:
    """An array's item schema whose optional fields may be null (an item's part the document
    does not state: a job's end year while the job goes on), the kinds of value they claim
    kept (``x-claimed``: a name beside a year field never takes the year)."""
    props = items.get("properties")
    if items.get("type") != "object" or not isinstance(props, dict):
        return items
    required = set(items.get("required", ()))
    nulled = {
        k: v if k in required or not isinstance(v, dict) else _or_null(v) for k, v in props.items()
    }
    claimed = sorted(claimed_kinds(props) | set(items.get("x-claimed", ())))
    return {**items, "properties": nulled, **({"x-claimed": claimed} if claimed else {})}


def _nullable(sub: dict[str, Any]) -> bool:
    kind = sub.get("type")
    branches = sub.get("anyOf") or sub.get("oneOf") or ()
    return (isinstance(kind, list) and "null" in kind) or any(
        isinstance(b, dict) and b.get("type") == "null" for b in branches
    )


def assemble(schema: dict[str, Any], answers: dict[str, str]) -> dict[str, Any]:
    """One record from the answers (field -> raw answer text); unreadable answers are left out."""
    data: dict[str, Any] = {}
    required = set(schema.get("required", ()))
    for key, sub in schema.get("properties", {}).items():
        text = answers.get(key)
        try:
            value = json.loads(text) if text else {}
        except ValueError:
            continue
        if isinstance(value, dict) and key in value:
            data[key] = _without_nulls(copy.deepcopy(value[key]), sub)
        elif (
            value == {} and key in required and isinstance(sub, dict) and sub.get("type") == "array"
        ):
            data[key] = []  # a required list the document does not state
    return data


def _without_nulls(value: Any, sub: Any) -> Any:
    """``value`` without the nulls its array items' schema does not allow (a part an item
    does not state: ``_null_when_not_stated``)."""
    items = sub.get("items") if isinstance(sub, dict) else None
    if not isinstance(value, list) or not isinstance(items, dict):
        return value
    props = items.get("properties") or {}
    return [
        {k: v for k, v in item.items() if v is not None or _nullable(props.get(k, {}))}
        if isinstance(item, dict)
        else item
        for item in value
    ]
