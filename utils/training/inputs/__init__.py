"""The data a step sees: the training clips as coqui's dataset serves them, the order of an epoch (batching),
each rank's share of the rows (batching), how the run sees its text, and the checks of a run's inputs before
any folder or model exists (input_checks).

May import: utils.training.checkpointing, recording, ranks (never loop, evaluation, the recipe or process)."""
