"""``format: "date"``, ``"time"`` and ``"date-time"`` as patterns: RFC 3339 §5.6, narrowed to
what every common checker accepts, so that generated values validate everywhere.

RFC 3339's ABNF admits year ``0000`` (``date-fullyear = 4DIGIT``) and a leap second
(``time-second`` up to 60). jsonschema's ``FormatChecker`` (the oracle of Stencil's tests;
``datetime.date.fromisoformat`` for ``date``, ``rfc3339-validator`` for ``date-time`` and, in
drafts 2019-09 / 2020-12, for ``time``: a full-time with its offset) rejects both, and so do
these patterns: years 0001-9999 and seconds 00-59. What RFC 3339
§5.7 and both checkers require is kept: months 01-12, days within the month, February 29
only in leap years (Appendix C: divisible by 4, centuries only by 400), hours 00-23, minutes
00-59, offsets ``Z`` or ``+hh:mm`` / ``-hh:mm``, ``T`` / ``Z`` in either case (§5.6 note).
llguidance's native formats differ: year 0000, February 29 of any year, second 60.
"""

from __future__ import annotations

_YEAR = "(?:[1-9][0-9]{3}|0[1-9][0-9]{2}|00[1-9][0-9]|000[1-9])"  # 0001-9999
_LEAP_YEAR = (  # 0004-9996 by 4 but not 100, or 0400-9600 by 400; never 0000
    "(?:[0-9]{2}(?:0[48]|[2468][048]|[13579][26])|(?:0[48]|[2468][048]|[13579][26])00)"
)
_MONTH_DAY = (
    "(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])"
    "|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)"
    "|02-(?:0[1-9]|1[0-9]|2[0-8]))"
)
_FULL_DATE = f"(?:{_YEAR}-{_MONTH_DAY}|{_LEAP_YEAR}-02-29)"
_HOUR_MINUTE = "(?:[01][0-9]|2[0-3]):[0-5][0-9]"
_FULL_TIME = f"{_HOUR_MINUTE}:[0-5][0-9](?:\\.[0-9]+)?(?:[zZ]|[+-]{_HOUR_MINUTE})"

FULL_DATE = f"^{_FULL_DATE}$"
FULL_TIME = f"^{_FULL_TIME}$"
DATE_TIME = f"^{_FULL_DATE}[tT]{_FULL_TIME}$"
