"""One hostile request and the answer it must get (``hostile_corpus``, ``hostile_responses``)."""

from __future__ import annotations

from dataclasses import dataclass, field

MB = 1 << 20
CHAT = "/v1/chat/completions"


@dataclass(frozen=True)
class Payload:
    name: str
    category: str
    body: bytes
    path: str = CHAT
    headers: dict[str, str] = field(default_factory=dict)
    expect: frozenset[int] = frozenset({400})
    compile_bound: bool = False  # may run into the constraint compile budget first
    echo: str = ""  # a piece of user input that must not come back whole in the error text
    known_bug: str = ""  # an open bug makes the server answer otherwise (the tests xfail it)
    method: str = "POST"
