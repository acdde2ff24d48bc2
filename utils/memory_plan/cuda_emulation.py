"""What a CUDA GPU would do differently from the CPU a plan is traced on, for memory.

Three differences change the bytes a training step keeps, and all are emulated while tracing:

- Autocast. CUDA and CPU autocast cast different ops. CUDA runs softmax, log_softmax, layer_norm,
  pow, exp, sums ... in FP32, CPU autocast leaves them in BF16; the XTTS GPT's `gelu_new` (a Python
  composite built on `pow`) and eager attention's softmax therefore keep FP32 tensors on a GPU.
  `cuda_autocast_policy()` re-registers CPU autocast's kernels with CUDA's policy for the duration
  of a trace: the op lists below are those of ATen's AutocastCUDA registrations
  (aten/src/ATen/autocast_mode.h/.cpp, torch 2.11), checked against the dispatcher by the tests.
- Attention. On a CPU, SDPA with dropout falls back to the math kernel, which stores the attention
  matrix. On a GPU with an attention mask (XTTS always passes one) PyTorch picks the
  memory-efficient kernel, which keeps only its output and a logsumexp per row, plus the mask
  converted to the query's dtype and padded to a multiple of 16 columns.
  `efficient_sdpa()` replaces `F.scaled_dot_product_attention` with a function that allocates
  exactly that (and the gradients and a per-row FP32 workspace in backward) without computing.
- Dropout. On a CPU, dropout multiplies by a noise tensor of the input's dtype and keeps it for
  backward; on a GPU it is one fused kernel (`native_dropout`) that keeps a boolean mask, a quarter
  of the bytes in FP32. `native_dropout()` routes `F.dropout` to that kernel.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator
from typing import Any

import torch
import torch.nn.functional as F
from torch.utils._pytree import tree_map

# CUDA autocast policies (AT_FORALL_* lists of autocast_mode.h). Names are dispatcher names.
CUDA_LOWER_PRECISION = frozenset(
    {
        "_convolution.deprecated",
        "_convolution",
        "conv1d",
        "conv2d",
        "conv3d",
        "conv_tbc",
        "conv_transpose1d",
        "conv_transpose2d.input",
        "conv_transpose3d.input",
        "convolution",
        "prelu",
        "addmm",
        "addmv",
        "addr",
        "matmul",
        "einsum",
        "mm",
        "mv",
        "linalg_vecdot",
        "linear",
        "addbmm",
        "baddbmm",
        "bmm",
        "chain_matmul",
        "linalg_multi_dot",
        "_thnn_fused_lstm_cell",
        "_thnn_fused_gru_cell",
        "lstm_cell",
        "gru_cell",
        "rnn_tanh_cell",
        "rnn_relu_cell",
        "_scaled_dot_product_flash_attention",
        "scaled_dot_product_attention",
        "cudnn_convolution",
        "cudnn_convolution_transpose",
        "_cudnn_rnn",
    }
)
CUDA_FP32_SET_OPT_DTYPE = frozenset(
    {
        "prod",
        "prod.dim_int",
        "prod.dim_Dimname",
        "softmax.int",
        "softmax.Dimname",
        "log_softmax.int",
        "log_softmax.Dimname",
        "cumprod",
        "cumprod.dimname",
        "cumsum",
        "cumsum.dimname",
        "linalg_vector_norm",
        "linalg_matrix_norm",
        "linalg_matrix_norm.str_ord",
        "sum",
        "sum.dim_IntList",
        "sum.dim_DimnameList",
    }
)
CUDA_PROMOTE = frozenset(
    {
        "addcdiv",
        "addcmul",
        "atan2",
        "bilinear",
        "cross",
        "dot",
        "vdot",
        "grid_sampler",
        "index_put",
        "tensordot",
        "scatter_add",
    }
)
CUDA_BANNED = frozenset({"binary_cross_entropy"})
# Every other AutocastCUDA registration is an FP32 op (norm's overloads append an FP32 dtype, same bytes).

# CPU autocast's lower-precision ops. Where CUDA agrees, CPU's own kernel is kept: it caches the
# BF16 copy of each weight for the autocast region exactly as CUDA's does.
CPU_LOWER_PRECISION = frozenset(
    {
        "conv1d",
        "conv1d.padding",
        "conv2d",
        "conv2d.padding",
        "conv3d",
        "conv3d.padding",
        "bmm",
        "mm",
        "linalg_vecdot",
        "baddbmm",
        "addmm",
        "_addmm_activation",
        "addbmm",
        "linear",
        "_convolution.deprecated",
        "matmul",
        "conv_tbc",
        "mkldnn_rnn_layer",
        "conv_transpose1d",
        "conv_transpose2d.input",
        "conv_transpose3d.input",
        "prelu",
        "scaled_dot_product_attention",
        "_native_multi_head_attention",
    }
)


def registered_autocast_ops(dispatch_key: str) -> set[str]:
    """Operator names (`softmax.int`) with a kernel for an autocast dispatch key, e.g. "AutocastCUDA"."""
    names = torch._C._dispatch_get_registrations_for_dispatch_key(dispatch_key)
    return {name.split("::", 1)[1] for name in names if name.startswith("aten::")}


def cuda_policy(name: str) -> str:
    """CUDA autocast's policy for an op: lower_precision | fp32_set_opt_dtype | promote | banned | fp32."""
    for policy, ops in (
        ("lower_precision", CUDA_LOWER_PRECISION),
        ("fp32_set_opt_dtype", CUDA_FP32_SET_OPT_DTYPE),
        ("promote", CUDA_PROMOTE),
        ("banned", CUDA_BANNED),
    ):
        if name in ops:
            return policy
    return "fp32"


def _overload(name: str) -> Any:
    base, _, overload = name.partition(".")
    return getattr(getattr(torch.ops.aten, base), overload or "default")


def _eligible(value: Any) -> bool:
    return (
        isinstance(value, torch.Tensor)
        and value.device.type == "cpu"
        and value.is_floating_point()
        and value.dtype != torch.float64
    )


def _cast_all(args: Any, dtype: torch.dtype) -> Any:
    return tree_map(lambda v: v.to(dtype) if _eligible(v) else v, args)


def _widest(args: Any, lower: torch.dtype) -> torch.dtype:
    found = []
    tree_map(lambda v: found.append(v.dtype) if _eligible(v) else None, args)
    return torch.float32 if torch.float32 in found else lower


_NO_AUTOCAST = torch._C.DispatchKeySet(torch._C.DispatchKey.AutocastCPU)


def _kernel(op: Any, policy: str) -> Any:
    """An AutocastCPU kernel applying CUDA's `policy` to `op` (or no cast at all for "none")."""
    dtype_position = next((i for i, a in enumerate(op._schema.arguments) if a.name == "dtype"), None)

    def kernel(*args: Any, **kwargs: Any) -> Any:
        lower = torch.get_autocast_dtype("cpu")
        with torch._C._ExcludeDispatchKeyGuard(_NO_AUTOCAST):
            if policy == "lower_precision":
                args, kwargs = _cast_all((args, kwargs), lower)
            elif policy == "fp32":
                args, kwargs = _cast_all((args, kwargs), torch.float32)
            elif policy == "promote":
                args, kwargs = _cast_all((args, kwargs), _widest((args, kwargs), lower))
            elif policy == "fp32_set_opt_dtype" and args and _eligible(args[0]):
                if dtype_position is not None and dtype_position < len(args):
                    if args[dtype_position] is None:
                        args = (*args[:dtype_position], torch.float32, *args[dtype_position + 1 :])
                elif kwargs.get("dtype") is None:
                    kwargs = {**kwargs, "dtype": torch.float32}
            elif policy == "banned":
                raise RuntimeError(f"{op} is not allowed under CUDA autocast.")
            return op(*args, **kwargs)

    return kernel


@contextlib.contextmanager
def cuda_autocast_policy() -> Iterator[None]:
    """While active, `torch.autocast("cpu")` casts as CUDA autocast would."""
    cuda_ops = registered_autocast_ops("AutocastCUDA")
    cpu_ops = registered_autocast_ops("AutocastCPU")
    library = torch.library.Library("aten", "IMPL")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "Overriding a previously registered kernel" for each op
            for name in sorted(cuda_ops | cpu_ops):
                if name in cuda_ops and cuda_policy(name) == "lower_precision" and name in CPU_LOWER_PRECISION:
                    continue  # CPU's kernel does the same, with the weight cache
                policy = cuda_policy(name) if name in cuda_ops else "none"
                try:
                    op = _overload(name)
                except (AttributeError, RuntimeError):
                    continue  # not exposed to Python in this build
                library.impl(name, _kernel(op, policy), "AutocastCPU")
        yield
    finally:
        library._destroy()


def _ceil_to(value: int, multiple: int) -> int:
    return -(-value // multiple) * multiple


class _MemoryEfficientAttention(torch.autograd.Function):
    """Allocates what CUDA's memory-efficient attention allocates; computes nothing."""

    @staticmethod
    def forward(ctx: Any, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, bias: Any) -> torch.Tensor:
        batch, heads, length, _ = query.shape
        # The kernel writes (batch, length, heads, dim) and returns it transposed: callers that
        # transpose back get a contiguous view, not a copy.
        out = query.new_empty((batch, length, heads, value.shape[-1])).transpose(1, 2)
        logsumexp = query.new_empty((batch, heads, _ceil_to(length, 32)), dtype=torch.float32)
        ctx.save_for_backward(query, key, value, bias, out, logsumexp)
        return out

    @staticmethod
    def backward(ctx: Any, grad_out: torch.Tensor) -> tuple[Any, ...]:
        query, key, value, _bias, _out, logsumexp = ctx.saved_tensors
        delta = torch.empty_like(logsumexp)  # rowsum(grad_out * out), FP32
        grads = (torch.empty_like(query), torch.empty_like(key), torch.empty_like(value))
        del delta
        return (*grads, None)


def _efficient_sdpa(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attn_mask: Any = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    scale: Any = None,
    enable_gqa: bool = False,
) -> torch.Tensor:
    if torch.is_autocast_enabled("cpu"):  # SDPA is a lower-precision op under CUDA autocast
        lower = torch.get_autocast_dtype("cpu")
        query, key, value = (t.to(lower) if _eligible(t) else t for t in (query, key, value))
        if attn_mask is not None and _eligible(attn_mask):
            attn_mask = attn_mask.to(lower)
    bias = None
    if attn_mask is not None:
        # A boolean mask becomes an additive one in the query's dtype, padded to 16 columns.
        columns = _ceil_to(attn_mask.shape[-1], 16)
        if attn_mask.dtype == torch.bool or attn_mask.dtype != query.dtype or columns != attn_mask.shape[-1]:
            shape = (*attn_mask.shape[:-1], columns)
            bias = torch.empty(shape, dtype=query.dtype, device=query.device)
        else:
            bias = attn_mask
    return _MemoryEfficientAttention.apply(query, key, value, bias)


@contextlib.contextmanager
def efficient_sdpa() -> Iterator[None]:
    """While active, `F.scaled_dot_product_attention` allocates like CUDA's memory-efficient kernel."""
    original = F.scaled_dot_product_attention
    F.scaled_dot_product_attention = _efficient_sdpa
    try:
        yield
    finally:
        F.scaled_dot_product_attention = original


@contextlib.contextmanager
def native_dropout() -> Iterator[None]:
    """While active, `F.dropout` in training runs `aten.native_dropout`, as it does on a GPU
    (aten's dropout takes the fused kernel for CUDA tensors only)."""
    original = F.dropout

    def dropout(input: torch.Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> torch.Tensor:
        if training and 0 < p < 1 and not inplace and input.numel() > 0:
            return torch.ops.aten.native_dropout(input, p, True)[0]
        return original(input, p, training, inplace)

    F.dropout = dropout
    try:
        yield
    finally:
        F.dropout = original
