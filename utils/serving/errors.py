"""Errors as OpenAI's API answers them: an HTTP status and `{"error": {"message", "type", "param", "code"}}`.

A client built for OpenAI (the `openai` package raises `BadRequestError`, `AuthenticationError`, `NotFoundError`,
`RateLimitError`... from the status, with the message) shows the reason as it is. A message never echoes a request's
text (the speech `input`) and cuts any other value a client sent (utils.text.visible.clipped, visible).
"""

from __future__ import annotations

import json
from typing import Any

from utils.text.visible import clipped, visible

# OpenAI's error types by status.
_TYPES = {
    400: "invalid_request_error",
    401: "invalid_request_error",
    403: "invalid_request_error",
    404: "invalid_request_error",
    405: "invalid_request_error",
    413: "invalid_request_error",
    415: "invalid_request_error",
    429: "rate_limit_exceeded",
    500: "server_error",
    503: "server_error",
}


def said(value: Any, limit: int = 60) -> str:
    """A value a client sent, as a message may quote it: visible and cut."""
    return visible(clipped(value if isinstance(value, str) else json.dumps(value, default=str), limit))


class ApiError(Exception):
    """A refusal with its HTTP status, OpenAI's error fields and extra response headers (Retry-After...)."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        param: str | None = None,
        code: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status, self.message, self.param, self.code = status, message, param, code
        self.headers = dict(headers or {})

    def body(self) -> dict[str, Any]:
        return {
            "error": {
                "message": self.message,
                "type": _TYPES.get(self.status, "invalid_request_error" if self.status < 500 else "server_error"),
                "param": self.param,
                "code": self.code,
            }
        }

    def response(self) -> Any:
        from starlette.responses import JSONResponse

        return JSONResponse(self.body(), status_code=self.status, headers=self.headers)
