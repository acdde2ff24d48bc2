"""The OpenAI-compatible speech API as an ASGI application: `POST /v1/audio/speech`, `GET /v1/models` (and
`/v1/models/{model}`), `GET /v1/audio/voices`.

Every request passes the door first (utils.serving.auth.Access: 401 without a valid login, 429 while locked out);
then a refusal is a 4xx in OpenAI's shape (utils.serving.errors). The speech answer starts once its first audio is
ready (an error before it, such as a sentence over the token limit, is still a JSON error), then streams as it is
generated (chunked); a client that goes away ends its generation at the next chunk. Nothing is written: the models
are read where they are and only generated audio is answered.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from utils.model import sampling
from utils.serving.auth import Access
from utils.serving.catalog import Catalog
from utils.serving.encoding import OPENAI_FORMATS, available_formats
from utils.serving.errors import ApiError, said
from utils.serving.speech import SpeechOrder, SpeechService

log = logging.getLogger(__name__)

MAX_INPUT_BYTES = 100_000  # the text of one request, UTF-8
MAX_BODY_BYTES = 1_000_000  # the JSON body (its text may be escaped: \uXXXX is 6 bytes a character)
SPEECH_FIELDS = ("model", "input", "voice", "response_format", "speed", "instructions", "stream_format")
DEFAULT_FORMAT = "mp3"  # OpenAI's


async def _json_body(request: Request, limit: int = MAX_BODY_BYTES) -> dict[str, Any]:
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise ApiError(413, f"The request body is over {limit:,} bytes.", code="body_too_large")
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            raise ApiError(413, f"The request body is over {limit:,} bytes.", code="body_too_large")
    try:
        value = json.loads(bytes(body))
    except (UnicodeDecodeError, ValueError):
        raise ApiError(400, "The request body is not JSON: send a JSON object.", code="invalid_json") from None
    if not isinstance(value, dict):
        raise ApiError(400, f"The request body is JSON {type(value).__name__}, not an object.", code="invalid_json")
    return value


class SpeechAPI:
    """The API over the finished runs of `catalog`, speaking through `service`, behind `access`."""

    def __init__(
        self,
        catalog: Catalog,
        service: SpeechService,
        access: Access | None = None,
        *,
        max_input_bytes: int = MAX_INPUT_BYTES,
    ) -> None:
        self.catalog, self.service, self.access = catalog, service, access or Access()
        self.max_input_bytes = max_input_bytes
        self.app = Starlette(
            routes=[
                Route("/v1/models", self.list_models, methods=["GET"]),
                Route("/v1/models/{model:path}", self.get_model, methods=["GET"]),
                Route("/v1/audio/voices", self.list_voices, methods=["GET"]),
                Route("/v1/audio/speech", self.speech, methods=["POST"]),
            ],
            exception_handlers={
                ApiError: lambda request, exc: exc.response(),
                HTTPException: self._http_error,
                Exception: self._server_error,
            },
        )

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        await self.handle(scope, receive, send)

    async def handle(self, scope: dict[str, Any], receive: Any, send: Any, session_user: str | None = None) -> None:
        """Serve one ASGI connection; `session_user`: the web app's logged-in user of this request, if any."""
        if scope["type"] == "http":
            try:
                await self.access.authorize(scope, session_user)
            except ApiError as refused:
                await refused.response()(scope, receive, send)
                return
        await self.app(scope, receive, send)

    # --- errors -----------------------------------------------------------------------------------------------
    @staticmethod
    async def _http_error(request: Request, exc: HTTPException) -> Response:
        if exc.status_code == 405:
            message, code = f"{request.method} is not allowed on {request.url.path}.", "method_not_allowed"
        elif exc.status_code == 404:
            message, code = (
                f"No route {said(request.url.path)}: this server has GET /v1/models, GET /v1/audio/voices and POST "
                "/v1/audio/speech.",
                "unknown_url",
            )
        else:
            message, code = str(exc.detail), None
        return ApiError(exc.status_code, message, code=code, headers=exc.headers).response()

    @staticmethod
    async def _server_error(request: Request, exc: Exception) -> Response:
        log.error("speech API: %s %s failed", request.method, request.url.path, exc_info=exc)
        return ApiError(500, f"The server failed: {type(exc).__name__}.", code="server_error").response()

    # --- listings (plain functions: Starlette runs them on its threads, the folders are read there) --------------
    def list_models(self, request: Request) -> Response:
        models = self.catalog.models()
        return JSONResponse({"object": "list", "data": [m.describe() for m in models.values()]})

    def get_model(self, request: Request) -> Response:
        return JSONResponse(self.catalog.model(request.path_params["model"]).describe())

    def list_voices(self, request: Request) -> Response:
        wanted = request.query_params.get("model")
        models = [self.catalog.model(wanted)] if wanted is not None else list(self.catalog.models().values())
        return JSONResponse({"object": "list", "data": [v.describe(m.name) for m in models for v in m.voices()]})

    # --- speech -----------------------------------------------------------------------------------------------
    def order(self, body: dict[str, Any]) -> SpeechOrder:
        """A request body checked field by field (a 4xx naming the field otherwise)."""
        unknown = [key for key in body if key not in SPEECH_FIELDS]
        if unknown:
            raise ApiError(
                400,
                f"Unrecognized request argument supplied: {said(unknown[0])}. This server takes "
                f"{', '.join(SPEECH_FIELDS)}.",
                param=said(unknown[0]),
                code="unknown_parameter",
            )
        model = self.catalog.model(body.get("model"))
        voice = model.voice(body.get("voice"))
        text = body.get("input")
        if not isinstance(text, str) or not text.strip():
            raise ApiError(400, "input is empty: give the text to speak.", param="input", code="empty_input")
        try:
            size = len(text.encode("utf-8"))
        except UnicodeEncodeError:  # a lone surrogate ("\ud800" in the JSON): no text a tokenizer can read
            raise ApiError(400, "input is not valid Unicode text.", param="input", code="invalid_input") from None
        if size > self.max_input_bytes:
            raise ApiError(
                400,
                f"input is {size:,} bytes, over this server's limit of {self.max_input_bytes:,}: send it in parts.",
                param="input",
                code="string_above_max_length",
            )
        name = body.get("response_format", DEFAULT_FORMAT)
        formats = available_formats()
        if name not in formats:
            missing = "" if name not in OPENAI_FORMATS else " (no encoder for it is installed here)"
            raise ApiError(
                400,
                f"response_format {said(name)} is not supported{missing}: this server has {', '.join(formats)}.",
                param="response_format",
                code="unsupported_format",
            )
        speed = body.get("speed", 1.0)
        try:
            speed = sampling.checked("speed", speed)
        except ValueError as exc:
            raise ApiError(400, str(exc), param="speed", code="invalid_speed") from None
        if body.get("stream_format", "audio") != "audio":
            raise ApiError(
                400,
                f"stream_format {said(body['stream_format'])} is not supported: this server streams audio only.",
                param="stream_format",
                code="unsupported_stream_format",
            )
        if body.get("instructions"):
            raise ApiError(
                400, "instructions are not supported: an XTTS voice speaks as it was trained.", param="instructions"
            )
        return SpeechOrder(model, voice, text, formats[name], speed)

    async def speech(self, request: Request) -> Response:
        order = await asyncio.to_thread(self.order, await _json_body(request))  # reads the served folders
        job = await self.service.start(order)
        first = await job.next(request.is_disconnected)
        if isinstance(first, ApiError):
            job.cancelled.set()
            return first.response()
        if first is None:  # the client left, or nothing was generated
            job.cancelled.set()
            return Response(status_code=204)

        async def audio() -> AsyncIterator[bytes]:
            try:
                yield first
                while (item := await job.next()) is not None:
                    if isinstance(item, ApiError):  # after the first bytes: the status is sent, the log says why
                        log.error("speech for %s ended early: %s", order.model.name, item.message)
                        return
                    yield item
            finally:
                job.cancelled.set()  # a client gone mid-stream ends the generation at its next chunk

        headers = {"X-Sample-Rate": str(job.sample_rate), "Cache-Control": "no-store"}
        return StreamingResponse(audio(), media_type=order.format.media_type, headers=headers)
