"""The playground in a real headless Chromium against the live server (the embedded model): a
schema and a document pasted, Run streams JSON that validates; grounded spans marked at their
offsets; a bad schema shows the API's own 400; many files give one table and CSV row each.
Screenshots of the views go to the ``shots`` folder (docs/playground/ with STENCIL_SCREENSHOTS=1)."""

from __future__ import annotations

import csv
import io
import json

import httpx
import jsonschema

SCHEMA = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
    "required": ["name", "age"],
}
DOC = "Ada Lovelace was 36 years old. She wrote the first program."
DONE = "document.querySelector('#run-state').textContent.startsWith('done')"
FAILED = "document.querySelector('#run-error').textContent"


def _paste(page, schema: dict, document: str) -> None:
    page.fill("#spec", json.dumps(schema, indent=2))
    page.wait_for_selector("#spec-status.ok", timeout=60_000)
    page.fill("#document", document)


def _run(page) -> None:
    page.keyboard.press("Control+Enter")  # the keyboard shortcut, as a person would
    page.wait_for_function(f"{DONE} || {FAILED}", timeout=120_000)
    assert page.inner_text("#run-error") == ""


def test_run_streams_json_that_validates(page, shots) -> None:
    _paste(page, SCHEMA, DOC)
    page.evaluate(
        """() => { window.updates = 0; new MutationObserver(() => window.updates++)
             .observe(document.querySelector('#output'), {childList: true}); }"""
    )
    _run(page)
    value = json.loads(page.inner_text("#output"))
    jsonschema.validate(value, SCHEMA)
    assert page.evaluate("window.updates") > 3  # it came in pieces, as it streamed
    page.screenshot(path=str(shots / "output.png"))


def test_grounded_spans_are_marked_at_their_offsets(page, shots) -> None:
    _paste(page, SCHEMA, DOC)
    page.check("#grounding")
    page.wait_for_selector("#spec-status.ok", timeout=60_000)
    _run(page)
    value = json.loads(page.inner_text("#output"))
    page.click("#tab-grounding")
    marks = page.eval_on_selector_all(
        "#grounded-doc mark",
        "ms => ms.map(m => ({pointer: m.dataset.pointer, start: +m.dataset.start,"
        " end: +m.dataset.end, text: m.textContent}))",
    )
    assert page.inner_text("#grounded-doc") == DOC  # the document, whole, around the marks
    by_pointer = {m["pointer"]: m for m in marks}
    name = by_pointer["/name"]
    assert DOC[name["start"] : name["end"]] == name["text"] == value["name"]
    for m in marks:
        assert DOC[m["start"] : m["end"]] == m["text"]
    page.hover('#fields button[data-pointer="/name"]')
    assert page.get_attribute('#grounded-doc mark[data-pointer="/name"]', "class").endswith("hot")
    page.screenshot(path=str(shots / "grounding.png"))
    page.hover('#grounded-doc mark[data-pointer="/name"]')  # and back: the span finds its field
    assert "hot" in page.get_attribute('#fields button[data-pointer="/name"]', "class")


def test_a_bad_schema_shows_the_apis_error(page, live_server) -> None:
    bad = {"type": "object", "properties": {"age": {"type": "integer", "minimum": "ten"}}}
    page.fill("#spec", json.dumps(bad))
    page.wait_for_selector("#spec-status.bad", timeout=60_000)
    shown = page.inner_text("#spec-status")
    chat = httpx.post(
        live_server.v1 + "/chat/completions",
        headers={"Authorization": f"Bearer {live_server.api_key}"},
        json={
            "messages": [{"role": "user", "content": DOC}],
            "max_tokens": 8,
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": "playground", "schema": bad, "strict": True},
            },
        },
        timeout=60,
    )
    error = chat.json()["error"]
    assert chat.status_code == 400
    assert shown == f"{error['message']} (param: {error['param']})"
    assert "/properties/age/minimum" in shown  # the pointer of the offending keyword


def test_many_files_give_a_table_and_a_csv_row_each(page, shots) -> None:
    _paste(page, SCHEMA, "")
    files = [
        {"name": "ada.txt", "mimeType": "text/plain", "buffer": DOC.encode()},
        {
            "name": "grace.html",
            "mimeType": "text/html",
            "buffer": b"<html><body><p>Grace Hopper, aged 85.</p></body></html>",
        },
        {"name": "alan.md", "mimeType": "text/markdown", "buffer": b"# Alan Turing, 41"},
    ]
    page.set_input_files("#files", files)
    page.wait_for_function("document.querySelectorAll('#file-list li').length === 3")
    _run(page)
    rows = page.eval_on_selector_all(
        "#results-table tr", "trs => trs.map(tr => [...tr.cells].map(c => c.textContent))"
    )
    assert rows[0] == ["file", "name", "age"]
    assert [r[0] for r in rows[1:]] == ["ada.txt", "grace.html", "alan.md"]
    with page.expect_download() as download:
        page.click("#download-csv")
    table = list(csv.DictReader(io.StringIO(open(download.value.path(), encoding="utf-8").read())))
    assert [r["file"] for r in table] == ["ada.txt", "grace.html", "alan.md"]
    for r in table:
        jsonschema.validate({"name": r["name"], "age": int(r["age"])}, SCHEMA)
    with page.expect_download() as download:
        page.click("#download-jsonl")
    lines = open(download.value.path(), encoding="utf-8").read().splitlines()
    assert len(lines) == 3
    for line in lines:
        jsonschema.validate(json.loads(line)["data"], SCHEMA)
    page.screenshot(path=str(shots / "results.png"))


def test_the_constraint_view_lists_forced_tokens(page, shots) -> None:
    fixed = {
        "type": "object",
        "properties": {"first_name": {"type": "string"}, "age_in_years": {"type": "integer"}},
        "required": ["first_name", "age_in_years"],
    }
    _paste(page, fixed, DOC)
    page.click("#tab-constraint")
    page.click("#trace")
    page.wait_for_selector("#trace-tokens li", timeout=120_000)
    tokens = page.eval_on_selector_all(
        "#trace-tokens .tok", "ts => ts.map(t => [t.dataset.kind, t.dataset.text])"
    )
    text = "".join(t for _, t in tokens)
    value = json.loads(text)
    jsonschema.validate(value, fixed)
    forced = "".join(t for kind, t in tokens if kind == "forced")
    assert "first_name" in forced and "age_in_years" in forced  # the keys: the grammar's
    assert tokens[0][0] == "sampled"  # a step always starts with the model's choice
    assert page.locator("#trace-chart svg rect").count() == len(tokens)
    summary = page.inner_text("#trace-summary")
    assert f"{len(tokens)} tokens" in summary and "Mask" in summary and "forward" in summary
    page.screenshot(path=str(shots / "constraint.png"))


def test_keyboard_and_the_schema_library(page, shots) -> None:
    page.select_option("#library", "invoice")  # a library schema fills the editor, checked
    page.wait_for_selector("#spec-status.ok", timeout=60_000)
    assert json.loads(page.input_value("#spec"))["title"].lower().startswith("invoice")
    assert page.is_checked("#grounding")  # its strings are x-grounded: they need the document
    page.focus("#tab-output")
    page.keyboard.press("ArrowRight")
    assert page.evaluate("document.activeElement.id") == "tab-grounding"
    assert page.is_visible("#view-grounding") and not page.is_visible("#view-output")
    page.keyboard.press("ArrowLeft")
    page.keyboard.press("ArrowLeft")
    assert page.evaluate("document.activeElement.id") == "tab-facts"
    page.wait_for_function("document.querySelector('#facts').textContent.includes('vocabulary')")
    page.screenshot(path=str(shots / "server.png"))
    page.evaluate(  # the file input's click is what opens the chooser: count it instead
        """() => document.querySelector('#files').addEventListener('click',
             (e) => { window.chosen = (window.chosen || 0) + 1; e.preventDefault(); })"""
    )
    page.focus("#drop")
    page.keyboard.press("Enter")
    page.keyboard.press("Space")
    assert page.evaluate("window.chosen") == 2
    assert page.get_attribute("#files", "multiple") is not None
