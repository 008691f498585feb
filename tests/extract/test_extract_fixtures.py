"""Sample documents for the ``stencil extract`` tests: mixed formats, a hand-written PDF with a
text layer, and the bad files (binary, empty, unreadable, non-UTF-8)."""

from __future__ import annotations

import json
import os
from pathlib import Path

PEOPLE = [
    ("Ada Lovelace", 36), ("Alan Turing", 41), ("Grace Hopper", 85), ("Linus Pauling", 93),
    ("Marie Curie", 66), ("Carl Gauss", 77), ("Emmy Noether", 53), ("John Nash", 86),
    ("Rosa Parks", 92), ("Nikola Tesla", 86), ("Ida Wells", 68), ("Kurt Godel", 71),
    ("Sofia Kovalevskaya", 41), ("Max Planck", 89), ("Lise Meitner", 89), ("Niels Bohr", 77),
]  # fmt: skip

# A schema small enough that every output ends well inside max_tokens=48.
TEST_SCHEMA = {
    "title": "person",
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 24},
        "age": {"type": "integer", "minimum": 0, "maximum": 120},
    },
    "required": ["name", "age"],
    "additionalProperties": False,
}

BAD_FILES = {"binary.bin", "empty.txt", "broken_link.txt", "fifo.txt"}

# a German invoice in the shape of a real one (not the evaluation corpus's), and the values it
# states for the fields of the invoice schema (its labels are quoted in the questions)
INVOICE_DE = """Schreinerei Holzwurm GmbH · Lindenweg 3 · 79098 Freiburg

Rechnung Nr. 2025-0042
Rechnungsdatum: 03.02.2025
Kunde: Café Morgenrot

Pos. Bezeichnung            Menge   Betrag
1    Tischplatte Eiche          1   840,00
2    Montage                    3   210,00

Nettobetrag:        1.050,00 €
zzgl. 19 % MwSt.:     199,50 €
Gesamtbetrag:       1.249,50 €
Zahlbar bis 17.02.2025 ohne Abzug.
"""
INVOICE_DE_LABELLED = {"invoice_number": "2025-0042", "issue_date": "2025-02-03", "currency": "EUR"}


def minimal_pdf(text: str) -> bytes:
    """A one-page PDF whose text layer says ``text`` (hand-written, correct xref offsets)."""
    stream = f"BT /F1 12 Tf 72 720 Td ({text}) Tj ET".encode("latin-1")
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
        b"/Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for i, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % i + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % o for o in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1,
        xref,
    )
    return bytes(out)


def write_sample_folder(root: Path) -> dict[str, str]:
    """20 files: 16 readable documents in 8 formats/encodings + 4 bad ones. Returns
    {relative path: the person's name} for the readable ones."""
    root.mkdir(parents=True, exist_ok=True)
    expected: dict[str, str] = {}
    writers = [_txt, _md, _html, _json, _csv, _pdf, _latin1, _utf16]
    for i, (name, age) in enumerate(PEOPLE):
        rel = writers[i % len(writers)](root, i, name, age)
        expected[rel] = name
    (root / "binary.bin").write_bytes(bytes(range(256)) * 8)
    (root / "empty.txt").write_bytes(b"")
    os.symlink(root / "does-not-exist.txt", root / "broken_link.txt")
    os.mkfifo(root / "fifo.txt")  # opening it would block: must be refused, not read
    return expected


def _txt(root: Path, i: int, name: str, age: int) -> str:
    (root / f"doc{i:02d}.txt").write_text(f"{name} is {age} years old.\n", encoding="utf-8")
    return f"doc{i:02d}.txt"


def _md(root: Path, i: int, name: str, age: int) -> str:
    rel = f"notes/doc{i:02d}.md"
    (root / "notes").mkdir(exist_ok=True)
    (root / rel).write_text(f"# Profile\n\n**Name:** {name}\n**Age:** {age}\n", encoding="utf-8")
    return rel


def _html(root: Path, i: int, name: str, age: int) -> str:
    html = (f"<html><head><style>p{{color:red}}</style></head><body><p>{name} is {age} "
            f"years old.</p><script>var x = 1;</script></body></html>")  # fmt: skip
    (root / f"doc{i:02d}.html").write_text(html, encoding="utf-8")
    return f"doc{i:02d}.html"


def _json(root: Path, i: int, name: str, age: int) -> str:
    (root / f"doc{i:02d}.json").write_text(json.dumps({"person": name, "years": age}))
    return f"doc{i:02d}.json"


def _csv(root: Path, i: int, name: str, age: int) -> str:
    (root / f"doc{i:02d}.csv").write_text(f"name,age\n{name},{age}\n", encoding="utf-8")
    return f"doc{i:02d}.csv"


def _pdf(root: Path, i: int, name: str, age: int) -> str:
    (root / f"doc{i:02d}.pdf").write_bytes(minimal_pdf(f"{name} is {age} years old."))
    return f"doc{i:02d}.pdf"


def _latin1(root: Path, i: int, name: str, age: int) -> str:
    text = f"Fiche: {name}, âgé de {age} ans, né à Genève. Café crème préféré.\n"
    (root / f"doc{i:02d}_latin1.txt").write_bytes(text.encode("latin-1"))
    return f"doc{i:02d}_latin1.txt"


def _utf16(root: Path, i: int, name: str, age: int) -> str:
    text = f"Grüße! {name} ist {age} Jahre alt.\n"
    (root / f"doc{i:02d}_utf16.txt").write_bytes(text.encode("utf-16"))
    return f"doc{i:02d}_utf16.txt"
