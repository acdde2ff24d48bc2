"""The speech API served two ways: inside the web app (`SpeechRoutes`, a middleware of its FastAPI app, mounted by
app.py: the same address, port and login as the page) and standalone (`python -m utils.serving RUN_OR_OUTPUT_DIR...`,
on uvicorn, 127.0.0.1 by default; see `main`)."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from http.cookies import CookieError, SimpleCookie
from pathlib import Path
from typing import Any

from utils.serving.api import MAX_INPUT_BYTES, SpeechAPI
from utils.serving.auth import Access, ApiKey, Login
from utils.serving.catalog import Catalog
from utils.serving.options import (
    DEFAULT_CHUNK_TOKENS,
    DEFAULT_MAX_WAITING,
    LOOPBACK,
    add_serve_options,
    check_serve_options,
)
from utils.serving.speech import SpeechService

log = logging.getLogger(__name__)

API_PREFIX = "/v1"
APP_LOGIN = "send the app's --auth user:password as the API key (Authorization: Bearer user:password), or Basic"
KEY_LOGIN = "send the server's --api-key as the API key (Authorization: Bearer KEY)"


def build_api(
    catalog: Catalog | list[str | Path],
    *,
    login: Login | None = None,
    how: str = "",
    gpu_busy: Any = None,
    gpu_lock: Any = None,
    max_audio_tokens: int | None = None,
    chunk_tokens: int = DEFAULT_CHUNK_TOKENS,
    max_waiting: int = DEFAULT_MAX_WAITING,
    max_input_bytes: int = MAX_INPUT_BYTES,
) -> SpeechAPI:
    """The API over the finished runs of `catalog` (or of these output or run folders). See SpeechService for the
    GPU arguments and utils.serving.auth for `login`."""
    service = SpeechService(
        gpu_busy=gpu_busy,
        gpu_lock=gpu_lock,
        max_audio_tokens=max_audio_tokens,
        chunk_tokens=chunk_tokens,
        max_waiting=max_waiting,
    )
    catalog = catalog if isinstance(catalog, Catalog) else Catalog(catalog)
    return SpeechAPI(catalog, service, Access(login, how), max_input_bytes=max_input_bytes)


def gradio_session_user(scope: dict[str, Any]) -> str | None:
    """The user of the web app's login cookie in this request, as Gradio's own /user route finds it (the app's
    `tokens` by its `access-token-<cookie_id>` cookie); None when not logged in, or not in a Gradio app."""
    app = scope.get("app")
    tokens, cookie_id = getattr(app, "tokens", None), getattr(app, "cookie_id", None)
    if not isinstance(tokens, dict) or not cookie_id:
        return None
    header = dict(scope.get("headers") or []).get(b"cookie", b"").decode("latin-1")
    try:
        cookies = SimpleCookie(header)
    except CookieError:
        return None
    for name in (f"access-token-{cookie_id}", f"access-token-unsecure-{cookie_id}"):
        if name in cookies and (user := tokens.get(cookies[name].value)):
            return user
    return None


def is_api_path(path: str) -> bool:
    return path == API_PREFIX or path.startswith(API_PREFIX + "/")


class SpeechRoutes:
    """ASGI middleware of the web app: requests under /v1 go to the speech API (with the page's login cookie, if
    any, as a login), every other request to the app."""

    def __init__(self, app: Any, api: SpeechAPI) -> None:
        self.app, self.api = app, api

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and is_api_path(scope.get("path", "")):
            await self.api.handle(scope, receive, send, session_user=gradio_session_user(scope))
            return
        await self.app(scope, receive, send)


def training_in(catalog: Catalog) -> str:
    """Why GPU work must wait (a run in the served folders is training: its run.json active, its process alive), or
    "". Read only: nothing is marked or written."""
    from utils.files import read_json
    from utils.training.recording.run_record import RUN_FILE, RunStatus, process_alive

    for root, single in catalog.sources:
        records = [root / RUN_FILE] if single else sorted(root.glob(f"*/{RUN_FILE}"))
        for path in records:
            record = read_json(path, {})
            if not isinstance(record, dict) or not RunStatus.parse(record.get("status")).active:
                continue
            if process_alive(record) is True:
                return (
                    f"A training run ({path.parent.name}) is using the GPU: this server speaks again when it ends "
                    "(or is stopped)."
                )
    return ""


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m utils.serving",
        description="An OpenAI-compatible speech server (POST /v1/audio/speech, GET /v1/models, GET /v1/audio/voices) "
        "for finished runs: the model is a run's folder name, the voice its own ('default').",
    )
    add_serve_options(parser)
    args = parser.parse_args(argv)
    try:
        return check_serve_options(args)
    except ValueError as exc:
        parser.error(str(exc))
        raise  # parser.error exits


def standalone_api(args: argparse.Namespace) -> SpeechAPI:
    catalog = Catalog(args.folders)
    return build_api(
        catalog,
        login=ApiKey(args.api_key) if args.api_key else None,
        how=KEY_LOGIN,
        gpu_busy=lambda: training_in(catalog) if SpeechService.on_gpu() else "",
        max_audio_tokens=args.max_audio_tokens,
        chunk_tokens=args.chunk_tokens,
        max_waiting=args.max_waiting,
    )


def serve(args: argparse.Namespace) -> None:
    """Run the standalone server until interrupted (the options checked: utils.serving.options); a ValueError
    before it starts (a folder that is not one)."""
    api = standalone_api(check_serve_options(args))
    import uvicorn

    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    # The client's address is the TCP peer's: X-Forwarded-For counts only from a proxy the operator names.
    os.environ.setdefault("FORWARDED_ALLOW_IPS", "")
    models = list(api.catalog.models())
    where = f"http://{args.host}:{args.port}{API_PREFIX}"
    print(
        f"Serving {len(models)} model(s) ({', '.join(models[:10]) or 'none yet'}) on {where}"
        + (" (API key required)" if args.api_key else ""),
        flush=True,
    )
    if args.insecure_open and not args.api_key and args.host not in LOOPBACK:
        print(f"warning: serving on {args.host} without a key (--insecure-open).", flush=True)
    uvicorn.run(api, host=args.host, port=args.port, forwarded_allow_ips=os.environ["FORWARDED_ALLOW_IPS"])


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    try:
        serve(args)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
