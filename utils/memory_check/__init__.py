"""The memory planner checked against the real thing: a training step's and a run's phases measured on this CPU
(PyTorch's own allocator accounting) on a real model of the planner's shapes. Used by the planner's tests and the
benchmarks only; it builds runs with utils.training, so it stands above training, beside the planner it checks
(utils.memory_plan never imports it)."""
