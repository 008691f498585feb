"""``stencil extract --review``: one self-contained page that parses, holds each document's text
(escaped), and marks each value where its span says, from an existing results JSONL."""

from __future__ import annotations

import hashlib
import json
from html.parser import HTMLParser
from pathlib import Path

from stencil.cli import build_parser
from stencil.extract.command import run
from stencil.extract.spans import Locator

DOCS = {
    "invoice.txt": ('Acme <Tools> & "Sons"\nInvoice INV-7\nTotal: 1.190,00 EUR\nDate: 4. März 2024\n',
                    {"seller": "Acme <Tools> & \"Sons\"", "total": 1190.0, "date": "2024-03-04",
                     "items": [{"name": "Acme", "qty": 7}]}),
    "note.md": ("# Note\nCall Ada at 10.\nAda agreed.\n", {"who": "Ada", "at": 10}),
}  # fmt: skip


class _Page(HTMLParser):
    """The text inside each ``<pre>``, and per mark id the text of the marks that carry it."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.pres: list[str] = []
        self.marks: list[dict[str, str]] = []
        self.scripts = self.links = 0
        self._pre = self._mark = None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "pre":
            self._pre = []
            self.marks.append({})
        elif tag == "mark":
            self._mark = attrs["data-f"].split()
        self.scripts += tag == "script" and "src" in attrs
        self.links += tag == "link" or (tag == "img" and "src" in attrs)

    def handle_endtag(self, tag):
        if tag == "pre":
            self.pres.append("".join(self._pre))
            self._pre = None
        elif tag == "mark":
            self._mark = None

    def handle_data(self, data):
        if self._pre is not None:
            self._pre.append(data)
        for f in self._mark or ():
            self.marks[-1][f] = self.marks[-1].get(f, "") + data


def _results(tmp_path: Path) -> tuple[Path, list[dict]]:
    records = []
    for name, (text, data) in DOCS.items():
        path = tmp_path / name
        path.write_text(text, encoding="utf-8")
        locator = Locator(text)
        spans = {p: s for k, v in data.items() for p, s in locator.spans(k, v).items()}
        sha = hashlib.sha256(text.encode()).hexdigest()
        records.append({"file": str(path), "sha256": sha, "ok": True, "data": data, "spans": spans})
    records.append({"file": str(tmp_path / "gone.txt"), "sha256": "0", "ok": False,
                    "error": "unreadable: <no such file>"})  # fmt: skip
    out = tmp_path / "results.jsonl"
    out.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records))
    return out, records


def test_review_page_from_an_existing_results_file(tmp_path):
    out, records = _results(tmp_path)
    page_file = tmp_path / "review.html"
    argv = ["extract", "--out", str(out), "--review", str(page_file)]
    assert run(build_parser().parse_args(argv)) == 0
    page = page_file.read_text(encoding="utf-8")
    parser = _Page()
    parser.feed(page)
    parser.close()
    assert parser.scripts == parser.links == 0 and "http" not in page  # nothing fetched
    assert "&lt;no such file&gt;" in page  # the error record, escaped
    assert parser.pres == [text for text, _ in DOCS.values()]
    for (text, _), record, marks in zip(DOCS.values(), records, parser.marks, strict=False):
        ids = {p: str(i) for i, p in enumerate(record["spans"])}
        assert set(marks) == set(ids.values())
        for pointer, (start, end) in record["spans"].items():
            assert marks[ids[pointer]] == text[start:end]
            value = _at(record["data"], pointer)
            if isinstance(value, str) and pointer != "/date":  # a date marks its stated spelling
                assert text[start:end] == value
    assert parser.marks[0][ids_of(records[0], "/total")] == "1.190,00"
    assert parser.marks[0][ids_of(records[0], "/date")] == "4. März 2024"


def ids_of(record: dict, pointer: str) -> str:
    return str(list(record["spans"]).index(pointer))


def _at(data: object, pointer: str) -> object:
    for part in pointer.split("/")[1:]:
        data = data[int(part)] if isinstance(data, list) else data[part]
    return data


def test_a_changed_file_is_shown_without_marks(tmp_path):
    out, _ = _results(tmp_path)
    (tmp_path / "note.md").write_text("# Note\nsomething else\n", encoding="utf-8")
    page_file = tmp_path / "review.html"
    assert run(build_parser().parse_args(["extract", "--out", str(out), "--review",
                                          str(page_file)])) == 0  # fmt: skip
    parser = _Page()
    parser.feed(page_file.read_text(encoding="utf-8"))
    assert parser.marks[1] == {} and "changed since it was extracted" in page_file.read_text()
