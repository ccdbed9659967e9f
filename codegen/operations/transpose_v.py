"""Operation transpose_v: V [b, s, h, d] -> V^T [b, h, d, s_pad], the FP8 P.V operand (sequence-contiguous).

    fp8attn_sm90_transpose_v_<type>_<BS>x<D>_w<warps>[_tma][_kperm][_<family>]

    tma     loads and stores through host TMA descriptors (kernels/transpose_v/transpose_v_tma_triton.py)
    kperm   keys permuted within 32-key blocks, the order the Gluon attention kernel's P fragment uses
            (kernels/transpose_v/transpose_v_triton.py, KEY_PERMUTED)

The bytes are moved as they are, so one u8 instance serves every one-byte element type.
"""

import re
from dataclasses import dataclass

from params import Param

NAME = "transpose_v"
CPP_KIND = "kTransposeV"  # library::OperationKind
ARCH = "sm90"


@dataclass(frozen=True)
class TransposeConfig:
    dtype: str
    block_s: int
    head_dim: int
    warps: int
    tma: bool = False
    family: str = "triton"
    key_permuted: bool = False

    operation = NAME


_RE = re.compile(rf"fp8attn_{ARCH}_transpose_v_(?P<t>u8)_(?P<bs>\d+)x(?P<d>\d+)_w(?P<w>\d+)(?P<tma>_tma)?"
                 r"(?P<kperm>_kperm)?(?:_(?P<family>gluon))?")


def name_of(c: TransposeConfig) -> str:
    name = f"fp8attn_{ARCH}_transpose_v_{c.dtype}_{c.block_s}x{c.head_dim}_w{c.warps}"
    if c.tma:
        name += "_tma"
    if c.key_permuted:
        name += "_kperm"
    return name if c.family == "triton" else f"{name}_{c.family}"


def parse(name: str):
    m = _RE.fullmatch(name)
    if not m:
        return None
    return TransposeConfig(m["t"], int(m["bs"]), int(m["d"]), int(m["w"]), bool(m["tma"]), m["family"] or "triton",
                           bool(m["kperm"]))


TRITON_PARAMS = [
    Param("V", "ptr", True), Param("VT", "ptr", True),
    Param("seqlen", "i32"), Param("seqlen_pad", "i32", True), Param("heads_kv", "i32"),
    Param("stride_vb", "i64", True), Param("stride_vh", "i64", True), Param("stride_vs", "i64", True),
    # Varlen: int32 [batch + 1] key offsets of the packed V; varlen = 0 ignores them, else it is the V^T column
    # alignment (16 or 128, kernels/common/varlen.py): declared a multiple of 16 (as 0 is), so that the stores' base
    # and limit keep their 16-byte vectorization.
    Param("cu_seqlens", "ptr"), Param("varlen", "i32", divisible_by_16=True), Param("total", "i32"),
]

TMA_PARAMS = [
    Param("v_desc", "tensordesc", rank=4), Param("vt_desc", "tensordesc", rank=2),
    Param("seqlen_pad", "i32"), Param("heads_kv", "i32"),
]

# kernel key -> (kernel module, function, params, C++ params struct)
KERNELS = {
    "triton": ("transpose_v.transpose_v_triton", "transpose_v_kernel", TRITON_PARAMS, "TransposeVTritonParams"),
    "triton_tma": ("transpose_v.transpose_v_tma_triton", "transpose_v_tma_kernel", TMA_PARAMS,
                   "TransposeVTmaTritonParams"),
}


def kernel_of(c: TransposeConfig):
    key = c.family + ("_tma" if c.tma else "")
    if key not in KERNELS:
        raise ValueError(f"{name_of(c)}: no {key} kernel for {NAME}")
    return KERNELS[key]


def compile_spec(c: TransposeConfig):
    _, _, params, _ = kernel_of(c)
    if c.tma:
        types = {"v_desc": f"tensordesc<u8[1, {c.block_s}, 1, {c.head_dim}]>",
                 "vt_desc": f"tensordesc<u8[{c.head_dim}, {c.block_s}]>"}
        constexprs = {"HEAD_DIM": c.head_dim, "BLOCK_S": c.block_s}
    else:
        types = {"V": "*u8", "VT": "*u8", "cu_seqlens": "*i32"}
        constexprs = {"HEAD_DIM": c.head_dim, "BLOCK_S": c.block_s, "KEY_PERMUTED": c.key_permuted}
    if c.key_permuted and (c.tma or c.block_s % 32):
        raise ValueError(f"{name_of(c)}: kperm is a pointer-kernel variant with whole 32-key blocks")
    return params, types, constexprs, c.warps, 1


def check_sass(c, mma_counts, sass="", ttgir=""):
    # The pointer variant stores each thread's 16 consecutive V^T bytes as one 16-byte store. If the store mask
    # loses its known divisibility (a limit Triton cannot prove a multiple of 16), every store becomes a single
    # byte and the kernel runs 5x slower (measured on the H200): refuse that build.
    if not c.tma and re.search(r"\bSTG\.E\.(U8|S8)\b", sass):
        raise RuntimeError(f"{name_of(c)}: byte-wide global stores in SASS (the V^T store lost its 16-byte "
                           "vectorization)")


def requires(c):
    return []


CPP_HEADER = "fmha/transpose_v_kernel_config.h"


def cpp_config(c: TransposeConfig):
    return ("fmha::detail::TransposeVKernelConfig",
            f"{{{c.block_s}, {c.head_dim}, {c.warps}, {'true' if c.tma else 'false'}, "
            f"{'true' if c.key_permuted else 'false'}}}")
