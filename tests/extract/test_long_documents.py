"""Long documents read in windows, their answers merged per field with spans: the windows cover
the document and fit the budget, the merge keeps what the document states (a later window's
value, a named line over a heading, items read twice in an overlap once) and never a grounded
value it does not state; end to end with the embedded model, a value on the last page of a
document longer than the context is found, and its span is where the document states it."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from stencil.extract.merge import Grounding, WindowAnswer, merge, window_schema
from stencil.extract.prompt import CharTokenCounter
from stencil.extract.spans import Locator
from stencil.extract.windows import Window, split_windows


class _Words:
    """One token per run of non-spaces (and a cut that keeps the text's own spacing)."""

    def count(self, text: str) -> int:
        return len(text.split())

    def cut(self, text: str, tokens: int) -> str:
        ends = [m.end() for m in re.finditer(r"\S+", text)]
        return text[: ends[tokens - 1]] if 0 < tokens <= len(ends) else text


LINES = "\n".join(f"line {i} says word{i} and more" for i in range(200))


@pytest.mark.parametrize(
    ("document", "budget", "counter"),
    [
        (LINES, 60, _Words()),
        (LINES, 7, _Words()),  # shorter than a line: seams at spaces
        (" ".join(f"w{i}" for i in range(500)), 33, _Words()),
        ("x" * 5000, 100, CharTokenCounter(3.0)),  # no space at all: cut where it fits
        (LINES, 10_000, _Words()),
        (LINES, None, _Words()),
    ],
)
def test_windows_cover_the_document_within_the_budget(document, budget, counter):
    windows = split_windows(document, budget, counter)
    assert windows[0].start == 0 and windows[-1].end == len(document)
    for w in windows:
        assert document[w.start : w.end] == w.text
        assert budget is None or counter.count(w.text) <= budget
    for a, b in zip(windows, windows[1:], strict=False):
        assert a.start < b.start <= a.end  # no gap, always progress
    if budget is not None and counter.count(document) > budget and budget > 20:
        assert all(b.start < a.end for a, b in zip(windows, windows[1:], strict=False))  # overlap
    if budget is None or budget >= counter.count(document):
        assert windows == [Window(0, document)]


def _answers(document: str, parts: list[tuple[int, int, dict[str, Any]]]) -> list[WindowAnswer]:
    return [WindowAnswer(Window(s, document[s:e]), data) for s, e, data in parts]


MINUTES = (
    "MINUTES OF THE MEETING\nHeld on 3 May 2022 in the town hall.\n"
    + "The committee discussed the garden.\n" * 5
    + "Secretary: Jane Doe\nNext meeting: 14 September 2022\n"
)
SCHEMA = {
    "type": "object",
    "properties": {
        "secretary": {"type": "string"},
        "next_meeting": {"type": "string", "format": "date"},
        "budget": {"type": "number"},
        "items": {
            "type": "array",
            "items": {"type": "object", "properties": {"name": {"type": "string"}}},
        },
    },
    "required": ["secretary", "next_meeting"],
}
HALF = MINUTES.index("The committee") + 40
SEAM = MINUTES.index("The committee")


def test_merge_prefers_a_named_line_and_keeps_a_later_windows_value():
    merged = merge(
        SCHEMA,
        _answers(
            MINUTES,
            [
                (0, HALF, {"secretary": "MINUTES", "next_meeting": "2022-05-03"}),
                (SEAM, len(MINUTES), {"secretary": "Jane Doe", "next_meeting": "2022-09-14"}),
            ],
        ),  # fmt: skip
        Grounding(),
    )
    assert merged.data == {"secretary": "Jane Doe", "next_meeting": "2022-09-14"}
    assert merged.missing == []
    at = {p: MINUTES[s:e] for p, (s, e) in merged.spans.items()}
    assert at == {"/secretary": "Jane Doe", "/next_meeting": "14 September 2022"}


def test_merge_drops_grounded_values_no_window_states():
    merged = merge(
        SCHEMA,
        _answers(
            MINUTES,
            [
                (
                    0,
                    HALF,
                    {"secretary": "Jane Doe", "next_meeting": "2021-01-01", "budget": 1200.0},
                ),
                (SEAM, len(MINUTES), {"next_meeting": "2030-02-02"}),
            ],
        ),  # fmt: skip
        Grounding(),
    )
    assert merged.data == {}  # "Jane Doe" is stated in the second window only: not read here
    assert merged.missing == ["secretary", "next_meeting"]
    free = merge(SCHEMA, _answers(MINUTES, [(0, len(MINUTES), {"next_meeting": "2030-02-02"})]),
                 Grounding(dates=False))  # fmt: skip
    assert free.data == {"next_meeting": "2030-02-02"} and free.spans == {}
    priced = {
        "type": "object",
        "properties": {"fee": {"type": "number", "description": "0 if none"}},
    }
    fees = merge(priced, _answers(MINUTES, [(0, HALF, {"fee": 0}), (HALF, len(MINUTES), {"fee": 7})]),
                 Grounding())  # fmt: skip
    assert fees.data == {"fee": 0}  # its description states 0; no window states 7


def test_merge_reads_items_of_an_overlap_once():
    doc = "Items:\napple\npear\nplum\n"
    p, q = doc.index("pear"), doc.index("plum")
    merged = merge(
        SCHEMA,
        _answers(
            doc,
            [
                (0, q, {"items": [{"name": "apple"}, {"name": "pear"}]}),
                (p, len(doc), {"items": [{"name": "pear"}, {"name": "plum"}, {"name": "kiwi"}]}),
            ],
        ),  # fmt: skip
        Grounding(),
    )
    assert merged.data["items"] == [{"name": "apple"}, {"name": "pear"}, {"name": "plum"}]
    assert {k: doc[s:e] for k, (s, e) in merged.spans.items()} == {
        "/items/0/name": "apple", "/items/1/name": "pear", "/items/2/name": "plum"}  # fmt: skip


def test_window_schema_makes_fields_optional_only_with_several_windows():
    assert window_schema(SCHEMA, 1) is SCHEMA
    assert "required" not in window_schema(SCHEMA, 3)


@pytest.mark.parametrize(
    ("document", "key", "value", "expected"),
    [
        ("Total 12.00\nVAT 2.00\nTotal due: 12.00", "total_due", 12.0, "12.00"),  # named line
        ("a 5\nb 5", "count", 5, "5"),  # first occurrence
        ("Paid 1.190,00 EUR on 04.03.2024", "amount", 1190.0, "1.190,00"),
        ("Paid on 04/03/2024, 2.50 each", "date", "2024-04-03", "04/03/2024"),  # either reading
        ("Paid on 04/03/2024, 2.50 each", "date", "2024-03-04", "04/03/2024"),
        (
            "En Zaragoza, a 25 de octubre, se reúnen en el portal del\n  edificio.",
            "place",
            "el portal del edificio",
            "el portal del\n  edificio",
        ),  # a value across a soft line break
    ],
)
def test_a_value_maps_to_its_stated_spelling(document, key, value, expected):
    spans = Locator(document).spans(key, value)
    ((s, e),) = spans.values()
    assert document[s:e] == expected
    if key == "total_due":
        assert s == document.rindex("12.00")


def test_array_items_take_the_occurrence_on_their_own_row():
    doc = "Tea   1   2.50\nCake  1   4.00\n"
    spans = Locator(doc).spans("items", [{"name": "Tea", "qty": 1}, {"name": "Cake", "qty": 1}])
    rows = {p: doc.count("\n", 0, s) for p, (s, _) in spans.items()}
    assert rows == {"/items/0/name": 0, "/items/0/qty": 0, "/items/1/name": 1, "/items/1/qty": 1}


# ---- end to end, embedded model -----------------------------------------------------------------

TOPICS = ["roof repairs", "garden budget", "winter party", "parking rules", "new website"]
LONG = (
    "MINUTES OF THE ANNUAL MEETING\n\n"
    + "\n\n".join(
        f"The committee discussed the {t} at some length. Members raised questions about the "
        f"timeline and agreed to revisit the {t} once more information is available."
        for t in TOPICS * 4
    )
    + "\n\nSecretary: Jane Holloway\nNext meeting: 14 September 2022\n"
)
LONG_SCHEMA = {
    "type": "object",
    "properties": {
        "secretary": {"type": "string", "description": "who took the minutes"},
        "next_meeting": {"type": "string", "format": "date"},
        "deadline": {"type": "string", "format": "date"},
    },
    "required": ["secretary", "next_meeting"],
    "additionalProperties": False,
}


@pytest.fixture(scope="module")
def llm() -> Any:
    from stencil import LLM

    return LLM(num_threads=2, max_model_len=512, num_kv_blocks=256)


def _extract(llm: Any, tmp_path: Path, name: str, text: str, schema: dict) -> dict[str, Any]:
    from stencil.cli import build_parser
    from stencil.extract.command import run

    doc, schema_file, out = tmp_path / name, tmp_path / "schema.json", tmp_path / "out.jsonl"
    doc.write_text(text)
    schema_file.write_text(json.dumps(schema))
    argv = ["extract", "--schema", str(schema_file), str(doc), "--out", str(out),
            "--max-tokens", "48", "--review", str(tmp_path / "review.html")]  # fmt: skip
    run(build_parser().parse_args(argv), llm=llm)
    (record,) = [json.loads(line) for line in out.read_text().splitlines()]
    return record


def test_a_value_on_the_last_page_of_a_long_document_is_found(llm, tmp_path):
    assert len(LONG) > 4 * 512  # far more than the context, whatever the tokenizer
    record = _extract(llm, tmp_path, "minutes.txt", LONG, LONG_SCHEMA)
    assert record["ok"], record
    assert record["data"]["secretary"] == "Jane Holloway"
    assert record["data"]["next_meeting"] == "2022-09-14"
    assert "deadline" not in record["data"]  # the document's one date is the next meeting
    assert any("windows" in w for w in record["warnings"]), record
    at = {p: LONG[s:e] for p, (s, e) in record["spans"].items()}
    assert at == {"/secretary": "Jane Holloway", "/next_meeting": "14 September 2022"}
    page = (tmp_path / "review.html").read_text(encoding="utf-8")  # this run's review page
    assert '<mark data-f="0">Jane Holloway</mark>' in page
    assert '<mark data-f="1">14 September 2022</mark>' in page


def test_no_required_date_is_invented_where_none_is_stated(llm, tmp_path):
    text = "Minutes taken by Jane Holloway.\nThe committee discussed the garden.\n"
    record = _extract(llm, tmp_path, "short.txt", text, LONG_SCHEMA)
    assert not record["ok"]
    assert "states no value for required field(s): next_meeting" in record["error"], record
    assert "data" not in record and "next_meeting" not in record["partial"], record
    spans = {p: text[s:e] for p, (s, e) in record["spans"].items()}
    assert all(record["partial"][p[1:]] == v for p, v in spans.items()), record  # stated ones
    page = (tmp_path / "review.html").read_text(encoding="utf-8")  # the partial values marked
    assert all(f'<mark data-f="{i}">' in page for i in range(len(spans))), page


def test_field_questions_compute_the_document_once(llm, tmp_path):
    """Per field, each question after the first finds the document's blocks in the prefix
    cache: the engine computes the document's tokens once, not once per field."""
    text = "\n".join(
        f"Note {w}: the committee met the supplier about {w} and agreed on terms."
        for w in ("roofs", "paint", "gates", "lamps", "trees", "bikes")
    )
    text += "\nSecretary: Jane Holloway\nNext meeting: 14 September 2022\n"
    schema = {**LONG_SCHEMA, "properties": {**LONG_SCHEMA["properties"],
              "supplier": {"type": "string"}, "topic": {"type": "string"}}}  # fmt: skip
    before = llm.get_metrics()
    record = _extract(llm, tmp_path, "notes.txt", text, schema)
    after = llm.get_metrics()
    assert record["ok"] and "warnings" not in record, record  # one window
    delta = {k: after[k] - before[k] for k in after}
    questions = int(delta["requests_finished_total"])
    assert questions >= 4
    doc_tokens = len(llm.get_tokenizer()(text, add_special_tokens=False).input_ids)
    computed = delta["prompt_tokens_total"] - delta["prefix_cache_hits_total"]
    block = llm.engine.config.block_size
    # every later question reuses the document but for the blocks at its two ends
    assert delta["prefix_cache_hits_total"] >= (questions - 1) * (doc_tokens - 2 * block)
    # computing the document once per question would cost more than questions * doc_tokens
    # (each question's own tokens, its field's quoted label line included, are computed apart)
    assert computed < questions * doc_tokens, delta
