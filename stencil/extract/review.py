"""``stencil extract --review out.html``: one self-contained page (inline CSS and script, no
network) of the documents with their extracted values marked by their ``spans``, and a table
of field -> value per document: the playground's grounding view, offline.

The page is written from the results JSONL (this run's records and earlier ones), re-reading
each file as ``stencil extract`` reads it; a file whose content hash no longer matches its
record is shown without marks (the offsets are of the text it had).
"""

from __future__ import annotations

import html
import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from stencil.extract.documents import read_document

STYLE = """
:root { --fg: #1b1f24; --muted: #57606a; --line: #d0d7de; --accent: #0b5fad; --mark: #fff0a8;
  --mark-hot: #ffb347; font: 15px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif;
  color: var(--fg); }
body { margin: 0; }
header { padding: .6rem 1.2rem; border-bottom: 1px solid var(--line); }
header h1 { font-size: 1.2rem; margin: 0; }
header p, .note { color: var(--muted); margin: .2rem 0; font-size: .9rem; }
section { border-bottom: 1px solid var(--line); padding: .8rem 1.2rem; }
h2 { font-size: 1rem; margin: 0 0 .4rem; font-family: ui-monospace, monospace; }
.split { display: grid; grid-template-columns: minmax(14rem, 1fr) 2fr; gap: 1rem; }
@media (max-width: 900px) { .split { grid-template-columns: 1fr; } }
table { border-collapse: collapse; font-size: .85rem; width: 100%; }
th, td { border: 1px solid var(--line); padding: .2rem .4rem; text-align: left; vertical-align: top; }
th { background: #f6f8fa; }
td code { white-space: pre-wrap; word-break: break-word; }
tr[data-f] { cursor: pointer; }
tr.hot, mark.hot { background: var(--mark-hot); }
pre { background: #f6f8fa; border: 1px solid var(--line); border-radius: 4px; padding: .6rem;
  white-space: pre-wrap; word-break: break-word; max-height: 36rem; overflow: auto; margin: 0;
  font: 13px/1.4 ui-monospace, SFMono-Regular, Menlo, monospace; }
mark { background: var(--mark); border-radius: 2px; }
.error { color: #b42318; white-space: pre-wrap; }
"""
SCRIPT = """
for (const doc of document.querySelectorAll('section')) {
  const all = doc.querySelectorAll('[data-f]');
  const hot = (ids, on) => all.forEach(el => {
    if (el.dataset.f.split(' ').some(f => ids.includes(f))) el.classList.toggle('hot', on);
  });
  all.forEach(el => {
    const ids = el.dataset.f.split(' ');
    el.addEventListener('mouseenter', () => hot(ids, true));
    el.addEventListener('mouseleave', () => hot(ids, false));
    if (el.tagName === 'TR') el.addEventListener('click', () => {
      const m = doc.querySelector('mark[data-f~="' + ids[0] + '"]');
      if (m) m.scrollIntoView({block: 'center'});
    });
  });
}
"""


def write_review(path: str | os.PathLike[str], records: Iterable[dict[str, Any]]) -> int:
    """Write the page for ``records`` (results JSONL records) to ``path``; how many documents."""
    sections = [_section(r) for r in records]
    page = (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>stencil extract review</title><style>{STYLE}</style></head><body>"
        "<header><h1>stencil extract review</h1>"
        f"<p>{len(sections)} documents. Each value the document states is marked where it is "
        "stated; hover a row or a mark to see which is which, click a row to scroll to it."
        f"</p></header>{''.join(sections)}<script>{SCRIPT}</script></body></html>\n"
    )
    Path(path).write_text(page, encoding="utf-8")
    return len(sections)


def _section(record: dict[str, Any]) -> str:
    name = html.escape(str(record.get("file")))
    doc = read_document(str(record.get("file")))
    notes = [f'<p class="note">{html.escape(w)}</p>' for w in record.get("warnings", ())]
    if not record.get("ok"):
        notes.append(f'<p class="error">{html.escape(str(record.get("error")))}</p>')
    text = doc.text or ""
    spans = record.get("spans") or {}
    if doc.text is None:
        notes.append(f'<p class="note">cannot show the document: {html.escape(str(doc.error))}</p>')
    elif doc.sha256 != record.get("sha256"):
        notes.append('<p class="note">the file changed since it was extracted: no marks</p>')
        spans = {}
    spans = {p: s for p, s in spans.items() if _fits(s, len(text))}
    ids = {p: str(i) for i, p in enumerate(spans)}
    rows = "".join(_row(p, v, ids.get(p), spans.get(p), text) for p, v in _leaves(record))
    table = f"<table><tr><th>field</th><th>value</th><th>stated as</th></tr>{rows}</table>"
    body = f"<pre>{_marked(text, spans, ids)}</pre>" if doc.text is not None else ""
    return (
        f"<section><h2>{name}</h2>{''.join(notes)}"
        f'<div class="split"><div>{table if _values(record) is not None else ""}</div>'
        f"<div>{body}</div></div></section>"
    )


def _fits(span: Any, length: int) -> bool:
    return (
        isinstance(span, list)
        and len(span) == 2
        and all(isinstance(x, int) for x in span)
        and 0 <= span[0] < span[1] <= length
    )


def _leaves(record: dict[str, Any]) -> list[tuple[str, Any]]:
    """(JSON pointer, value) for each leaf of the record's data, in order."""
    out: list[tuple[str, Any]] = []

    def walk(value: Any, pointer: str) -> None:
        if isinstance(value, dict) and value:
            for k, v in value.items():
                walk(v, f"{pointer}/{str(k).replace('~', '~0').replace('/', '~1')}")
        elif isinstance(value, list) and value:
            for i, v in enumerate(value):
                walk(v, f"{pointer}/{i}")
        else:
            out.append((pointer, value))

    walk(_values(record), "")
    return out


def _values(record: dict[str, Any]) -> Any:
    """The record's data, or the values an error record's document does state (``partial``)."""
    return record.get("data", record.get("partial"))


def _row(pointer: str, value: Any, fid: str | None, span: list[int] | None, text: str) -> str:
    stated = html.escape(text[span[0] : span[1]]) if span else ""
    attr = f' data-f="{fid}"' if fid is not None else ""
    shown = html.escape(json.dumps(value, ensure_ascii=False))
    return f"<tr{attr}><td><code>{html.escape(pointer)}</code></td><td><code>{shown}</code></td><td>{stated}</td></tr>"


def _marked(text: str, spans: dict[str, list[int]], ids: dict[str, str]) -> str:
    """``text`` escaped, each stretch covered by spans in a ``<mark data-f="ids">``."""
    cuts = sorted({0, len(text), *(x for s in spans.values() for x in s)})
    out = []
    for a, b in zip(cuts, cuts[1:], strict=False):
        inside = [ids[p] for p, (s, e) in spans.items() if s <= a and b <= e]
        piece = html.escape(text[a:b])
        out.append(f'<mark data-f="{" ".join(inside)}">{piece}</mark>' if inside else piece)
    return "".join(out)
