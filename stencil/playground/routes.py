"""The playground's routes: the page at ``/`` (and its script and style, read once when the
router is built, so serving them touches no disk) and the JSON endpoints it calls under
``/v1/playground/``; the run itself goes through ``/v1/chat/completions``. Work that may take a
while (schema files, document conversion, span search) runs in a thread, never on the event
loop."""

from __future__ import annotations

import asyncio
import base64
import binascii
import dataclasses
import json
import uuid
from importlib import resources
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response

from stencil.api.errors import APIError, bad_request
from stencil.api.read_request import ClientGone, json_body, ready, unless_disconnected
from stencil.api.state import AppState
from stencil.playground.chat_body import RunSpec, chat_body, endpoint
from stencil.playground.facts import server_facts
from stencil.playground.spans import locate
from stencil.playground.trace import request_plan, traced_completion

ASSETS = {"app.js": "text/javascript", "views.js": "text/javascript", "app.css": "text/css"}
MAX_FILES = 200


def playground_routes(state: AppState) -> APIRouter:
    """The playground's router for the app around ``state``."""
    static = resources.files("stencil.playground") / "static"
    page = (static / "index.html").read_bytes()
    assets = {name: (static / name).read_bytes() for name in ASSETS}
    router = APIRouter(include_in_schema=False)
    no_store = {"Cache-Control": "no-store"}

    @router.get("/")
    async def index() -> Response:
        return Response(page, media_type="text/html; charset=utf-8", headers=no_store)

    @router.get("/playground/{asset}")
    async def asset(asset: str) -> Response:
        if asset not in assets:
            raise APIError(f"no playground asset {asset!r}", status=404, type="not_found_error")
        return Response(assets[asset], media_type=ASSETS[asset], headers=no_store)

    @router.get("/v1/playground/schemas")
    async def schemas() -> dict[str, Any]:
        return {"schemas": await asyncio.to_thread(_library)}

    @router.post("/v1/playground/request")
    async def request_body(request: Request) -> dict[str, Any]:
        st = ready(state)
        spec = RunSpec.read(await json_body(request, st))
        body, document, warnings = await asyncio.to_thread(
            chat_body, spec, st.model.tokenizer, st.model.max_model_len
        )
        return {
            "body": body,
            "document": document,
            "warnings": warnings,
            "endpoint": endpoint(body),
        }

    @router.post("/v1/playground/check")
    async def check(request: Request) -> dict[str, Any]:
        st = ready(state)
        spec = RunSpec.read(await json_body(request, st))
        spec = dataclasses.replace(spec, max_tokens=1)
        body, _, _ = await asyncio.to_thread(
            chat_body, spec, st.model.tokenizer, st.model.max_model_len
        )
        try:
            await _compile_as_the_api_does(st, body)
        except APIError as e:
            if e.code != "unstated_value":
                raise
            return {"ok": True, "note": e.message}  # the spec holds; the document lacks a value
        return {"ok": True}

    @router.post("/v1/playground/documents")
    async def documents(request: Request) -> dict[str, Any]:
        st = ready(state)
        files = _files(await json_body(request, st))
        return {"documents": await asyncio.to_thread(_read_all, files)}

    @router.post("/v1/playground/spans")
    async def spans(request: Request) -> dict[str, Any]:
        payload = await json_body(request, ready(state))
        document = payload.get("document") if isinstance(payload, dict) else None
        if not isinstance(document, str) or "value" not in payload:
            raise bad_request("give document (a string) and value (the extracted JSON)")
        try:
            return {"spans": await asyncio.to_thread(locate, document, payload["value"])}
        except RecursionError:
            raise bad_request("value is nested too deeply", "value") from None

    @router.post("/v1/playground/trace")
    async def trace(request: Request) -> Any:
        st = ready(state)
        body = await json_body(request, st)
        try:
            return await unless_disconnected(request, st, traced_completion(st, body))
        except ClientGone:  # the generation was aborted with the request
            return Response(status_code=499)

    @router.get("/v1/playground/facts")
    async def facts() -> dict[str, Any]:
        return server_facts(ready(state))

    return router


async def _compile_as_the_api_does(st: AppState, body: dict[str, Any]) -> None:
    """Run ``body`` through the chat endpoint's own reading, conversion and constraint compile
    (one token at most), so a bad constraint gets the 400 ``/v1/chat/completions`` gives."""
    plan = request_plan(st, {**body, "stream": False, "stream_options": None})
    params = dataclasses.replace(plan.params, max_tokens=1)
    gen = await st.runner.open(
        plan.prompt_ids, params, f"playground-check-{uuid.uuid4().hex}", plan.constraint_param
    )
    gen.close()


def _library() -> list[dict[str, Any]]:
    from stencil.extract.schema_library import list_schemas

    return [
        {"name": s.name, "description": s.description, "schema": json.loads(s.path.read_bytes())}
        for s in list_schemas()
    ]


def _files(payload: Any) -> list[tuple[str, bytes]]:
    files = payload.get("files") if isinstance(payload, dict) else None
    if not isinstance(files, list) or not 1 <= len(files) <= MAX_FILES:
        raise bad_request(f"files must be a list of 1 to {MAX_FILES} files", "files")
    out = []
    for i, f in enumerate(files):
        if not isinstance(f, dict) or not isinstance(f.get("name"), str):
            raise bad_request("each file is {name, data (base64)}", f"files[{i}]")
        try:
            out.append((f["name"], base64.b64decode(str(f.get("data", "")), validate=True)))
        except (binascii.Error, ValueError):
            raise bad_request("data is not base64", f"files[{i}].data") from None
    return out


def _read_all(files: list[tuple[str, bytes]]) -> list[dict[str, Any]]:
    from stencil.extract.documents import read_bytes

    docs = [read_bytes(name, data) for name, data in files]
    return [
        {"name": d.path, "text": d.text, "error": d.error, "warnings": d.warnings} for d in docs
    ]
