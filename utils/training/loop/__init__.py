"""The training loop and its model: coqui's Trainer with the run's epoch written out (trainer) and the collaborators
it is built with (contract), coqui's GPTTrainer adapted (gpt_model), the run built in
its folder (setup), LoRA, out-of-memory recovery and its advice (oom, micro_steps), batch_size="auto".

May import: utils.training.inputs, checkpointing, recording, ranks (never evaluation, the recipe or process)."""
