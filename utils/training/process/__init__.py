"""The processes a run lives in: `python -m utils.training.process.worker RUN_DIR` (the one entry point of every
training process), the launcher of a multi-device run (torchrun) and its agent and ranks (ddp_worker), and the runner
that starts a worker and follows its folder (the web page's Start, a sweep's trials).

May import: the recipe (utils.training.run, ending, rank_run, controls) and every sub-package of utils.training. Nothing
in utils.training imports this package (utils.gpt_train, utils.sweep and the web app do)."""
