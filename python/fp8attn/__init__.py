"""fp8attn: FP8 attention for NVIDIA Hopper (ahead-of-time Triton kernels in a C++ library), for torch.

    import fp8attn
    q8, qd = fp8attn.quantize_e4m3(q)            # per tensor; quantize_e4m3_per_head for [B, H_kv] descales
    k8, kd = fp8attn.quantize_e4m3(k)
    v8, vd = fp8attn.quantize_e4m3(v)
    o = fp8attn.fmha_fwd(q8, k8, v8, q_descale=qd, k_descale=kd, v_descale=vd, causal=True)

The compiled instances are listed by fp8attn.list_kernels(); fmha_fwd(..., kernel_name=NAME) forces one.
"""

from . import _fp8attn_ext
from .fmha import find_kernel, fmha_fwd, list_kernels, select_kernel, triton_version, workspace_size
from .quant import E4M3_MAX, quantize_e4m3, quantize_e4m3_per_head

__version__ = _fp8attn_ext.__version__

__all__ = [
    "E4M3_MAX",
    "find_kernel",
    "fmha_fwd",
    "list_kernels",
    "quantize_e4m3",
    "quantize_e4m3_per_head",
    "select_kernel",
    "triton_version",
    "workspace_size",
]
