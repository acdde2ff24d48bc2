"""The reference clips of any finished run chosen by measurement, on demand (the notebook, the CLI's
`choose-reference`, the Test tab's "Choose the best reference").

    from utils.training.evaluation.reference_on_demand import choose_reference

    record = choose_reference("output/my-run", candidates=4, sentences=3)
    print(record["source"], [(c["clips"], c["score"]) for c in record["candidates"]])

The run's dataset is checked again as the run checked it (its spec.json: the same CSVs, options and audio
confinement; the run's check cache serves it without decoding a clip when nothing changed), for its held-out
sentences, its probes and the clean training clips to try; then utils.training.evaluation.reference_choice measures
the candidates on the run's ready/ voice and writes the winner there. A run still training, a run without ready/,
or a dataset that moved is a ValueError saying so; the voice's clips are replaced only by a whole new set.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from utils.data.check_cache import cache_folder
from utils.data.mix_check import validate_datasets
from utils.data.text_checks import text_check_options
from utils.files import read_json
from utils.model.base_models import run_vocab_file
from utils.options.arguments import TrainArguments, argument_defaults, option_of
from utils.options.option import checked_value
from utils.quality.reference_candidates import DURATION_TIERS, clean_clips, reference_pool
from utils.text.languages import canonical_language
from utils.text.visible import clipped, visible
from utils.training.evaluation.probe_eval import probe_rows, speaking_pace
from utils.training.evaluation.quality_eval import QualityEvaluator, pick_eval_sentences
from utils.training.evaluation.reference_choice import RANKING, Progress, choose_voice_reference
from utils.training.recording.run_record import RunStatus, read_run
from utils.training.recording.spec import SPEC_FILE, RunSpec

# As at a run's end (reference_search), and the held-out sentences of a scored evaluation (quality_eval) when the run
# scored none.
DEFAULT_CANDIDATES = argument_defaults()["reference_search"]
DEFAULT_SENTENCES = argument_defaults()["quality_eval"]


def _checked(name: str, value: Any, what: str) -> int:
    """`value` checked as the run option `name` is declared, and at least 1 (`what` names it in the message)."""
    value = checked_value(what, value, 0, option_of(name))
    if value < 1:
        raise ValueError(f"{what} must be at least 1; got {value}.")
    return int(value)


def run_arguments(run_dir: Path) -> tuple[TrainArguments, Any]:
    """(the run's arguments, its spec) of a finished run folder; a ValueError says why a folder is not one."""
    from utils.model.inference import find_ready_dir

    if not run_dir.is_dir():
        raise ValueError(f"{clipped(visible(str(run_dir)))} is not a run folder.")
    status = RunStatus.parse(read_run(run_dir).get("status"))
    if status.active:
        raise ValueError(f"The run {visible(run_dir.name)} is {status.value}: choose its reference once it has ended.")
    find_ready_dir(run_dir)  # a ValueError naming what ready/ lacks
    data = read_json(run_dir / SPEC_FILE)
    # Only read, never run: a copied run folder (its spec naming the original) is measured as it is.
    spec = RunSpec.from_dict({**data, "run_dir": str(run_dir)} if isinstance(data, dict) else data, run_dir)
    return spec.train_arguments(), spec


def run_report(run_dir: Path, args: TrainArguments, spec: Any, frontend: Any) -> Any:
    """The run's dataset report, checked as the run checked it (same options, the text through the voice's own front
    end as ready/finetune.json holds it, lexicon included: the run's check cache serves it)."""
    language = canonical_language(args.language)

    vocab = run_vocab_file(args.version, args.custom_model, args.models_dir or None)

    def options_for(code: str) -> dict[str, Any]:
        own = code == language
        options = text_check_options(code, args.use_amharic_g2p and own, vocab=vocab)
        return {**options, "text_frontend": frontend if own else frontend.for_language(code)}

    try:
        return validate_datasets(
            args.train_csv,
            args.eval_csv,
            language,
            args.max_audio_length,
            options_for=options_for,
            seed=args.seed,
            audio_roots=spec.audio_roots,
            cache_dir=cache_folder(run_dir.parent),
        )
    except (ValueError, OSError) as exc:
        raise ValueError(
            f"The run's dataset is needed (its held-out sentences and the training clips to try), and it did not "
            f"read: {exc}"
        ) from exc


def choose_reference(
    run_dir: str | Path,
    *,
    candidates: int = DEFAULT_CANDIDATES,
    sentences: int | None = None,
    whisper_model: str | None = None,
    seed: int | None = None,
    max_audio_tokens: int | None = None,
    probes: bool = True,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Choose the reference clips of a finished run's voice by measurement (see the module docstring) and write them
    into its ready/; returns ready/finetune.json "reference": which clips, why, and every candidate's scores.

    `candidates`: how many to try (the voice's current clips first; bounds of reference_search); `sentences`: held-out
    sentences spoken by each (default: the run's quality_eval, else its default); `whisper_model`, `seed`,
    `max_audio_tokens`: the run's own (whisper_model, seed, quality_max_audio_tokens) unless given; `probes`: the short
    text, question, exclamation and long sentence spoken too (babble rate); `progress(done, total, message)`: called
    per candidate."""
    from utils.model.ready import read_voice_frontend

    folder = Path(run_dir).expanduser()
    count = _checked("reference_search", candidates, "candidates")
    args, spec = run_arguments(folder)
    sentence_count = _checked("quality_eval", sentences or args.quality_eval or DEFAULT_SENTENCES, "sentences")
    seed = int(checked_value("seed", args.seed if seed is None else seed, 0, option_of("seed")))
    cap = args.quality_max_audio_tokens if max_audio_tokens is None else max_audio_tokens
    cap = int(checked_value("max_audio_tokens", cap, 0, option_of("quality_max_audio_tokens")))
    ready = folder / "ready"
    frontend = read_voice_frontend(ready)
    if progress:
        progress(0, count, "Checking the run's dataset")
    report = run_report(folder, args, spec, frontend)
    spoken = pick_eval_sentences(report, frontend, sentence_count, args.seed)
    if not spoken:
        raise ValueError("The run's dataset has no held-out (eval) rows to speak: nothing to measure with.")
    evaluator = QualityEvaluator(
        spoken,
        folder,
        ready / "reference.wav",
        frontend.language,
        seed=seed,
        whisper_model=args.whisper_model if whisper_model is None else whisper_model,
        max_audio_tokens=cap,
        probes=probe_rows(report, frontend, speaking_pace(report), spoken) if probes else [],
    )
    clean, _ = clean_clips(reference_pool(report, args.seed), count)
    if not clean and count > 1:
        low, high = DURATION_TIERS[-1]
        raise ValueError(f"The run's training data has no clean clip of {low:g}-{high:g} s to try as a reference.")
    return choose_voice_reference(ready, evaluator, None, count, seed, clean, when="on demand", progress=progress)


def describe_choice(record: dict[str, Any]) -> str:
    """A "reference" record as plain text lines: the choice and why, then each candidate's scores (the chosen one
    starred) and the clips ready/ now holds. File names are shown as they are, invisible characters made visible."""

    def number(value: Any, digits: int = 3) -> str:
        return "-" if value is None else f"{value:.{digits}f}"

    lines = [visible(str(record.get("source") or ""))]
    if record.get("reason"):
        lines.append(visible(f"Note: {record['reason']}"))
    lines.append(f"Ranked by {RANKING}.")
    lines.append(f"{'':2}{'#':>2}  {'kind':8}{'score':>7}{'cer':>7}{'sim':>7}{'nat':>7}{'babble':>8}  clips")
    for index, candidate in enumerate(record.get("candidates") or []):
        scores = candidate.get("scores") or {}
        star = "*" if index == record.get("chosen") else ""
        names = ", ".join(Path(str(clip)).name for clip in candidate.get("clips") or [])
        lines.append(
            f"{star:2}{index:>2}  {candidate.get('kind', ''):8}{number(candidate.get('score')):>7}"
            f"{number(scores.get('cer')):>7}{number(scores.get('similarity')):>7}"
            f"{number(scores.get('naturalness'), 2):>7}{number(scores.get('babble_rate'), 2):>8}  {visible(names)}"
        )
    lines.append("ready/ speaks with: " + ", ".join(record.get("files") or []))
    return "\n".join(lines)
