"""Failed logins slowed down, then refused for a while, per client address: a guesser is stopped, the owner is not.

Gradio calls the `auth` callable with the user name and password only; the client's address comes from the request
(webui/login_address.py puts it where `check` reads it). Failures are counted per (user name, address), and per
address over all names (a guesser trying many names is stopped too). Each failure answers after a short, growing
delay (awaited: the server keeps serving others). `max_failures` failures within `window_s` lock that name from that
address (or, over all names, that address) for `lockout_s` seconds, doubled at each new lock of the same key (up
to `max_lockout_s`): a guesser who waits out one lock gets a longer one. While locked even the right password is
refused, saying when to try again. Another address is not affected, so nobody can lock the owner out from
elsewhere; no count is shared by all addresses. A success clears its address's counts.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

ADDRESS_LIMIT = 10  # failures over all names from one address: this many times the per-name limit
MAX_LOCKOUT_S = 24 * 3600.0
KEPT_KEYS = 10_000  # beyond this many counted keys, those with nothing left to remember are dropped


@dataclass
class _Count:
    """One key's recent failures, its lock and how many locks it has had (each doubles the next)."""

    failures: deque[float] = field(default_factory=deque)
    locked_until: float = 0.0
    locks: int = 0
    last_failure: float = 0.0


class LoginLocked(Exception):
    """Logins of this name from this address (or from this address at all) are refused for `seconds` more."""

    def __init__(self, seconds: float, whole_address: bool) -> None:
        self.seconds = max(1, int(seconds + 0.999))
        self.whole_address = whole_address
        super().__init__(lockout_message(self.seconds, whole_address))


def lockout_message(seconds: int, whole_address: bool = False) -> str:
    """What a refused login is told: why, and when to try again (in how long, and at what UTC time)."""
    minutes, rest = divmod(seconds, 60)
    wait = f"{minutes} min {rest} s" if minutes else f"{rest} s"
    at = time.strftime("%H:%M:%S", time.gmtime(time.time() + seconds))
    who = "logins from your address" if whole_address else "this user's logins from your address"
    return f"Too many failed logins: {who} are refused for {seconds} more seconds. Try again in {wait} (at {at} UTC)."


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
        max_lockout_s: float = MAX_LOCKOUT_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.user, self.password = user, password
        self.max_failures, self.window_s, self.lockout_s, self.delay_s = max_failures, window_s, lockout_s, delay_s
        self.max_lockout_s = max(max_lockout_s, lockout_s)
        self.clock = clock
        self.counts: dict[tuple[str, ...], _Count] = {}

    @staticmethod
    def _keys(username: str, address: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
        return ("user", username, address), ("address", address)

    def _left(self, key: tuple[str, ...], now: float) -> float:
        count = self.counts.get(key)
        return max(0.0, count.locked_until - now) if count else 0.0

    def locked_for(self, username: str, address: str) -> tuple[float, bool]:
        """(seconds this name is still refused from this address, whether the whole address is locked)."""
        now = self.clock()
        user_key, address_key = self._keys(username, address)
        whole = self._left(address_key, now)
        return max(whole, self._left(user_key, now)), whole > 0

    def address_locked_for(self, address: str) -> tuple[float, bool]:
        """The longest refusal at this address, for any name (what its login page says), and whether it is the
        address's own lock."""
        now = self.clock()
        whole = self._left(("address", address), now)
        names = [self._left(key, now) for key in self.counts if key[0] == "user" and key[2] == address]
        return max([whole, *names]), whole > 0

    def notice(self, address: str) -> str:
        """What the login page tells a client at `address`: the refusal and when to try again, or ""."""
        seconds, whole = self.address_locked_for(address)
        return lockout_message(max(1, int(seconds + 0.999)), whole) if seconds else ""

    def _fail(self, key: tuple[str, ...], limit: int, now: float) -> int:
        count = self.counts.setdefault(key, _Count())
        if count.locks and now - count.last_failure > self.max_lockout_s:
            count.locks = 0  # a day without failures: the next lock starts short again
        count.last_failure = now
        count.failures.append(now)
        while count.failures and now - count.failures[0] > self.window_s:
            count.failures.popleft()
        failures = len(count.failures)
        if failures >= limit:
            count.locks += 1
            count.locked_until = now + min(self.lockout_s * 2 ** (count.locks - 1), self.max_lockout_s)
            count.failures.clear()
        return failures

    def _forget_stale(self, now: float) -> None:
        if len(self.counts) <= KEPT_KEYS:
            return
        for key, count in list(self.counts.items()):
            idle = now - count.last_failure
            if count.locked_until <= now and idle > self.window_s and (not count.locks or idle > self.max_lockout_s):
                del self.counts[key]

    async def check(self, username: str, password: str, address: str) -> bool:
        """True for the right name and password; False (after a delay) otherwise; LoginLocked while refused."""
        wait, whole = self.locked_for(username, address)
        if wait:
            raise LoginLocked(wait, whole)
        now = self.clock()
        user_key, address_key = self._keys(username, address)
        right = secrets.compare_digest(username.encode(), self.user.encode()) and secrets.compare_digest(
            password.encode(), self.password.encode()
        )
        if right:
            for key in (user_key, address_key):
                self.counts.pop(key, None)
            return True
        failures = self._fail(user_key, self.max_failures, now)
        self._fail(address_key, self.max_failures * ADDRESS_LIMIT, now)
        self._forget_stale(now)
        await asyncio.sleep(min(self.delay_s * max(failures, 1), 4 * self.delay_s))
        return False

    def auth(self) -> Callable[[str, str], Awaitable[bool]]:
        """The callable for launch(auth=...): a coroutine function, which Gradio awaits. The address is the one
        webui.login_address recorded for this request; a refusal is an HTTP answer saying when to try again."""
        from webui.login_address import current_client, refusal

        async def check(username: str, password: str) -> bool:
            client = current_client()
            try:
                return await self.check(username, password, client.address)
            except LoginLocked as locked:
                raise refusal(locked, client) from None

        return check
