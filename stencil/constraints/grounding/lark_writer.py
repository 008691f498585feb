"""Grounded JSON: string values that can only be verbatim spans of a source text.

A grounded string (a subschema with ``"x-grounded": true``, or with ``ground_strings`` every plain
string: no ``pattern``, ``enum``, ``const`` or ``format`` other than ``email``) is marked with a sentinel ``const``
before the usual JSON Schema translation, so everything else keeps its exact semantics. The
translated schema is then written as a Lark grammar: the objects, arrays and unions on the way
to a grounded string become rules, every other subtree stays an inline ``%json { ... }`` block,
and each grounded string is a lexeme over the JSON-escaped source (each soft line break one
space: ``soft_breaks``), cut into chunks at word boundaries (words, single punctuation and
whitespace characters, escapes), so a value starts and ends on a chunk boundary, never at
whitespace, never starts with a separator such as `,` `;` `)` nor ends with one such as `,` `(`.

A plain grounded string (no ``format``, ``pattern`` or length bound) is co-matched: its lexeme
is only the trie of the spans' first ``WINDOW`` bytes (exact: llguidance checks the tokens that
cross the opening quote, but for the few carrying more than ``WINDOW`` bytes after it, which the
co-matcher checks whole) followed by any string characters, so llguidance's lexer is back in a
free string's state after a few bytes; the rest is checked by a suffix automaton of the
document's marked text (``marked_text``; ``grounded_spans.GroundedSpans``). Each such
lexeme also admits ``PROBE`` + its number + ``PROBE_END`` (control bytes no JSON text holds
raw, which the co-matcher never lets through), by which the co-matcher asks llguidance whether
(and which) grounded string a string about to open is. The others keep an llguidance
substring lexeme (``substring_chunks``) intersected with their format, pattern and bounds.
"""

from __future__ import annotations

import functools
import json
import re
from typing import Any

from ..errors import ConstraintError, UnstatedValueError, UnsupportedSchemaError
from ..json_schema.ecma_regex import ecma_pattern, structure
from .marking import EMAIL, SENTINEL, SPAN_FORMATS
from .soft_breaks import unwrapped
from .stated import date_spans

# an email address and a code with digits (words joined by - / . , : with a digit: a date,
# 1,580.00, INV-2024-0193, a phone number) are one unit each (a span holds all of it or none),
# then words, then single characters; words without a digit before a code join it by - . ,
# only (``doi.org/10.1007/s44295`` and ``doi:10.1007/s44295``: a DOI is a unit of its own);
# a superscript or subscript digit is a unit of its own, not part of the word it marks
# (``Huamán¹``: a name and its affiliation's footnote mark)
_SCRIPT_DIGITS = "\u00b9\u00b2\u00b3\u2070\u2074\u2075\u2076\u2077\u2078\u2079"
_SCRIPT = rf"[{_SCRIPT_DIGITS}\u2080-\u2089]"
_W = rf"(?:(?!{_SCRIPT})\w)"
_CODE = rf"(?:{_W}+[\-.,])*{_W}*\d{_W}*(?:[\-/.,:]{_W}+)*"
_CHUNK = re.compile(rf"{EMAIL}|{_CODE}|{_W}+|{_SCRIPT}|\s|[^\w\s]")
_ESCAPED = re.compile(r'["\\\x00-\x1f]')  # what JSON writes as an escape
# the separators a value never starts with (they close or follow something: a footnote mark
# follows what it marks) or ends with
_NO_START = frozenset(",;:)]}»”" + _SCRIPT_DIGITS)
_NO_END = frozenset(",;:([{«“")
# one JSON string character (raw, or one escape); a value's first and last: no whitespace or its
# escapes, and no separator that follows (first) or precedes (last) something (``_edge_char``)
_CHAR = r'(?:[^"\\\x00-\x1f]|\\["\\\x2fbfnrt]|\\u[0-9a-fA-F]{4})'


def _edge_char(separators: frozenset[str]) -> str:
    """One JSON character a value may start or end with: no whitespace or its escapes, none of
    ``separators``."""
    banned = re.escape("".join(sorted(separators)))
    return rf'(?:[^"\\\x00-\x20{banned}]|\\["\\\x2fbfu]|\\u[0-9a-fA-F]{{4}})'


_START, _END = _edge_char(_NO_START), _edge_char(_NO_END)
# the units (chunks) a sibling property claims by its type or format, which a plain grounded
# string then never contains: an address, a number with a decimal fraction, and a date the
# source states, in digits or words (``_date_chunks``: ``112/03/2026`` in a code is none)
_CLAIMED = {
    "email": re.compile(EMAIL),
    "number": re.compile(r"[0-9][0-9,]*\.[0-9]+"),
}
# the longest span (JSON characters) checked against a grounded string's pattern at compile time
_SPAN_CHECK = 256
# stands in for a claimed unit: a raw quote, which no span (JSON string content) can hold
_BARRIER = '"'
# co-matched lexemes: the exact trie covers at least WINDOW bytes of a value (what most tokens
# carry after a quote; the co-matcher checks the few longer ones whole), and the probe's bytes
WINDOW = 8
PROBE, PROBE_END = "\x0b", "\x0c"
_UNIT = re.compile(r"\\u[0-9a-fA-F]{4}|\\.|.", re.S)
_SPACE_CHUNKS = frozenset({" ", "\\n", "\\r", "\\t"})
# the keywords a grammar rule around a grounded string handles (anything else: unsupported)
_OBJECT_KEYS = frozenset({"type", "properties", "required", "additionalProperties"})
_ARRAY_KEYS = frozenset({"type", "items", "minItems", "maxItems"})


def source_chunks(source: str) -> list[str]:
    """The JSON-escaped source, each soft line break one space (a value copied across one has
    a space), cut at word boundaries: the units a grounded value is made of."""
    return _chunks(unwrapped(source)[0])


def _chunks(text: str) -> list[str]:
    """``text`` (unwrapped) cut at word boundaries, JSON-escaped."""
    return [
        json.dumps(c, ensure_ascii=False)[1:-1] if _ESCAPED.search(c) else c
        for c in _CHUNK.findall(text)
    ]


def _date_chunks(text: str) -> frozenset[int]:
    """The chunks (by index) of the dates an unwrapped source states in words or digits (``Nov
    15, 2026``, ``4. März 2024``): what a sibling ``format: date`` field claims whole."""
    spans = date_spans(text)
    if not spans:
        return frozenset()
    return frozenset(
        i
        for i, m in enumerate(_CHUNK.finditer(text))
        if any(a < m.end() and m.start() < b for a, b, _ in spans)
    )


def grounded_lark(translated: dict[str, Any], source: str) -> tuple[str, tuple[bytes, ...]]:
    """The Lark grammar for a translated schema whose grounded strings carry sentinels, and the
    marked text of each co-matched grounded string (by its probe number)."""
    writer = _LarkWriter(translated, source)
    try:
        return writer.grammar(), tuple(writer.marked)
    except _NoSpan as e:
        raise UnstatedValueError(f"a required grounded string cannot be filled: {e}") from None


def _may_start(chunk: str) -> bool:
    """Whether a value may start with ``chunk``: not whitespace, a barrier or a separator that
    closes or follows something (``,`` ``;`` ``:`` ``)`` ...: `, Lyon` is no value)."""
    return chunk not in _SPACE_CHUNKS and chunk != _BARRIER and chunk not in _NO_START


def _may_end(chunk: str) -> bool:
    """Whether a value may end with ``chunk``: not whitespace, a barrier or a separator that
    opens or precedes something (``,`` ``(`` ``:`` ...)."""
    return chunk not in _SPACE_CHUNKS and chunk != _BARRIER and chunk not in _NO_END


def _has_span(chunks: list[str]) -> bool:
    """Whether some run of chunks without a barrier starts and ends where a value may."""
    started = False
    for c in chunks:
        started = (started and c != _BARRIER) or _may_start(c)
        if started and _may_end(c):
            return True
    return False


def marked_text(chunks: list[str]) -> bytes:
    """The chunks joined by marker bytes (1 | 2: the chunk before may end a value | 4: the
    chunk after may start one), barriers as byte 0: what ``SpanAutomaton`` is built on."""
    starts, ends = [_may_start(c) for c in chunks], [_may_end(c) for c in chunks]
    out = bytearray()
    for i, c in enumerate(chunks):
        out.append(1 | (2 if i and ends[i - 1] else 0) | (4 if starts[i] else 0))
        out += b"\x00" if c == _BARRIER else c.encode("utf-8", "surrogatepass")
    out.append(1 | (2 if chunks and ends[-1] else 0))
    return bytes(out)


def window_regex(chunks: list[str], probe: str) -> str:
    """A regex body for the values whose first ``WINDOW`` bytes (whole JSON characters) are a
    span's and go on with any string characters, or ``probe``."""
    split = {
        c: [(u, len(u.encode("utf-8", "surrogatepass"))) for u in _UNIT.findall(c)]
        for c in set(chunks)
    }
    units = [split[c] for c in chunks]
    ends = [_may_end(c) for c in chunks]
    root: dict = {}
    starts = [i for i, c in enumerate(chunks) if _may_start(c)]
    windows = dict.fromkeys(_window(chunks, units, ends, i) for i in starts)
    for window in windows:
        node = root
        for key in window:
            if key:
                node = node.setdefault(key, {})
            else:
                node[key] = True  # "": a span may end here; None: it goes on past the window
    return f"{_regex_literal(probe)}|{_trie_regex(root)}"


def _window(chunks: list[str], units: list, ends: list[bool], i: int) -> tuple:
    """The first ``WINDOW`` bytes of the spans starting at chunk ``i``: JSON characters, with
    ``""`` where a span may end and a final ``None`` where the span goes on past them."""
    out: list = []
    size = 0
    for j in range(i, len(chunks)):
        if chunks[j] == _BARRIER:
            break
        for unit, n in units[j]:
            if size >= WINDOW:
                out.append(None)
                return tuple(out)
            out.append(unit)
            size += n
        if ends[j]:
            out.append("")
    while out and out[-1] != "":  # the text after the last chunk a span may end with: no span's
        out.pop()
    return tuple(out)


def _trie_regex(node: dict) -> str:
    alts = [_regex_literal(u) + _trie_regex(c) for u, c in node.items() if u]
    if node.get(None):
        alts.append(f"{_CHAR}+")
    if not alts:
        return ""
    return "(?:" + "|".join(alts) + ")" + ("?" if node.get("") else "")


def _regex_literal(text: str) -> str:
    return "".join(c if c.isalnum() or ord(c) > 127 else f"\\x{ord(c):02x}" for c in text)


class _NoSpan(ConstraintError):
    """No span of the source fits a grounded string (its pattern matches none)."""


def _longest(regexes: list[str], high: int | None) -> int | None:
    """The longest text ``high`` and every regex admit (None: unbounded): a pattern such as
    ``^[A-Z]{3}$`` bounds the spans ``_some_span_matches`` must try, so its answer is exact."""
    widths = [re._parser.parse(r.replace("\\/", "/")).getwidth()[1] for r in regexes]
    bounded = [w for w in widths if w < re._constants.MAXREPEAT]
    if high is not None:
        bounded.append(high)
    return min(bounded, default=None)


def _some_span_matches(
    chunks: list[str], regexes: list[str], low: int, high: int | None, *, in_words: bool = False
) -> bool:
    """Whether a span (a run of chunks without barriers, not starting or ending at whitespace,
    ``low``..``high`` characters of JSON text) fully matches every one of ``regexes`` (Lark regex
    bodies). With ``in_words`` (a regex that admits no whitespace, as every span format) only the
    spans inside a run of non-space chunks are tried, whatever their bounds: exact. Otherwise
    spans over ``_SPAN_CHECK`` characters are not tried: a value only a longer span holds is
    not stated (its optional field left out, never a string opened with no way to close)."""
    wholes = [re.compile(r.replace("\\/", "/")) for r in regexes]
    bounded = high is not None and (in_words or high <= _SPAN_CHECK)
    limit = high if bounded else _SPAN_CHECK
    space = [c.isspace() or c in _SPACE_CHUNKS for c in chunks]
    for i, first in enumerate(chunks):
        if not _may_start(first):
            continue
        text = ""
        for j in range(i, len(chunks)):
            if chunks[j] == _BARRIER or (in_words and space[j]):
                break
            text += chunks[j]
            if len(text) > limit:
                if in_words and high is None:
                    return True  # a run this long: assumed to hold one
                break
            if _may_end(chunks[j]) and len(text) >= low and all(w.fullmatch(text) for w in wholes):
                return True
    return False


class _LarkWriter:
    def __init__(self, root: dict[str, Any], source: str) -> None:
        self.root = root
        self.text = unwrapped(source)[0]  # what the chunks are cut from
        self.defs = root.get("$defs", {})
        self.guidance = root.get("x-guidance", {})
        self.chunks = _chunks(self.text)
        self.rules: dict[str, str] = {}
        self.ref_rules: dict[str, str] = {}
        self.grounded_defs = _grounded_defs(self.defs)
        self.marked: list[bytes] = []  # per co-matched grounded string
        self.ws = _whitespace(self.guidance)

    @functools.cached_property
    def dates(self) -> frozenset[int]:
        """The chunks of the dates the source states (read once, where a date is claimed)."""
        return _date_chunks(self.text)

    def grammar(self) -> str:
        body = {k: v for k, v in self.root.items() if k not in ("$defs", "x-guidance")}
        start = self.expr(body, "")
        lines = [f"start: {start}", *(f"{name}: {body}" for name, body in self.rules.items())]
        if self.ws:
            lines.append(f"WS: /{self.ws}/")
        return "\n".join(lines) + "\n"

    def expr(self, node: Any, pointer: str) -> str:
        if not _has_sentinel(node, self.grounded_defs):
            return self.json_block(node)
        if "$ref" in node and len(node) == 1:
            return self.ref(node["$ref"], pointer)
        if "const" in node:
            return self.grounded(node)
        if "anyOf" in node and set(node) <= {"anyOf"}:
            return self.union(node["anyOf"], pointer)
        kind = node.get("type")
        if (
            kind == "object"
            and set(node) <= _OBJECT_KEYS
            and node.get("additionalProperties") is False
        ):
            return self.obj(node, pointer)
        if kind == "array" and set(node) <= _ARRAY_KEYS:
            return self.array(node, pointer)
        raise UnsupportedSchemaError(
            "x-grounded",
            pointer,
            "a grounded string must sit under closed objects, "
            "arrays with `items`, `anyOf` or `$ref` (not under " + ", ".join(sorted(node)) + ")",
        )

    def union(self, branches: list[Any], pointer: str) -> str:
        """The branches no span leaves empty (all empty: ``_NoSpan``)."""
        alts, empty = [], None
        for i, branch in enumerate(branches):
            try:
                alts.append(self.expr(branch, f"{pointer}/anyOf/{i}"))
            except _NoSpan as e:
                empty = e
        if not alts and empty is not None:
            raise empty
        return "(" + " | ".join(alts) + ")"

    def json_block(self, node: Any) -> str:
        block = node if isinstance(node, dict) else {"anyOf": [node]} if node is False else {}
        block = {**block, "x-guidance": self.guidance}
        if self.defs:
            block["$defs"] = self.defs
        return "%json " + json.dumps(block, ensure_ascii=False)

    def ref(self, ref: str, pointer: str) -> str:
        if not ref.startswith("#/$defs/"):
            raise UnsupportedSchemaError("$ref", pointer, f"{ref!r} around a grounded string")
        name = f"def{len(self.rules)}_" + re.sub(r"[^a-z0-9_]", "_", ref[8:].lower())
        name = self.ref_rules.setdefault(ref, name)
        if name not in self.rules:
            self.rules[name] = ""  # reserved: a recursive reference refers to the rule by name
            self.rules[name] = self.expr(self.defs[ref[8:]], ref[1:])
        return name

    def grounded(self, node: dict[str, Any]) -> str:
        number, fmt, claimed, pattern = node["const"][len(SENTINEL) :].split(":", 3)
        name = f"GROUNDED_{number}"
        low, high = node.get("minLength", 1), node.get("maxLength")
        claims = [k for k in claimed.split(",") if k]
        kinds = [_CLAIMED[k] for k in claims if k in _CLAIMED]
        barred = {c for c in set(self.chunks) if any(k.fullmatch(c) for k in kinds)}
        dates = self.dates if "date" in claims else frozenset()
        chunks = [_BARRIER if c in barred or i in dates else c for i, c in enumerate(self.chunks)]
        if not fmt and not pattern and low == 1 and high is None:
            if not _has_span(chunks):
                raise _NoSpan("the source text has no span")
            probe = f"{PROBE}{len(self.marked)}{PROBE_END}"
            self.marked.append(marked_text(chunks))
            self.rules[name] = f"/{window_regex(chunks, probe)}/"
            return f'"\\"" {name} "\\""'
        spec = json.dumps({"substring_chunks": chunks}, ensure_ascii=False)
        body = f"%regex {spec} & /{_START}{_CHAR}*/ & /{_CHAR}*{_END}/"
        regexes = [SPAN_FORMATS[fmt]] if fmt else []
        regexes += [_lark_pattern(pattern)] if pattern else []
        longest = _longest(regexes, high)  # checked exactly where a pattern bounds the length
        if not _some_span_matches(chunks, regexes, low, longest, in_words=bool(fmt)):
            raise _NoSpan(f"no span of the source text is {_wanted(fmt, pattern, low, high)}")
        body += "".join(f" & /{r}/" for r in regexes)
        if low > 1 or high is not None:
            body += f" & /{_CHAR}{{{low},{'' if high is None else high}}}/"
        self.rules[name] = body
        return f'"\\"" {name} "\\""'

    def obj(self, node: dict[str, Any], pointer: str) -> str:
        required = set(node.get("required", ()))
        members = []
        for k, v in node.get("properties", {}).items():
            try:
                value = self.expr(v, f"{pointer}/properties/{k}")
            except _NoSpan:
                if k in required:
                    raise
                continue  # an optional property no span can fill is left out
            key = _literal(json.dumps(k, ensure_ascii=False))
            members.append((f'{key} {self.gap()}":" {self.gap()}{value}', k in required))
        # first: the members from here on when none is written yet; after: when one is
        first, after = "", ""
        for text, needed in reversed(members):
            new_first = f"{text} {after}"
            new_after = f'{self.gap()}"," {self.gap()}{text} {after}'
            if not needed:
                new_first, new_after = _optional(new_first, first), _optional(new_after, after)
            first, after = self.rule(new_first), self.rule(new_after)
        return f'"{{" {self.gap()}{first} {self.gap()}"}}"'

    def array(self, node: dict[str, Any], pointer: str) -> str:
        item = self.rule(self.expr(node.get("items", {}), f"{pointer}/items"))
        low, high = node.get("minItems", 0), node.get("maxItems")
        if high == 0:
            return f'"[" {self.gap()}"]"'
        more = f'({self.gap()}"," {self.gap()}{item})'
        more += f"{{{max(low - 1, 0)},{'' if high is None else high - 1}}}"
        body = f"{item} {more}"
        if low == 0:
            body = f"({body})?"
        return f'"[" {self.gap()}{body} {self.gap()}"]"'

    def rule(self, body: str) -> str:
        name = f"g{len(self.rules)}"
        self.rules[name] = body
        return name

    def gap(self) -> str:
        return "WS? " if self.ws else ""


def _lark_pattern(pattern: str) -> str:
    """A JSON Schema ``pattern`` (a search, ECMA-262) as a Lark regex over the whole value (the
    value's JSON text: the same wherever it has no quote, backslash or control character)."""
    branches = []
    for branch in _top_level_branches(ecma_pattern(pattern)):
        head = "" if branch.startswith("^") else ".*"
        tail = "" if branch.endswith("$") and not branch.endswith("\\$") else ".*"
        branch = branch[1:] if not head else branch
        branch = branch[:-1] if not tail else branch
        branches.append(f"{head}(?:{branch}){tail}")
    return "|".join(branches).replace("/", "\\/")


def _wanted(fmt: str, pattern: str, low: int, high: int | None) -> str:
    """What a grounded string asks for, in words (for an error)."""
    parts = [f"a(n) {fmt}"] if fmt else []
    parts += [f"matched by the pattern {pattern!r}"] if pattern else []
    return " and ".join(parts + [f"{low} to {high or 'any number of'} characters long"])


def _top_level_branches(pattern: str) -> list[str]:
    """``pattern`` split at the ``|`` outside groups and classes."""
    cuts = [i for i, c, depth in structure(pattern) if c == "|" and depth == 0]
    return [pattern[a + 1 : b] for a, b in zip([-1, *cuts], [*cuts, len(pattern)], strict=True)]


def _optional(expr: str, rest: str) -> str:
    """``expr`` or else ``rest`` (which may be empty)."""
    return f"{expr} | {rest}" if rest else f"({expr})?"


def _whitespace(guidance: dict[str, Any]) -> str:
    if "whitespace_pattern" in guidance:
        return f"(?:{guidance['whitespace_pattern']})"
    return r"[ \t\n\r]+" if guidance.get("whitespace_flexible", True) else ""


def _literal(text: str) -> str:
    """A Lark string literal for ``text``."""
    return json.dumps(text, ensure_ascii=False)


def _has_sentinel(node: Any, grounded_defs: frozenset[str] = frozenset()) -> bool:
    """Whether a grounded string is reachable from ``node`` (through ``$ref``s to grounded_defs)."""
    if isinstance(node, str):
        return node.startswith(SENTINEL)
    if isinstance(node, dict):
        if node.get("$ref") in grounded_defs:
            return True
        return any(_has_sentinel(v, grounded_defs) for k, v in node.items() if k != "$defs")
    if isinstance(node, list):
        return any(_has_sentinel(v, grounded_defs) for v in node)
    return False


def _grounded_defs(defs: dict[str, Any]) -> frozenset[str]:
    """The ``#/$defs/...`` references from which a grounded string is reachable (a fixpoint)."""
    found: frozenset[str] = frozenset()
    while True:
        more = frozenset(f"#/$defs/{k}" for k, v in defs.items() if _has_sentinel(v, found))
        if more == found:
            return found
        found = more
