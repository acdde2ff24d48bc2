"""What to change after an out-of-memory error: the run's own settings, and the memory planner's batch."""

from __future__ import annotations

from utils.options.arguments import TrainArguments


def out_of_memory_advice(args: TrainArguments) -> str:
    """Turn a CUDA OOM into what to change, most effective first."""
    steps = []
    if not args.enable_grad_checkpoint:
        steps.append("turn on gradient checkpointing (enable_grad_checkpoint=True)")
    if args.precision == "fp32":
        steps.append("turn on mixed precision (precision='auto')")
    if args.batch_size > 1:
        smaller = max(1, args.batch_size // 2)
        steps.append(
            f"use batch_size={smaller} with grad_acumm={args.grad_acumm * args.batch_size // smaller} "
            "(same effective batch)"
        )
    if args.max_audio_length > 220500:
        steps.append("lower max_audio_length (e.g. 220500 = 10 s): memory grows with the longest clip")
    steps.append("close other programs using the GPU (nvidia-smi lists them)")
    return "Out of GPU memory. Try, in this order: " + "; ".join(steps) + "."


def planner_suggestion(args: TrainArguments) -> str:
    """The memory planner's answer to an out-of-memory error: the largest batch that fits the GPU's free memory."""
    try:
        from utils.memory_plan.planner import GIB, detected_free_bytes, largest_batch_that_fits

        free = detected_free_bytes()
        if free is None:
            return ""
        keywords = {k: v for k, v in args.to_dict().items() if k != "batch_size"}
        batch = largest_batch_that_fits(free, **keywords)
    except Exception as exc:  # noqa: BLE001 - advice must never hide the error it explains
        return f" (The memory planner could not be asked: {exc}.)"
    if batch == 0:
        return f" The memory planner finds no batch that fits in {free / GIB:.2f} GiB free with these settings."
    return (
        f" The memory planner fits batch_size={batch} in the {free / GIB:.2f} GiB free now (or use batch_size='auto')."
    )
