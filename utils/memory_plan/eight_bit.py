"""bitsandbytes' 8-bit AdamW as the trace sees it: the memory it keeps, without its kernels.

AdamW8bit keeps both moments as uint8 with one float32 scale per block of 256 values, and updates each
parameter in place inside one kernel (no full-size temporaries). This optimizer allocates exactly that state
and updates in place, so a traced step has the real one's memory; its arithmetic is not the real one's and it
is only ever used for planning.
"""

from __future__ import annotations

import math

import torch

BLOCK = 256  # values per quantisation scale (bitsandbytes' blockwise 8-bit optimizers)
MIN_8BIT_SIZE = 4096  # bitsandbytes' min_8bit_size: smaller tensors keep 32-bit state


class EightBitAdamWTrace(torch.optim.Optimizer):
    def __init__(self, param_groups: list[dict], lr: float = 1e-3) -> None:
        super().__init__(
            [{"params": g["params"], "weight_decay": g.get("weight_decay", 0.0)} for g in param_groups],
            {"lr": lr, "weight_decay": 0.0},
        )

    @torch.no_grad()
    def step(self, closure=None):  # type: ignore[no-untyped-def]
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if not state and p.numel() < MIN_8BIT_SIZE:  # bitsandbytes keeps small tensors in 32 bits
                    state["state1"] = torch.zeros_like(p, dtype=torch.float32)
                    state["state2"] = torch.zeros_like(p, dtype=torch.float32)
                elif not state:
                    blocks = math.ceil(p.numel() / BLOCK)
                    state["state1"] = torch.zeros_like(p, dtype=torch.uint8)
                    state["state2"] = torch.zeros_like(p, dtype=torch.uint8)
                    state["absmax1"] = p.new_zeros(blocks, dtype=torch.float32)
                    state["absmax2"] = p.new_zeros(blocks, dtype=torch.float32)
                p.add_(p.grad, alpha=-group["lr"])  # in place, as the fused kernel writes
        return None
