"""Headless command line over the same functions the notebook and web UI call.

python -m utils.cli train --train-csv data/metadata.csv --version tiny --num-epochs 2
python -m utils.cli validate --train-csv data/metadata.csv --language en
python -m utils.cli prepare --train-csv data/metadata.csv --out-dir data/prepared --denoise
python -m utils.cli export output/<run> --profile alltalk --name Narrator
python -m utils.cli serve output/ --port 8000 --api-key KEY
python -m utils.cli choose-reference output/<run> --candidates 4 --sentences 3
python -m utils.cli speak output/<run> --text-file chapter.txt --out chapter.wav --tries 3
python -m utils.cli sweep --train-csv data/metadata.csv --trials 8 --space learning_rate=1e-6:1e-4
python -m utils.cli runs output/ --sort combined
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import MISSING, fields
from typing import Any

from utils.constants import XTTS_SAMPLE_RATE
from utils.options.arguments import TrainArguments, argument_defaults, option_of
from utils.serving.options import add_serve_options  # argparse only: loads no model library
from utils.text.visible import visible
from utils.training.recording.records import EvalRecord, QualityRecord, metric_from_json


class _Parser(argparse.ArgumentParser):
    """argparse, whose usage errors are one line too."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"error: {message} (see {self.prog} --help)\n")


def one_line(exc: BaseException) -> str:
    """An error as one line: the message's lines joined, a list ("- model.pth") as items separated by commas."""
    parts: list[str] = []
    for line in (line.strip() for line in str(exc).splitlines() if line.strip()):
        if line.startswith("- ") and parts and parts[-1].startswith("- "):
            parts[-1] += ", " + line[2:]
        else:
            parts.append(line)
    text = " ".join(part.removeprefix("- ") for part in parts) or type(exc).__name__
    return text if isinstance(exc, (ValueError, OSError)) else f"{type(exc).__name__}: {text}"


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def _add_train_options(parser: argparse.ArgumentParser, leave_out: tuple[str, ...] = ()) -> None:
    for f in fields(TrainArguments):
        if f.name in leave_out:
            continue
        default = f.default if f.default is not MISSING else None
        spec = option_of(f.name)
        bounds = (
            f" [{spec.minimum:g} to {spec.maximum:g}]"
            if spec.maximum is not None and not isinstance(default, tuple)
            else ""
        )
        help_text = (spec.help + bounds).replace("%", "%%")  # argparse formats help with %
        if isinstance(default, bool):
            parser.add_argument(_flag(f.name), action=argparse.BooleanOptionalAction, default=default, help=help_text)
        elif f.name in ("train_csv", "eval_csv"):
            # One CSV, or several datasets: `--train-csv en=a.csv de:0.5=b.csv` (utils.data.mix).
            parser.add_argument(_flag(f.name), nargs="+", default=[default], help=help_text, type=str)
        elif isinstance(default, tuple):
            parser.add_argument(_flag(f.name), type=float, nargs="+", default=list(default), help=help_text)
        else:
            # An option that also takes a word ("auto") arrives as text; TrainArguments reads it.
            kind = str if spec.special else type(default)
            parser.add_argument(_flag(f.name), type=kind, default=default, help=help_text, choices=spec.choices)


def _add_prepare_options(parser: argparse.ArgumentParser) -> None:
    """Prepare's processing options, from their one declaration (utils.data.prepare_options)."""
    from utils.data.prepare_options import PrepareOptions, prepare_option

    for f in fields(PrepareOptions):
        spec = prepare_option(f.name)
        if isinstance(f.default, bool):
            parser.add_argument(_flag(f.name), action=argparse.BooleanOptionalAction, default=f.default, help=spec.help)
        else:
            bounds = f" [{spec.minimum:g} to {spec.maximum:g}]"
            parser.add_argument(_flag(f.name), type=type(f.default), default=f.default, help=spec.help + bounds)


def _add_dataset_options(parser: argparse.ArgumentParser, declared: dict[str, Any]) -> None:
    """The options `validate` and `prepare` share with `train`, with their declared defaults."""
    parser.add_argument("--train-csv", required=True, help="Metadata CSV to check.")
    parser.add_argument("--eval-csv", default=declared["eval_csv"], help="Optional evaluation CSV.")
    parser.add_argument("--language", default=declared["language"], help="Language code of the dataset.")
    parser.add_argument(
        "--max-audio-length",
        type=int,
        default=declared["max_audio_length"],
        help=f"Longest clip, in samples at {XTTS_SAMPLE_RATE} Hz.",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="python -m utils.cli",
        description="Fine-tune the XTTS v2 GPT on your own speech, without the web UI.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument(
        "--traceback", action="store_true", help="On an error, print the whole Python traceback, not one line."
    )
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    train = commands.add_parser(
        "train",
        help="Fine-tune (same as train_gpt in a notebook).",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    _add_train_options(train)
    validate = commands.add_parser(
        "validate",
        help="Check a dataset row by row without training.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    declared = argument_defaults()
    _add_dataset_options(validate, declared)
    validate.add_argument(
        "--cache-dir", default=None, help="Keep the check here (an unchanged dataset is not read again next time)."
    )
    validate.add_argument("--json", action="store_true", help="Print the whole report as JSON.")
    prepare = commands.add_parser(
        "prepare",
        help="Write a clean 22.05 kHz copy with a train/eval split (loudness evened, noise removed on request).",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    _add_dataset_options(prepare, declared)
    prepare.add_argument("--out-dir", required=True, help="Folder to prepare into (an earlier one: add to it).")
    _add_prepare_options(prepare)
    export = commands.add_parser(
        "export",
        help="Export a run's voice in the layout an app reads: coqui (default), alltalk, xtts-api-server, "
        "openedai-speech, ebook2audiobook, auralis or all.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    export.add_argument("run", help="A run folder, its ready/ folder, or a model.pth in it.")
    export.add_argument(
        "--profile",
        default="coqui",
        help="coqui, alltalk, xtts-api-server, openedai-speech, ebook2audiobook, auralis or all (docs/export.md).",
    )
    export.add_argument("--name", default=None, help="The voice's name in the app (default: the run's name).")
    export.add_argument("--dest", default=None, help="Folder to write into (default: <runs folder>/exports/<profile>).")
    export.add_argument(
        "--zip",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="A zip, or a folder (default: the profile's; ebook2audiobook's is a zip).",
    )
    serve = commands.add_parser(
        "serve",
        help="Serve finished runs through an OpenAI-compatible speech API (docs/serving.md).",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    add_serve_options(serve)
    _add_choose_reference(commands, declared)
    _add_speak(commands)
    _add_sweep(commands)
    runs = commands.add_parser(
        "runs",
        help="Every run of an output folder side by side: settings, best scores, verdict against the base model, "
        "time, memory, sweep trial, blind-listening tally.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    runs.add_argument("output", nargs="?", default=declared["output_path"], help="The output folder.")
    runs.add_argument("--sort", default="combined", help="The column to sort by, best first.")
    runs.add_argument("--json", action="store_true", help="Print every column of every run as JSON.")
    return parser


# train_gpt's options a sweep sets per trial itself (devices names the sweep's parallel slots instead).
SWEEP_SETS = ("best_by", "resume_from", "quality_baseline_from", "devices", "run_name")


def _add_sweep(commands: Any) -> None:
    sweep = commands.add_parser(
        "sweep",
        help="A scored sweep of train_gpt's settings (Optuna): which make the voice better than the base model "
        "(docs/quality.md#a-sweep-settings-that-beat-the-base-model). Ctrl-C stops; the same command resumes.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    sweep.add_argument(
        "--space",
        action="append",
        default=None,
        help="A dimension: name=low:high or name=a,b (repeat). Default: learning_rate, num_epochs, lora_rank.",
    )
    sweep.add_argument("--trials", type=int, default=8, help="Finished trials the study should hold (0: no limit).")
    sweep.add_argument("--minutes", type=float, default=None, help="Wall time of this process, at most.")
    sweep.add_argument("--gpu-hours", type=float, default=None, help="Device hours of the study's trials, at most.")
    sweep.add_argument(
        "--rule", default="combined", help="The objective: combined, cer, similarity, naturalness, eval_loss."
    )
    sweep.add_argument("--study-name", default="sweep", help="The study's name in its storage.")
    sweep.add_argument("--storage", default="", help="An Optuna storage URL (default SQLite in OUTPUT/sweeps/).")
    sweep.add_argument("--first-trial", action="append", default=None, help="Settings to try first, as JSON (repeat).")
    sweep.add_argument("--memory-limit-gib", type=float, default=None, help="Refuse trials planned above it.")
    sweep.add_argument(
        "--devices", default="", help="One trial per device at a time: '0,1' (default every GPU, else one CPU)."
    )
    _add_train_options(sweep, leave_out=SWEEP_SETS)
    from utils.sweep.space import TRIAL_DEFAULTS  # the declarations only: no model library

    sweep.set_defaults(**TRIAL_DEFAULTS)  # the API's: a study run from both has one definition


def _add_choose_reference(commands: Any, declared: dict[str, Any]) -> None:
    choose = commands.add_parser(
        "choose-reference",
        help="Choose a finished run's reference clips by measurement: candidates spoken and scored, the best into "
        "its ready/ (docs/quality.md).",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    choose.add_argument("run", help="A finished run folder.")
    choose.add_argument(
        "--candidates",
        type=int,
        default=declared["reference_search"],
        help="Candidates tried, the voice's own clips first.",
    )
    choose.add_argument("--sentences", type=int, default=None, help="Held-out sentences (default: the run's).")
    choose.add_argument("--whisper-model", default=None, help="Whisper model for the CER (default: the run's).")
    choose.add_argument("--seed", type=int, default=None, help="Sampling seed (default: the run's).")
    choose.add_argument("--max-audio-tokens", type=int, default=None, help="Longest clip (default: the run's).")
    choose.add_argument("--probes", action=argparse.BooleanOptionalAction, default=True, help="Speak the probes too.")
    choose.add_argument("--json", action="store_true", help="Print finetune.json's whole 'reference' record.")


def _add_speak(commands: Any) -> None:
    from utils.model import sampling  # the settings' declarations only: no model library

    speak = commands.add_parser(
        "speak",
        help="Speak a text of any length with a run's voice, sentence by sentence, each checked as it is spoken (the "
        "best of --tries kept), into one WAV; prints the report of each sentence.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    speak.add_argument("run", help="A run folder, its ready/ folder, or a model.pth in it.")
    text = speak.add_mutually_exclusive_group(required=True)
    text.add_argument("--text", help="The text to speak.")
    text.add_argument("--text-file", help="A UTF-8 text file to speak (only read).")
    speak.add_argument("--out", required=True, help="The WAV file to write (the voice's rate, 16-bit).")
    speak.add_argument("--language", default=None, help="The text's language (default: the voice's).")
    speak.add_argument(
        "--reference",
        action="append",
        default=None,
        help="A reference clip of the voice; repeat for several (default: the voice's own, ready/reference*.wav).",
    )
    speak.add_argument("--json", action="store_true", help="Print the whole report as JSON.")
    for name in ("tries", "seed", *sampling.CONFIG_KEYS, "speed", "max_audio_tokens"):
        setting = sampling.SETTINGS[name]
        default = setting.default if name in ("tries", "speed") else None  # None: the voice's own, or random
        speak.add_argument(
            _flag(name),
            type=int if setting.whole else float,
            default=default,
            help=f"{setting.help} [{setting.allowed().split('from ')[-1]}]".replace("%", "%%"),
        )


def _print_progress(record: dict[str, Any]) -> None:
    typed = metric_from_json(record)
    if isinstance(typed, EvalRecord):
        print(f"[eval] step {typed.step}: eval_loss {typed.eval_loss}", flush=True)
    elif isinstance(typed, QualityRecord):
        scores = ", ".join(
            f"{k} {getattr(typed, k):.3f}" if getattr(typed, k) is not None else f"{k} -"
            for k in ("cer", "wer", "similarity", "duration_ratio", "combined")
        )
        missing = f" ({'; '.join(typed.reasons)})" if typed.reasons else ""
        print(f"[quality] step {typed.step}: {scores}{missing}", flush=True)


def _validate(args: argparse.Namespace) -> int:
    from utils.data.validation import validate_dataset

    report = validate_dataset(
        args.train_csv, args.eval_csv or None, args.language, args.max_audio_length, cache_dir=args.cache_dir
    )
    if args.json:
        print(json.dumps(report.to_dict(), indent=2, ensure_ascii=False))
        return 0 if report.ok else 1
    print(report.summary())
    for problem in report.problems:
        print(f"{problem.csv_file}:{problem.line}: {problem.severity}: {problem.audio_file} {problem.reason}")
    return 0 if report.ok else 1


def _prepare(args: argparse.Namespace) -> int:
    from utils.data.prepare import prepare_dataset
    from utils.data.prepare_options import PrepareOptions

    def progress(done: int, total: int, message: str) -> None:
        print(f"\r{message}\033[K", end="" if done < total else "\n", file=sys.stderr, flush=True)

    options = {f.name: getattr(args, f.name) for f in fields(PrepareOptions)}
    prepared = prepare_dataset(
        args.train_csv,
        args.out_dir,
        args.eval_csv or None,
        args.language,
        args.max_audio_length,
        progress=progress,
        **options,
    )
    print(prepared.summary())
    return 0


def _train(args: argparse.Namespace) -> int:
    from utils.gpt_train import train_gpt

    options = {f.name: _one_or_list(getattr(args, f.name), f.name) for f in fields(TrainArguments)}
    result = train_gpt(progress_callback=_print_progress, **options)
    print(json.dumps({**result._asdict(), "status": result.status}, indent=2))
    return 0


def _one_or_list(value: Any, name: str) -> Any:
    """--train-csv/--eval-csv: one path as itself, several as the list of datasets."""
    if not isinstance(value, list) or name not in ("train_csv", "eval_csv") or len(value) != 1:
        return value
    return value if name == "train_csv" and "=" in value[0] else value[0]


def _export(args: argparse.Namespace) -> int:
    from utils.model.export_profiles import export_voice

    print(export_voice(args.run, args.profile, args.dest, args.name, archive=args.zip).summary())
    return 0


def _choose_reference(args: argparse.Namespace) -> int:
    from utils.training.evaluation.reference_on_demand import choose_reference, describe_choice

    def progress(done: int, total: int, message: str) -> None:
        print(f"[{done}/{total}] {message}", file=sys.stderr, flush=True)

    options = ("candidates", "sentences", "whisper_model", "seed", "max_audio_tokens", "probes")
    record = choose_reference(args.run, progress=progress, **{name: getattr(args, name) for name in options})
    print(json.dumps(record, indent=2, ensure_ascii=False) if args.json else describe_choice(record))
    return 0


def _speak(args: argparse.Namespace) -> int:
    from utils.model.inference import synthesize
    from utils.model.long_text_io import read_text_file, report_text

    text = args.text if args.text is not None else read_text_file(args.text_file, args.out)

    def progress(done: int, total: int, message: str) -> None:
        print(f"[{done}/{total}] {visible(message)}", file=sys.stderr, flush=True)

    settings = ("language", "tries", "seed", "temperature", "length_penalty", "repetition_penalty", "top_k", "top_p")
    settings += ("speed", "max_audio_tokens")
    speech = synthesize(
        args.run,
        text,
        reference_wav=args.reference,
        output_wav=args.out,
        progress=progress,
        **{name: getattr(args, name) for name in settings},
    )
    if args.json:
        print(json.dumps({"checks": speech.checks, "sentences": [s.to_dict() for s in speech.sentences]}, indent=2))
    else:
        print(report_text(speech))
    print(f"wrote {visible(args.out)}: {len(speech.wav) / speech.sample_rate:.1f} s", file=sys.stderr)
    return 0


def _sweep(args: argparse.Namespace) -> int:
    from utils.sweep.sweep import sweep_gpt

    options = {
        f.name: _one_or_list(getattr(args, f.name), f.name) for f in fields(TrainArguments) if f.name not in SWEEP_SETS
    }
    first = None
    if args.first_trial:
        try:
            first = [json.loads(text) for text in args.first_trial]
        except ValueError as exc:
            raise ValueError(f"--first-trial takes JSON such as '{{\"learning_rate\": 1e-5}}': {exc}") from None

    def progress(event: dict[str, Any]) -> None:
        shown = {k: v for k, v in event.items() if k not in ("event", "time")}
        print(f"[sweep] {event.get('event')}: {json.dumps(shown, default=str)}", flush=True)

    result = sweep_gpt(
        space=args.space,
        trials=args.trials or None,
        minutes=args.minutes,
        gpu_hours=args.gpu_hours,
        rule=args.rule,
        study_name=args.study_name,
        storage=args.storage,
        first_trials=first,
        memory_limit_gib=args.memory_limit_gib,
        devices=args.devices or None,
        progress=progress,
        **options,
    )
    print(result.to_markdown())
    return 0


def _runs(args: argparse.Namespace) -> int:
    from utils.sweep.runs import compare_runs

    frame = compare_runs(args.output, args.sort)
    if args.json:
        print(frame.to_json(orient="records", indent=2))
        return 0
    if frame.empty:
        print(f"No runs in {visible(args.output)}.")
        return 0
    shown = [
        "run",
        "status",
        "sweep",
        "trial",
        "epochs",
        "learning_rate",
        "lora_rank",
        "cer",
        "similarity",
        "naturalness",
        "babble",
        "combined",
        "better_than_base",
        "minutes",
        "listening",
    ]
    cell = lambda v: "-" if v is None or v != v or v == "" else f"{v:.4g}" if isinstance(v, float) else str(v)
    print(frame[shown].map(cell).to_string(index=False))
    return 0


def _serve(args: argparse.Namespace) -> int:
    from utils.serving.server import serve

    serve(args)  # until Ctrl-C; a bad option or folder is a ValueError: one line, exit 2
    return 0


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        commands = {"validate": _validate, "prepare": _prepare, "train": _train, "export": _export, "serve": _serve}
        commands["choose-reference"] = _choose_reference
        commands["speak"] = _speak
        commands["sweep"] = _sweep
        commands["runs"] = _runs
        return commands[args.command](args)
    except Exception as exc:  # every error, a missing model or file, a bad value: one line
        if args.traceback:
            raise
        print(f"error: {visible(one_line(exc))}", file=sys.stderr)  # a file name's RLO must not reorder it
        return 2


if __name__ == "__main__":
    sys.exit(main())
