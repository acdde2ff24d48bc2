"""The data a step sees: the training clips as coqui's dataset serves them, the order of an epoch and
each rank's share of the rows (batching), and the checks of a run's inputs before
any folder or model exists (input_checks). How a run sees its text, for a dataset check, is utils.data.text_checks.

May import: utils.training.checkpointing, recording, ranks (never loop, evaluation, the recipe or process)."""
