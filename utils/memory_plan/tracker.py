"""Counting the bytes a traced training step keeps alive, op by op, and keeping batch metadata real.

`MemoryTracker` is a dispatch mode that sees every tensor an op creates. It files each new storage
under the category of the moment (forward activations, backward temporaries, optimizer
temporaries) or under the category it was registered with (weights, frozen models, gradients,
optimizer state), and records the live total after every allocation and free: the event series
the planner reads its peak from. Sizes come from storage metadata, so the same code counts fake
tensors (planning) and real ones.

`RealMetadata` keeps the small integer and boolean tensors of a fake trace real (lengths, masks,
token ids, indices): coqui's GPT and transformers branch and slice on their values, which a fake
tensor does not have. Everything large stays fake.
"""

from __future__ import annotations

import weakref
from typing import Any

import torch
from torch._subclasses.fake_tensor import FakeTensor, unset_fake_temporarily
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves
from torch.utils.weak import WeakIdKeyDictionary

WEIGHTS = "weights"
FROZEN = "frozen_models"
GRADIENTS = "gradients"
OPTIMIZER_STATE = "optimizer_state"
ACTIVATIONS = "activations"
BACKWARD = "backward_temporaries"
OPTIMIZER_TEMP = "optimizer_temporaries"
CATEGORIES = (WEIGHTS, FROZEN, GRADIENTS, OPTIMIZER_STATE, ACTIVATIONS, BACKWARD, OPTIMIZER_TEMP)
_INDEX = {name: i for i, name in enumerate(CATEGORIES)}

# The CUDA caching allocator rounds every block up to a multiple of 512 bytes (c10 kMinBlockSize).
CUDA_BLOCK_BYTES = 512
# Real tensors below this many elements are metadata (scalars, lengths): left out of the count, so
# that loops over the batch (one tiny tensor per sample) do not change the event sequence.
MIN_REAL_NUMEL = 65536
# A factory (torch.ones, arange, ...) with no float output and at most this many elements is made real.
MAX_REAL_FACTORY_NUMEL = 1 << 22


class PlanningError(RuntimeError):
    """The traced step needed a value that a shape-only trace cannot know."""


class MemoryTracker(TorchDispatchMode):
    """Live bytes per category after every allocation and free of a tensor storage."""

    def __init__(self, round_to: int = 1) -> None:
        super().__init__()
        self.round_to = round_to
        self.phase = ACTIVATIONS
        self.current = [0] * len(CATEGORIES)
        self.events: list[tuple[int, ...]] = []
        self.event_phases: list[str] = []
        self._storages = WeakIdKeyDictionary()  # storage -> [bytes, category index, weakref]
        self.recording = True

    def _bytes(self, storage: torch.UntypedStorage) -> int:
        size = storage.nbytes()
        return -(-size // self.round_to) * self.round_to

    def _record(self) -> None:
        self.events.append(tuple(self.current))
        self.event_phases.append(self.phase)

    def _freed(self, info: list, _ref: Any) -> None:
        self.current[info[1]] -= info[0]
        if self.recording:
            self._record()

    def __exit__(self, *args: object) -> None:
        # Storages freed after the traced step (the fake model going away) are no part of it.
        self.recording = False
        super().__exit__(*args)

    def track(self, tensor: torch.Tensor, category: str | None = None) -> None:
        """Count `tensor`'s storage under `category` (the current phase when None); re-file it if known."""
        if not isinstance(tensor, torch.Tensor) or tensor.layout != torch.strided:
            return
        if not isinstance(tensor, FakeTensor) and tensor.numel() < MIN_REAL_NUMEL and category is None:
            return
        storage = tensor.untyped_storage()
        index = _INDEX[category or self.phase]
        info = self._storages.get(storage)
        if info is None:
            info = [self._bytes(storage), index, None]
            info[2] = weakref.ref(storage, lambda ref, info=info: self._freed(info, ref))
            self._storages[storage] = info
            self.current[index] += info[0]
            self._record()
        elif category is not None and info[1] != index:
            self.current[info[1]] -= info[0]
            self.current[index] += info[0]
            info[1] = index
            self._record()  # an event of its own: every event is one change, in every trace
        elif self._bytes(storage) != info[0]:  # resized in place (out= kernels)
            self.current[info[1]] += self._bytes(storage) - info[0]
            info[0] = self._bytes(storage)
            self._record()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        out = func(*args, **(kwargs or {}))
        for tensor in tree_leaves(out):
            if isinstance(tensor, torch.Tensor):
                self.track(tensor)
        return out


def _written_args(func: Any, args: tuple, kwargs: dict) -> list[Any]:
    """The arguments an op writes to (`Tensor(a!)` in its schema)."""
    written = []
    for position, argument in enumerate(func._schema.arguments):
        if argument.alias_info is not None and argument.alias_info.is_write:
            if position < len(args):
                written.append(args[position])
            elif argument.name in kwargs:
                written.append(kwargs[argument.name])
    return written


_SCALAR_READS = (
    torch.ops.aten._local_scalar_dense.default,
    torch.ops.aten.is_nonzero.default,
    torch.ops.aten.item.default,
)


class RealMetadata(TorchDispatchMode):
    """Inside a FakeTensorMode: ops on real tensors only stay real, small non-float factories are
    made real, and a fake boolean that Python branches on counts as True (see `assumed_true`)."""

    def __init__(self) -> None:
        super().__init__()
        # coqui asserts every row of mel_targets holds a stop token; it does by construction (the
        # stop token is appended), and that assert is the only branch on a fake value in the step.
        self.assumed_true = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        kwargs = kwargs or {}
        tensors = [t for t in tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)]
        fakes = [t for t in tensors if isinstance(t, FakeTensor)]
        # Under inference mode (coqui's eval step) Python's bool() reaches this mode as is_nonzero or item.
        if func in _SCALAR_READS and fakes:
            if fakes[0].dtype == torch.bool:
                self.assumed_true += 1
                return True
            raise PlanningError(
                f"The traced step read the value of a {fakes[0].dtype} tensor of shape {tuple(fakes[0].shape)}, "
                "which a shape-only trace does not have."
            )
        if not fakes and tensors:
            with unset_fake_temporarily():
                return func(*args, **kwargs)
        if fakes and any(
            isinstance(w, torch.Tensor) and not isinstance(w, FakeTensor)
            for w in tree_leaves(_written_args(func, args, kwargs))
        ):
            raise PlanningError(f"{func} would write fake values into a real tensor.")
        out = func(*args, **kwargs)
        if not tensors and isinstance(out, FakeTensor) and _small_metadata(out):
            with unset_fake_temporarily():
                return func(*args, **kwargs)
        return out


def _small_metadata(tensor: torch.Tensor) -> bool:
    return tensor.numel() <= 1 or (not tensor.is_floating_point() and tensor.numel() <= MAX_REAL_FACTORY_NUMEL)
