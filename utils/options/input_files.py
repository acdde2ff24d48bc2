"""The files a run's arguments name, checked where a run starts and where it is planned (`TrainArguments` itself
reads no file)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from utils.options.arguments import TrainArguments


def check_input_files(args: TrainArguments) -> None:
    """The files the arguments name, where a run starts (TrainArguments itself reads no file): a base model
    version that is a name, a models folder that takes it, a custom model and a run to resume that exist, a
    pronunciation lexicon that reads (a bad one refused with its line), and an eval CSV that is not the training
    CSV. The dataset's rows, the base model and the output folder follow in TrainingRun.check_inputs."""
    if args.custom_model and not Path(args.custom_model).expanduser().is_file():
        raise ValueError(
            f"custom_model not found: {args.custom_model}. Give the path of a model.pth, or '' "
            "to start from the base model."
        )
    if args.resume_from and not Path(args.resume_from).expanduser().exists():
        raise ValueError(f"resume_from not found: {args.resume_from}. Give a run folder from {args.output_path}.")
    from utils.model.base_models import check_models_folder, check_version_name

    check_version_name(args.version, args.models_dir or None)  # a name, never a path ("../../etc")
    if args.models_dir and not args.resume_from:  # a resume reads its version from the run, checked there
        check_models_folder(args.version, args.models_dir)  # a base model is never written among other files
    if args.lexicon_file:
        from utils.text.lexicon import read_lexicon_file

        read_lexicon_file(args.lexicon_file, args.language)
    if isinstance(args.train_csv, tuple):
        from utils.data.mix import dataset_entries

        for entry in dataset_entries(args.train_csv, args.eval_csv, args.language):
            if entry.eval_csv and _same_file(entry.eval_csv, entry.csv):
                raise ValueError(
                    f"eval_csv {entry.eval_csv!r} is the training CSV of its dataset: give a separate eval CSV, or "
                    "'' to hold out 15% of its rows."
                )
        return
    if args.eval_csv and args.train_csv and _same_file(args.eval_csv, args.train_csv):
        raise ValueError(
            f"eval_csv is the training CSV ({args.eval_csv}): the evaluation would score the rows the run "
            "trains on. Give a separate eval CSV, or leave eval_csv empty to hold out 15% of the training rows."
        )


def _same_file(a: str, b: str) -> bool:
    try:
        return os.path.samefile(Path(a).expanduser(), Path(b).expanduser())
    except OSError:
        return Path(a).expanduser().absolute() == Path(b).expanduser().absolute()
