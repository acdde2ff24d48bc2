"""XTTS fine-tuning studio: parse the command line, build the web UI, launch it (127.0.0.1 by default)."""

from __future__ import annotations

import argparse
import atexit
import os
import signal
from pathlib import Path

LOOPBACK = ("127.0.0.1", "localhost", "::1")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="XTTS v2 fine-tuning studio (web UI).")
    parser.add_argument(
        "--host",
        default="127.0.0.1",
        help="Address to bind; 0.0.0.0 exposes the app to your network (then --auth is required).",
    )
    parser.add_argument("--port", type=int, default=7860, help="Port to listen on.")
    parser.add_argument("--share", action="store_true", help="Also create a public gradio.live link (needs --auth).")
    parser.add_argument(
        "--auth",
        default=os.environ.get("XTTS_AUTH", ""),
        help="Require a login, as user:password (default: $XTTS_AUTH).",
    )
    parser.add_argument(
        "--max-failed-logins",
        type=int,
        default=5,
        help="Failed logins of one user from one address (within 10 minutes) before that user is refused from that "
        "address for --login-lockout seconds (another address is not affected).",
    )
    parser.add_argument(
        "--login-lockout",
        type=float,
        default=300.0,
        help="Seconds a user is refused from an address after too many failed logins; doubled at each new lockout.",
    )
    parser.add_argument(
        "--insecure-open",
        action="store_true",
        default=os.environ.get("XTTS_INSECURE_OPEN") == "1",
        help="Serve beyond this machine without a login: anyone who reaches the port can train "
        "(default: $XTTS_INSECURE_OPEN=1).",
    )
    parser.add_argument("--output-dir", default="output", help="Where datasets, runs and exports are written.")
    parser.add_argument(
        "--data-dir",
        action="append",
        default=[],
        metavar="FOLDER",
        help="A folder whose datasets the page may read by typed path (repeatable). Uploads and the "
        "output folder's datasets/ are always allowed; nothing else is.",
    )
    args = parser.parse_args(argv)
    if args.auth:
        user, _, password = args.auth.partition(":")
        if not user.strip() or not password:
            parser.error("--auth takes user:password, both non-empty")
    exposed = args.share or args.host not in LOOPBACK
    if exposed and not args.auth and not args.insecure_open:
        parser.error(
            f"serving on {'a public link' if args.share else args.host} needs --auth user:password (or "
            "--insecure-open to accept that anyone who reaches the port can train and read your runs)."
        )
    if args.max_failed_logins < 1 or args.login_lockout < 0:
        parser.error("--max-failed-logins takes 1 or more, --login-lockout 0 or more seconds")
    for folder in args.data_dir:
        if not Path(folder).expanduser().is_dir():
            parser.error(f"--data-dir {folder} is not a folder")
    return args


def _raise_keyboard_interrupt(signum, frame) -> None:
    # Gradio's launch loop ends cleanly on KeyboardInterrupt; then atexit handlers run.
    raise KeyboardInterrupt


def _login(args: argparse.Namespace, guard=None) -> dict:
    """launch()'s login keywords: the one user and password, failed logins slowed down and then refused for a while
    per client address (webui.login_guard), the address recorded and the login page's notice filled by a
    middleware (webui.login_address); none without --auth. `guard`: the LoginGuard to use (else a new one)."""
    if not args.auth:
        return {"auth": None}
    from starlette.middleware import Middleware

    from webui.login_address import LOGIN_NOTICE, LoginAddress

    guard = guard or _guard(args)
    return {
        "auth": guard.auth(),
        "auth_message": LOGIN_NOTICE,
        "app_kwargs": {"middleware": [Middleware(LoginAddress, guard=guard)]},
    }


def _guard(args: argparse.Namespace):
    """The LoginGuard of --auth (None without it), shared by the page's login and the speech API."""
    if not args.auth:
        return None
    from webui.login_guard import LoginGuard

    # The client's address is the TCP peer's: X-Forwarded-For counts only from a proxy the operator names.
    os.environ.setdefault("FORWARDED_ALLOW_IPS", "")
    user, password = args.auth.split(":", 1)
    return LoginGuard(user, password, max_failures=args.max_failed_logins, lockout_s=args.login_lockout)


def _with_speech_api(login: dict, ctx, guard) -> dict:
    """launch()'s login keywords with the OpenAI-compatible speech API (utils.serving, docs/serving.md) mounted at
    /v1 of the app: the finished runs of the output folder, behind the same login (the page's cookie, or --auth's
    user:password as Bearer or Basic, counted by the same LoginGuard), the GPU shared with the page (refused while a
    run trains on it; Start waits for a request that speaks)."""
    from starlette.middleware import Middleware

    from utils.serving.server import APP_LOGIN, SpeechRoutes, build_api

    api = build_api(
        [ctx.output_dir], login=guard, how=APP_LOGIN, gpu_busy=ctx.gpu_in_use_by_training, gpu_lock=ctx.gpu_work
    )
    app_kwargs = login.get("app_kwargs", {})
    middleware = [*app_kwargs.get("middleware", []), Middleware(SpeechRoutes, api=api)]
    return {**login, "app_kwargs": {**app_kwargs, "middleware": middleware}}


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")  # no calls home
    from webui.ui import CSS, build_ui, quiet_queue

    if args.insecure_open and not args.auth and (args.share or args.host not in LOOPBACK):
        print(
            f"warning: serving on {args.host} without a login (--insecure-open): anyone who can reach this port "
            "can train, use the GPU and download exports.",
            flush=True,
        )
    demo, ctx = build_ui(args.output_dir, data_dirs=[Path(d).expanduser().resolve() for d in args.data_dir])
    # On exit (Ctrl-C or SIGTERM), a running training child is asked to stop, which saves a checkpoint.
    atexit.register(ctx.runner.shutdown)
    # The memory planner runs in a child process (it patches torch while it traces); start it now, in the
    # background, so the page's first plan waits neither for its imports nor for a first trace's one-time costs.
    if os.environ.get("XTTS_PLANNER_WARM_UP", "1") != "0":
        from utils.memory_plan.child import warm_up

        warm_up()
    signal.signal(signal.SIGTERM, _raise_keyboard_interrupt)
    guard = _guard(args)
    quiet_queue(demo.queue(default_concurrency_limit=4))
    demo.launch(
        server_name=args.host,
        server_port=args.port,
        share=args.share,
        **_with_speech_api(_login(args, guard), ctx, guard),
        # Only what the app hands out is served: exports and generated audio, never checkpoints or datasets.
        allowed_paths=[str(ctx.output_dir / "exports"), str(ctx.output_dir / "synthesized")],
        ssr_mode=False,
        css=CSS,
    )


if __name__ == "__main__":
    main()
