"""Triton signature, constexprs and specialization hints of each kernel kind.

The C++ launchers (src/fmha_launch.cpp) pack arguments in exactly the order of `param_names`; the compiler
checks the PTX entry against `param_types` so a mismatch fails the build instead of a launch.

Specialization (docs/CONVENTIONS.md, "Specialization hints"): pointers and strides carry tt.divisibility=16, as
the JIT would give them, and `can_implement` checks every actual pointer and stride against that. Sequence
lengths are not hinted, so one instance serves every length.
"""

from dataclasses import dataclass, field

from kernel_name import FmhaConfig, TransposeConfig

_TRITON_TYPES = {"e4m3": "fp8e4nv", "e5m2": "fp8e5", "bf16": "bf16", "f16": "fp16", "f32": "fp32", "u8": "u8"}
_PTX_TYPES = {"i32": "u32", "fp32": "f32"}  # pointers are u64

FMHA_PARAMS = [
    "Q", "K", "V", "O", "LSE",
    "q_descale", "k_descale", "v_descale",
    "q_descale_stride_b", "q_descale_stride_h",
    "k_descale_stride_b", "k_descale_stride_h",
    "v_descale_stride_b", "v_descale_stride_h",
    "softmax_scale",
    "seqlen_q", "seqlen_k", "heads_q", "group_size", "write_lse",
    "stride_qb", "stride_qh", "stride_qs",
    "stride_kb", "stride_kh", "stride_ks",
    "stride_vb", "stride_vh", "stride_vs",
    "stride_ob", "stride_oh", "stride_os",
]
TRANSPOSE_PARAMS = ["V", "VT", "seqlen", "seqlen_pad", "heads_kv", "stride_vb", "stride_vh", "stride_vs"]


@dataclass
class KernelSignature:
    fn: object
    signature: dict
    constexprs: dict
    attrs: dict
    num_warps: int
    num_stages: int
    param_names: list = field(default_factory=list)
    param_types: list = field(default_factory=list)
    divisible_names: list = field(default_factory=list)


def _build(fn, types, constexprs, divisible, num_warps, num_stages):
    signature = dict(types)
    for k in constexprs:
        signature[k] = "constexpr"
    names = list(fn.arg_names)
    assert [n for n in names if n not in constexprs] == list(types), f"{fn.__name__}: parameter order changed"
    assert set(names) == set(signature), f"signature/kernel mismatch: {set(names) ^ set(signature)}"
    attrs = {(names.index(n),): [["tt.divisibility", 16]] for n in divisible}
    params = [n for n in names if n not in constexprs]
    ptx = ["u64" if types[n].startswith("*") else _PTX_TYPES[types[n]] for n in params]
    return KernelSignature(fn, signature, constexprs, attrs, num_warps, num_stages, params, ptx, list(divisible))


def kernel_signature(config):
    if isinstance(config, FmhaConfig):
        from fmha_fwd import fmha_fwd_kernel

        io = _TRITON_TYPES[config.qk_type]
        types = {n: "i32" for n in FMHA_PARAMS}
        types.update({"Q": f"*{io}", "K": f"*{io}", "V": f"*{_TRITON_TYPES[config.v_type]}",
                      "O": f"*{_TRITON_TYPES[config.out_type]}", "LSE": "*fp32",
                      "q_descale": "*fp32", "k_descale": "*fp32", "v_descale": "*fp32", "softmax_scale": "fp32"})
        constexprs = {"HEAD_DIM": config.head_dim, "BLOCK_M": config.block_m, "BLOCK_N": config.block_n,
                      "CAUSAL": config.causal, "V_TRANSPOSED": config.is_fp8,
                      "WARP_SPECIALIZE": config.warp_specialized, "EVEN_N": config.even_n}
        divisible = ["Q", "K", "V", "O", "LSE"] + [n for n in FMHA_PARAMS if n.startswith("stride_")]
        return _build(fmha_fwd_kernel, types, constexprs, divisible, config.warps, config.stages)
    if isinstance(config, TransposeConfig):
        from transpose_v import transpose_v_kernel

        types = {n: "i32" for n in TRANSPOSE_PARAMS}
        types.update({"V": "*u8", "VT": "*u8"})
        constexprs = {"HEAD_DIM": config.head_dim, "BLOCK_S": config.block_s}
        divisible = ["V", "VT", "seqlen_pad", "stride_vb", "stride_vh", "stride_vs"]
        return _build(transpose_v_kernel, types, constexprs, divisible, config.warps, 1)
    raise TypeError(f"unknown kernel configuration {config!r}")
