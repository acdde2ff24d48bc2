"""The XTTS fine-tuning library: `gpt_train.train_gpt` for a run, `cli` for the shell, subpackages by concern."""
