"""``$ref`` resolution inside one schema document: JSON pointers, ``$id`` bases and anchors."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote, urldefrag, urljoin, urlsplit, uses_relative

from ..errors import InvalidSchemaError, UnsupportedSchemaError
from .keywords import SCHEMA_LIST_KEYWORDS, SCHEMA_MAP_KEYWORDS, SCHEMA_VALUE_KEYWORDS

DEFAULT_BASE = "https://stencil.invalid/schema.json"


@dataclass(frozen=True, slots=True)
class Target:
    """A resolved reference: the node, its pointer from the document root, its parent's base URI."""

    node: Any
    pointer: str
    base: str


def escape(token: str) -> str:
    return token.replace("~", "~0").replace("/", "~1")


def _unescape(token: str) -> str:
    return token.replace("~1", "/").replace("~0", "~")


@dataclass(slots=True)
class RefIndex:
    """Every ``$id`` and ``$anchor`` of a document, so local and id-relative refs resolve."""

    root: Any
    id_key: str = "$id"
    ids: dict[str, Target] = field(default_factory=dict)
    anchors: dict[str, Target] = field(default_factory=dict)

    def build(self) -> RefIndex:
        stack: list[tuple[Any, str, str]] = [(self.root, "", DEFAULT_BASE)]
        self.ids[DEFAULT_BASE] = Target(self.root, "", DEFAULT_BASE)
        while stack:
            node, pointer, parent_base = stack.pop()
            if not isinstance(node, dict):
                continue
            base = self.base_of(node, parent_base)
            here = Target(node, pointer, parent_base)
            if isinstance(node.get(self.id_key), str) and not node[self.id_key].startswith("#"):
                self.ids.setdefault(urldefrag(base)[0], here)
            if isinstance(node.get(self.id_key), str) and node[self.id_key].startswith("#"):
                self.anchors.setdefault(f"{urldefrag(base)[0]}{node[self.id_key]}", here)
            for key in ("$anchor", "$dynamicAnchor"):
                if isinstance(node.get(key), str):
                    self.anchors.setdefault(f"{urldefrag(base)[0]}#{node[key]}", here)
            stack.extend(_children(node, pointer, base))
        return self

    def base_of(self, node: Any, base: str) -> str:
        if isinstance(node, dict) and isinstance(node.get(self.id_key), str):
            value = node[self.id_key]
            if value.startswith("#"):  # draft-04/06 plain-name fragment id
                return base
            return join(base, value)
        return base

    def resolve(self, ref: str, base: str, pointer: str) -> Target:
        """The node a ``$ref`` at ``pointer`` (with base URI ``base``) points to."""
        doc_url, fragment = urldefrag(join(base, ref))
        doc = self.ids.get(doc_url)
        if doc is None:
            if doc_url.startswith("https://stencil.invalid/"):
                raise InvalidSchemaError(
                    f"$ref {ref!r} points to no schema in this document", pointer
                )
            raise UnsupportedSchemaError(
                "$ref",
                pointer,
                f"remote reference {ref!r} (only local refs): copy the schema it names "
                'into "$defs" and write {"$ref": "#/$defs/<name>"}',
            )
        fragment = unquote(fragment)
        if not fragment.startswith("/") and fragment:
            anchor = self.anchors.get(f"{doc_url}#{fragment}")
            if anchor is None:
                raise InvalidSchemaError(f"$ref {ref!r}: no anchor {fragment!r}", pointer)
            return anchor
        return self._walk(doc, fragment, ref, pointer)

    def _walk(self, doc: Target, fragment: str, ref: str, pointer: str) -> Target:
        node, path, base = doc.node, doc.pointer, doc.base
        for raw in fragment.split("/")[1:]:
            token = _unescape(raw)
            base = self.base_of(node, base)
            if isinstance(node, dict) and token in node:
                node = node[token]
            elif isinstance(node, list) and token.isdigit() and int(token) < len(node):
                node = node[int(token)]
            else:
                raise InvalidSchemaError(f"dangling $ref {ref!r}", pointer)
            path += "/" + escape(token)
        return Target(node, path, base)


def join(base: str, ref: str) -> str:
    """``urljoin`` that also works for schemes it does not know (``classpath:``, ``urn:``)."""
    if ref.startswith("#"):
        return urldefrag(base)[0] + ref
    if urlsplit(ref).scheme:
        return ref
    scheme = urlsplit(base).scheme
    if scheme in uses_relative:
        return urljoin(base, ref)
    head = urldefrag(base)[0].rsplit("/", 1)[0] if "/" in base else base
    return f"{head}/{ref}"


def _children(node: dict, pointer: str, base: str) -> list[tuple[Any, str, str]]:
    out: list[tuple[Any, str, str]] = []
    for key, value in node.items():
        here = f"{pointer}/{escape(key)}"
        if key in SCHEMA_VALUE_KEYWORDS or (key == "items" and not isinstance(value, list)):
            out.append((value, here, base))
        elif key in SCHEMA_LIST_KEYWORDS or key == "items":
            if isinstance(value, list):
                out.extend((v, f"{here}/{i}", base) for i, v in enumerate(value))
        elif key in SCHEMA_MAP_KEYWORDS and isinstance(value, dict):
            out.extend((v, f"{here}/{escape(k)}", base) for k, v in value.items())
        elif key == "dependencies" and isinstance(value, dict):
            out.extend(
                (v, f"{here}/{escape(k)}", base)
                for k, v in value.items()
                if not isinstance(v, list)
            )
    return out
