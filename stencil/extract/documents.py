"""Input documents for ``stencil extract``: expand paths/globs/directories, read each file to text.

Reading never raises for one bad file: binary, empty or unreadable files come back as a
``Document`` with ``error`` set, so the run goes on and the file gets an error record.
"""

from __future__ import annotations

import glob
import hashlib
import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from stencil.extract.formats import (
    DocumentError,
    csv_to_text,
    decode_text,
    email_to_text,
    html_to_text,
    json_to_text,
    pdf_to_text,
)

MAX_FILE_BYTES = 64 << 20
_HTML = {".html", ".htm", ".xhtml"}


class InputError(ValueError):
    """A path or glob on the command line names nothing (a usage error: exit code 2)."""


@dataclass(slots=True)
class Document:
    """One input file: its text, or the reason it has none."""

    path: str
    sha256: str | None = None
    text: str | None = None
    error: str | None = None
    encoding: str | None = None
    warnings: list[str] = field(default_factory=list)


def discover(args: Iterable[str], exclude: Iterable[str] = ()) -> list[str]:
    """Files named by ``args`` (files, directories recursed, globs expanded), sorted per
    argument, de-duplicated, without hidden entries found by recursion and without ``exclude``."""
    skip = {os.path.abspath(p) for p in exclude}
    seen: set[str] = set()
    out: list[str] = []
    for arg in args:
        for path in _expand(arg):
            key = os.path.abspath(path)
            if key not in seen and key not in skip:
                seen.add(key)
                out.append(os.path.normpath(path))
    return out


def _expand(arg: str) -> list[str]:
    if os.path.isdir(arg):
        return _walk(arg)
    if os.path.lexists(arg):  # files, broken symlinks, FIFOs: reading reports them
        return [arg]
    if glob.has_magic(arg):
        matches = sorted(glob.glob(arg, recursive=True))
        if matches:
            return [p for m in matches for p in (_walk(m) if os.path.isdir(m) else [m])]
        raise InputError(f"no files match {arg!r}")
    raise InputError(f"no such file or directory: {arg!r}")


def _walk(root: str) -> list[str]:
    out: list[str] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        out.extend(os.path.join(dirpath, f) for f in sorted(filenames) if not f.startswith("."))
    return out


def read_document(path: str) -> Document:
    """Read and convert one file; problems become ``Document.error``, never exceptions.

    ``sha256`` is ``file_sha256(path)`` whatever happens, so resume sees the same hash."""
    doc = Document(path)
    try:
        data = _read_bytes(path)
    except OSError as e:
        doc.sha256, doc.error = file_sha256(path), f"unreadable: {_reason(e)}"
        return doc
    except DocumentError as e:
        doc.sha256, doc.error = file_sha256(path), str(e)
        return doc
    return read_bytes(path, data)


def read_bytes(name: str, data: bytes) -> Document:
    """Convert one file's content (``name`` picks the format by its suffix, as for a path);
    problems become ``Document.error``, never exceptions."""
    doc = Document(name, hashlib.sha256(data).hexdigest())
    if len(data) > MAX_FILE_BYTES:
        doc.error = f"file too large ({len(data)} bytes > {MAX_FILE_BYTES})"
        return doc
    if not data:
        doc.error = "empty file"
        return doc
    try:
        doc.text, doc.encoding = _to_text(name, data)
    except DocumentError as e:
        doc.error = str(e)
        return doc
    if not doc.text.strip():
        doc.text, doc.error = None, "empty document (no text)"
    elif doc.encoding not in (None, "utf-8", "ascii"):
        doc.warnings.append(f"decoded as {doc.encoding}")
    return doc


def file_sha256(path: str) -> str | None:
    """Content hash of a regular file (streamed); None when it is not one or cannot be read."""
    try:
        if not os.path.isfile(path):
            return None
        digest = hashlib.sha256()
        with open(path, "rb") as fh:
            while chunk := fh.read(1 << 20):
                digest.update(chunk)
        return digest.hexdigest()
    except OSError:
        return None


def _read_bytes(path: str) -> bytes:
    st = os.stat(path)  # follows symlinks: a broken one raises here
    if not stat.S_ISREG(st.st_mode):
        raise DocumentError(f"unreadable: not a regular file ({_kind(st.st_mode)})")
    if st.st_size > MAX_FILE_BYTES:
        raise DocumentError(f"file too large ({st.st_size} bytes > {MAX_FILE_BYTES})")
    with open(path, "rb") as fh:
        return fh.read(MAX_FILE_BYTES + 1)


def _to_text(path: str, data: bytes) -> tuple[str, str | None]:
    suffix = Path(path).suffix.lower()
    if suffix == ".pdf" or data.startswith(b"%PDF-"):
        return pdf_to_text(data), None
    if suffix == ".eml" and (text := email_to_text(data)) is not None:
        return text, None
    text, encoding = decode_text(data)
    if suffix in _HTML or (suffix not in (".md", ".txt") and _looks_like_html(text)):
        return html_to_text(text), encoding
    if suffix == ".json":
        return json_to_text(text), encoding
    if suffix in (".csv", ".tsv"):
        return csv_to_text(text), encoding
    return text, encoding


def _looks_like_html(text: str) -> bool:
    head = text.lstrip()[:200].lower()
    return head.startswith("<!doctype html") or head.startswith("<html")


def _kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISFIFO, "fifo"),
        (stat.S_ISSOCK, "socket"),
        (stat.S_ISCHR, "device"),
        (stat.S_ISBLK, "device"),
        (stat.S_ISDIR, "directory"),
    ):
        if test(mode):
            return name
    return "special file"


def _reason(e: BaseException) -> str:
    if isinstance(e, OSError) and e.strerror:
        return e.strerror.lower()
    return str(e)
