"""The words documents print, as data (``lexicon.toml``): the labels printed before a value, per
concept (``total``: ``Total due``, ``Gesamtbetrag``, ``Montant TTC`` ...), the field words that
ask for each concept (in English, German, French, Spanish and Italian), month names (those and
Dutch, Portuguese, Swedish, Danish, Norwegian, Polish and Czech), and currency signs, names and
codes. ``LEXICON`` is read once at import; ``concepts_for`` finds a field's
concepts by its name."""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType

_FILE = Path(__file__).with_name("lexicon.toml")


@dataclass(frozen=True, slots=True)
class Lexicon:
    labels: Mapping[str, tuple[str, ...]]
    """concept -> the labels that name its value (lower case; ``to:``: only before a colon)."""
    dated: frozenset[str]
    """the concepts whose value is a date (``due``, ``issued``)."""
    code_words: frozenset[str]
    """the last words of a field's name that ask for a code (``order_id``, ``invoice_no``)."""
    fields: Mapping[tuple[str, ...], tuple[str, ...]]
    """a run of a field's words -> the concepts it asks for, best first."""
    abbreviations: Mapping[str, tuple[str, ...]]
    """a field's word -> the words it abbreviates (``nr`` -> number)."""
    months: Mapping[str, int]
    """a month's name (the genitive too: ``marca``), its first three letters (where those are
    no word elsewhere) or another spelling -> its number."""
    weekdays: Mapping[str, frozenset[int]]
    """a weekday's name in lower case -> its number (Monday 0), as a set (``weekdays_named``
    reads abbreviations, which may name several)."""
    currency_signs: Mapping[str, str]
    """a currency sign (``€``, ``R$``, ``zł``) -> its ISO 4217 code."""
    currency_codes: frozenset[str]
    dollars: frozenset[str]
    """the codes a bare ``$`` (or the word ``dollars``) may stand for."""
    currency_names: Mapping[str, tuple[str, ...]]
    """a currency's name in words (lower case) -> its ISO 4217 code, or the codes it may
    stand for (``kr``: SEK, NOK, DKK)."""
    units: Mapping[str, re.Pattern[str]]
    """a unit (``hour``, ``month``, ``square_metre``, ``percent``) -> what reads its words
    (``pro Stunde``, ``/mes``, ``m²``, ``%``) in lower-case text."""

    def concepts_for(self, name: str) -> tuple[str, ...] | None:
        """The concepts a field asks for by the words of its name (``billingAddress``,
        ``amount-due``, ``invoice_nr``: its longest run of words that names a concept, the last
        first); None where no run names one."""
        words = self.words(name)
        for n in range(len(words), 0, -1):
            for i in range(len(words) - n, -1, -1):
                found = self.fields.get(tuple(words[i : i + n]))
                if found is not None:
                    return found
        return None

    def weekdays_named(self, word: str, dotted: bool = False) -> frozenset[int]:
        """The weekdays (Monday 0) ``word`` may name: a weekday's name, or a prefix of one of at
        least three letters, or two where ``dotted`` (``Sa.``); empty where it names none."""
        word = word.lower()
        if len(word) < (2 if dotted else 3):
            return frozenset()
        found = [days for name, days in self.weekdays.items() if name.startswith(word)]
        return frozenset().union(*found)

    def units_in(self, text: str) -> list[tuple[int, str]]:
        """``(position, unit)`` of each unit ``text`` names, in order."""
        lower = text.lower()
        found = [(m.start(), u) for u, p in self.units.items() for m in p.finditer(lower)]
        return sorted(found)

    def words(self, text: str) -> list[str]:
        """``text``'s words as the lexicon compares them: split on blanks, punctuation, ``_`` and
        camelCase, lower case, abbreviations written out (``invoiceNr`` -> invoice, number)."""
        spaced = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", " ", text)
        words = [w for w in re.split(r"[\W_]+", spaced.lower()) if len(w) > 1]
        return [out for w in words for out in self.abbreviations.get(w, (w,))]


def load_lexicon(path: Path = _FILE) -> Lexicon:
    """The lexicon of a TOML file shaped as ``lexicon.toml``."""
    with path.open("rb") as f:
        data = tomllib.load(f)
    months: dict[str, int] = {}
    for names in data["months"].values():
        for number, month in enumerate(names, 1):
            months.setdefault(month, number)
            months.setdefault(month[:3], number)
    for names in data["months_in_full"].values():
        for number, month in enumerate(names, 1):
            months.setdefault(month, number)
    for spelling, number in data["month_spellings"].items():
        months.setdefault(spelling, number)
    weekdays: dict[str, frozenset[int]] = {}
    for names in data["weekdays"].values():
        for number, day in enumerate(names):
            weekdays[day] = weekdays.get(day, frozenset()) | {number}
    names = data["currencies"]["names"]
    return Lexicon(
        labels=MappingProxyType({c: tuple(ws) for c, ws in data["labels"].items()}),
        dated=frozenset(data["kinds"]["date"]),
        code_words=frozenset(data["kinds"]["code"]),
        fields=MappingProxyType({tuple(f.split()): tuple(cs) for f, cs in data["fields"].items()}),
        abbreviations=MappingProxyType(
            {w: tuple(full.split()) for w, full in data["abbreviations"].items()}
        ),
        months=MappingProxyType(months),
        weekdays=MappingProxyType(weekdays),
        currency_signs=MappingProxyType(dict(data["currencies"]["signs"])),
        currency_codes=frozenset(data["currencies"]["codes"]),
        dollars=frozenset(data["currencies"]["dollars"]),
        currency_names=MappingProxyType(
            {
                name: (codes,) if isinstance(codes, str) else tuple(codes)
                for name, codes in names.items()
            }
        ),
        units=MappingProxyType({u: _phrases(ws) for u, ws in data["units"].items()}),
    )


def _phrases(phrases: list[str]) -> re.Pattern[str]:
    """What reads any of ``phrases`` (lower case), not inside a word at a letter's end
    (``/an`` is not ``/ano``'s start)."""
    edges = [
        ("(?<!\\w)" if p[0].isalnum() else "")
        + re.escape(p)
        + ("(?!\\w)" if p[-1].isalnum() else "")
        for p in sorted(phrases, key=len, reverse=True)
    ]
    return re.compile("|".join(edges))


LEXICON = load_lexicon()
