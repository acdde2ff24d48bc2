"""Who may call the speech API: the credentials of a request, checked by a login (the web app's LoginGuard, or the
standalone server's API key), or a logged-in page's session.

A request names its credentials in `Authorization`:
- `Bearer TOKEN`: what OpenAI's clients send (`api_key=TOKEN`). In the web app, TOKEN is the app's `--auth`
  `user:password`; standalone, the server's `--api-key`.
- `Basic base64(user:password)`: what curl -u and browsers send.
In the web app, a browser logged in to the page (Gradio's session cookie) is let in too. A login is anything with
`async check(username, password, address) -> bool` that may raise an exception with a `seconds` attribute while the
address is locked out (webui.login_guard.LoginGuard and its LoginLocked): wrong credentials are slowed down and
counted per client address by it, and a lockout is answered 429 with Retry-After. No login: the API is open, as the
page is (a server on 127.0.0.1, or one its operator opened with --insecure-open).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import secrets
import time
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from utils.serving.errors import ApiError


class Login(Protocol):
    def check(self, username: str, password: str, address: str) -> Awaitable[bool]: ...


def credentials(scope: dict[str, Any]) -> tuple[str, str] | None:
    """(user, password) of a request's Authorization header: Bearer "user:password" (or a bare key, user ""), or
    Basic; None when it has none."""
    headers = dict(scope.get("headers") or [])
    value = headers.get(b"authorization", b"").decode("latin-1").strip()
    if not value:
        return None
    scheme, _, token = value.partition(" ")
    token = token.strip()
    if scheme.lower() == "basic":
        try:
            token = base64.b64decode(token, validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError):
            return None
        user, _, password = token.partition(":")
        return user, password
    if scheme.lower() == "bearer" and token:
        user, colon, password = token.partition(":")
        return (user, password) if colon else ("", token)
    return None


def client_address(scope: dict[str, Any]) -> str:
    """The TCP peer (uvicorn rewrites it from X-Forwarded-For only for the proxies FORWARDED_ALLOW_IPS names)."""
    return (scope.get("client") or ("",))[0] or ""


class Access:
    """The API's door: open without a login; else a request's credentials checked by `login`, or a `session` user
    (a logged-in page of the web app). `how` says in a 401 what to send."""

    def __init__(self, login: Login | None = None, how: str = "") -> None:
        self.login = login
        self.how = how or "send Authorization: Bearer <key>"

    async def authorize(self, scope: dict[str, Any], session_user: str | None = None) -> None:
        if self.login is None or session_user:
            return
        given = credentials(scope)
        challenge = {"WWW-Authenticate": 'Bearer realm="xtts", Basic realm="xtts"'}
        if given is None:
            raise ApiError(401, f"This server needs a login: {self.how}.", code="missing_api_key", headers=challenge)
        try:
            right = await self.login.check(given[0], given[1], client_address(scope))
        except Exception as exc:
            seconds = getattr(exc, "seconds", None)
            if not isinstance(seconds, (int, float)):
                raise
            wait = max(1, int(seconds + 0.999))
            raise ApiError(429, str(exc), code="login_locked", headers={"Retry-After": str(wait)}) from None
        if not right:
            raise ApiError(401, f"Incorrect API key or login: {self.how}.", code="invalid_api_key", headers=challenge)


class KeyLocked(Exception):
    def __init__(self, seconds: float) -> None:
        self.seconds = max(1, int(seconds + 0.999))
        super().__init__(
            f"Too many wrong API keys from your address: refused for {self.seconds} more seconds. Try again later."
        )


class ApiKey:
    """The standalone server's login: one key (Bearer KEY). A wrong key answers after a short delay (awaited), and
    `max_failures` wrong keys from one address within `window_s` refuse that address for `lockout_s` seconds
    (other addresses are not affected)."""

    def __init__(
        self,
        key: str,
        *,
        max_failures: int = 10,
        window_s: float = 600.0,
        lockout_s: float = 300.0,
        delay_s: float = 0.5,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not key:
            raise ValueError("the API key is empty")
        self.key = key
        self.max_failures, self.window_s, self.lockout_s, self.delay_s = max_failures, window_s, lockout_s, delay_s
        self.clock = clock
        self.failures: dict[str, deque[float]] = {}
        self.locked_until: dict[str, float] = {}

    async def check(self, username: str, password: str, address: str) -> bool:
        now = self.clock()
        if self.locked_until.get(address, 0.0) > now:
            raise KeyLocked(self.locked_until[address] - now)
        given = f"{username}:{password}" if username else password
        if secrets.compare_digest(given.encode(), self.key.encode()):
            self.failures.pop(address, None)
            return True
        recent = self.failures.setdefault(address, deque())
        recent.append(now)
        while recent and now - recent[0] > self.window_s:
            recent.popleft()
        if len(recent) >= self.max_failures:
            recent.clear()
            self.locked_until[address] = now + self.lockout_s
        if len(self.failures) > 10_000:  # forget addresses with nothing left to remember
            for stale in [a for a, times in self.failures.items() if not times]:
                del self.failures[stale]
        await asyncio.sleep(self.delay_s)
        return False
