"""How well a run does: scored evaluations (held-out sentences and probes spoken and scored), the best checkpoint
and early stopping by the user's rule, the verdict against the starting weights, the inference settings chosen on
ready/, and the CPU measurements of a step's and a phase's memory that check the planner.

May import: utils.training.loop, inputs, checkpointing, recording, ranks (never the recipe or process)."""
