"""A fine-tuning run. The recipe reads top to bottom in `run.py` (`TrainingRun`: check, create the folder, train),
`run_records.py` (what it records while it runs) and `ending.py` (export, record the ending); `rank_run.py` is the
recipe of a rank other than 0, `controls.py` what a run borrows from its caller. The loop of one run reads top to
bottom in `loop/trainer.py` (`FineTuneTrainer`: fit, each epoch, each step), its collaborators typed in
`loop/contract.py`.
Its building blocks live in sub-packages by concern, each importing only those below it (docs/architecture.md):

    process/        the processes a run lives in: the worker, torchrun's launcher and its ranks (above the recipe)
    (this folder)   the recipe: run, run_records, ending, rank_run, controls
    evaluation/     scored evaluations, the best checkpoint and early stop, the verdict, inference settings
    loop/           the trainer (its epoch written out) and its contract, the GPT model, LoRA, out-of-memory
                    recovery, batch_size="auto"
    inputs/         the data a step sees: the dataset, batching, each rank's rows; the checks before a run
    checkpointing/  checkpoint files, background saves, random states, what a resume may continue, export repair
    recording/      what a run records: run.json, metrics.jsonl, spec.json, TensorBoard, phase times, outcome
    ranks/          which rank this process is, DistributedDataParallel, the ranks' traces
"""
