"""``POST /v1/responses``, ``GET`` and ``DELETE /v1/responses/{id}``: the request converted to a
chat plan (``convert``), run on the one response path (``send_response.respond``) and rendered by the
Responses API renderer (``render``); stored when it completes (``store``)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from stencil.api.engine_stream import ChoiceState, EventStream
from stencil.api.errors import APIError
from stencil.api.openapi import json_body as openapi_body
from stencil.api.read_request import read_request, ready
from stencil.api.responses_api.convert import to_turn
from stencil.api.responses_api.protocol import ResponsesRequest
from stencil.api.responses_api.reasoning import ReasoningSplit
from stencil.api.responses_api.render import ResponseBuilder, response_body
from stencil.api.responses_api.store import Stored, key_scope
from stencil.api.responses_api.stream import stream_events
from stencil.api.responses_api.surface import check_responses_surface
from stencil.api.send_response import respond
from stencil.api.state import AppState


def responses_routes(state: AppState) -> APIRouter:
    router = APIRouter()

    @router.post("/v1/responses", openapi_extra=openapi_body(ResponsesRequest))
    async def create(request: Request) -> Response:
        st = ready(state)
        req = await read_request(request, st, ResponsesRequest)
        scope = key_scope(request.headers.get("authorization"))
        previous: list[dict[str, Any]] = []
        if req.previous_response_id is not None:
            stored = _stored(st, scope, req.previous_response_id, "previous_response_id")
            previous = list(stored.conversation)
        check_responses_surface(req)
        turn = to_turn(req, previous, st.model)
        split = ReasoningSplit(st.model.reasoning_end)
        prompt_len = len(turn.plan.prompt_ids)
        builder = ResponseBuilder(req, st.model_name, prompt_len, turn.logprobs, split)

        def keep(response: dict[str, Any]) -> None:
            if req.store is not False and response["status"] != "failed":
                st.responses.put(scope, response, turn.conversation + builder.output_messages())

        def body(choices: dict[int, ChoiceState]) -> dict[str, Any]:
            response = response_body(builder, choices)
            keep(response)
            return response

        opened = EventStream.open(st.runner, [turn.plan], builder.id, 1, st.model)
        return await respond(
            request,
            st,
            opened,
            bool(req.stream),
            lambda stream, on_exit: stream_events(stream, builder, on_exit, keep),
            body,
        )

    @router.get("/v1/responses/{response_id}")
    async def get(request: Request, response_id: str) -> Response:
        scope = key_scope(request.headers.get("authorization"))
        return JSONResponse(_stored(state, scope, response_id).response)

    @router.delete("/v1/responses/{response_id}")
    async def delete(request: Request, response_id: str) -> Response:
        scope = key_scope(request.headers.get("authorization"))
        _stored(state, scope, response_id)
        state.responses.delete(scope, response_id)
        return JSONResponse({"id": response_id, "object": "response", "deleted": True})

    return router


def _stored(st: AppState, scope: str, response_id: str, param: str | None = None) -> Stored:
    entry = st.responses.get(scope, response_id)
    if entry is None:
        store = st.responses
        raise APIError(
            f"no stored response with id {response_id[:80]!r} for this API key: it was never "
            "stored (store: false), was deleted, or was evicted (this server keeps the "
            f"{store.max_entries} most recently used responses, at most {store.max_bytes} "
            "bytes, in memory)",
            status=404,
            type="invalid_request_error",
            param=param,
            code="response_not_found",
        )
    return entry
