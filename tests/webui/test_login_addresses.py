"""The login lockout is per client address (issue 30): a hostile client locks only itself out, with a lock that
doubles each time; the owner logs in from another address meanwhile; a forged X-Forwarded-For buys no fresh
address; and the login page, in a real browser, says when to try again.

Two real loopback addresses: the app binds 127.0.0.1, and a client may connect from 127.0.0.2 (the whole 127/8 is
this machine's). Chromium connects from 127.0.0.1, so in the browser test the person at the page shares the
hostile client's address and the owner is at 127.0.0.2."""

from __future__ import annotations

import http.client
import json
import re
import time
import urllib.parse

import pytest

from tests.webui.app_server import running_app

pytestmark = pytest.mark.slow

HOSTILE, OWNER = "127.0.0.1", "127.0.0.2"


def request(server, method: str, path: str, source: str, body: bytes | None = None, headers: dict | None = None):
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30, source_address=(source, 0))
    try:
        connection.request(method, path, body=body, headers=headers or {})
        answer = connection.getresponse()
        return answer.status, dict(answer.getheaders()), answer.read()
    finally:
        connection.close()


def login(server, password: str, source: str, **headers: str) -> tuple[int, str, int | None]:
    """(status, detail, Retry-After) of one POST /login for alice, as a script sends it."""
    body = urllib.parse.urlencode({"username": "alice", "password": password}).encode()
    form = {"Content-Type": "application/x-www-form-urlencoded", **headers}
    status, answer_headers, content = request(server, "POST", "/login", source, body, form)
    detail = json.loads(content or b"{}").get("detail", "") if status != 200 else ""
    retry = answer_headers.get("retry-after") or answer_headers.get("Retry-After")
    return status, detail, int(retry) if retry else None


def page_notice(server, source: str) -> str | None:
    """The login page's auth_message for a client at `source` (None: no notice)."""
    _, _, content = request(server, "GET", "/", source)
    config = re.search(rb"window\.gradio_config = (\{.*?\});</script>", content).group(1)
    return json.loads(config)["auth_message"]


def lock(server, failures: int) -> list[int]:
    """Wrong passwords from the hostile address, each with a forged X-Forwarded-For (a fresh address each time)."""
    return [login(server, f"guess-{n}", HOSTILE, **{"X-Forwarded-For": f"10.9.8.{n}"})[0] for n in range(failures)]


def test_a_hostile_address_locks_only_itself_out_for_longer_each_time(tmp_path):
    with running_app(tmp_path, "--auth", "alice:secret", "--max-failed-logins", "3", "--login-lockout", "2") as server:
        assert page_notice(server, HOSTILE) is None, "no notice before any failure"
        assert lock(server, 3) == [400, 400, 400]
        status, detail, retry = login(server, "secret", HOSTILE)
        assert status == 429 and "Too many failed logins" in detail and "Try again in" in detail, (status, detail)
        assert retry is not None and 1 <= retry <= 2, retry
        notice = page_notice(server, HOSTILE)
        assert notice and "Try again in" in notice, notice
        # The owner, elsewhere, is not affected: the right password works and the page shows no notice there.
        assert login(server, "secret", OWNER)[0] == 200
        assert page_notice(server, OWNER) is None
        # The lock ends (the hostile page's notice goes away), then the next lock lasts twice as long.
        deadline = time.monotonic() + 30
        while page_notice(server, HOSTILE) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert page_notice(server, HOSTILE) is None, "the first lock did not end"
        assert lock(server, 3) == [400, 400, 400]
        status, detail, retry = login(server, "secret", HOSTILE)
        assert status == 429 and retry is not None and 3 <= retry <= 4, (status, detail, retry)
        assert login(server, "secret", OWNER)[0] == 200, "the owner still logs in"


@pytest.mark.browser
def test_the_login_page_says_when_to_try_again_and_the_owner_elsewhere_logs_in(tmp_path):
    """The right password typed on the page during a lockout (its address is the hostile one): the page says when
    to try again, instead of nothing (Gradio's page only reacts to 200 and 400)."""
    from selenium.webdriver.common.by import By

    from tests.webui.browser import click_button, start_chromium, wait_text

    with running_app(
        tmp_path, "--auth", "alice:secret", "--max-failed-logins", "2", "--login-lockout", "120"
    ) as server:
        driver = start_chromium(tmp_path / "profile", height=900)
        try:
            driver.get(server.url)
            assert "Too many failed logins" not in driver.find_element(By.TAG_NAME, "body").text
            assert lock(server, 2) == [400, 400]  # from the page's own address
            type_login(driver, "alice", "secret")
            click_button(driver, "Login")
            text = wait_text(driver, "Try again in")
            seconds = re.search(
                r"refused for (\d+) more seconds\. Try again in \d+ min \d+ s \(at \d\d:\d\d:\d\d UTC\)", text
            )
            assert seconds and 60 <= int(seconds.group(1)) <= 120, text
            driver.save_screenshot(str(tmp_path / "locked.png"))
            assert login(server, "secret", OWNER)[0] == 200, "the owner, at another address, logs in meanwhile"
        finally:
            driver.quit()


def type_login(driver, name: str, password: str) -> None:
    """Type into the login form, again from the start if the page redrew it while typing."""
    from tests.webui.browser import _retrying

    def type_both() -> None:
        for field, text in zip(login_inputs(driver), (name, password), strict=True):
            field.clear()
            field.send_keys(text)

    _retrying(type_both)


def login_inputs(driver):
    """The login form's two inputs (name, password), once the page has drawn them."""
    from selenium.webdriver.common.by import By

    from tests.webui.browser import wait_for

    def shown(d):
        found = [e for e in d.find_elements(By.CSS_SELECTOR, "input") if e.is_displayed()]
        return found if len(found) == 2 else None

    return wait_for(driver, shown, 60, "the login form")
