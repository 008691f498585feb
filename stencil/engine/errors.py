"""Typed errors of the engine. All are ValueError subclasses so callers can map them to HTTP 400."""


class StencilError(Exception):
    """Base of every Stencil error."""


class ConfigError(StencilError, ValueError):
    """An invalid engine or server configuration (unknown model, bad field value)."""


class RequestError(StencilError, ValueError):
    """A request that cannot be served as asked (bad sampling parameter, prompt too long, ...)."""


class EngineError(StencilError, RuntimeError):
    """The engine cannot make progress (dead loop, shut down)."""


class QueueFullError(EngineError):
    """The waiting queue is full; the caller should retry later."""
