"""Document formats -> plain text: bytes decoding (any encoding), HTML, e-mail, JSON, CSV and PDF.

Every function returns text or raises ``DocumentError`` with a short reason; none of them crash
on arbitrary bytes.
"""

from __future__ import annotations

import csv
import io
import json
import re
from html.parser import HTMLParser

_BOMS = (  # longest first: the UTF-32 LE BOM starts with the UTF-16 LE one
    (b"\xff\xfe\x00\x00", "utf-32-le"),
    (b"\x00\x00\xfe\xff", "utf-32-be"),
    (b"\xef\xbb\xbf", "utf-8"),
    (b"\xff\xfe", "utf-16-le"),
    (b"\xfe\xff", "utf-16-be"),
)
_PREFERRED = ("utf_8", "cp1252", "latin_1", "cp1251", "shift_jis", "gb18030", "big5", "euc_kr")
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0e-\x1f\x7f]")
_MAX_CONTROL_SHARE = 0.05
_MAX_CSV_ROWS = 200
_MAIL_HEADERS = ("From", "To", "Cc", "Date", "Subject")


class DocumentError(ValueError):
    """The file cannot be turned into text (binary, empty, unreadable, no text layer...)."""


def decode_text(data: bytes) -> tuple[str, str]:
    """Decode bytes in any text encoding; returns (text, encoding). Binary -> DocumentError."""
    for bom, encoding in _BOMS:
        if data.startswith(bom):
            return _checked(data[len(bom) :].decode(encoding, errors="replace")), encoding
    if b"\x00" not in data[:8192]:
        try:
            return _checked(data.decode("utf-8")), "utf-8"
        except UnicodeDecodeError:
            pass
    from charset_normalizer import from_bytes

    matches = list(from_bytes(data))
    if not matches:
        raise DocumentError("binary file (no text encoding fits)")
    best = _tie_break(matches)
    return _checked(str(best)), best.encoding


def _tie_break(matches: list) -> object:
    """Among equally plausible decodings prefer the most widespread code page (short Latin-1
    texts otherwise come out as cp1250, 'crème' -> 'crčme')."""
    top = [m for m in matches if (m.chaos, m.coherence) == (matches[0].chaos, matches[0].coherence)]
    for name in _PREFERRED:
        for m in top:
            if name in m.could_be_from_charset:
                return m
    return matches[0]


def _checked(text: str) -> str:
    sample = text[:20000]
    if sample and len(_CONTROL.findall(sample)) > _MAX_CONTROL_SHARE * len(sample):
        raise DocumentError("binary file (control characters)")
    return text


def html_to_text(html: str) -> str:
    """Visible text of an HTML page: no scripts/styles, one line per block element."""
    parser = _TextParser()
    parser.feed(html)
    parser.close()
    lines = (" ".join(line.split()) for line in "".join(parser.parts).splitlines())
    return "\n".join(line for line in lines if line)


class _TextParser(HTMLParser):
    _SKIP = {"script", "style", "noscript", "template", "svg"}
    # a list of tag names: packed lines read better than the formatter's one name per line
    _BLOCK = {
        "p", "div", "br", "li", "tr", "h1", "h2", "h3", "h4", "h5", "h6", "title", "section",
        "article", "header", "footer", "table", "ul", "ol", "dt", "dd", "pre", "blockquote",
    }  # fmt: skip

    # a footnote mark or an exponent as the page shows it (``Zhang<sup>1</sup>`` -> ``Zhang¹``,
    # ``m<sup>2</sup>`` -> ``m²``): a name stays apart from its affiliation's number
    _RAISED = {"sup": dict(zip("0123456789", "⁰¹²³⁴⁵⁶⁷⁸⁹", strict=True)),
               "sub": dict(zip("0123456789", "₀₁₂₃₄₅₆₇₈₉", strict=True))}  # fmt: skip

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.skipping = 0
        self.raised: list[str] = []

    def handle_starttag(self, tag: str, attrs: list) -> None:
        if tag in self._SKIP:
            self.skipping += 1
        elif tag in self._RAISED:
            self.raised.append(tag)
        elif tag in self._BLOCK:
            self.parts.append("\n")
        elif tag in ("td", "th"):
            self.parts.append(" | ")

    def handle_endtag(self, tag: str) -> None:
        if tag in self._SKIP:
            self.skipping = max(0, self.skipping - 1)
        elif tag in self._RAISED and tag in self.raised:
            self.raised.remove(tag)
        elif tag in self._BLOCK:
            self.parts.append("\n")

    def handle_data(self, data: str) -> None:
        if self.skipping:
            return
        if self.raised:  # inside <sup> / <sub>
            digits = self._RAISED[self.raised[-1]]
            data = "".join(digits.get(c, c) for c in data)
        self.parts.append(data)


def email_to_text(data: bytes) -> str | None:
    """An e-mail message (``.eml``, RFC 5322 with MIME) as a reader sees it: its From, To, Cc,
    Date and Subject lines (encoded words decoded), a blank line, its text body (the plain-text
    part, else the HTML part's text; transfer encoding and charset decoded) and the names of
    its attachments. None where ``data`` is no message (no From, Date or Subject header)."""
    from email import message_from_bytes, policy

    try:
        msg = message_from_bytes(data, policy=policy.default)
        heads = [f"{name}: {msg[name]}" for name in _MAIL_HEADERS if msg[name] is not None]
        part = msg.get_body(preferencelist=("plain", "html"))
        body = _part_text(part) if part is not None else ""
        files = [f for p in msg.iter_attachments() if (f := p.get_filename())]
    except (LookupError, ValueError, TypeError, AttributeError, IndexError):
        return None  # a malformed header or part: read as plain text
    if not any(h.split(":")[0] in ("From", "Date", "Subject") for h in heads):
        return None
    tail = [f"Attachments: {', '.join(files)}"] if files else []
    return "\n".join(heads) + "\n\n" + "\n\n".join([body.strip("\n"), *tail]).strip("\n") + "\n"


def _part_text(part) -> str:
    """A MIME text part's content: its declared charset, UTF-8 where it declares none."""
    if part.get_param("charset") is None:
        text, _ = decode_text(part.get_payload(decode=True) or b"")
    else:
        text = part.get_content()
    return html_to_text(text) if part.get_content_subtype() == "html" else text


def json_to_text(text: str) -> str:
    """Pretty-printed JSON (one key per line reads better for a small model); raw if invalid."""
    try:
        value = json.loads(text)
    except ValueError:
        return text
    return json.dumps(value, ensure_ascii=False, indent=1)


def csv_to_text(text: str) -> str:
    """CSV rows as 'header: value' lines, one blank line between rows; raw text if not tabular."""
    try:
        dialect = csv.Sniffer().sniff(text[:4096], delimiters=",;\t|")
        rows = list(csv.reader(io.StringIO(text), dialect))
    except csv.Error:
        return text
    rows = [r for r in rows if any(c.strip() for c in r)]
    if len(rows) < 2 or len(rows) > _MAX_CSV_ROWS:
        return text
    header, body = rows[0], rows[1:]
    blocks = [
        "\n".join(f"{h.strip()}: {v.strip()}" for h, v in zip(header, row, strict=False))
        for row in body
    ]
    return "\n\n".join(blocks)


def pdf_to_text(data: bytes) -> str:
    """The PDF's text layer (pypdf); DocumentError when it is unreadable or has no text."""
    from pypdf import PdfReader
    from pypdf.errors import PyPdfError

    try:
        reader = PdfReader(io.BytesIO(data))
        pages = [page.extract_text() or "" for page in reader.pages]
    except (PyPdfError, ValueError, KeyError, TypeError, OSError) as e:
        raise DocumentError(f"unreadable PDF: {e}") from e
    text = "\n\n".join(p.strip() for p in pages if p.strip())
    if not text:
        raise DocumentError("PDF has no text layer")
    return text
