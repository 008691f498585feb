"""The one response path of every generating endpoint (chat, completions, the Responses API):
open the engine work, then hand its events to that API's renderer."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from stencil.api.engine_stream import ChoiceState, EventStream, collect
from stencil.api.read_request import ClientGone, unless_disconnected
from stencil.api.state import AppState


async def respond(
    request: Request,
    st: AppState,
    opened: Awaitable[EventStream],
    streaming: bool,
    render_stream: Callable[[EventStream, Callable[[bool], None]], Any],
    render_body: Callable[[dict[int, ChoiceState]], dict[str, Any]],
    headers: dict[str, str] | None = None,
) -> Response:
    """The one response path of every generating endpoint: open the engine work (``opened``,
    an awaitable EventStream; bad input fails here), then hand its events to a renderer: SSE
    (``render_stream(stream, on_exit)``) or one JSON body (``render_body(choices)``). A client
    that goes away aborts the engine requests."""
    try:
        stream = await unless_disconnected(request, st, opened)
    except ClientGone:
        return Response(status_code=499)

    def on_exit(completed: bool = True) -> None:
        if not completed:
            st.metrics.aborted_by_client += 1
        stream.close()

    if streaming:
        return StreamingResponse(
            render_stream(stream, on_exit),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", **(headers or {})},
        )
    try:
        choices = await unless_disconnected(request, st, collect(stream))
    except ClientGone:
        return Response(status_code=499)
    finally:
        stream.close()
    return JSONResponse(render_body(choices), headers=headers)
