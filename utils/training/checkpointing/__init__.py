"""Checkpoints: the files a run writes (atomic, finite, the newest kept), their background writes, the random
states saved in them, what a resume may continue from, and finishing a run whose ready/ export failed.

May import: utils.training.recording, ranks (never inputs, loop, evaluation, the recipe or process)."""
