"""A fine-tuning run: its arguments, optimizations, coqui's trainer, metrics, run record and the run itself."""
