"""fp8attn as PyTorch operators (torch.library): fp8attn::fmha_fwd, fp8attn::fmha_fwd_lse, fp8attn::quantize.

Registered custom operators with fixed schemas, so that torch.compile (fullgraph=True) can trace through them,
CUDA graphs can capture them, and fake tensors give their output shapes without running anything:

    torch.ops.fp8attn.fmha_fwd(q, k, v, q_descale, k_descale, v_descale, softmax_scale, causal, layout,
                               v_key_permuted=False, k_descale_paired=False) -> O
    torch.ops.fp8attn.fmha_fwd_lse(...same...) -> (O, LSE)

    torch.ops.fp8attn.quantize(x, dtype, granularity, heads_kv, smooth, rotate, seed, layout, static_descale,
                               smooth_sample_stride=1)
        -> (x_q, descale)       as fp8attn.quantize (heads_kv 0: x's heads; a static descale comes back copied)

Two operators rather than one with a flag: a schema's return type cannot depend on an argument, and asking for
LSE can change which kernel runs (the fastest non-causal instance does not write it). Arguments as in
fp8attn.fmha_fwd: q, k, v in the layout named by `layout` ("bshd" or "bhsd"), e4m3 or bf16; the descales
float32 [1] or [B, H_kv] (required for e4m3, None for bf16); softmax_scale 0 (or None through the Python
wrappers) selects 1/sqrt(D); v_key_permuted: v is the V^T view that quantize(..., layout="vt_kperm") or
transpose_v(v, key_permuted=True) returns (e4m3 only; the call runs no transpose); k_descale_paired: INT8 k
descales in equal pairs, as quantize(..., granularity="block_pair") writes them (fp8attn.fmha_fwd's). Inference
only: backward raises.
"""

from typing import Optional, Tuple

import torch

from . import fmha as _fmha
from . import quantize_op as _quantize

_OUTPUT_DTYPE = torch.bfloat16


def _lse_shape(q, layout):
    b, s, h = (q.shape[0], q.shape[1], q.shape[2]) if layout == "bshd" else (q.shape[0], q.shape[2], q.shape[1])
    return (b, h, s)


@torch.library.custom_op("fp8attn::fmha_fwd", mutates_args=(), device_types="cuda")
def fmha_fwd(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, q_descale: Optional[torch.Tensor],
             k_descale: Optional[torch.Tensor], v_descale: Optional[torch.Tensor], softmax_scale: float,
             causal: bool, layout: str, v_key_permuted: bool = False,
             k_descale_paired: bool = False) -> torch.Tensor:
    return _fmha.fmha_fwd(q, k, v, q_descale=q_descale, k_descale=k_descale, v_descale=v_descale,
                          softmax_scale=softmax_scale or None, causal=causal, layout=layout,
                          v_key_permuted=v_key_permuted, k_descale_paired=k_descale_paired)


@torch.library.custom_op("fp8attn::fmha_fwd_lse", mutates_args=(), device_types="cuda")
def fmha_fwd_lse(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, q_descale: Optional[torch.Tensor],
                 k_descale: Optional[torch.Tensor], v_descale: Optional[torch.Tensor], softmax_scale: float,
                 causal: bool, layout: str, v_key_permuted: bool = False,
                 k_descale_paired: bool = False) -> Tuple[torch.Tensor, torch.Tensor]:
    return _fmha.fmha_fwd(q, k, v, q_descale=q_descale, k_descale=k_descale, v_descale=v_descale,
                          softmax_scale=softmax_scale or None, causal=causal, return_lse=True, layout=layout,
                          v_key_permuted=v_key_permuted, k_descale_paired=k_descale_paired)


# Fake (meta) implementations: output shapes and types only, for tracing and torch.compile.
@fmha_fwd.register_fake
def _(q, k, v, q_descale, k_descale, v_descale, softmax_scale, causal, layout, v_key_permuted=False,
      k_descale_paired=False):
    return torch.empty_like(q, dtype=_OUTPUT_DTYPE)


@fmha_fwd_lse.register_fake
def _(q, k, v, q_descale, k_descale, v_descale, softmax_scale, causal, layout, v_key_permuted=False,
      k_descale_paired=False):
    return torch.empty_like(q, dtype=_OUTPUT_DTYPE), q.new_empty(_lse_shape(q, layout), dtype=torch.float32)


@torch.library.custom_op("fp8attn::quantize", mutates_args=(), device_types="cuda")
def quantize(x: torch.Tensor, dtype: str, granularity: str, heads_kv: int, smooth: bool, rotate: bool, seed: int,
             layout: str, static_descale: Optional[torch.Tensor],
             smooth_sample_stride: int = 1) -> Tuple[torch.Tensor, torch.Tensor]:
    x_q, descale = _quantize.quantize(x, dtype=dtype, granularity=granularity, heads_kv=heads_kv or None,
                                      smooth=smooth, rotate=rotate, seed=seed, layout=layout, descale=static_descale,
                                      smooth_sample_stride=smooth_sample_stride)
    # An operator's outputs may not alias its inputs: a static descale comes back as a copy.
    return x_q, descale.clone() if static_descale is not None else descale


@quantize.register_fake
def _(x, dtype, granularity, heads_kv, smooth, rotate, seed, layout, static_descale, smooth_sample_stride=1):
    b, s, h, d = x.shape
    x_q = _quantize.empty_output(x, dtype, layout)
    if static_descale is not None:
        return x_q, torch.empty_like(static_descale)
    return x_q, x.new_empty(_quantize.descale_shape(b, s, h, heads_kv or h, granularity), dtype=torch.float32)


def _inference_only(ctx, *grads):
    raise RuntimeError("fp8attn::fmha_fwd is inference-only: it has no backward (use a BF16 attention for training)")


def _save_nothing(ctx, inputs, output):
    pass


fmha_fwd.register_autograd(_inference_only, setup_context=_save_nothing)
fmha_fwd_lse.register_autograd(_inference_only, setup_context=_save_nothing)
quantize.register_autograd(_inference_only, setup_context=_save_nothing)
