"""Accuracy modes: BF16/FP16 q, k, v in, quantized on the GPU (fp8attn::quantize), attention (fp8attn::fmha_fwd).

    o = fp8attn.attention(q, k, v, mode="int8_qk", causal=True)      # q, k, v bfloat16, [B, S, H, D]

    mode               Q, K                                            V            measured on SmolLM2-135M
    "bf16"             bf16 (no quantization)                          bf16         -0.01% perplexity
    "fp8"              e4m3, one descale per tensor                    e4m3         +2.39%
    "fp8_per_head"     e4m3, per (batch, kv head) descales             e4m3         +2.48%
    "fp8_smooth_rotate" e4m3 per tensor after K smoothing and the      e4m3         +0.73%
                       same random-sign Hadamard rotation of Q and K
    "int8_qk"          int8 after K smoothing and the rotation, Q per   e4m3         +0.15%
                       64-token block, K per 128 tokens (block_pair),
                       K's mean from every n-th block

(Perplexity change against BF16 SDPA on Python's documentation, windows of 2048 tokens, through these kernels
on the H200 (2026-12-06; fp8_per_head and bf16 2026-12-02): bench/real_model_perplexity.py; docs/ACCURACY.md has windows of 8192 and how
much such a number moves when only roundings change.) The smoothing and the rotation are exact transforms
(softmax and Q K^T do not change), so every mode computes the same attention up to its rounding. Everything runs
through torch operators: torch.compile(fullgraph=True) traces it and CUDA graphs capture it.

The default is "fp8": the fastest path, with an LSE (docs/ACCURACY.md, Defaults); "int8_qk" is the mode for a
model's quality (its INT8 instances exist for head_dim 64 and 128). Its K descales come one per 128 tokens where
the build has the 128-token apply (BF16 K at head_dim 64 and 128; k_descale_paired), one per 64 elsewhere; the
perplexity above was measured with K per 128 tokens.
"""

import re

import torch

from . import ops as _ops  # noqa: F401  (registers torch.ops.fp8attn.*)

MODES = ("bf16", "fp8", "fp8_per_head", "fp8_smooth_rotate", "int8_qk")
_LAYOUTS = ("bshd", "bhsd")


def _vt_kperm_problems():
    """{(qk_type, head_dim, causal)} for which this build can take V quantized straight into the key-permuted V^T
    (attention's fast path): a key-permuted quantize apply for BF16 input at that head dim and a dense
    v_key_permuted attention instance. Read once, at import (a constant to torch.compile's tracing); a build
    filtered without them (FP8ATTN_KERNELS) keeps the path through V as given."""
    from ._fp8attn_ext import list_kernels, list_operations

    apply_dims = {int(m.group(1)) for m in (re.search(r"quantize_apply_bf16_e4m3_\d+x(\d+)_w\d+_kperm$", o["name"])
                                            for o in list_operations()) if m}
    return frozenset((k["qk_type"], k["head_dim"], bool(k["causal"])) for k in list_kernels()
                     if k["v_key_permuted"] and not k["varlen"] and not k["softcap"] and k["head_dim"] in apply_dims)


_VT_KPERM = _vt_kperm_problems()


def _pair_apply_dims():
    """Head dims with the 128-token Triton int8 apply for BF16 input (quantize granularity "block_pair"; the Gluon
    one, the pick where TMA takes K's strides, is not counted: it cannot take every K). Read once, at import, like
    _VT_KPERM."""
    from ._fp8attn_ext import list_operations

    return frozenset(int(m.group(1)) for m in (re.search(r"quantize_apply_bf16_i8_128x(\d+)_w\d+$", o["name"])
                                               for o in list_operations()) if m)


_PAIR_APPLY_DIMS = _pair_apply_dims()

# int8_qk's K per 128 tokens (block_pair) where compiled; False restores K per 64 tokens, the recipe measured before
# 2026-12-06 (bench/real_model_perplexity.py's "int8_qk_k64" sets it to compare the two in one run). Read at each
# call (a constant to torch.compile's tracing). attention_fused (C++) always pairs where it can.
INT8_QK_K_PAIRS = True


def k_descale_paired(mode, k):
    """Whether `mode` quantizes this K with one descale per 128 tokens, written in pairs of the per-block layout
    (granularity "block_pair"): int8_qk on BF16 K at a head dim the build has the 128-token apply for. Such K
    descales go to fmha_fwd with k_descale_paired=True, which runs the "kpair" instances (one k descale a 128-key
    tile: +2.7% to +5% at D=128 S=8192 on the H200, 2026-12-06)."""
    return (INT8_QK_K_PAIRS and mode == "int8_qk" and k.dtype == torch.bfloat16
            and k.shape[-1] in _PAIR_APPLY_DIMS)


def _q(x, dtype="e4m3", granularity="tensor", heads_kv=0, smooth=False, rotate=False, seed=0, layout="bshd",
       smooth_sample_stride=1):
    return torch.ops.fp8attn.quantize(x, dtype, granularity, heads_kv, smooth, rotate, seed, layout, None,
                                      smooth_sample_stride)


def quantize_for(mode, q, k, v, v_layout="bshd"):
    """(q, k, v, q_descale, k_descale, v_descale) for fmha_fwd in `mode`, from [B, S, H, D] BF16/FP16 tensors.
    v_layout "vt_kperm" (FP8 and INT8 modes): V quantized straight into the key-permuted V^T that
    fmha_fwd(..., v_key_permuted=True) reads, so that the call runs no V transpose; "bshd": V as given."""
    if v_layout not in ("bshd", "vt_kperm"):
        raise ValueError(f"v_layout={v_layout!r}: expected 'bshd' or 'vt_kperm'")
    if mode == "bf16":
        return (*(t.to(torch.bfloat16) for t in (q, k, v)), None, None, None)
    if mode == "fp8":
        (q8, qd), (k8, kd), (v8, vd) = _q(q), _q(k), _q(v, layout=v_layout)
    elif mode == "fp8_per_head":
        hkv = k.shape[2]
        (q8, qd), (k8, kd), (v8, vd) = (_q(q, granularity="head", heads_kv=hkv), _q(k, granularity="head"),
                                        _q(v, granularity="head", layout=v_layout))
    elif mode == "fp8_smooth_rotate":
        (q8, qd), (k8, kd), (v8, vd) = (_q(q, rotate=True), _q(k, smooth=True, rotate=True),
                                        _q(v, layout=v_layout))
    elif mode == "int8_qk":
        # INT8 Q and K, one scale per 64 tokens of Q and per 128 of K where paired, K smoothed, Q and K rotated (the
        # rotation spreads a head's outlier channels over all of them, so a block's scale fits its values better);
        # P.V in FP8. K's mean from sampled blocks (smooth_sample_stride 0, the library's rule: every 8th block from
        # 2k tokens on): any subtracted vector keeps softmax exact, and the statistics pass reads ~1/8 of K.
        k_granularity = "block_pair" if k_descale_paired(mode, k) else "block"
        (q8, qd), (k8, kd), (v8, vd) = (_q(q, "int8", "block", rotate=True),
                                        _q(k, "int8", k_granularity, smooth=True, rotate=True, smooth_sample_stride=0),
                                        _q(v, layout=v_layout))
    else:
        raise ValueError(f"mode={mode!r}: expected one of {MODES}")
    return q8, k8, v8, qd, kd, vd


def attention_fused(q, k, v, *, mode="fp8", causal=False, softmax_scale=None):
    """As attention() for [B, S, H, D] inputs, through the C++ handle fmha::device::FmhaFwdQuantized: one crossing
    into C++ per call, V quantized straight into the layout P.V reads; not a torch operator (no torch.compile
    tracing). Returns O [B, S, H_q, D] bfloat16."""
    from . import _fp8attn_ext as ext
    from . import fmha as _fmha

    if mode not in MODES:
        raise ValueError(f"mode={mode!r}: expected one of {MODES}")
    out = torch.empty(q.shape, dtype=torch.bfloat16, device=q.device)
    stream, current = _fmha._stream_and_device(q)
    call = (q, k, v, out, _CPP_MODES[mode], bool(causal), float(softmax_scale or 0.0), 0, stream,
            _fmha._workspace_alloc, _fmha._workspace_free)
    if current:
        ext.fmha_fwd_quantized(*call)
    else:
        with torch.cuda.device(q.device):
            ext.fmha_fwd_quantized(*call)
    return out


# fp8attn::fmha::AccuracyMode's order.
_CPP_MODES = {"fp8": 0, "fp8_per_head": 1, "fp8_smooth_rotate": 2, "int8_qk": 3, "bf16": 4}


def attention(q, k, v, *, mode="fp8", causal=False, softmax_scale=None, layout="bshd"):
    """Attention over BF16/FP16 q, k, v ([B, S, H, D] for "bshd", [B, H, S, D] for "bhsd"; GQA: fewer k/v heads)
    in an accuracy mode (MODES); returns O in q's layout, bfloat16."""
    if layout not in _LAYOUTS:
        raise ValueError(f"layout={layout!r}: expected 'bshd' or 'bhsd'")
    if mode not in MODES:
        raise ValueError(f"mode={mode!r}: expected one of {MODES}")
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor) or t.dtype not in (torch.bfloat16, torch.float16):
            raise ValueError(f"{name}: fp8attn.attention takes bfloat16 or float16 tensors "
                             f"(got {getattr(t, 'dtype', type(t).__name__)}); fmha_fwd takes quantized ones")
    if layout == "bhsd":
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))
    # V quantized straight into the key-permuted V^T the FP8 P.V reads (as attention_fused does), where the build
    # takes it (_VT_KPERM; BF16 input: the key-permuted applies are compiled for it): the call then runs no V
    # transpose (H100, D=128 S=512 B=64: the separate transpose cost int8_qk 92 us of 1301, and fp8's V-transposing
    # kernel 68 us more than its V^T one). Elsewhere V goes as given, as before.
    vt = (mode != "bf16" and v.dtype == torch.bfloat16 and
          ("i8" if mode == "int8_qk" else "e4m3", q.shape[-1], bool(causal)) in _VT_KPERM)
    q8, k8, v8, qd, kd, vd = quantize_for(mode, q, k, v, v_layout="vt_kperm" if vt else "bshd")
    out = torch.ops.fp8attn.fmha_fwd(q8, k8, v8, qd, kd, vd, float(softmax_scale or 0.0), causal, "bshd", vt,
                                     k_descale_paired(mode, k))
    return out.transpose(1, 2) if layout == "bhsd" else out
