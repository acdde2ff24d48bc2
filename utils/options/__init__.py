"""What a run is asked to do (`TrainArguments`) and what each optimization decides from it (`TrainingOptimizer`).

Below both training and the memory planner, which read the same arguments and the same decisions: the page, the
planner and the run cannot disagree, and the planner needs nothing from training."""
