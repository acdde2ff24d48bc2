"""XTTS fine-tuning studio: parse the command line, build the web UI, launch it (127.0.0.1 by default)."""

from __future__ import annotations

import argparse


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="XTTS v2 fine-tuning studio (web UI).")
    parser.add_argument("--host", default="127.0.0.1", help="Address to bind; 0.0.0.0 exposes the app to your network.")
    parser.add_argument("--port", type=int, default=7860, help="Port to listen on.")
    parser.add_argument("--share", action="store_true", help="Also create a public gradio.live link.")
    parser.add_argument("--auth", default="", help="Require a login, as user:password.")
    parser.add_argument("--output-dir", default="output", help="Where training runs are written.")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    import gradio as gr

    with gr.Blocks(title="XTTS fine-tuning studio") as demo:
        gr.Markdown("# XTTS fine-tuning studio\nThe web UI is being built; use `train_gpt` from a notebook meanwhile.")
    auth = tuple(args.auth.split(":", 1)) if args.auth else None
    demo.launch(server_name=args.host, server_port=args.port, share=args.share, auth=auth)


if __name__ == "__main__":
    main()
