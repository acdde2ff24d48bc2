"""How well a run does: scored evaluations (held-out sentences and probes spoken and scored), the best checkpoint
and early stopping by the user's rule, the verdict against the starting weights, the reference clips and inference
settings chosen on ready/ (the reference clips of any finished run on demand too). The CPU measurements that check
the planner are utils.memory_check.

May import: utils.training.loop, inputs, checkpointing, recording, ranks (never the recipe or process)."""
