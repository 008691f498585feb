"""The values a text states, normalized: numbers in the text's own locale (``1,580.00``,
``1.190,00``, ``264,30``, ``1 234,56`` -> 1580.0, 1190.0, 264.3, 1234.56), calendar dates with
the lexicon's month names (``2024-03-04``, ``March 4, 2024``, ``4. März 2024``, ``04.03.2024``,
``4 de marzo de 2024``, ``4 marca 2024``, ``04-Mar-24``, ``04.03.24`` -> ``"2024-03-04"``; both
days of a range that names its month once: ``4-6 December 2026``; a day and month by the dates
the text gives) and currencies (``€``, ``£``, ``zł`` -> ``"EUR"``, ``"GBP"``, ``"PLN"``), for
grounding free number, ``format: date`` and currency fields in the values of a source text;
and IBANs, phone numbers and DOIs as written, for the fields that ask for one. Month and weekday
names and currency signs are the lexicon's (``lexicon.toml``); ``document_index.DocumentIndex``
reads a document through these."""

from __future__ import annotations

import datetime
import re

from .lexicon import LEXICON

# a run of digits joined by single . or , (1.190,00; 15,750.00; 264,30; 2400.00), or groups of
# three joined by a space, no-break space, thin space or apostrophe (1 234,56; 1'234.50)
_NUMBER = re.compile(
    r"(?<![\w.,\-/])-?(?:\d{1,3}(?:[ \u00a0\u202f\u2009']\d{3})+(?:[.,]\d+)?|\d+(?:[.,]\d+)*)"
    r"(?![\w\-/]|[.,]\d)"
)
_SPACES = " \u00a0\u202f\u2009'"
# a number of thousands written with k (95k, $1.5K, 80 k€)
_THOUSANDS = re.compile(r"(?<![\w.,\-/])(\d{1,3}(?:[.,]\d{1,2})?) ?[kK](?![^\W\d_])")
# a time of day: 9:15, 09.15 Uhr, 20.00 uur, 15h30, 3 pm, 9 Uhr, kl. 18.30, ore 20.30, kl 19 (a
# dot only before Uhr / uur / h / am / pm or after a clock word: kl, klo, ore, alle, godz, or
# "at" in Czech, Polish, Dutch, Slovene, Croatian: v, ve, o, om, ob, u; a bare hour only before
# those or after kl, klo, ore, godz: "alle 11" is "all 11" elsewhere)
_CLOCK = r"\s?(?:Uhr|uur|h(?![^\W\d_])|[ap]\.?m\.?(?![^\W\d_]))"
_CLOCK_WORD = r"(?P<word>(?:(?P<hour>kl|klo|ore|godz)|alle|ve?|o|om|ob|u)\.?\s?)"
_TIME = re.compile(
    rf"(?<![\w.:,]){_CLOCK_WORD}?(?P<h>[01]?\d|2[0-3])(?:[:h](?P<m>[0-5]\d)(?::[0-5]\d)?(?![\d:])"
    rf"|\.(?P<dm>[0-5]\d)(?(word)(?!\d|[.,]\d)|(?={_CLOCK}))|(?(hour)(?![.,:]?\d)|(?={_CLOCK})))"
    rf"(?:\s?(?P<half>[ap])\.?m\.?)?(?![\w:])",
    re.IGNORECASE,
)
_LINE_BREAK = r"(?: |[ \t]*\n[ \t]*)"


def _wrapping(pattern: str) -> re.Pattern[str]:
    """``pattern`` with each space a space or a line break (blanks around it): a date in a
    wrapped paragraph (``el día 27 de`` / ``febrero de 2026``) is read as on one line."""
    return re.compile(pattern.replace(" ", _LINE_BREAK))


_MONTH = r"(?P<mon>[^\W\d_]{3,12})\.?"
_DAY = r"(?P<day>\d{1,2})(?:st|nd|rd|th|er|º|°)?\.?"
_YEAR = r"(?P<year>\d{4})"
_YY = r"(?P<yy>\d{2})"  # a year of this century by its last two digits
_DATES = [
    _wrapping(rf"(?<![\w\-/.]){_YEAR}(?P<sep>[\-/.])(?P<num>\d{{1,2}})(?P=sep){_DAY}(?![\w\-/])"),
    _wrapping(rf"\b{_MONTH} {_DAY},? {_YEAR}\b"),
    _wrapping(rf"\b{_DAY} (?:de |of )?{_MONTH},? (?:del? )?{_YEAR}\b"),
    _wrapping(rf"(?<![\w\-/.]){_DAY}-{_MONTH}-(?:{_YEAR}|{_YY})(?![\w\-/])"),  # 03-Mar-26
    _wrapping(rf"\b{_DAY} {_MONTH} '{_YY}\b"),  # 3 Mar '26
]
# the first day of a range or pair of days that names its month and year once (4-6 December
# 2026, du 4 au 6 décembre 2026, 4. bis 6. Dezember 2026, del 4 al 6 de diciembre de 2026, Dec
# 4-6, 2026, 7 y 8 de noviembre de 2026; a weekday before the last day: sábado 7 y domingo 8)
_TO = (
    r"(?:\s?[\-\u2013\u2014&]\s?|\s(?:au|bis|al|a|to|until|through|and|und|et|y|e|i|og|och|en)\s)"
    r"(?:del?\s)?(?:[^\W\d_]{3,10},?\s)?"
)
_FIRST = r"(?P<first>\d{1,2})(?:st|nd|rd|th|er|º|°)?\.?"
# (month first, the last day is no date of ``_DATES`` either: both days read here)
_RANGES = [
    (_wrapping(rf"\b{_FIRST}{_TO}{_DAY} (?:de )?{_MONTH},? (?:de )?{_YEAR}\b"), ("first",)),
    (_wrapping(rf"\b{_MONTH} {_FIRST}{_TO}{_DAY},? {_YEAR}\b"), ("first", "day")),
]
# a day and month without a year (October 14, 14 octobre, 14. Oktober): read by the dates the
# text gives beside it (its full dates, a month and year: Newsletter März 2026)
_MONTH_YEAR = _wrapping(rf"\b{_MONTH},? (?:de )?{_YEAR}\b")
_WEEKDAY = re.compile(r"([^\W\d_]+)(?:-[^\W\d_]+)?(\.)?,?\s(?:(?:den|le|el|il|de)\s)?$")
_YEARLESS = [
    re.compile(rf"\b{_MONTH} {_DAY}(?![\w\-/]|\.\d|,? \d)"),
    re.compile(rf"\b{_DAY} (?:de )?{_MONTH}(?![\w\-/]|\.\d|,? (?:de )?\d)"),
]
_WORD_MONTHS = {"may"}  # month names that are also words: a month only with a capital
# day first: dotted dates everywhere, slashed ones where the text writes decimal commas
_DOTTED = re.compile(
    r"(?<![\w\-/.])(?P<day>\d{1,2})\. ?(?P<num>\d{1,2})\. ?(?:(?P<year>\d{4})|(?P<yy>\d{2}))"
    r"(?![\w\-/]|[.,]\d)"
)  # 04.03.2026, 28. 3. 2026, 04.03.26
_SLASHED = re.compile(r"(?<![\w\-/.])(\d{1,2})[\-/](\d{1,2})[\-/](\d{4})(?![\w\-/])")
_CODE = re.compile(r"(?<![A-Za-z])[A-Z]{3}(?![A-Za-z])")
# a currency sign of the lexicon, the longest first (``R$`` before ``$``); one of letters only
# as a word (``zł``, not inside ``złoty``)
_SIGN = re.compile(
    "|".join(
        rf"(?<![^\W\d_]){re.escape(s)}(?![^\W\d_])" if s[0].isalpha() else re.escape(s)
        for s in sorted(LEXICON.currency_signs, key=len, reverse=True)
    )
)
# a phone number as printed: an optional + or (+, digits in groups joined by a space, dot, dash,
# slash or parentheses (+49 176 44455566, (555) 123-4567, 05 56 44 21 90)
_PHONE = re.compile(
    r"(?<![\w+.,/(-])(?:\+|\(\+?(?=\d))?\d[\d()]*(?:(?:[ ./-]| [-–/] )\(?\d[\d()]*)*(?![\w,.]?\d|/)"
)  # groups apart by a space, dot, hyphen or slash, or a spaced dash or slash (``030 - 232 18``)
# how far a number's unit may stand from it, what ends its clause first, and what ends the
# label before it (its sentence's, its table row's)
_UNIT_REACH = 24
# the rest of a range after its first number (`` – 9 000``, ``-£44``, `` bis 5.200``): the
# range's unit is its last number's
_RANGE_REST = re.compile(
    r"\s?(?:[-\u2013\u2014]|to|bis|à|a|al|até|do|tot|till)\s?[^\w\s]{0,2}\s?\d[\d .,']*"
)
_UNIT_STOP = re.compile(r"[0-9\n;()|\[\]]|,\s")
_LABEL_STOP = re.compile(r"[0-9\n;()\[\].,!?]")
# a DOI (Crossref's pattern for modern DOIs: 10.prefix/suffix), without the punctuation after it
_DOI = re.compile(r"(?<![\w.])10\.\d{4,9}/[-._;()/:A-Za-z0-9]+")
_ZONE_OFFSET = re.compile(r" ?[+-][01]\d[0-5]\d(?!\d)")  # a timestamp's +0100 after its time
_CLOCK_TIME = re.compile(r"(?<![\d:.,])\d{1,2}:\d{2}(?::\d{2})?(?![\d:])")
# a month and year in digits (03/2021, 03.2021, 2021-03) or a year range without spaces
# (2014-2016): its years are numbers, as in ``März 2021`` and ``2014 – 2016``
_YYYY = r"(?:19|20)\d\d"
_MONTH_NUM = r"(?:0?[1-9]|1[0-2])"
_PERIOD = re.compile(
    rf"(?<![\w.,\-/])(?:{_MONTH_NUM}[./](?P<y1>{_YYYY})|(?P<y2>{_YYYY})-{_MONTH_NUM}"
    rf"|(?P<y3>{_YYYY})[-\u2013/](?P<y4>{_YYYY}))(?![\w\-/]|[.,]\d)"
)
_PERIOD_YEARS = ("y1", "y2", "y3", "y4")
_YEAR_IN = re.compile(r"\d{4}")  # a date's year
_YEARS = re.compile(r"(?:19|20)\d\d\s?[-–/]\s?(?:19|20)\d\d")  # a range of years
_ACT = re.compile(r"\d{1,4}/(?:19|20)\d\d|(?:19|20)\d\d/\d{1,4}")  # an act's number, no phone
# an IBAN as printed: country, check digits, then letters and digits in groups of four (the
# last shorter) with or without a space between groups
_IBAN = re.compile(
    r"(?<![A-Za-z0-9])[A-Z]{2}\d{2}(?:[ \u00a0]?[A-Z0-9]{4})+(?:[ \u00a0]?[A-Z0-9]{1,3})?(?![A-Za-z0-9])"
)


def numbers_in(source: str) -> list[float]:
    """The numbers a text states, read in its own locale, each once, in order. A number that
    reads two ways (``1,580``: 1580 or 1.58) takes the text's decimal mark, or both readings when
    the text never shows which mark it uses."""
    return list(dict.fromkeys(number_mentions(source)))


def numbers_in_units(source: str, units: frozenset[str]) -> list[float]:
    """The numbers a text states (as ``numbers_in``) less those stated only in a unit outside
    ``units`` (the lexicon's ``hour``, ``month``, ``square_metre``, ``percent`` ...): for a
    field that names its unit, ``15,50 € pro Stunde`` is no yearly salary."""
    spans = number_spans(source)
    return list(dict.fromkeys(v for s, e, v in spans if _unit(source, s, e) in (None, *units)))


def _unit(source: str, start: int, end: int) -> str | None:
    """The unit a number's next words name (``€ brutto pro Stunde``, ``m²``) within its clause
    (no digit, line break, bracket, semicolon or comma between: ``£44k pro rata, paid
    monthly`` is yearly), else the last its label names (``Stundenlohn:``, same sentence); a
    range's first number has its last's (``7 500 – 9 000 zł miesięcznie``: both monthly)."""
    if rest := _RANGE_REST.match(source, end):
        end = rest.end()
    after = source[end : end + _UNIT_REACH]
    after = after[: stop.start()] if (stop := _UNIT_STOP.search(after)) else after
    if found := LEXICON.units_in(after):
        return found[0][1]
    before = source[max(0, start - _UNIT_REACH) : start]
    before = before[max((m.end() for m in _LABEL_STOP.finditer(before)), default=0) :]
    found = LEXICON.units_in(before)
    return found[-1][1] if found else None


def number_mentions(source: str) -> list[float]:
    """Every reading of every number a text states (as ``numbers_in``, repeats kept)."""
    return [value for _, _, value in number_spans(source)]


def number_spans(source: str) -> list[tuple[int, int, float]]:
    """``(start, end, reading)`` for every reading of every number a text states, in order
    (``95k``, ``$1.5K``: thousands); the hours and minutes of a clock time (``18:00``) are a
    time's, no number's; a date's day is the date's (``7 kwietnia 2026`` states no 7), not its
    year; a month in digits beside its year (``03/2021``) states the year."""
    periods = list(_PERIOD.finditer(source))
    dates = [(s, e) for s, e, _ in date_spans(source)]
    taken = [m.span() for m in (*_CLOCK_TIME.finditer(source), *periods)]
    found = [
        m
        for m in _NUMBER.finditer(source)
        if not any(s <= m.start() < e for s, e in taken)
        and (_YEAR_IN.fullmatch(m.group()) or not any(s <= m.start() < e for s, e in dates))
    ]
    mark = decimal_mark([m.group() for m in found])
    spans = [(m.start(), m.end(), v) for m in found for v in _readings(m.group(), mark)]
    spans += [(m.start(g), m.end(g), float(m[g])) for m in periods for g in _PERIOD_YEARS if m[g]]
    for m in _THOUSANDS.finditer(source):
        spans.append((m.start(), m.end(), round(float(m.group(1).replace(",", ".")) * 1000, 6)))
    return sorted(spans, key=lambda s: (s[0], s[1]))


def period_spans(source: str) -> list[tuple[int, int]]:
    """``(start, end)`` of each period a text states, in order: a month of a year (``03/2021``,
    ``2021-03``, ``Sept. 2019``, ``März 2021``) or a range of years (``2014-2016``, ``2017 –
    2019``)."""
    named = [m.span() for m in _MONTH_YEAR.finditer(source) if m["mon"].lower() in LEXICON.months]
    return sorted(
        [*(m.span() for m in (*_PERIOD.finditer(source), *_YEARS.finditer(source))), *named]
    )


def decimal_mark(runs: list[str]) -> str | None:
    """``","`` or ``"."`` where the numbers show their decimal mark unambiguously (``264,30``,
    ``1.190,00``, ``2400.00``), the more common one; None when none does."""
    votes = {",": 0, ".": 0}
    for run in runs:
        marks = [c for c in run if c in ".,"]
        tail = re.split(r"[.,]", run)[-1]
        if marks and (len(set(marks)) == 2 or (len(marks) == 1 and len(tail) != 3)):
            votes[marks[-1]] += 1
    best = max(votes, key=votes.__getitem__)
    return best if votes[best] else None


def _readings(run: str, mark: str | None) -> list[float]:
    sign, body = ("-", run[1:]) if run.startswith("-") else ("", run)
    if any(c in body for c in _SPACES):
        head = re.split(r"[.,](?=\d+$)", body)
        whole = re.sub(f"[{_SPACES}]", "", head[0])
        value = float(f"{sign}{whole}.{head[1]}" if len(head) > 1 else f"{sign}{whole}")
        parts = [p for p in re.split(r" ", body) if p] if " " in body else []
        return (
            [value, *(v for p in parts for v in _readings(p, mark))] if len(parts) > 1 else [value]
        )
    parts = re.split(r"([.,])", body)
    digits, seps = parts[::2], parts[1::2]
    if not seps:
        return [float(sign + body)]
    last = seps[-1]
    grouping = seps[:-1]
    groups_ok = all(len(d) == 3 for d in digits[1:-1]) and len(digits[0]) <= 3
    if grouping and (set(grouping) != {grouping[0]} or not groups_ok):
        return []  # 1.2.3, 1,2.3: a version or a list, not one number
    if grouping and grouping[0] != last:  # 1.190,00 / 15,750.00
        return [float(sign + "".join(digits[:-1]) + "." + digits[-1])]
    if grouping:  # 1,234,567 / 1.234.567: grouping only
        return [float(sign + "".join(digits))] if len(digits[-1]) == 3 else []
    if len(digits[-1]) != 3 or len(digits[0]) > 3 or digits[0] == "0":  # 264,30 / 2400.00
        return [float(f"{sign}{digits[0]}.{digits[1]}")]
    thousands, decimal = float(sign + "".join(digits)), float(f"{sign}{digits[0]}.{digits[1]}")
    if mark is None:
        return [thousands, decimal]
    return [decimal] if mark == last else [thousands]


def dates_in(source: str) -> list[str]:
    """The calendar dates a text states, as ISO ``YYYY-MM-DD``, each once, in order of first
    appearance; a date this cannot read unambiguously (``03/04/2024`` in a text with decimal
    points: day or month first?) as both its readings, day first first."""
    return list(dict.fromkeys(date_mentions(source)))


def date_mentions(source: str) -> list[str]:
    """Every reading of every place a text states a calendar date (ISO, in order, repeats
    kept)."""
    return [iso for _, _, iso in date_spans(source)]


def date_spans(source: str) -> list[tuple[int, int, str]]:
    """``(start, end, iso)`` for every reading of every date a text states, in order (an
    ambiguous slashed date: two readings at one place)."""
    found = []
    for pattern in [*_DATES, _DOTTED]:
        for m in pattern.finditer(source):
            iso = _iso(m.groupdict())
            if iso is not None:
                found.append((m.start(), m.end(), iso))
    for pattern, days in _RANGES:
        for m in pattern.finditer(source):
            if _iso(m.groupdict()) is None:
                continue
            for day in days:
                iso = _iso({**m.groupdict(), "day": m.group(day)})
                if iso is not None:
                    found.append((m.start(day), m.end(day), iso))
    day_first = decimal_mark([m.group() for m in _NUMBER.finditer(source)]) == ","
    for m in _SLASHED.finditer(source):
        a, b, year = (int(g) for g in m.groups())
        if a > 12 or day_first or a == b:
            orders = [(a, b)]
        elif b > 12:
            orders = [(b, a)]
        else:
            orders = [(a, b), (b, a)]  # day or month first: both readings
        for day, month in orders:
            iso = _iso({"day": day, "num": month, "year": year})
            if iso is not None:
                found.append((m.start(), m.end(), iso))
    found += _yearless(source, found)
    return sorted(found, key=lambda f: (f[0], f[1]))


def _yearless(source: str, found: list[tuple[int, int, str]]) -> list[tuple[int, int, str]]:
    """The dates stated without a year, where no full date covers the place: for each date the
    text gives (``_anchors``, the nearest first), the day's occurrence nearest it (``28
    December`` in a letter of 11 January 2027: 2026-12-28), and on the same line its own year
    too (``December 3 and March 4, 2024``); after a weekday, of the years before, of and after
    each, those where it falls on that day."""
    full, named = _anchors(source, found)
    out = []
    for pattern in _YEARLESS:
        for m in pattern.finditer(source):
            at = m.start()
            if m["mon"] in _WORD_MONTHS or any(a < m.end() and at < b for a, b, _ in found):
                continue
            line_start, line_end = source.rfind("\n", 0, at) + 1, source.find("\n", at)
            line_end = len(source) if line_end < 0 else line_end
            near, years = [], []
            for where, anchor in [*_nearest(full, at), *_nearest(named, at)]:
                isos = [_iso({**m.groupdict(), "year": anchor.year + d}) for d in (0, -1, 1)]
                ranked = sorted(
                    filter(None, isos), key=lambda d: abs(datetime.date.fromisoformat(d) - anchor)
                )
                near += ranked
                if line_start <= where <= line_end and isos[0]:
                    years.append(isos[0])
                years += ranked[:1]
            days = _weekday_before(source, at)
            chosen = [d for d in near if _weekday(d) in days] or years
            out += [(at, m.end(), d) for d in dict.fromkeys(chosen)]
    return out


def _anchors(
    source: str, found: list[tuple[int, int, str]]
) -> tuple[list[tuple[int, datetime.date]], list[tuple[int, datetime.date]]]:
    """The dates a text gives for its dates without a year, each with its place: its full
    dates, and the middle of each month it names with a year (``März 2026``)."""
    full = [(a, datetime.date.fromisoformat(iso)) for a, _, iso in found]
    named = [
        (m.start(), datetime.date(int(m["year"]), LEXICON.months[m["mon"].lower()], 15))
        for m in _MONTH_YEAR.finditer(source)
        if m["mon"].lower() in LEXICON.months
        and not any(a < m.end() and m.start() < b for a, b, _ in found)
    ]
    return full, named


def _nearest(anchors: list[tuple[int, datetime.date]], at: int) -> list[tuple[int, datetime.date]]:
    return sorted(anchors, key=lambda f: abs(f[0] - at))


def _weekday_before(source: str, at: int) -> frozenset[int]:
    """The weekdays the word just before ``at`` names (``Saturday,``, ``Sa.``, ``samedi le``)."""
    m = _WEEKDAY.search(source, max(0, at - 24), at)
    return LEXICON.weekdays_named(m[1], dotted=bool(m[2])) if m else frozenset()


def _weekday(iso: str) -> int:
    return datetime.date.fromisoformat(iso).weekday()


def times_in(source: str) -> list[str]:
    """The times of day a text states, as 24-hour ``HH:MM``, each once, in order (``9:15``,
    ``09.15 Uhr``, ``15h30``, ``3 pm``, ``kl. 18.30`` -> ``09:15``, ``09:15``, ``15:30``,
    ``15:00``, ``18:30``); not a timestamp's (``Date: Tue, 10 Mar 2026 21:14:03 +0100``, an
    e-mail's, with its zone offset: when it was sent, no time it speaks of)."""
    out = []
    for m in _TIME.finditer(source):
        if _ZONE_OFFSET.match(source, m.end()):
            continue
        hour, minute = int(m["h"]), int(m["m"] or m["dm"] or 0)
        half = (m["half"] or "").lower()
        if half and not 1 <= hour <= 12:
            continue
        if half:
            hour = hour % 12 + (12 if half == "p" else 0)
        out.append(f"{hour:02d}:{minute:02d}")
    return list(dict.fromkeys(out))


def readings_in(source: str) -> list[str]:
    """The dates (ISO) and times of day (``HH:MM``) a text states, normalized: the spellings a
    grounded string with a ``pattern`` may take besides the text's own spans."""
    return [*dates_in(source), *times_in(source)]


def currencies_in(source: str) -> list[str]:
    """The ISO 4217 codes of the currencies a text states by code or sign (``€``, ``R$``, a
    ``zł`` that stands as a word), each once, in order."""
    found = [
        (m.start(), m.group())
        for m in _CODE.finditer(source)
        if m.group() in LEXICON.currency_codes
    ]
    found += [(m.start(), LEXICON.currency_signs[m.group()]) for m in _SIGN.finditer(source)]
    return list(dict.fromkeys(code for _, code in sorted(found)))


def ibans_in(source: str) -> list[str]:
    """The IBANs a text states, as written (``DE89 3704 0044 0532 0130 00``,
    ``GB29NWBK60161331926819``), each once: the shape of ISO 13616 (15 to 34 letters and digits
    after a country's letters and two check digits), not its checksum (a value is extracted as
    printed, not validated), so a tax, card or company number never passes."""
    found = [m.group() for m in _IBAN.finditer(source)]
    return list(dict.fromkeys(v for v in found if 15 <= len(re.sub(r"[ \u00a0]", "", v)) <= 34))


def phones_in(source: str) -> list[str]:
    """The phone numbers a text states, as written, each once: 7 to 15 digits in groups
    (E.164's length), not a date, an amount, a period (``2020-2023``, ``09/2017 – 02/2021``) or
    an act's number and year (``Regulation (EU) 2016/679``, ``D.Lgs. 196/2003``)."""
    found = []
    for m in _PHONE.finditer(source):
        text = m.group()
        digits = sum(c.isdigit() for c in text)
        no_phone = dates_in(text) or period_spans(text) or _ACT.fullmatch(text)
        if 7 <= digits <= 15 and not no_phone:
            found.append(text)
    return list(dict.fromkeys(found))


def dois_in(source: str) -> list[str]:
    """The DOIs a text states (``10.18653/v1/2025.acl-1.11``), each once, without the
    sentence's punctuation after them."""
    return list(dict.fromkeys(m.group().rstrip(".,;:)]") for m in _DOI.finditer(source)))


def currencies_named(source: str) -> set[str]:
    """The ISO 4217 codes of the currencies a text names in words (``euros``, ``Franken``;
    ``dollars``: every code a bare ``$`` may stand for)."""
    words = set(re.findall(r"\w+", source.lower()))
    named = {
        code for name, codes in LEXICON.currency_names.items() if name in words for code in codes
    }
    return named | (set(LEXICON.dollars) if words & {"dollar", "dollars"} else set())


def _iso(parts: dict) -> str | None:
    if parts.get("num") is not None:
        month = int(parts["num"])
    else:
        month = LEXICON.months.get(parts["mon"].lower())
        if month is None:
            return None
    year = int(parts["year"]) if parts.get("year") else 2000 + int(parts["yy"])
    try:
        return datetime.date(year, month, int(parts["day"])).isoformat()
    except ValueError:
        return None
