"""XTTS fine-tuning studio: parse the command line, build the web UI, launch it (127.0.0.1 by default)."""

from __future__ import annotations

import argparse
import atexit
import os
import signal


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="XTTS v2 fine-tuning studio (web UI).")
    parser.add_argument("--host", default="127.0.0.1", help="Address to bind; 0.0.0.0 exposes the app to your network.")
    parser.add_argument("--port", type=int, default=7860, help="Port to listen on.")
    parser.add_argument("--share", action="store_true", help="Also create a public gradio.live link.")
    parser.add_argument("--auth", default="", help="Require a login, as user:password.")
    parser.add_argument("--output-dir", default="output", help="Where datasets, runs and exports are written.")
    args = parser.parse_args(argv)
    if args.auth and ":" not in args.auth:
        parser.error("--auth takes user:password")
    return args


def _raise_keyboard_interrupt(signum, frame) -> None:
    # Gradio's launch loop ends cleanly on KeyboardInterrupt; then atexit handlers run.
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")  # no calls home
    from webui.ui import CSS, build_ui

    if args.host not in ("127.0.0.1", "localhost", "::1") and not args.auth:
        print(f"warning: serving on {args.host} without --auth: anyone who can reach this port can train, read "
              "the datasets and runs under the output folder, and use the GPU.", flush=True)  # fmt: skip
    demo, ctx = build_ui(args.output_dir)
    # On exit (Ctrl-C or SIGTERM), a running training child is asked to stop, which saves a checkpoint.
    atexit.register(ctx.runner.shutdown)
    signal.signal(signal.SIGTERM, _raise_keyboard_interrupt)
    demo.queue(default_concurrency_limit=4).launch(
        server_name=args.host,
        server_port=args.port,
        share=args.share,
        auth=tuple(args.auth.split(":", 1)) if args.auth else None,
        allowed_paths=[str(ctx.output_dir)],
        ssr_mode=False,
        css=CSS,
    )


if __name__ == "__main__":
    main()
