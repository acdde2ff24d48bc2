"""Failed logins against the real app server: slowed down, then refused for a while, even with the right password
(issue 17: 30 wrong passwords, then the right one worked)."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.parse
import urllib.request

import pytest

from tests.webui.app_server import running_app

pytestmark = pytest.mark.slow


def login(server, user: str, password: str) -> tuple[int, str, float]:
    """(HTTP status, detail, seconds the answer took) of one POST /login, as the login form sends it."""
    data = urllib.parse.urlencode({"username": user, "password": password}).encode()
    started = time.monotonic()
    try:
        with urllib.request.urlopen(urllib.request.Request(server.url + "login", data=data), timeout=30) as answer:
            return answer.status, "", time.monotonic() - started
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"{}").get("detail", ""), time.monotonic() - started


def test_repeated_failed_logins_are_slowed_then_refused_for_a_while(tmp_path):
    with running_app(tmp_path, "--auth", "alice:secret", "--max-failed-logins", "4", "--login-lockout", "6") as server:
        assert login(server, "alice", "secret")[0] == 200, "the right password works"
        answers = [login(server, "alice", f"guess-{n}") for n in range(4)]
        assert [status for status, _, _ in answers] == [400] * 4
        assert answers[-2][2] >= 0.4, "a failed login answers after a delay"
        status, detail, _ = login(server, "alice", "secret")
        assert status == 429 and "Too many failed logins" in detail and "more seconds" in detail, (status, detail)
        for n in range(26):  # the 30 wrong passwords: still refused, and answered at once
            assert login(server, "alice", f"more-{n}")[0] == 429
        assert login(server, "alice", "secret")[0] == 429
        time.sleep(6.5)
        assert login(server, "alice", "secret")[0] == 200, "after the lockout the right password works again"
