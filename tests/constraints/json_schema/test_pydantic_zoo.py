"""The Pydantic promise: for a model's JSON schema, every output that ends with EOS passes
``Model.model_validate_json`` (seeded random token walks, no model needed); valid dumps are
accepted and Pydantic-invalid ones refused. Known gaps of the schemas Pydantic emits
(``Decimal`` admits any string, ``HttpUrl``'s scheme rule) are in docs/constraints.md."""

from __future__ import annotations

import datetime
import ipaddress
import random
import uuid
from enum import StrEnum
from typing import Annotated, Literal

import pytest
from constraint_helpers import accepts_text, walk

pydantic = pytest.importorskip("pydantic")
pytest.importorskip("email_validator")
from pydantic import (  # noqa: E402
    UUID1,
    UUID3,
    UUID4,
    UUID5,
    UUID6,
    UUID7,
    UUID8,
    AnyUrl,
    Base64Bytes,
    Base64Str,
    BaseModel,
    EmailStr,
    Field,
    IPvAnyAddress,
    IPvAnyInterface,
    IPvAnyNetwork,
    NameEmail,
    ValidationError,
    confloat,
    conint,
    conset,
    constr,
)

from stencil.constraints import Constraint  # noqa: E402


class Color(StrEnum):
    RED = "red"
    GREEN = "green"


class Cat(BaseModel):
    kind: Literal["cat"]
    lives: conint(ge=0, le=9)


class Dog(BaseModel):
    kind: Literal["dog"]
    good: bool


class Node(BaseModel):
    v: int
    children: list[Node] = Field(default_factory=list, max_length=2)


class Sets(BaseModel):
    s: set[int]
    fs: frozenset[str]
    cs: conset(int, min_length=1, max_length=3)
    colors: set[Color]
    flags: set[bool]


class Numbers(BaseModel):
    f: confloat(ge=0, lt=1)
    i: conint(multiple_of=5)
    o: int | None
    c: constr(pattern=r"^[a-z]{2,4}$")
    lit: Literal["a", "b"]


class Ids(BaseModel):
    u1: UUID1
    u3: UUID3
    u4: UUID4
    u5: UUID5
    u6: UUID6
    u7: UUID7
    u8: UUID8
    u: uuid.UUID


class Addresses(BaseModel):
    ip: IPvAnyAddress
    iface: IPvAnyInterface
    net: IPvAnyNetwork
    v4: ipaddress.IPv4Address
    v6: ipaddress.IPv6Address


class Contacts(BaseModel):
    email: EmailStr
    named: NameEmail


class Dates(BaseModel):
    dt: datetime.datetime
    d: datetime.date
    t: datetime.time
    span: datetime.timedelta


class Encoded(BaseModel):
    text: Base64Str
    data: Base64Bytes
    raw: bytes
    url: AnyUrl


class Pets(BaseModel):
    pet: Annotated[Cat | Dog, Field(discriminator="kind")]
    pets: list[Cat | Dog] = Field(max_length=3)


class Tree(BaseModel):
    root: Node


ZOO = [Sets, Numbers, Ids, Addresses, Contacts, Dates, Encoded, Pets, Tree]


@pytest.mark.parametrize("model", ZOO, ids=lambda m: m.__name__)
def test_every_finished_walk_validates(qwen_compiler, model):
    compiled = qwen_compiler.compile(Constraint.json_schema(model.model_json_schema()))
    rng = random.Random(len(model.__name__))
    walks = [walk(compiled, rng, max_tokens=200) for _ in range(6)]
    for w in walks:
        if w.outcome == "done":
            model.model_validate_json(w.text)
    if model in FINISHING:
        assert any(w.outcome == "done" for w in walks)


# Random text rarely forms a valid IP, email, base64 or 8 UUIDs within 200 tokens: those
# walks end by length or in the error state (never invalid); their values are checked below.
FINISHING = (Sets, Numbers, Dates, Pets, Tree)


VALID = {
    Sets: Sets(s={1, 2}, fs=frozenset({"a", "b"}), cs={3}, colors={Color.RED}, flags={True}),
    Ids: Ids(
        u1=uuid.uuid1(),
        u3=uuid.uuid3(uuid.NAMESPACE_DNS, "a"),
        u4=uuid.uuid4(),
        u5=uuid.uuid5(uuid.NAMESPACE_DNS, "a"),
        u6=uuid.UUID("1ef21d2f-1207-6660-8c4f-419efbd44d48"),
        u7=uuid.UUID("0190163d-8694-739b-aea5-966c26f8ad91"),
        u8=uuid.UUID("320c3d4d-cc00-875b-8ec9-32d5f69181c0"),
        u=uuid.uuid4(),
    ),
    Addresses: Addresses(
        ip="10.0.0.1", iface="10.0.0.1/24", net="10.0.0.0/24", v4="192.168.1.1", v6="::1"
    ),
    Contacts: Contacts(email="ada@example.com", named="Ada <ada@example.com>"),
    Encoded: Encoded.model_validate(
        {"text": "aGk=", "data": "aGVsbG8=", "raw": "x", "url": "https://example.com/a"}
    ),
}
INVALID = [  # Pydantic refuses these; so must the matcher
    # (duplicate set items are Pydantic-valid (de-duplicated) but break ``uniqueItems``:
    # refused too, see test_semantic_checks)
    (
        Ids,
        '{"u1": "%s", "u3": "%s", "u4": "%s", "u5": "%s", "u6": "%s", "u7": "%s", '
        '"u8": "%s", "u": "%s"}' % ((str(uuid.uuid4()),) * 8),
    ),
    (
        Addresses,
        '{"ip": "10.0.0.256", "iface": "10.0.0.1/24", "net": "10.0.0.0/24", '
        '"v4": "1.1.1.1", "v6": "::1"}',
    ),
    (
        Addresses,
        '{"ip": "10.0.0.1", "iface": "10.0.0.1/24", "net": "10.0.0.1/24", '
        '"v4": "1.1.1.1", "v6": "::1"}',
    ),
    (Contacts, '{"email": "ada@localhost", "named": "Ada <ada@example.com>"}'),
    (Encoded, '{"text": "/w==", "data": "aGk=", "raw": "x", "url": "https://example.com"}'),
]


@pytest.mark.parametrize("model", list(VALID), ids=lambda m: m.__name__)
def test_pydantic_dumps_are_accepted(qwen_compiler, qwen_tokenizer, model):
    compiled = qwen_compiler.compile(Constraint.json_schema(model.model_json_schema()))
    text = VALID[model].model_dump_json()
    assert accepts_text(compiled, qwen_tokenizer, text), text


@pytest.mark.parametrize(("model", "text"), INVALID, ids=lambda x: getattr(x, "__name__", ""))
def test_pydantic_invalid_is_refused(qwen_compiler, qwen_tokenizer, model, text):
    with pytest.raises(ValidationError):
        model.model_validate_json(text)
    compiled = qwen_compiler.compile(Constraint.json_schema(model.model_json_schema()))
    assert not accepts_text(compiled, qwen_tokenizer, text), text
