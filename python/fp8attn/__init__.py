"""fp8attn: FP8 attention for NVIDIA Hopper (ahead-of-time Triton kernels in a C++ library), for torch.

    import fp8attn
    o = fp8attn.attention(q, k, v, mode="int8_qk", causal=True)   # BF16 in: quantized on the GPU, then attention
    q8, qd = fp8attn.quantize(q)                 # on the GPU: per tensor, head or 64-token block, e4m3 or int8
    q8, qd = fp8attn.quantize_e4m3(q)            # in torch; quantize_e4m3_per_head for [B, H_kv] descales
    k8, kd = fp8attn.quantize_e4m3(k)
    v8, vd = fp8attn.quantize_e4m3(v)
    o = fp8attn.fmha_fwd(q8, k8, v8, q_descale=qd, k_descale=kd, v_descale=vd, causal=True)

The compiled instances are listed by fp8attn.list_kernels(); fmha_fwd(..., kernel_name=NAME) forces one.
The registry functions (list_kernels, find_kernel, triton_version) work without torch; the rest needs it.
"""

from . import _fp8attn_ext
from ._fp8attn_ext import find_kernel, flops, list_kernels, list_operations, triton_version

__version__ = _fp8attn_ext.__version__

_TORCH_API = ("fmha_fwd", "fmha_fwd_varlen", "select_kernel", "select_kernel_varlen", "workspace_size", "transpose_v",
              "quantize", "attention", "MODES",
              "quantize_e4m3", "quantize_e4m3_per_head", "E4M3_MAX", "transform_qk", "DelayedScaling", "ops", "paged")

try:
    from .fmha import fmha_fwd, fmha_fwd_varlen, select_kernel, select_kernel_varlen, transpose_v, workspace_size
    from .quant import E4M3_MAX, DelayedScaling, quantize_e4m3, quantize_e4m3_per_head, transform_qk
    from .quantize_op import quantize
    from .modes import MODES, attention
    from . import paged  # fp8attn.paged: the paged FP8 KV cache (append, decode)
    from . import ops  # registers torch.ops.fp8attn.fmha_fwd and fmha_fwd_lse
except ImportError as _e:
    if _e.name != "torch":
        raise
    _torch_error = str(_e)  # `_e` itself is unbound when the except block ends

    def __getattr__(name):
        if name in _TORCH_API:
            raise ImportError(f"fp8attn.{name} needs torch, which is not importable: {_torch_error}")
        raise AttributeError(f"module 'fp8attn' has no attribute {name!r}")

__all__ = ["find_kernel", "flops", "list_kernels", "list_operations", "triton_version", *_TORCH_API]
