"""What a run records in its folder: the schema of run.json and metrics.jsonl (records), the run's record and
status (run_record), the metrics logger and its TensorBoard mirror, phase times, the run's outcome, spec.json
and the control files the processes of a run read, and the names of its checkpoint files.

May import: utils.training.ranks only (every other part of a run reads and writes through this package)."""
