"""The playground page of ``stencil serve`` (``GET /``): try a schema on documents, see the JSON
stream in, where each value came from, and what the constraint did at every step. Mounted by
``stencil serve`` beside the API unless ``--no-playground``; it sits above ``api`` and
``extract`` (the prompt, the schema library and the document readers of ``stencil extract``)."""

from stencil.playground.routes import playground_routes

__all__ = ["playground_routes"]
