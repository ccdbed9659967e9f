"""fp8attn.quantize: the library's quantization kernels (C++ quant::device::Quantize) from torch.

One call turns a BF16/FP16 Q, K or V into the operand the attention kernels read and its float32 descales, on
the GPU, without a host synchronization. See include/fp8attn/quant/device/quantize.h for the exact semantics.
"""

import torch

from . import _fp8attn_ext as _ext
from . import fmha as _fmha

_GRANULARITIES = {"tensor": 0, "head": 1, "block": 2, "block_pair": 3}
_LAYOUTS = {"bshd": 0, "vt": 1, "vt_kperm": 2}
_OUTPUT_DTYPES = {"e4m3": torch.float8_e4m3fn, "int8": torch.int8}

BLOCK_TOKENS = _ext.QUANTIZE_BLOCK_TOKENS


def quantize(x, *, dtype="e4m3", granularity="tensor", heads_kv=None, smooth=False, rotate=False, seed=0,
             layout="bshd", descale=None, kernel_name=None, smooth_sample_stride=1):
    """(x_q, descale) for x [B, S, H, D] (bfloat16 or float16, head_dim contiguous), quantized on the GPU.

    dtype: "e4m3" (torch.float8_e4m3fn) or "int8" (symmetric, -127..127).
    granularity: "tensor" (descale [1]), "head" (descale [B, heads_kv]; heads // heads_kv consecutive heads
        share one, the convention fmha_fwd's per-head descales use; heads_kv=None means H) or "block" (descale
        [B, H, ceil(S / BLOCK_TOKENS)], one per block of BLOCK_TOKENS = 64 tokens) or "block_pair" (the same
        shape, one value per 128 tokens written to both of its blocks' entries: fmha_fwd(..., k_descale_paired=True)
        then reads one per 128-key tile; int8 K at head dims 64 and 128, layout "bshd").
    smooth: subtract each (batch, head)'s mean over the sequence first (for K: softmax does not change).
    smooth_sample_stride: with smooth, take that mean over every n-th block of BLOCK_TOKENS tokens only (1: every
        token; 0: the library's rule, smooth_sample_stride_for(S): n = max(1, min(8, blocks // 4))). Subtracting
        any vector from every key leaves softmax exact, so the sample changes only the rounding (int8_qk uses 0:
        the statistics pass then reads ~1/8 of K). 0 or 1 without smooth.
    rotate: multiply by the random-sign Hadamard matrix of `seed` over head_dim first (rotate Q and K with the
        same seed: Q K^T does not change; fp8attn.quant.hadamard(D, seed) is the same matrix).
    layout: "bshd" returns x_q [B, S, H, D]; "vt" / "vt_kperm" write V as V^T [B, H, D, S_pad] (S_pad = S
        rounded up to 32, zero padding) and return the sequence-contiguous [B, S, H, D] view that fmha_fwd reads
        as v, "vt_kperm" in the key order of fmha_fwd(..., v_key_permuted=True) (no transpose at attention time).
    descale: a static (calibrated) float32 descale, per tensor [1] or per head [B, heads_kv], used instead of
        computing one (values beyond the range saturate); it is returned as given.
    kernel_name: force one compiled apply instance (fp8attn.list_operations(), "quantize_apply" names), e.g. to
        compare them; default: the library's pick.
    """
    if granularity not in _GRANULARITIES:
        raise ValueError(f"granularity={granularity!r}: expected one of {sorted(_GRANULARITIES)}")
    if layout not in _LAYOUTS:
        raise ValueError(f"layout={layout!r}: expected one of {sorted(_LAYOUTS)}")
    if dtype not in _OUTPUT_DTYPES:
        raise ValueError(f"dtype={dtype!r}: expected one of {sorted(_OUTPUT_DTYPES)}")
    if not isinstance(x, torch.Tensor) or x.dim() != 4:
        raise ValueError(f"x: expected a 4-D [batch, seqlen, heads, head_dim] tensor, got {type(x).__name__}"
                         f"{'' if not isinstance(x, torch.Tensor) else ' of shape ' + str(tuple(x.shape))}")
    b, s, h, d = x.shape
    heads_kv = h if heads_kv is None else int(heads_kv)
    if heads_kv <= 0 or h % heads_kv:
        raise ValueError(f"heads_kv={heads_kv}: must divide the {h} heads of x")
    storage = _empty_storage(x, dtype, layout)
    if descale is not None:
        if not isinstance(descale, torch.Tensor) or descale.dtype != torch.float32:
            raise ValueError("descale: a static descale must be a float32 tensor")
        static, computed = descale, None
    else:
        shape = descale_shape(b, s, h, heads_kv, granularity)
        static, computed = None, torch.empty(shape, dtype=torch.float32, device=x.device)
    stream, current = _fmha._stream_and_device(x)
    call = (x, storage, computed, static, _GRANULARITIES[granularity], _LAYOUTS[layout], heads_kv if granularity == "head"
            else 0, bool(smooth), bool(rotate), int(seed) & 0xFFFFFFFF, stream, _fmha._workspace_alloc,
            _fmha._workspace_free, "" if kernel_name is None else str(kernel_name), int(smooth_sample_stride))
    if current:
        _ext.quantize(*call)
    else:
        with torch.cuda.device(x.device):
            _ext.quantize(*call)
    if x.numel() == 0 and computed is not None:
        computed.fill_(1.0)  # nothing was quantized; the library writes no descale for an empty tensor
    return _view(storage, s, layout), (static if static is not None else computed)


def smooth_sample_stride_for(seqlen):
    """The block stride quantize(..., smooth=True, smooth_sample_stride=0) samples K's mean with."""
    return _ext.smooth_sample_stride_for(int(seqlen))


def descale_shape(batch, seqlen, heads, heads_kv, granularity):
    """The descale tensor's shape for a granularity (x [batch, seqlen, heads, D])."""
    blocks = (batch, heads, -(-seqlen // BLOCK_TOKENS))
    return {"tensor": (1,), "head": (batch, heads_kv), "block": blocks, "block_pair": blocks}[granularity]


def _empty_storage(x, dtype, layout):
    """The tensor the library writes: x_q [B, S, H, D], or V^T [B, H, D, S_pad] (S_pad: S rounded up to 32)."""
    b, s, h, d = x.shape
    if layout == "bshd":
        return torch.empty((b, s, h, d), dtype=_OUTPUT_DTYPES[dtype], device=x.device)
    align = _ext.VT_SEQ_ALIGN
    return torch.empty((b, h, d, (s + align - 1) // align * align), dtype=_OUTPUT_DTYPES[dtype], device=x.device)


def _view(storage, seqlen, layout):
    """The [B, S, H, D] view of what the library wrote (V^T: sequence-contiguous)."""
    return storage if layout == "bshd" else storage[..., :seqlen].permute(0, 3, 1, 2)


def empty_output(x, dtype, layout):
    """An uninitialized x_q as quantize returns it (shape, dtype and strides): for fake tensors."""
    return _view(_empty_storage(x, dtype, layout), x.shape[1], layout)
