"""The client's address where Gradio's login cannot see it, and a login page that says when to try again.

Gradio's `/login` route calls the `auth` callable with a name and a password only. `LoginAddress`, an ASGI
middleware of the app (launch(app_kwargs={"middleware": ...})), records each request's client address (the TCP
peer, as uvicorn reports it) in a context variable that the auth callable (webui.login_guard) reads: the route runs
in the request's context. The address is the peer's own: uvicorn rewrites it from X-Forwarded-For only for the
proxies in FORWARDED_ALLOW_IPS, which app.py empties unless the operator names a proxy, so a client cannot choose
its address with a header.

Gradio's login page shows `auth_message` (from the page's config) and reacts to no answer but 200 (it reloads)
and 400 ("Incorrect credentials"). So a refused browser login is answered with a redirect to the page (fetch
follows it, sees 200 and reloads the page), whose `auth_message` this middleware fills, per address, with the
lockout and when to try again. A script (no Sec-Fetch-Mode header) gets 429 with the same words as `detail` and
a Retry-After header.
"""

from __future__ import annotations

import contextvars
import html
import json
from dataclasses import dataclass
from typing import Any

from fastapi import HTTPException

# launch(auth_message=LOGIN_NOTICE): replaced in each page by this address's notice (or nothing).
LOGIN_NOTICE = "xtts-login-notice"
_PLACEHOLDER = json.dumps(LOGIN_NOTICE).encode()
_NOTICE_PATHS = ("/", "/login_check", "/login_check/")


@dataclass(frozen=True)
class Client:
    address: str = ""
    browser: bool = False  # a page's fetch (Sec-Fetch-Mode is set by browsers only)


_CLIENT: contextvars.ContextVar[Client | None] = contextvars.ContextVar("login_client", default=None)


def current_client() -> Client:
    """This request's client (an unknown one outside a request the middleware saw)."""
    return _CLIENT.get() or Client()


def refusal(locked: Any, client: Client) -> HTTPException:
    """The answer to a refused login: back to the page (which then says why) for a browser, 429 for a script."""
    if client.browser:
        return HTTPException(status_code=303, detail=str(locked), headers={"Location": "./"})
    return HTTPException(status_code=429, detail=str(locked), headers={"Retry-After": str(locked.seconds)})


def _notice_json(guard: Any, address: str) -> bytes:
    notice = guard.notice(address)
    if not notice:
        return b"null"
    text = html.escape(notice)
    # As Gradio writes its config into the page (routes.toorjson): nothing in it can close the script.
    return json.dumps(text).replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026").encode()


class LoginAddress:
    """ASGI middleware: the client of every HTTP request in `current_client()`; the login notice in the page."""

    def __init__(self, app: Any, guard: Any) -> None:
        self.app, self.guard = app, guard

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        client = Client((scope.get("client") or ("",))[0] or "", b"sec-fetch-mode" in headers)
        token = _CLIENT.set(client)
        try:
            if scope["method"] == "GET" and scope["path"] in _NOTICE_PATHS:
                await self.app(scope, receive, self._with_notice(send, client.address))
            else:
                await self.app(scope, receive, send)
        finally:
            _CLIENT.reset(token)

    def _with_notice(self, send: Any, address: str) -> Any:
        """`send`, with the page's (or login check's) placeholder notice replaced by this address's."""
        start: dict[str, Any] = {}
        body: list[bytes] = []

        async def sending(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                start.update(message)
                return
            if message["type"] != "http.response.body":
                await send(message)
                return
            body.append(message.get("body", b""))
            if message.get("more_body"):
                return
            content = b"".join(body).replace(_PLACEHOLDER, _notice_json(self.guard, address))
            headers = [(k, v) for k, v in start.get("headers", []) if k.lower() != b"content-length"]
            await send({**start, "headers": [*headers, (b"content-length", str(len(content)).encode())]})
            await send({"type": "http.response.body", "body": content})

        return sending
