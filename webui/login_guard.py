"""Failed logins slowed down, then refused for a while: a shared server's password cannot be guessed at speed.

Gradio calls the `auth` callable with the user name and password only (no address), so failures are counted
per user name, and all together (a guesser trying many names is stopped too). Each failure answers after a
short, growing delay (awaited: the server keeps serving others); `max_failures` failures within `window_s`
lock that name (or, all together, every name) for `lockout_s` seconds, during which even the right password
is refused with a message saying for how long (HTTP 429). A success clears the name's count.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections import deque
from collections.abc import Awaitable, Callable

from fastapi import HTTPException

ALL_USERS = 10  # the shared count locks every name at this many times the per-name limit


class LoginGuard:
    def __init__(
        self,
        user: str,
        password: str,
        *,
        max_failures: int = 5,
        window_s: float = 600.0,
        lockout_s: float = 300.0,
        delay_s: float = 0.5,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.user, self.password = user, password
        self.max_failures, self.window_s, self.lockout_s, self.delay_s = max_failures, window_s, lockout_s, delay_s
        self.clock = clock
        self.failures: dict[str, deque[float]] = {}
        self.locked_until: dict[str, float] = {}

    def _locked_for(self, key: str, now: float) -> float:
        return max(0.0, self.locked_until.get(key, 0.0) - now)

    def _fail(self, key: str, limit: int, now: float) -> int:
        times = self.failures.setdefault(key, deque())
        times.append(now)
        while times and now - times[0] > self.window_s:
            times.popleft()
        if len(times) >= limit:
            self.locked_until[key] = now + self.lockout_s
            times.clear()
        return len(times)

    async def check(self, username: str, password: str) -> bool:
        now = self.clock()
        wait = max(self._locked_for(username, now), self._locked_for("", now))
        if wait:
            raise HTTPException(
                status_code=429,
                detail=f"Too many failed logins: {'this user' if self._locked_for(username, now) else 'logins'} "
                f"refused for {int(wait) + 1} more seconds. Try again later.",
            )
        right = secrets.compare_digest(username.encode(), self.user.encode()) and secrets.compare_digest(
            password.encode(), self.password.encode()
        )
        if right:
            self.failures.pop(username, None)
            return True
        count = self._fail(username, self.max_failures, now)
        self._fail("", self.max_failures * ALL_USERS, now)
        await asyncio.sleep(min(self.delay_s * max(count, 1), 4 * self.delay_s))
        return False

    def auth(self) -> Callable[[str, str], Awaitable[bool]]:
        """The callable for launch(auth=...): a coroutine function, which Gradio awaits."""

        async def check(username: str, password: str) -> bool:
            return await self.check(username, password)

        return check
