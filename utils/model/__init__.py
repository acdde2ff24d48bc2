"""XTTS model files: base versions, the tiny model, vocab extension, checkpoints, the ready/ export, inference."""
