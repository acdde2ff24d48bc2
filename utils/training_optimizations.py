"""Public entry point for the training optimizations and the device helpers (kept for notebooks).

`from utils.training_optimizations import TrainingOptimizer, print_memory_stats` works as documented;
the code lives in `utils.options.optimizations` and `utils.device`.
"""

from utils.device.gpu import GPUInfo, architecture_for, detect_gpu
from utils.device.memory import format_memory_stats, get_memory_stats, print_memory_stats
from utils.device.precision import PRECISIONS, Precision, PrecisionChoice, choose_precision
from utils.options.optimizations import (
    CUDNN_BENCHMARK,
    GRAD_CHECKPOINTING,
    MIXED_PRECISION,
    SDPA,
    TF32,
    OptimizationReport,
    TrainingOptimizer,
    gpt_transformer,
    set_gradient_checkpointing,
)

__all__ = [
    "CUDNN_BENCHMARK",
    "GRAD_CHECKPOINTING",
    "MIXED_PRECISION",
    "PRECISIONS",
    "SDPA",
    "TF32",
    "GPUInfo",
    "OptimizationReport",
    "Precision",
    "PrecisionChoice",
    "TrainingOptimizer",
    "architecture_for",
    "choose_precision",
    "detect_gpu",
    "format_memory_stats",
    "get_memory_stats",
    "gpt_transformer",
    "print_memory_stats",
    "set_gradient_checkpointing",
]
