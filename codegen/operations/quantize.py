"""Operation quantize: BF16/FP16 [b, s, h, d] -> e4m3 or int8 operands of the attention kernels, and descales.

    fp8attn_sm90_quantize_apply_<in>_<out>_<BS>x<D>_w<warps>[_kperm][_gluon]   quantize blocks of BS tokens
                                                                       (BS = 128: granularity block_pair, each
                                                                       block's descale in its two 64-token entries)
    fp8attn_sm90_quantize_stats_<in>_<BS>x<D>_w<warps>                 per-block column sums / amax
    fp8attn_sm90_quantize_reduce_f32_w<warps>                          partials -> mean / descale
    fp8attn_sm90_quantize_rotation_<in>_w<warps>                       the rotation matrix, once per call

A quantization launches the stages its options need (src/quant/quantize.cpp); every stage is its own
instance. kperm: V^T written in the Gluon attention kernel's key order (the vkperm attention instances).
Kernels: kernels/quantize/quantize_triton.py; _gluon: the apply in kernels/quantize/quantize_apply_gluon.py
(persistent, TMA in and out, [b, s, h, d] outputs at head dims 64 and 128; its stats, reduce and rotation stages
are the Triton ones).
"""

import re
from dataclasses import dataclass

from common.numerics import DESCALE_BLOCK_TOKENS as DESCALE_BLOCK
from common.numerics import ROTATION_TABLE_MAX_HEAD_DIM
from operations.fmha_fwd import gluon_tensordesc
from params import Param
from quantize.quantize_apply_gluon import buffer_bytes as gluon_apply_buffer_bytes

NAME = "quantize"
CPP_KIND = "kQuantize"  # library::OperationKind
ARCH = "sm90"
STAGES = ("apply", "stats", "reduce", "rotation")


@dataclass(frozen=True)
class QuantizeConfig:
    stage: str           # apply | stats | reduce | rotation
    in_dtype: str        # bf16 | f16 (f32 for reduce; the matrix's type for rotation)
    out_dtype: str       # e4m3 | i8 (apply only; "" otherwise)
    block_s: int         # tokens per program (the per-block granularity's block); 0 for reduce and rotation
    head_dim: int        # 0 for reduce and rotation (the rotation stage serves every head dim it can)
    warps: int
    key_permuted: bool = False
    family: str = "triton"

    operation = NAME


_RE = re.compile(
    rf"fp8attn_{ARCH}_quantize_(?:"
    r"apply_(?P<ai>bf16|f16)_(?P<ao>e4m3|i8)_(?P<abs>\d+)x(?P<ad>\d+)_w(?P<aw>\d+)(?P<kperm>_kperm)?(?P<ag>_gluon)?"
    r"|stats_(?P<si>bf16|f16)_(?P<sbs>\d+)x(?P<sd>\d+)_w(?P<sw>\d+)"
    r"|reduce_f32_w(?P<rw>\d+)"
    r"|rotation_(?P<ri>bf16|f16)_w(?P<row>\d+))")


def name_of(c: QuantizeConfig) -> str:
    if c.stage == "apply":
        name = f"fp8attn_{ARCH}_quantize_apply_{c.in_dtype}_{c.out_dtype}_{c.block_s}x{c.head_dim}_w{c.warps}"
        return name + ("_kperm" if c.key_permuted else "") + ("_gluon" if c.family == "gluon" else "")
    if c.stage == "stats":
        return f"fp8attn_{ARCH}_quantize_stats_{c.in_dtype}_{c.block_s}x{c.head_dim}_w{c.warps}"
    if c.stage == "rotation":
        return f"fp8attn_{ARCH}_quantize_rotation_{c.in_dtype}_w{c.warps}"
    return f"fp8attn_{ARCH}_quantize_reduce_f32_w{c.warps}"


def parse(name: str):
    m = _RE.fullmatch(name)
    if not m:
        return None
    if m["ai"]:
        return QuantizeConfig("apply", m["ai"], m["ao"], int(m["abs"]), int(m["ad"]), int(m["aw"]), bool(m["kperm"]),
                              family="gluon" if m["ag"] else "triton")
    if m["si"]:
        return QuantizeConfig("stats", m["si"], "", int(m["sbs"]), int(m["sd"]), int(m["sw"]))
    if m["ri"]:
        return QuantizeConfig("rotation", m["ri"], "", 0, 0, int(m["row"]))
    return QuantizeConfig("reduce", "f32", "", 0, 0, int(m["rw"]))


_X_STRIDES = [Param("stride_xb", "i64", True), Param("stride_xh", "i64", True), Param("stride_xs", "i64", True)]

STATS_PARAMS = [
    Param("X", "ptr", True), Param("Mean", "ptr", True), Param("Rotation", "ptr", True), Param("PartialSum", "ptr", True),
    Param("PartialAmax", "ptr", True),
    Param("seqlen", "i32"), Param("heads", "i32"), Param("num_blocks", "i32"), Param("seed", "i32"),
    Param("rotate", "i32"), Param("smooth", "i32"), Param("what", "i32"),
    Param("sample_stride", "i32"),  # what 0: every sample_stride-th token block feeds the smoothing mean
] + _X_STRIDES

REDUCE_PARAMS = [
    Param("Partial", "ptr", True), Param("Out", "ptr", True),
    Param("count", "i32"), Param("width", "i32"), Param("divisor", "f32"), Param("qmax", "f32"),
    Param("seed", "i32"), Param("rotate", "i32"),
]

APPLY_PARAMS = [
    Param("X", "ptr", True), Param("Out", "ptr", True), Param("Descale", "ptr"), Param("Mean", "ptr", True),
    Param("Rotation", "ptr", True),
    Param("seqlen", "i32"), Param("heads", "i32"), Param("num_blocks", "i32"), Param("seed", "i32"),
    Param("rotate", "i32"), Param("smooth", "i32"), Param("per_block", "i32"), Param("group", "i32"),
    # seqlen_pad (V^T's row, padded_seqlen: a multiple of 32) divisible by 16: the transposed store of the V^T
    # layouts is then 16 bytes a thread along the tokens instead of one byte (64 single-byte stores a thread).
    Param("seqlen_pad", "i32", True), Param("vt", "i32"),
    Param("num_items", "i32"),  # batch * heads * num_blocks (read by the PERSISTENT variant)
] + _X_STRIDES + [Param("stride_ob", "i64", True), Param("stride_oh", "i64", True), Param("stride_os", "i64", True)]

ROTATION_PARAMS = [Param("Rotation", "ptr", True), Param("width", "i32"), Param("seed", "i32")]

# The Gluon apply (kernels/quantize/quantize_apply_gluon.py): host TMA descriptors of x and the output ([b, s, h, d],
# a block of 64 tokens of one head), then the Triton apply's scalars but the V^T ones (it writes [b, s, h, d] only)
# and the seed (it reads the rotation table).
GLUON_APPLY_PARAMS = [
    Param("x_desc", "tensordesc", rank=4), Param("out_desc", "tensordesc", rank=4),
    Param("Descale", "ptr"), Param("Mean", "ptr", True), Param("Rotation", "ptr", True),
    Param("seqlen", "i32"), Param("heads", "i32"), Param("num_blocks", "i32"),
    Param("rotate", "i32"), Param("smooth", "i32"), Param("per_block", "i32"), Param("group", "i32"),
    Param("num_items", "i32"),
]

_MODULE = "quantize.quantize_triton"
# kernel key -> (kernel module, function, params, C++ params struct)
KERNELS = {
    "triton_apply": (_MODULE, "quantize_apply_kernel", APPLY_PARAMS, "QuantizeApplyTritonParams"),
    "triton_stats": (_MODULE, "quantize_stats_kernel", STATS_PARAMS, "QuantizeStatsTritonParams"),
    "triton_reduce": (_MODULE, "quantize_reduce_kernel", REDUCE_PARAMS, "QuantizeReduceTritonParams"),
    "triton_rotation": (_MODULE, "quantize_rotation_kernel", ROTATION_PARAMS, "QuantizeRotationTritonParams"),
    "gluon_apply": ("quantize.quantize_apply_gluon", "quantize_apply_gluon_kernel", GLUON_APPLY_PARAMS,
                    "QuantizeApplyGluonParams"),
}

# The reduce stage's widest row (the largest head dim's mean) and its loop chunk.
REDUCE_WIDTH = 256
REDUCE_CHUNK = 1024

_TRITON_TYPE = {"bf16": "*bf16", "f16": "*fp16", "e4m3": "*fp8e4nv", "i8": "*i8"}


def kernel_of(c: QuantizeConfig):
    key = f"{c.family}_{c.stage}"
    if key not in KERNELS:
        raise ValueError(f"{name_of(c)}: no {key} kernel for {NAME}")
    return KERNELS[key]


# Registers per SM on sm_90 (the persistent apply's register cap is derived from it).
SM90_REGISTERS = 65536


# The Gluon apply's ring of input blocks and its output blocks, and the shared memory an sm_90 SM offers its CTAs
# (228 KiB, 1 KiB of it reserved per resident CTA; the kernel's mbarriers and reduction scratch take under 256 bytes
# more).
GLUON_APPLY_STAGES = 3
GLUON_APPLY_OUT_BUFFERS = 2
SM90_SHARED_PER_SM = 233472
GLUON_APPLY_CTA_OVERHEAD = 1024 + 256


def gluon_apply_ring(block_s):
    """(NUM_STAGES, OUT_BUFFERS) of the Gluon apply: 3 and 2 for 64-token blocks; 2 and 1 for 128-token ones
    (block_pair), whose blocks are twice the bytes: at D=128 that keeps two programs an SM (112 KiB each; 3 and 2
    would take 160 KiB, one program) with more input bytes in flight per SM than the 64-token apply (128 KiB against
    96); at D=64 four programs (48 KiB each, the cap; 3 and 2 would fit three), 128 KiB in flight against 96. Chosen
    by these counts, not timed against other rings (the next check: bench_quantize_instances.py's int8_k_pair)."""
    return (GLUON_APPLY_STAGES, GLUON_APPLY_OUT_BUFFERS) if block_s == DESCALE_BLOCK else (2, 1)


def gluon_apply_programs_per_sm(head_dim, stages=None, out_buffers=None, most=4, block_s=DESCALE_BLOCK):
    """Programs of the Gluon apply an SM holds by shared memory (64-token blocks: D=128 2, D=64 4; 128-token
    blocks: D=128 2, D=64 4); its persistent grid."""
    ring_stages, ring_out = gluon_apply_ring(block_s)
    per_cta = (gluon_apply_buffer_bytes(head_dim, ring_stages if stages is None else stages,
                                        ring_out if out_buffers is None else out_buffers, block_s)
               + GLUON_APPLY_CTA_OVERHEAD)
    return max(1, min(most, SM90_SHARED_PER_SM // per_cta))


def apply_programs_per_sm(c: QuantizeConfig):
    """The apply's persistent grid, programs per SM (0: one program per 64-token block). The Gluon apply is
    persistent (as many programs an SM as its shared memory lets reside); the Triton apply's PERSISTENT switch was
    measured and not adopted (docs/perf/NOTES.md, 2026-12-05): 0."""
    if c.family == "gluon":
        return gluon_apply_programs_per_sm(c.head_dim, block_s=c.block_s)
    return 0


def compile_options(c: QuantizeConfig):
    """A persistent Triton apply's register cap: as many registers as let apply_programs_per_sm(c) programs share an
    SM (ptxas at D=128: 192 registers without it, two programs; 166 under 168, three, no spill). The Gluon apply's
    registers (about 125 at D=128, 65 at D=64) leave room for the programs its shared memory admits: no cap."""
    per_sm = apply_programs_per_sm(c) if c.stage == "apply" and c.family == "triton" else 0
    if not per_sm:
        return {}
    cap = SM90_REGISTERS // (per_sm * 32 * c.warps) // 8 * 8
    return {"maxnreg": min(cap, 255)}


def compile_spec(c: QuantizeConfig):
    _, _, params, _ = kernel_of(c)
    if c.stage == "reduce":
        types = {"Partial": "*fp32", "Out": "*fp32"}
        constexprs = {"WIDTH": REDUCE_WIDTH, "CHUNK": REDUCE_CHUNK}
    elif c.stage == "rotation":
        types = {"Rotation": _TRITON_TYPE[c.in_dtype]}
        constexprs = {"WIDTH": ROTATION_TABLE_MAX_HEAD_DIM, "ROWS": 16}
    elif c.family == "gluon":
        if not (c.stage == "apply" and not c.key_permuted and c.head_dim in (64, 128) and c.warps == 4 and
                (c.block_s == DESCALE_BLOCK or (c.block_s == 2 * DESCALE_BLOCK and c.out_dtype == "i8"))):
            raise ValueError(f"{name_of(c)}: the Gluon quantize is an apply to [b, s, h, d] (no kperm), head_dim 64 or "
                             f"128, blocks of {DESCALE_BLOCK} tokens (or {2 * DESCALE_BLOCK} for int8 block_pair), "
                             "4 warps")
        stages, out_buffers = gluon_apply_ring(c.block_s)
        types = {"x_desc": gluon_tensordesc(_TRITON_TYPE[c.in_dtype][1:], [1, c.block_s, 1, c.head_dim], 128),
                 "out_desc": gluon_tensordesc(_TRITON_TYPE[c.out_dtype][1:], [1, c.block_s, 1, c.head_dim],
                                              min(128, c.head_dim)),
                 "Descale": "*fp32", "Mean": "*fp32", "Rotation": _TRITON_TYPE[c.in_dtype]}
        constexprs = {"HEAD_DIM": c.head_dim, "BLOCK_S": c.block_s, "OUT_INT8": c.out_dtype == "i8",
                      "NUM_STAGES": stages, "OUT_BUFFERS": out_buffers}
        return params, types, constexprs, c.warps, 1  # the ring's depth is NUM_STAGES; no Triton pipelining
    elif c.stage == "stats":
        types = {"X": _TRITON_TYPE[c.in_dtype], "Mean": "*fp32", "Rotation": _TRITON_TYPE[c.in_dtype],
                 "PartialSum": "*fp32", "PartialAmax": "*fp32"}
        constexprs = {"HEAD_DIM": c.head_dim, "BLOCK_S": c.block_s, "HEADS_FASTEST": False}
    else:
        if c.key_permuted and c.block_s % 32:
            raise ValueError(f"{name_of(c)}: kperm needs whole 32-key blocks")
        # 128-token blocks: the block_pair granularity (one descale per 128 tokens, written to both 64-token entries:
        # the kpair attention instances read one per 128-key tile), [b, s, h, d] output only.
        paired = c.block_s == 2 * DESCALE_BLOCK
        if c.block_s != DESCALE_BLOCK and not (paired and not c.key_permuted):
            raise ValueError(f"{name_of(c)}: apply blocks are {DESCALE_BLOCK} tokens, or {2 * DESCALE_BLOCK} for "
                             "block_pair descales ([b, s, h, d] output, no kperm)")
        types = {"X": _TRITON_TYPE[c.in_dtype], "Out": _TRITON_TYPE[c.out_dtype], "Descale": "*fp32",
                 "Mean": "*fp32", "Rotation": _TRITON_TYPE[c.in_dtype]}
        constexprs = {"HEAD_DIM": c.head_dim, "BLOCK_S": c.block_s, "OUT_INT8": c.out_dtype == "i8",
                      "KEY_PERMUTED": c.key_permuted, "HEADS_FASTEST": False,
                      "PERSISTENT": apply_programs_per_sm(c) > 0, "PAIRED": paired}
    return params, types, constexprs, c.warps, 1


def check_sass(c, mma_counts, sass="", ttgir=""):
    """The Gluon apply rotates with one bf16/f16 wgmma chain a 64-row block (HEAD_DIM / 16 HGMMA, twice for a
    128-token block); the Triton stages are
    memory-bound and their small MMA is not a throughput path."""
    expected = c.block_s // DESCALE_BLOCK * c.head_dim // 16
    if c.family == "gluon" and mma_counts.get("HGMMA", 0) != expected:
        raise RuntimeError(f"{name_of(c)}: expected {expected} HGMMA (the rotation) in SASS ({mma_counts})")


def requires(c: QuantizeConfig):
    """Every apply instance may need the statistics of its input (smoothing, per-head/per-tensor descales) and,
    up to ROTATION_TABLE_MAX_HEAD_DIM, the rotation matrix in its input type."""
    if c.stage != "apply":
        return []
    # The statistics stages walk 64-token blocks whatever the apply's (src/quant/quantize.cpp: blocks_of).
    needed = [QuantizeConfig("stats", c.in_dtype, "", DESCALE_BLOCK, c.head_dim, 8 if c.head_dim == 256 else 4),
              QuantizeConfig("reduce", "f32", "", 0, 0, 4)]
    if c.head_dim <= ROTATION_TABLE_MAX_HEAD_DIM:
        needed.append(QuantizeConfig("rotation", c.in_dtype, "", 0, 0, 4))
    return needed


CPP_HEADER = "quant/quantize_kernel_config.h"
_CPP_STAGE = {"apply": "kApply", "stats": "kStats", "reduce": "kReduce", "rotation": "kRotation"}
_CPP_TYPE = {"bf16": "DataType::kBF16", "f16": "DataType::kF16", "f32": "DataType::kF32", "e4m3": "DataType::kE4M3",
             "i8": "DataType::kI8", "": "DataType::kF32"}


def cpp_config(c: QuantizeConfig):
    return ("quant::detail::QuantizeKernelConfig",
            f"{{quant::detail::QuantizeStage::{_CPP_STAGE[c.stage]}, {_CPP_TYPE[c.in_dtype]}, "
            f"{_CPP_TYPE[c.out_dtype]}, {c.block_s}, {c.head_dim}, {c.warps}, {'true' if c.key_permuted else 'false'}, "
            f"{REDUCE_WIDTH}, {apply_programs_per_sm(c) if c.stage == 'apply' else 0}}}")
