"""``stencil extract`` without a model: documents, resume file, records, prompts, schemas, CLI."""

from __future__ import annotations

import json
import os
from pathlib import Path

import jsonschema
import pytest
from test_extract_fixtures import BAD_FILES, TEST_SCHEMA, write_sample_folder

from stencil.cli import main
from stencil.constraints import Constraint, uses_grounding
from stencil.extract.documents import InputError, discover, read_document
from stencil.extract.engine_backend import ExtractSpec
from stencil.extract.formats import csv_to_text, decode_text, html_to_text
from stencil.extract.prompt import PromptBuilder, PromptTemplate, TemplateError
from stencil.extract.records import Outcome, make_validator, outcome_record
from stencil.extract.results import ResultsError, ResultsFile
from stencil.extract.schema_library import SchemaError, list_schemas, resolve_schema

REPO = Path(__file__).resolve().parents[2]
LIBRARY = {
    "person", "contact", "invoice", "receipt", "event", "job_posting", "product", "paper",
    "support_ticket", "meeting_notes", "purchase_order", "letter", "cv",
}  # fmt: skip


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    root = tmp_path_factory.mktemp("docs")
    return root, write_sample_folder(root)


# ---- documents ---------------------------------------------------------------------------------


def test_folder_reads_every_format(folder: tuple[Path, dict[str, str]]) -> None:
    root, expected = folder
    paths = discover([str(root)])
    assert len(paths) == 20
    for path in paths:
        doc = read_document(path)
        rel = os.path.relpath(path, root)
        if rel in BAD_FILES:
            assert doc.text is None and doc.error, rel
        else:
            assert doc.error is None, (rel, doc.error)
            assert expected[rel] in doc.text, (rel, doc.text)
            assert "<" not in doc.text and "var x" not in doc.text  # HTML tags/scripts gone


@pytest.mark.parametrize(
    ("name", "error"),
    [
        ("binary.bin", "binary file"),
        ("empty.txt", "empty file"),
        ("broken_link.txt", "unreadable"),
        ("fifo.txt", "unreadable: not a regular file (fifo)"),
    ],
)
def test_bad_files_give_reasons(folder: tuple[Path, dict[str, str]], name: str, error: str) -> None:
    doc = read_document(str(folder[0] / name))
    assert doc.error is not None and doc.error.startswith(error)


@pytest.mark.parametrize(
    ("text", "encoding"),
    [
        ("Привет! Иван Петров, 42 года, живёт в Москве и работает инженером.", "cp1251"),
        ("山田太郎さんは四十二歳で、東京に住んでいるエンジニアです。", "shift_jis"),
        ("Jürgen Müller, 42 Jahre, wohnt in Köln und arbeitet als Ingenieur.", "latin-1"),
        ("王小明今年四十二岁，住在北京，是一名工程师。", "gb18030"),
        ("Grüße aus Köln", "utf-16"),
        ("Grüße aus Köln", "utf-8-sig"),
        ("plain ascii", "utf-8"),
    ],
)
def test_decode_any_encoding(text: str, encoding: str) -> None:
    assert decode_text(text.encode(encoding))[0] == text


def test_html_and_csv_to_text() -> None:
    html = "<html><title>T</title><style>x{}</style><p>a &amp; b</p><td>1</td><td>2</td></html>"
    assert html_to_text(html) == "T\na & b\n| 1 | 2"
    authors = (
        "<span>Wei Zhang</span><sup>1,2</sup><p><sup>1</sup>Tsinghua University, 68 m<sup>2</sup>"
    )
    assert html_to_text(authors) == "Wei Zhang¹,²\n¹Tsinghua University, 68 m²"
    assert html_to_text("H<sub>2</sub>O, x<sup>n</sup>") == "H₂O, xn"
    assert csv_to_text("name;age\nAda;36\n") == "name: Ada\nage: 36"
    assert csv_to_text("just one line") == "just one line"


def test_an_email_reads_as_its_headers_and_text_body(tmp_path: Path) -> None:
    """A multipart message as mail clients write it: the subject an encoded word, the text
    quoted-printable, an HTML alternative and an attachment; the reader sees the headers a
    person reads, the decoded text part and the attachment's name."""
    from email.message import EmailMessage

    msg = EmailMessage()
    msg["From"] = "Zoë Müller <zoe@example.org>"
    msg["To"] = "support@example.com"
    msg["Date"] = "Tue, 10 Mar 2026 21:14:03 +0100"
    msg["Subject"] = "Rückerstattung für Bestellung 4471"
    msg["Message-ID"] = "<abc@example.org>"
    msg.set_content("Grüße,\ndie Lieferung kam beschädigt an.\n", cte="quoted-printable")
    msg.add_alternative("<p>Grüße, <b>HTML</b></p>", subtype="html")
    msg.add_attachment(b"%PDF-1.4", maintype="application", subtype="pdf", filename="foto.pdf")
    path = tmp_path / "mail.eml"
    path.write_bytes(msg.as_bytes())
    assert b"=C3=BC" in path.read_bytes()  # the body is quoted-printable on disk
    assert read_document(str(path)).text == (
        "From: Zoë Müller <zoe@example.org>\nTo: support@example.com\n"
        "Date: Tue, 10 Mar 2026 21:14:03 +0100\nSubject: Rückerstattung für Bestellung 4471\n\n"
        "Grüße,\ndie Lieferung kam beschädigt an.\n\nAttachments: foto.pdf\n"
    )
    html_only = EmailMessage()
    html_only["Subject"] = "Bestätigung"
    html_only.set_content("<p>Bestellung <b>4471</b></p>", subtype="html")
    path.write_bytes(html_only.as_bytes())
    assert read_document(str(path)).text == "Subject: Bestätigung\n\nBestellung 4471\n"
    saved = "Von: Zoë\nBetreff: Rückfrage\n\nHallo"  # a client's own labels: plain text
    path.write_text(saved, encoding="utf-8")
    assert read_document(str(path)).text == saved


def test_discover_globs_recursion_and_exclusions(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "x.txt").write_text("x")
    (tmp_path / "a" / ".hidden.txt").write_text("h")
    (tmp_path / "b.md").write_text("b")
    (tmp_path / "out.jsonl").write_text("")
    got = discover([str(tmp_path), str(tmp_path / "*.md")], exclude=[str(tmp_path / "out.jsonl")])
    assert [os.path.relpath(p, tmp_path) for p in got] == ["b.md", "a/x.txt"]
    assert discover([str(tmp_path / "**" / "*.txt")]) == [str(tmp_path / "a" / "x.txt")]
    with pytest.raises(InputError):
        discover([str(tmp_path / "*.pdf")])
    with pytest.raises(InputError):
        discover([str(tmp_path / "missing.txt")])


# ---- results file --------------------------------------------------------------------------------


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_torn_line_stale_hash_retry_and_lock(tmp_path: Path) -> None:
    out = tmp_path / "r.jsonl"
    with ResultsFile(out) as results:
        assert results.resume({}).records == {}
        results.append({"file": "a", "sha256": "1", "ok": True, "data": {}})
        results.append({"file": "b", "sha256": "2", "ok": False, "error": "x"})
        results.append({"file": "c", "sha256": "3", "ok": True, "data": {}})
        with pytest.raises(ResultsError, match="in use"):
            ResultsFile(out)
    with open(out, "ab") as fh:
        fh.write(b'{"file": "d", "ok": tr')  # a kill in the middle of a write
    with ResultsFile(out) as results:
        resume = results.resume({"a": "1", "b": "2", "c": "changed"})
    assert resume.torn == 1 and resume.dropped == 1
    assert sorted(resume.records) == ["a", "b"]
    assert [r["file"] for r in _lines(out)] == ["a", "b"]
    with ResultsFile(out) as results:
        assert sorted(results.resume({"a": "1", "b": "2"}, retry_errors=True).records) == ["a"]
        assert sorted(results.resume({}, overwrite=True).records) == []
    assert out.read_text() == ""


def test_duplicate_records_keep_the_last(tmp_path: Path) -> None:
    out = tmp_path / "r.jsonl"
    out.write_text(
        '{"file": "a", "sha256": "1", "ok": false, "error": "x"}\n'
        "not json\n"
        '{"file": "a", "sha256": "1", "ok": true, "data": {}}\n'
    )
    with ResultsFile(out) as results:
        resume = results.resume({"a": "1"})
    assert resume.records["a"]["ok"] is True
    assert len(_lines(out)) == 1


# ---- records -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "finish", "ok", "error"),
    [
        ('{"name": "Ada", "age": 36}', "stop", True, None),
        ('{"name": "Ada", "age": 36', "length", False, "max_tokens reached"),
        ('{"name": "Ada"}', "stop", False, "schema validation failed"),
        (None, "error", False, "boom"),
    ],
)
def test_outcome_records(text: str | None, finish: str, ok: bool, error: str | None) -> None:
    from stencil.extract.documents import Document

    doc = Document("f.txt", sha256="h", text="t", warnings=["decoded as cp1252"])
    outcome = Outcome(0, text, 5, 7, finish, "boom" if text is None else None)
    record = outcome_record(doc, outcome, make_validator(TEST_SCHEMA))
    assert record["ok"] is ok and record["file"] == "f.txt" and record["sha256"] == "h"
    assert record["tokens"] == {"prompt": 5, "completion": 7}
    assert record["finish_reason"] == finish and record["warnings"] == ["decoded as cp1252"]
    if ok:
        jsonschema.validate(record["data"], TEST_SCHEMA)
    else:
        assert error in record["error"] and "data" not in record


# ---- prompts -----------------------------------------------------------------------------------


class _Words:
    def count(self, text: str) -> int:
        return len(text.split())

    def cut(self, text: str, tokens: int) -> str:
        return " ".join(text.split()[:tokens])


def _builder(context: int | None, template: str | None = None) -> PromptBuilder:
    t = PromptTemplate.parse(template) if template else PromptTemplate.load(None)

    def measure(messages: list[dict[str, str]]) -> int:
        return sum(len(m["content"].split()) for m in messages)

    return PromptBuilder(t, TEST_SCHEMA, "Be brief.", 10, context, _Words(), measure)


def test_long_documents_are_cut_with_a_warning() -> None:
    doc = " ".join(f"w{i}" for i in range(1000))
    overhead = _builder(None).build("f.txt", "").messages
    words = sum(len(m["content"].split()) for m in overhead)
    prompt = _builder(words + 10 + 16 + 100).build("f.txt", doc)
    user = prompt.messages[-1]["content"]
    assert "w99" in user and "w100" not in user
    assert prompt.warnings == [
        "document cut to 100 of 1000 tokens to fit the context window "
        f"({words + 126} tokens with max_tokens=10)"
    ]
    assert _builder(10_000).build("f.txt", doc).warnings == []
    with pytest.raises(ValueError, match="no room"):
        _builder(20).build("f.txt", doc)


def test_template_placeholders_and_split() -> None:
    messages = (
        _builder(None, "Schema: {schema}\n---\n{filename}: {document}")
        .build("a.txt", "literal {schema} stays")
        .messages
    )
    assert messages[0] == {"role": "system", "content": "Schema: " + json.dumps(TEST_SCHEMA)}
    assert messages[1] == {"role": "user", "content": "a.txt: literal {schema} stays"}
    assert len(_builder(None, "only {document}").build("a", "d").messages) == 1
    with pytest.raises(TemplateError):
        PromptTemplate.parse("no document here")


@pytest.mark.parametrize(
    ("path", "name"),
    [
        ("/srv/checkout/bench/papers/docs/06.txt", "06.txt"),
        ("invoices/2024/march/a b.md", "a b.md"),
        ("C:\\scans\\shop-receipts\\r1.html", "r1.html"),
        ("plain.txt", "plain.txt"),
    ],
)
@pytest.mark.parametrize("template", [None, "{filename}\n---\nDocument ({filename}): {document}"])
def test_prompts_name_the_file_not_its_folders(path: str, name: str, template: str | None) -> None:
    spec = ExtractSpec(TEST_SCHEMA, PromptTemplate.load(None))
    prompt = _builder(None, template).build(path, "the text").messages
    for messages in (prompt, spec.field_prefix(prompt, path, "the text")):
        texts = " ".join(m["content"] for m in messages)
        assert f"({name})" in texts, texts
        folders = [p for p in path.replace("\\", "/").split("/")[:-1] if p]
        assert not any(folder in texts for folder in folders), texts


# ---- schema library --------------------------------------------------------------------------


def test_library_schemas_are_small_strict_and_have_examples(monkeypatch) -> None:
    monkeypatch.chdir(REPO)
    schemas = {s.name: s for s in list_schemas()}
    assert LIBRARY <= set(schemas)
    examples = {p.stem: p for p in (REPO / "examples").iterdir()}
    for name in LIBRARY:
        _, schema = resolve_schema(name)
        jsonschema.validators.validator_for(schema).check_schema(schema)
        # enforceable (x-grounded fields with the example document as the source)
        source = examples[name].read_text() if uses_grounding(schema) else None
        Constraint.json_schema(schema, whitespace="compact", source_text=source)
        assert schema["additionalProperties"] is False and schema["required"], name
        assert schemas[name].description and len(schema["properties"]) <= 8, name
        assert name in examples, name


def test_resolve_schema_file_and_errors(tmp_path: Path) -> None:
    path = tmp_path / "mine.json"
    path.write_text(json.dumps(TEST_SCHEMA))
    assert resolve_schema(str(path)) == ("mine", TEST_SCHEMA)
    with pytest.raises(SchemaError, match="no schema file or library schema"):
        resolve_schema("no_such_schema")
    path.write_text('{"type": 5}')
    with pytest.raises(SchemaError, match="not a valid JSON Schema"):
        resolve_schema(str(path))


def test_list_schemas_cli(capsys, monkeypatch) -> None:
    monkeypatch.chdir(REPO)
    assert main(["extract", "--list-schemas"]) == 0
    out = capsys.readouterr().out
    assert all(name in out for name in LIBRARY)


@pytest.mark.parametrize(
    "argv",
    [
        ["extract", "--out", "o.jsonl", "x.txt"],  # no --schema
        ["extract", "--schema", "person", "x.txt"],  # no --out
        ["extract", "--schema", "person", "--out", "o.jsonl"],  # no files
        ["extract", "--schema", "person", "--out", "o.jsonl", "missing.txt"],
        ["extract", "--schema", "nope", "--out", "o.jsonl", "doc.txt"],
        ["extract", "--schema", "bad.json", "--out", "o.jsonl", "doc.txt"],
        ["extract", "--schema", "person", "--out", "o.jsonl", "--max-tokens", "0", "doc.txt"],
        ["extract", "--schema", "person", "--out", "o.jsonl", "--server", "u", "--ray", "doc.txt"],
        ["extract", "--schema", "person", "--out", "o.jsonl", "--prompt-template=doc.txt", "x"],
    ],
)
def test_usage_errors_exit_2(argv: list[str], tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("STENCIL_SCHEMAS_DIR", str(REPO / "stencil" / "extract" / "schemas"))
    (tmp_path / "doc.txt").write_text("Ada is 36.")
    (tmp_path / "bad.json").write_text('{"type": "object", "pattern": "("}')
    assert main(argv) == 2
    assert "stencil extract:" in capsys.readouterr().err
    assert not (tmp_path / "o.jsonl").exists() or not (tmp_path / "o.jsonl").read_text()


def test_unreachable_server_is_a_usage_error(tmp_path: Path, capsys) -> None:
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    (tmp_path / "doc.txt").write_text("Ada is 36.")
    out = tmp_path / "o.jsonl"
    argv = ["extract", "--schema", str(REPO / "stencil" / "extract" / "schemas" / "person.json"), "--out", str(out),
            "--server", f"http://127.0.0.1:{port}", str(tmp_path / "doc.txt")]  # fmt: skip
    assert main(argv) == 2
    assert "cannot use the server" in capsys.readouterr().err
    assert out.read_text() == ""  # nothing recorded: a rerun against a live server does it all


def test_extract_constraints_let_the_model_space_its_json() -> None:
    """Answers take the default bounded whitespace, compact or pretty as the model writes JSON
    (held to compact JSON, Qwen2.5 picks other values: docs/extraction.md)."""
    spec = ExtractSpec(TEST_SCHEMA, PromptTemplate.load(None))
    for constraint in (spec.constraint(), spec.constraint("Name: Ada Lovelace\nAge: 36\n")):
        assert dict(constraint.options)["whitespace"] == "bounded"
