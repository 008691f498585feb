"""Errors answered to HTTP clients: OpenAI's error body with a status, its text sanitized."""

from __future__ import annotations

from typing import Any

from stencil.api.sanitize import sanitize_message


class APIError(Exception):
    """An error answered as OpenAI's error body with an HTTP status."""

    def __init__(
        self,
        message: str,
        *,
        status: int = 400,
        type: str = "invalid_request_error",
        param: str | None = None,
        code: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.type = type
        self.param = param
        self.code = code
        self.headers = headers or {}

    def body(self) -> dict[str, Any]:
        return {
            "error": {
                "message": sanitize_message(self.message),
                "type": self.type,
                "param": sanitize_message(self.param, 120) if self.param else self.param,
                "code": self.code,
            }
        }


def bad_request(message: str, param: str | None = None, code: str | None = None) -> APIError:
    return APIError(message, status=400, param=param, code=code)
