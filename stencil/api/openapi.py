"""The OpenAPI document: the routes read their JSON bodies themselves (to bound their size and
name the offending field in a 400), so FastAPI cannot see the request models; this module declares
them, so that ``/openapi.json`` describes what each POST route accepts (clients, fuzzers)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

_REF = "#/components/schemas/{model}"


def json_body(model: type[BaseModel]) -> dict[str, Any]:
    """``openapi_extra`` for a route whose body is ``model``."""
    schema = {"$ref": _REF.format(model=model.__name__)}
    return {"requestBody": {"required": True, "content": {"application/json": {"schema": schema}}}}


def install_openapi(
    app: FastAPI, models: list[type[BaseModel]], served: Callable[[], str] = lambda: ""
) -> None:
    """Make ``app.openapi()`` include the JSON schemas of ``models`` (and what they use); once
    ``served()`` names the model, their ``model`` field admits that name (or null) only."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            doc = get_openapi(title=app.title, version=app.version, routes=app.routes)
            _, defs = models_json_schema([(m, "validation") for m in models], ref_template=_REF)
            name = served()
            if name:
                _pin_model_field(defs["$defs"], [m.__name__ for m in models], name)
            doc.setdefault("components", {}).setdefault("schemas", {}).update(defs["$defs"])
            if not name:
                return doc  # not cached: the served name is not known yet
            app.openapi_schema = doc
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


def _pin_model_field(schemas: dict[str, Any], names: list[str], served: str) -> None:
    for name in names:
        props = schemas.get(name, {}).get("properties", {})
        if "model" in props:
            props["model"] = {"anyOf": [{"type": "string", "enum": [served]}, {"type": "null"}]}
