"""Several devices: which rank this process is and the collectives that set a run up (distributed), torch's
DistributedDataParallel around the GPT (data_parallel), and the ranks' opt-in traces (RankTrace, in data_parallel).

May import: nothing of utils.training (the bottom of the run; every other part may ask which rank it is in)."""
