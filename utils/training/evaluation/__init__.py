"""How well a run does: scored evaluations (held-out sentences and probes spoken and scored), the best checkpoint
and early stopping by the user's rule, the verdict against the starting weights, the reference clips and inference
settings chosen on ready/ (the reference clips of any finished run on demand too), and the CPU measurements of a
step's and a phase's memory that check the planner.

May import: utils.training.loop, inputs, checkpointing, recording, ranks (never the recipe or process)."""
