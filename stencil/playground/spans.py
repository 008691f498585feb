"""Where each extracted value came from, for the page: ``stencil extract``'s spans
(``stencil.extract.spans``) with the text at each and how it was read. Offsets count code points
(Python's ``str`` indices; ``Array.from(text)`` in JavaScript)."""

from __future__ import annotations

from typing import Any

from stencil.extract.spans import Locator, escape_pointer, key_words


def locate(document: str, value: Any) -> list[dict[str, Any]]:
    """One entry per leaf of ``value`` found in ``document``: its JSON pointer, ``start``,
    ``end``, the ``text`` there, and ``how`` (``verbatim`` or ``stated``)."""
    locator = Locator(document)
    fields = value.items() if isinstance(value, dict) else [("", value)]
    return [
        {"pointer": pointer, "start": start, "end": end, "text": document[start:end], "how": how}
        for key, sub in fields
        for pointer, start, end, how in locator.place(
            f"/{escape_pointer(key)}" if isinstance(value, dict) else "", key_words(key), sub
        )
    ]
