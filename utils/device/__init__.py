"""The machine a run uses: GPU detection (without a CUDA context), the precision it supports, memory readings."""
