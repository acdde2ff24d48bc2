"""The standalone speech server's command-line options, declared once for `python -m utils.serving` and for a
`serve` subcommand of utils.cli (argparse only: importing this loads no model library)."""

from __future__ import annotations

import argparse
import os

LOOPBACK = ("127.0.0.1", "localhost", "::1")
DEFAULT_PORT = 8000
DEFAULT_CHUNK_TOKENS = 20  # coqui's stream_chunk_size: ~0.93 s of speech per chunk
DEFAULT_MAX_WAITING = 16


def add_serve_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "folders",
        nargs="+",
        metavar="RUN_OR_OUTPUT_DIR",
        help="A run folder (or its ready/), or an output folder whose finished runs are all served (found anew at "
        "each request).",
    )
    parser.add_argument("--host", default="127.0.0.1", help="Address to bind; beyond this machine needs --api-key.")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help="Port to listen on.")
    parser.add_argument(
        "--api-key",
        default=None,
        help="Require this key (Authorization: Bearer KEY, the openai client's api_key). Default: $XTTS_API_KEY "
        "(read when the server starts, so that no help text shows it).",
    )
    parser.add_argument(
        "--insecure-open",
        action="store_true",
        help="Serve beyond this machine without a key: anyone who reaches the port can use the GPU.",
    )
    parser.add_argument(
        "--max-audio-tokens",
        type=int,
        default=None,
        help="Cap on each sentence's speech, in audio tokens (~21.5 a second; default: the model's own limit).",
    )
    parser.add_argument(
        "--chunk-tokens",
        type=int,
        default=DEFAULT_CHUNK_TOKENS,
        help="Audio tokens per streamed chunk (~21.5 a second): fewer, the first audio comes sooner; more, the "
        "whole is faster (each chunk decodes the sentence so far again).",
    )
    parser.add_argument(
        "--max-waiting",
        type=int,
        default=DEFAULT_MAX_WAITING,
        help="Requests waiting or speaking at once; more are refused (503).",
    )


def check_serve_options(args: argparse.Namespace) -> argparse.Namespace:
    """The options as given (the API key from $XTTS_API_KEY when none is), or a ValueError saying which is wrong (an
    open server beyond this machine included)."""
    if not args.api_key:
        args.api_key = os.environ.get("XTTS_API_KEY", "")
    if args.host not in LOOPBACK and not args.api_key and not args.insecure_open:
        raise ValueError(f"serving on {args.host} needs --api-key KEY (or --insecure-open to accept an open server).")
    if args.max_waiting < 1 or args.chunk_tokens < 1:
        raise ValueError("--max-waiting and --chunk-tokens take 1 or more")
    if not 0 < args.port < 65536:
        raise ValueError(f"--port takes 1 to 65535 (got {args.port})")
    if args.max_audio_tokens is not None:
        from utils.model import sampling

        sampling.checked("max_audio_tokens", args.max_audio_tokens)
    return args
