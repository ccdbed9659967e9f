"""Operation fmha_fwd: attention forward. Configuration, procedural name, kernel parameters, C++ record.

    fp8attn_sm90_fmha_fwd_<qk>_<v>_<acc>_<out>_<BM>x<BN>x<D>_w<warps>_s<stages>_<layout>_<mask>[_ws][_evenn][_vnat][_vkperm][_bdesc][_kpair][_lsum][_softcap][_varlen][_<family>]

    layout  "strided": any (batch, seq, head) strides with head_dim contiguous (BSHD and BHSD alike)
    mask    "causal" or "full"
    ws      warp-specialized main loop (a producer partition issues the TMA loads)
    evenn   no masked tail: only valid when seqlen_k % BN == 0 and not causal
    vnat    FP8 only: reads V in its natural (head_dim-contiguous) layout and transposes each tile on chip,
            instead of reading the V^T that a separate transpose kernel writes (one launch per call, not two);
            on the gluon kernel (dense e4m3, D=64/128) the producer warpgroup writes a key-permuted V^T ring
    vkperm  FP8 gluon only: reads the key-permuted V^T that the kperm transpose writes, so that P goes to the
            P.V MMA without a register shuffle; cannot read a caller's sequence-contiguous V directly
    bdesc   per-block q and k descales (one per 64 tokens, the quantize operation's blocks) applied in the tile;
            every "i8" (INT8 Q.K^T, e4m3 V) instance has them
    kpair   gluon i8 with 128-key tiles: the k descales come in equal pairs (one scale per 128 keys, as the int8_qk
            mode's quantization writes K), so a tile reads one and its softmax keeps no per-block statistics
            (the same output bits on such descales; +2.7-5% at D=128 S=8192 on the H200, 2026-12-06). Run only
            when Arguments::k_descale_paired says the pairs are equal
    lsum    gluon only: each tile's row sums of P taken from the tensor cores as P (rounded to e4m3, what P.V
            multiplies) times a ones operand (the kernel's SUM_ON_TC), instead of float32 sums of the unrounded P:
            O's normalization then matches the P that P.V used (e4m3 rounding loses 2e-4 to 8e-4 of the mass on
            average); 1-5% slower on the H200 (2026-12-03), an accuracy variant, not a default
    softcap logit soft-capping cap * tanh(s / cap) (Gemma 2); sliding windows need no variant (runtime)
    varlen  gluon only (head_dim <= 128): packed sequences (cu_seqlens) only. The gluon instances without it
            refuse them, and cost nothing for them: the path's per-tile setup and masked O store took 1-5% off
            the dense suite when every instance carried it (H200, 2026-12-02). Every Triton instance but ws/evenn
            takes cu_seqlens at run time (no variant).
    family  omitted for "triton"; otherwise the family that compiles it (e.g. "gluon")
"""

import re
from dataclasses import dataclass

from params import Param

NAME = "fmha_fwd"
CPP_KIND = "kFmhaFwd"  # library::OperationKind
ARCH = "sm90"
TYPES = ("e4m3", "e5m2", "bf16", "f16", "f32", "i8")
FAMILIES = ("triton", "gluon")
TRITON_TYPES = {"e4m3": "fp8e4nv", "e5m2": "fp8e5", "bf16": "bf16", "f16": "fp16", "f32": "fp32", "i8": "i8"}
CPP_TYPES = {"e4m3": "kE4M3", "e5m2": "kE5M2", "bf16": "kBF16", "f16": "kF16", "f32": "kF32", "i8": "kI8"}


@dataclass(frozen=True)
class FmhaConfig:
    qk_type: str
    v_type: str
    acc_type: str
    out_type: str
    block_m: int
    block_n: int
    head_dim: int
    warps: int
    stages: int
    causal: bool
    warp_specialized: bool = False
    even_n: bool = False
    layout: str = "strided"
    family: str = "triton"
    v_natural: bool = False
    v_key_permuted: bool = False
    block_descale: bool = False
    softcap: bool = False
    varlen: bool = False
    row_sum_mma: bool = False  # "lsum"
    k_descale_paired: bool = False  # "kpair"

    operation = NAME

    @property
    def is_fp8(self):
        return self.qk_type in ("e4m3", "e5m2")

    @property
    def is_int8_qk(self):
        return self.qk_type == "i8"

    @property
    def k_descale_unit_stride(self):
        """The Gluon INT8 instances read the k descales of consecutive 64-key blocks at block stride 1 (a
        compile-time constant: the address arithmetic of a run-time stride cost ~2% of the loop's instructions and
        spills at D=64/128); the host refuses them other strides (src/fmha/fmha_heuristic.cpp), which the Triton
        INT8 instances still take. Not the 192-row causal one at D=128: with the constant it ran 2% slower at
        S=8192 and 4% at 16384 (H200, 2026-12-04, bench_int8_instances.py, two rounds against the run-time
        stride), where every other Gluon INT8 instance gained 0-6%."""
        return (self.family == "gluon" and self.is_int8_qk and self.block_descale
                and not (self.head_dim == 128 and self.block_m == 192 and self.causal))

    @property
    def reads_v_transposed(self):
        """FP8 wgmma wants V sequence-contiguous: read V^T, unless the kernel transposes V tiles itself."""
        return self.v_type in ("e4m3", "e5m2") and not self.v_natural


# ---- Name ------------------------------------------------------------------------------------------------

_RE = re.compile(
    rf"fp8attn_{ARCH}_fmha_fwd_(?P<qk>[a-z0-9]+)_(?P<v>[a-z0-9]+)_(?P<acc>[a-z0-9]+)_(?P<out>[a-z0-9]+)_"
    r"(?P<bm>\d+)x(?P<bn>\d+)x(?P<d>\d+)_w(?P<w>\d+)_s(?P<s>\d+)_(?P<layout>strided)_(?P<mask>causal|full)"
    r"(?P<ws>_ws)?(?P<evenn>_evenn)?(?P<vnat>_vnat)?(?P<vkperm>_vkperm)?(?P<bdesc>_bdesc)?(?P<kpair>_kpair)?(?P<lsum>_lsum)?(?P<softcap>_softcap)?(?P<varlen>_varlen)?"
    r"(?:_(?P<family>gluon))?")


def name_of(c: FmhaConfig) -> str:
    name = (f"fp8attn_{ARCH}_fmha_fwd_{c.qk_type}_{c.v_type}_{c.acc_type}_{c.out_type}_"
            f"{c.block_m}x{c.block_n}x{c.head_dim}_w{c.warps}_s{c.stages}_{c.layout}_"
            f"{'causal' if c.causal else 'full'}")
    if c.warp_specialized:
        name += "_ws"
    if c.even_n:
        name += "_evenn"
    if c.v_natural:
        name += "_vnat"
    if c.v_key_permuted:
        name += "_vkperm"
    if c.block_descale:
        name += "_bdesc"
    if c.k_descale_paired:
        name += "_kpair"
    if c.row_sum_mma:
        name += "_lsum"
    if c.softcap:
        name += "_softcap"
    if c.varlen:
        name += "_varlen"
    if c.family != "triton":
        name += f"_{c.family}"
    return name


def parse(name: str):
    """The FmhaConfig of an attention name, None if it is not one; ValueError for an unknown type."""
    m = _RE.fullmatch(name)
    if not m:
        return None
    for field in ("qk", "v", "acc", "out"):
        if m[field] not in TYPES:
            raise ValueError(f"kernel name {name!r}: unknown type {m[field]!r}")
    return FmhaConfig(m["qk"], m["v"], m["acc"], m["out"], int(m["bm"]), int(m["bn"]), int(m["d"]),
                      int(m["w"]), int(m["s"]), m["mask"] == "causal", bool(m["ws"]), bool(m["evenn"]),
                      m["layout"], m["family"] or "triton", bool(m["vnat"]), bool(m["vkperm"]), bool(m["bdesc"]),
                      bool(m["softcap"]), bool(m["varlen"]), bool(m["lsum"]), bool(m["kpair"]))


# ---- Kernel parameters (the one list: signature, PTX check and C++ packing all come from it) --------------

def _strides(prefix, names):
    return [Param(f"stride_{prefix}{n}", "i64", divisible_by_16=True) for n in names]


# The scalars every attention kernel takes, in this order, after its operands (the runtime fills them once
# for both families: fill_common in src/fmha/fmha_params.cpp).
SCALAR_PARAMS = [
    Param("LSE", "ptr", True),
    Param("q_descale", "ptr"), Param("k_descale", "ptr"), Param("v_descale", "ptr"),
    Param("q_descale_stride_b", "i64"), Param("q_descale_stride_h", "i64"),
    Param("k_descale_stride_b", "i64"), Param("k_descale_stride_h", "i64"),
    Param("v_descale_stride_b", "i64"), Param("v_descale_stride_h", "i64"),
    # q's descale per query head (0 in the FlashAttention-3 convention, which indexes it by kv head), and the
    # per-block strides (per 64 query rows / keys; 0 unless the instance is "bdesc").
    Param("q_descale_stride_hq", "i64"), Param("q_descale_stride_blk", "i64"), Param("k_descale_stride_blk", "i64"),
    # Sliding window (-1: unlimited on that side) and soft-cap (applied by "softcap" instances only).
    Param("window_left", "i32"), Param("window_right", "i32"), Param("softcap", "f32"),
    Param("softmax_scale", "f32"),
    Param("seqlen_q", "i32"), Param("seqlen_k", "i32"), Param("heads_q", "i32"), Param("group_size", "i32"),
    Param("write_lse", "i32"),
]

TRITON_PARAMS = [
    Param("Q", "ptr", True), Param("K", "ptr", True), Param("V", "ptr", True), Param("O", "ptr", True),
    *SCALAR_PARAMS,
    *_strides("q", "bhs"), *_strides("k", "bhs"), *_strides("v", "bhs"), *_strides("o", "bhs"),
    # Varlen (packed sequences): int32 [batch + 1] offsets of each sequence's query rows and keys; varlen = 0
    # ignores them (the dense layout).
    Param("cu_seqlens_q", "ptr"), Param("cu_seqlens_k", "ptr"), Param("varlen", "i32"),
    Param("total_q", "i32"), Param("total_k", "i32"),
]

# The Gluon kernel (kernels/fmha_fwd/fmha_fwd_gluon.py) takes host TMA descriptors for Q, K, V^T and O (4-D,
# so that TMA clips at each sequence's end) instead of pointers and strides, then the same scalars.
GLUON_PARAMS = [
    Param("q_desc", "tensordesc", rank=4), Param("k_desc", "tensordesc", rank=4),
    Param("vt_desc", "tensordesc", rank=4), Param("o_desc", "tensordesc", rank=4),
    *SCALAR_PARAMS,
    # The kernel is persistent (a grid of at most one program per SM walks all query blocks), so it needs the
    # batch to count them.
    Param("batch", "i32"),
    # Varlen (packed sequences; varlen = 0: dense): O's pointer and row / head strides (elements) for the rows of a
    # sequence's last block, stored from registers, masked to the sequence; the offsets and totals as the Triton
    # kernel's. The descriptors then cover the packed tensors with a batch dimension of 1.
    Param("O", "ptr", True), Param("stride_os", "i64", divisible_by_16=True),
    Param("stride_oh", "i64", divisible_by_16=True),
    Param("cu_seqlens_q", "ptr"), Param("cu_seqlens_k", "ptr"), Param("varlen", "i32"),
    Param("total_q", "i32"), Param("total_k", "i32"),
    # BF16 varlen: V's pointer and row / head strides (elements), for the descriptor of each sequence's own rows
    # that the kernel makes on the device (global scratch); the FP8 instances ignore them.
    Param("V", "ptr", True), Param("stride_vs", "i64", divisible_by_16=True),
    Param("stride_vh", "i64", divisible_by_16=True),
]

# kernel key (the family, plus a variant where one family has several kernels) -> (kernel module, function,
# params, C++ params struct)
KERNELS = {
    "triton": ("fmha_fwd.fmha_fwd_triton", "fmha_fwd_kernel", TRITON_PARAMS, "FmhaFwdTritonParams"),
    "gluon": ("fmha_fwd.fmha_fwd_gluon", "fmha_fwd_gluon_kernel", GLUON_PARAMS, "FmhaFwdGluonParams"),
}
# The Gluon kernel of one warpgroup a CTA (64-row blocks; kernels/fmha_fwd/fmha_fwd_gluon_solo.py): the library
# kernel's parameters, several CTAs an SM (gluon_programs_per_sm).
GLUON_SOLO = ("fmha_fwd.fmha_fwd_gluon_solo", "fmha_fwd_gluon_kernel", GLUON_PARAMS, "FmhaFwdGluonParams")


def single_warpgroup(c: FmhaConfig):
    """Whether the instance runs the single-warpgroup Gluon kernel: a Gluon name with 64-row blocks (one warpgroup's
    rows; the warp-specialized kernel's blocks are two to four of them)."""
    return c.family == "gluon" and c.block_m == GLUON_WG_M


def kernel_of(c: FmhaConfig):
    if c.family not in KERNELS:
        raise ValueError(f"{name_of(c)}: no {c.family} kernel for {NAME}")
    return GLUON_SOLO if single_warpgroup(c) else KERNELS[c.family]


# Registers a thread of the single-warpgroup kernel: four CTAs of 128 threads fill an SM's 65536.
SOLO_REGS = 128


def gluon_programs_per_sm(c: FmhaConfig):
    """Programs of a Gluon instance an SM holds, the persistent grid's multiple of the SM count (the C++ record's
    programs_per_sm): one for the warp-specialized kernel (its consumers' registers leave room for one CTA), four for
    the single-warpgroup kernel (128 registers a thread, SOLO_REGS; 45 KB of shared memory each)."""
    return 4 if single_warpgroup(c) else 1


def gluon_tensordesc(dtype, block, swizzle=128):
    """Gluon's signature string of a host descriptor: element type, block and the shared layout its TMA
    writes (NVMMASharedLayout of the descriptor's own rank; the kernel reshapes the block to 2-D for wgmma)."""
    bits = 8 if dtype.startswith("fp8") or dtype == "i8" else {"bf16": 16, "fp16": 16, "fp32": 32}[dtype]
    return (f"tensordesc<{dtype}[{', '.join(str(b) for b in block)}],NVMMASharedLayout(swizzle_byte_width={swizzle}, "
            f"element_bitwidth={bits}, rank={len(block)}, transposed=False, fp4_padded=False, cga_layout=[])>")


# Rows of the query block per consumer warpgroup of the Gluon kernel (one wgmma M extent over 4 warps).
GLUON_WG_M = 64


def gluon_pv_pipelined(head_dim, causal):
    """Whether the Gluon FP8 kernel runs P.V at D=256 in eight [64, 32] column parts, two in flight (PV_PIPELINED),
    instead of four [64, 64] parts waited for one at a time; bench/sweep_gluon.py uses the same. With 64-key tiles
    it paid for full attention only (H200, 2026-12-01: S=2048 787 -> 850, S=8192 832 -> 886 TFLOP/s; causal
    715 -> 703 and 853 -> 797). With the 128-key tiles FP8 runs at D=256 since 2026-12-02 it is needed for both
    masks: the four-part causal schedule spills 13 registers a tile in the loop, the pipelined one none (ptxas),
    and the 128-key pipelined tile ran 1-19% faster than the 64-key library at every D=256 point (sweep).
    D <= 128 has no column parts."""
    del causal  # kept in the signature: the choice has depended on the mask, and may again
    return head_dim == 256


def gluon_int8_inf_selects(head_dim, block_m, block_n, causal, int8, lsum=False):
    """Whether the INT8 softmax also selects -inf for a 64-key half with no visible key (INT8_INF_SELECTS), which the
    scale's FLT_MIN clamp already gives (the same output bits; gluon_softmax._softmax_tile_int8). Without the
    selects the steady-state loop issues 8 fewer instructions a tile (4 FSETP, 4 FSEL: 751 -> 743 per warpgroup).
    H100, 2026-12-05 (int8_qk through attention_fused at D=64, one build with each, alternated twice, outputs
    identical by sha256; no tuning row matches an H100, so the 128-row instances ran): the 128-row full instance
    -3.1% / -4.5% end to end at S=2048 / 8192, the 128-row causal one +1.2% / +0.5%. Dropped in the first only;
    every instance not measured (192-row blocks, 256-key tiles, lsum, D=128) keeps them."""
    return not (int8 and head_dim == 64 and block_m == 2 * GLUON_WG_M and block_n == 128 and not causal
                and not lsum)


def int8_loop_switches(c) -> bool:
    """INT8_ROWMAX_LOCAL and RING_UNSIGNED (both kernels take them): on where measured to help. D=64: the
    single-warpgroup and 192-row instances (H100, 2026-12-06, two runs each); off in the 128-row one (its two runs
    were even at best). D=128 (H100, 2026-12-06, two JIT sweeps in opposite orders, docs/perf/NOTES.md): the 128-row
    instances (-0.2..+4.2%, 12 of 14 points up) and the 192-row causal one (+0.9..+4.0%, all six points up); off in
    the 192-row full one (-3.5 / +0.5% at S=2048, +0.2 / -3.9% at S=8192: the runs disagree in sign)."""
    if not (c.is_int8_qk and c.block_descale and c.block_n == 128 and not c.row_sum_mma and not c.varlen):
        return False
    if c.head_dim == 64:
        return c.block_m in (GLUON_WG_M, 3 * GLUON_WG_M)
    if c.head_dim == 128:
        return c.block_m == 2 * GLUON_WG_M or (c.block_m == 3 * GLUON_WG_M and c.causal)
    return False


def gluon_tile_info_handoff(head_dim, block_m, block_n, causal, varlen=False):
    """Whether the Gluon kernel's producer hands each query block's place and key bounds to the consumers through
    shared memory (TILE_INFO_HANDOFF) instead of every consumer warpgroup computing them again; bench/sweep_gluon.py
    uses the same. ptxas, 2026-12-04: the consumers' per-tile code shrinks 300-700 instructions (spills fall at
    D=128 causal, varlen and D=256), but the values arrive in registers of every thread where the computed ones
    sat in uniform registers, and where the key loop was already short of registers it spills more: three
    consumers (192-row blocks: 4 -> 12-19 spill instructions in the loop) and 256-key tiles at D=64 (0 -> 3-6).
    Those keep the computed bounds.
    H200, 2026-12-04 (bench/sweep_gluon.py, hand-off on / off, D=128 and 256): causal +2.0-3.0% at S <= 2048 and
    +2.9-3.0% at D=256, -0.9 / -1.8% at S = 8k / 16k; full attention -0.7 to -1.9% except D=128 S >= 8k (+0.3 /
    +1.3%). On for causal and packed-sequence (varlen) instances, where a block's bounds take the most scalar code
    (varlen 32 x 1024 causal: 0.917 -> 0.966 of the dense call); off for full attention. The suite (bench_vs_cudnn,
    same day) showed the dense causal 256-key instance (128x256x128) 8-10% slower with it at S = 8k / 16k and
    GQA, where the sweep's 128-key tiles lost 1-2%: off for dense 256-key tiles too. The varlen 256-key instances
    with it on / off (bench_varlen.py, varlen / dense, same machine, 2026-12-04): 2 x 16384 causal 0.952 / 0.971,
    full 0.964 / 0.967, 0.956 / 0.962, 0.951 / 0.958 (8 x 4096, 2 x 16384, 32 x 1024): off for every 256-key tile."""
    if not (causal or varlen) or block_n == 256:
        return False
    return block_m == 2 * GLUON_WG_M


def gluon_q_in_regs(head_dim, block_m, block_n, causal, varlen, e4m3_kperm, bf16=False):
    """Whether the Gluon kernel's consumers load their 64 rows of Q into registers once per query block, as the A
    operand of every S product (HEAD_DIM / 8 registers a thread in e4m3, HEAD_DIM / 4 in bf16), and hand the Q buffer
    back at the block's start (Q_IN_REGS): S reads only K from shared memory and the producer loads the next block's
    Q under the whole block instead of after its last S. e4m3_kperm: e4m3 Q and K with fp8attn's key-permuted V^T
    (not INT8, BF16, vnat); bf16: the BF16 instances (V as given). bench/sweep_gluon.py uses the same.
    H200, 2026-12-04 (bench/sweep_gluon.py, two calls, on / off adjacent, the order reversed in the second;
    D=128, 256-key tiles, V^T given, ms): full attention S=512 0.3965 / 0.4044, 0.3970 / 0.4056 (+2%), 1k
    +0.5-0.9%, 2k 1.1702 / 1.1867, 1.1680 / 1.1822 (+1.2-1.4%), 4k +1.3%, 8k 4.3974 / 4.5483, 4.3833 / 4.4757
    (+2-3%), 16k 8.7674 / 9.0141, 8.7227 / 8.9023 (+2-3%): on for the dense e4m3 full-attention 256-key instance.
    Off elsewhere in e4m3: causal 256-key even to -1% (S=8k, 16k; S=32k +1%), D=64 7-10% slower, the vnat instance
    (TRANSPOSE_V) 1-6% slower; ptxas spills 108-204 bytes with it on the 128-key D=128 and the D=256 tiles (0 off).
    BF16 (H200, 2026-12-04, bench/sweep_gluon.py --bf16, on / off, two runs each, ms): D=64 full S=2048 2.4095,
    2.4050 / 2.5680, 2.5715 (+6.5%), 8192 9.2000, 9.2677 / 9.9211, 9.9915 (+7.5%); D=64 causal 2048 +3.5%, 8192
    +4%; D=128 causal 1024 +3%, 4096 +2%, 16384 +0.6%; D=128 full 1-2% slower (4096 3.5664, 3.5729 / 3.5087,
    3.5036): on for the dense BF16 instances at D=64 and for causal ones at D=128 (no spill; D=256 spills 280
    bytes)."""
    two_consumers = block_m == 2 * GLUON_WG_M
    if bf16:
        return two_consumers and not varlen and block_n == 128 and (head_dim == 64 or (head_dim == 128 and causal))
    return e4m3_kperm and not causal and not varlen and head_dim == 128 and block_n == 256 and two_consumers


def gluon_half_last(head_dim, block_m, block_n, causal, varlen, e4m3_kperm):
    """Whether a consumer warpgroup computes its block's last key tile over the tile's lower half only when no row
    of its 64 sees the upper half (HALF_LAST: with 256-key tiles the causal diagonal tile of every block that starts
    on a multiple of 256, and half the blocks of a sliding window). The other 128 keys cost no S, no exponentials
    and no P.V. e4m3_kperm as for gluon_q_in_regs. bench/sweep_gluon.py uses the same.
    H200, 2026-12-04 (bench/sweep_gluon.py, two calls, on / off, D=128 causal 256-key, ms): S=2048 0.7108,
    0.7426, 0.7998, 0.7351 / 0.8103, 0.8045, 0.8208, 0.8070 (and against the 128-key tile the bucket ran, 0.7567,
    0.7492, 0.7632, 0.7814: +2%); S=4096 1.2730, 1.2709, 1.2808, 1.2800 / 1.3427, 1.3484, 1.3592, 1.3608 (+6%,
    also 5.5% faster than the 128-key tile); S=8192 2.4045, 2.4140 / 2.4816, 2.6569 (+3%); S=16384 4.5817, 4.6074
    / 4.6365, 4.9672; S=32768 +0.5%; D=64 S=8192 3.6315, 3.6412, 3.6373, 3.6237 / 3.7305, 3.7206, 3.7334, 3.7249
    (+2.6%); the 4k sliding window at S=32768 2.3550, 2.3606 / 2.3435 (-0.5%). On for the dense e4m3 causal
    instances with 256-key tiles. Not on the 128-key tiles (the first warpgroup's half diagonal tile, with
    HALF_FIRST: D=128 S=4096 1.3379, 1.4283 / 1.3479, 1.3477; D=64 S=2048 even); HALF_FIRST (a sliding window's
    first tile over its upper half) stays off: the window 2.4226, 2.4083 with both against 2.3684, 2.3614."""
    return e4m3_kperm and causal and not varlen and head_dim in (64, 128) and block_n == 256 and \
        block_m == 2 * GLUON_WG_M


# Shared memory a CTA may use on sm_90 (227 KB).
SM90_SHARED_BYTES = 232448


def gluon_raw_stages(c: FmhaConfig):
    """Raw V slots of a vnat Gluon instance (TRANSPOSE_V): two when shared memory holds them beside Q, the K and
    V^T ring and the two O buffers (the next tile's load then overlaps this tile's transpose), else one
    (128x256x128: 176 KB + 2 x 32 KB would pass the 227 KB)."""
    ring = c.block_m * c.head_dim + 2 * c.stages * c.block_n * c.head_dim + c.block_m * c.head_dim * 2
    raw = c.block_n * c.head_dim
    return 2 if ring + 2 * raw + 1024 <= SM90_SHARED_BYTES else 1


def _gluon_types(c: FmhaConfig, bf16, transpose_v):
    """The Gluon kernels' pointer and descriptor types (both kernels take the same parameters)."""
    io, out = TRITON_TYPES[c.qk_type], TRITON_TYPES[c.out_type]
    # The swizzle spans the box's innermost row (64 bytes for e4m3 rows of 64 elements), at most 128 bytes.
    row_swizzle = min(128, c.head_dim * (2 if bf16 else 1))  # bytes per row of head_dim elements
    return {
        # Q, O: [batch, seqlen_q, heads_q, head_dim]; K: [batch, seqlen_k, heads_kv, head_dim];
        # V^T: [batch, heads_kv, head_dim, seqlen_k] (sequence contiguous).
        # Other than 128-row blocks: Q as one 64-row box per warpgroup (a TMA box's extents are powers of two).
        "q_desc": gluon_tensordesc(io, [1, c.block_m if c.block_m == 2 * GLUON_WG_M else GLUON_WG_M, 1, c.head_dim],
                                   row_swizzle),
        "k_desc": gluon_tensordesc(io, [1, c.block_n, 1, c.head_dim], row_swizzle),
        # FP8: V^T [batch, heads_kv, head_dim, seqlen_k]; BF16 and FP8 vnat: V itself [batch, seqlen_k, heads_kv,
        # head_dim].
        "vt_desc": (gluon_tensordesc(TRITON_TYPES[c.v_type], [1, c.block_n, 1, c.head_dim], row_swizzle)
                    if bf16 or transpose_v else
                    gluon_tensordesc(TRITON_TYPES[c.v_type], [1, 1, c.head_dim, c.block_n], min(128, c.block_n))),
        # Each consumer warpgroup stores its own 64 rows.
        "o_desc": gluon_tensordesc(out, [1, GLUON_WG_M, 1, c.head_dim], min(128, 2 * c.head_dim)),
        "LSE": "*fp32", "q_descale": "*fp32", "k_descale": "*fp32", "v_descale": "*fp32",
        "O": f"*{out}", "cu_seqlens_q": "*i32", "cu_seqlens_k": "*i32", "V": f"*{TRITON_TYPES[c.v_type]}",
    }


def _gluon_solo_compile_spec(c: FmhaConfig):
    """The single-warpgroup kernel (kernels/fmha_fwd/fmha_fwd_gluon_solo.py): INT8 Q.K^T with per-block descales at
    head_dim 64, the key-permuted V^T, 128-key tiles and a ring of 2, dense: where it was measured (H200 and H100,
    2026-12-05, bench/sweep_gluon.py --int8: +4% at S=2048 full over the 192-row instance, +8% / +5% at causal S=2048
    / 8192 over the 128-row one; at D=128 it spills at 128 registers, and FP8 keeps its 256-key tiles)."""
    _, _, params, _ = kernel_of(c)
    if not (c.is_int8_qk and c.block_descale and c.v_type == "e4m3" and c.v_key_permuted and c.head_dim == 64
            and c.block_n == 128 and c.stages == 2 and c.warps == 4 and not c.varlen and not c.row_sum_mma
            and c.out_type == "bf16" and c.acc_type == "f32" and not c.warp_specialized and not c.even_n
            and not c.softcap and not c.v_natural):
        raise ValueError(f"{name_of(c)}: 64-row blocks (the single-warpgroup kernel) are i8 Q.K^T, bdesc, vkperm, "
                         "64x128x64, w4, s2, dense")
    types = _gluon_types(c, bf16=False, transpose_v=False)
    loop_switches = int8_loop_switches(c)
    constexprs = {"HEAD_DIM": c.head_dim, "BLOCK_M": c.block_m, "BLOCK_N": c.block_n, "CAUSAL": c.causal,
                  "NUM_STAGES": c.stages, "KEY_PERMUTED": True, "QK_INT8": True, "BLOCK_DESCALE": True,
                  "INT8_INF_SELECTS": True, "K_DESCALE_UNIT_STRIDE": c.k_descale_unit_stride,
                  # As _gluon_compile_spec's (RING_UNSIGNED: 13 instructions a tile fewer here); on: H100,
                  # 2026-12-06 (bench/sweep_gluon.py --int8, two runs in opposite orders) +1.7% full / +2.2% causal at
                  # S=2048, +2.6% / +1.2% at S=8192, the same error against float64.
                  "INT8_ROWMAX_LOCAL": loop_switches, "RING_UNSIGNED": loop_switches,
                  "K_DESCALE_PAIRED": c.k_descale_paired}
    return params, types, constexprs, c.warps, c.stages


def _gluon_compile_spec(c: FmhaConfig):
    if single_warpgroup(c):
        return _gluon_solo_compile_spec(c)
    _, _, params, _ = kernel_of(c)
    # head_dim 256: e4m3 128-key tiles (shared memory: Q 32 KB, two K and two V^T stages 128 KB, O 64 KB; 64 keys
    # compile too), bf16 64-key tiles (Q 64 KB, K and V stages 128 KB, one O buffer the warpgroups share 32 KB);
    # e4m3 P.V in column parts (the two-level accumulator does not fit the 240 registers a consumer thread gets
    # otherwise; gluon_pv_pipelined).
    int8 = c.qk_type == "i8" and c.block_descale  # INT8 Q.K^T (int32 S, IGMMA) with per-block descales
    bf16 = c.qk_type == "bf16" and c.v_type == "bf16" and not c.block_descale and not c.v_key_permuted
    # "vnat" on the Gluon kernel: e4m3 at D=64 and 128, dense or varlen, V read as the caller gives it (head_dim
    # contiguous) and transposed tile by tile by the producer into a key-permuted V^T ring of its own
    # (TRANSPOSE_V): no transpose launch, at the cost of the producer's issue slots and a raw slot of shared memory
    # per stage. Varlen: a V tile reaching past its sequence's end is loaded through a descriptor of the
    # sequence's own rows, as BF16 varlen does (_sequence_v).
    transpose_v = (c.v_natural and c.qk_type == "e4m3" and c.v_type == "e4m3" and not c.block_descale
                   and not c.v_key_permuted and c.head_dim in (64, 128))
    # 256-key tiles: FP8 with fp8attn's key-permuted V^T or transposed in the kernel at D=64 and 128, dense or varlen
    # (the varlen V^T then aligns each sequence's columns to 256, so no tile reaches the next sequence's; the host's
    # varlen_vt_align); INT8 Q.K^T with the kperm V^T at D=64 (the kernel's SPLIT_S: S as two [64, 128] integer
    # products, four descale blocks per tile; at D=128 ptxas spills 33 registers inside the loop).
    wide_ok = (((c.qk_type == "e4m3" and not c.block_descale) or (int8 and c.v_key_permuted and c.head_dim == 64 and
                                                                     not c.varlen))
               and (c.v_key_permuted or transpose_v))
    # Three consumer warpgroups (192-row blocks, the kernel's NUM_CONSUMERS): dense e4m3 or INT8 Q.K^T, key-permuted
    # V^T, D=64 and 128, 128-key tiles (the registers of 160 a thread hold no wider S).
    three_ok = (c.qk_type in ("e4m3", "i8") and c.v_type == "e4m3" and c.v_key_permuted and not c.varlen
                and c.head_dim in (64, 128) and c.block_n == 128)
    # 64-key tiles: INT8 Q.K^T at D=64 (one k descale block a tile). Four consumer warpgroups (256-row blocks) take
    # only these: S, P, O and the fresh P.V product of a 128-key tile do not fit the 112-120 registers a consumer
    # thread gets there (ptxas: 19 local loads or stores per tile).
    narrow_ok = int8 and c.v_key_permuted and not c.varlen and c.head_dim == 64
    block_m_ok = (c.block_m == 2 * GLUON_WG_M or (c.block_m == 3 * GLUON_WG_M and three_ok)
                  or (c.block_m == 4 * GLUON_WG_M and narrow_ok and c.block_n == 64))
    tile_ok = ((c.head_dim in (64, 128) and (c.block_n == 128 or (c.block_n == 256 and wide_ok)
                                               or (c.block_n == 64 and narrow_ok)))
               or (c.head_dim == 256 and (c.block_n == 64 or (c.block_n == 128 and not bf16)) and not int8))
    supported = ((c.qk_type == "e4m3" and c.v_type == "e4m3" and not c.block_descale) or
                 (int8 and c.v_type == "e4m3") or bf16) and (
                 c.out_type == "bf16" and c.acc_type == "f32"
                 and block_m_ok and tile_ok and c.warps == 4
                 and c.stages in (2, 3) and not c.warp_specialized and not c.even_n
                 and (not c.v_natural or transpose_v) and not c.softcap)
    if c.varlen and not (c.qk_type in ("e4m3", "bf16") and c.head_dim <= 128 and not c.block_descale):
        # At head_dim 256 the path's registers raised the spills (108 -> 132 bytes); per-block descales (INT8
        # Q.K^T) would straddle sequences (the host refuses them).
        raise ValueError(f"{name_of(c)}: varlen is an e4m3 or bf16 variant up to head_dim 128")
    # lsum (SUM_ON_TC): the row-sum MMA rides the S-ahead schedule (_consumer), i.e. S_{j+1}, P_j, O and the fresh
    # P.V product in the 240 registers of a two-consumer warpgroup, dense FP8 or INT8 with the kperm V^T; with
    # three consumers it spills.
    if c.row_sum_mma and not ((c.qk_type == "e4m3" or int8) and c.v_key_permuted and not c.varlen
                              and c.block_m == 2 * GLUON_WG_M and c.head_dim <= 128
                              and c.block_n // 2 + c.block_n // 8 + c.head_dim <= 224
                              and not (int8 and c.block_n == 256)):  # SPLIT_S takes no row-sum MMA
        raise ValueError(f"{name_of(c)}: lsum needs dense e4m3 or i8 vkperm, 128-row blocks, and "
                         "BLOCK_N / 2 + BLOCK_N / 8 + head_dim <= 224 (128x128x64, 128x256x64 e4m3, 128x128x128)")
    if not supported:
        raise ValueError(f"{name_of(c)}: the gluon kernel is e4m3 (or i8 Q/K with bdesc, or bf16 with V as given) "
                         "-> bf16, 128x128x64, 128x128x128 (128x256x64, 128x256x128: dense e4m3 vkperm; "
                         "128x256x64: i8 vkperm), 128x128x256 (e4m3) or 128x64x256, 192x128x64/128 (three "
                         "consumers), 256x64x64 and 128x64x64 (i8 vkperm), 64x128x64 (i8 vkperm bdesc, one warpgroup), "
                         "w4 (two to four consumer warpgroups of 64 rows + a producer "
                         "warp), 2 or 3 stages, "
                         "FP8 V^T (optionally vkperm; vnat: dense e4m3 at head_dim 64/128), no ws/evenn/softcap")
    e4m3_kperm = c.qk_type == "e4m3" and c.v_key_permuted and not c.block_descale  # dense e4m3, V^T given
    types = _gluon_types(c, bf16, transpose_v)
    loop_switches = int8_loop_switches(c)
    constexprs = {"HEAD_DIM": c.head_dim, "BLOCK_M": c.block_m, "BLOCK_N": c.block_n, "CAUSAL": c.causal,
                  "NUM_STAGES": c.stages, "KEY_PERMUTED": c.v_key_permuted or transpose_v, "SUM_ON_TC": c.row_sum_mma,
                  "QK_INT8": c.is_int8_qk, "BLOCK_DESCALE": c.block_descale, "V_NATURAL": bf16,
                  "PV_PIPELINED": not bf16 and gluon_pv_pipelined(c.head_dim, c.causal), "VARLEN": c.varlen,
                  "TRANSPOSE_V": transpose_v, "RAW_STAGES": gluon_raw_stages(c) if transpose_v else 2,
                  "NUM_CONSUMERS": c.block_m // GLUON_WG_M, "K_DESCALE_UNIT_STRIDE": c.k_descale_unit_stride,
                  # One Q buffer: the double-buffered Q (2) is a sweep variant (bench/sweep_gluon.py), not measured.
                  "Q_BUFFERS": 1,
                  "TILE_INFO_HANDOFF": gluon_tile_info_handoff(c.head_dim, c.block_m, c.block_n, c.causal,
                                                                        c.varlen),
                  "Q_IN_REGS": gluon_q_in_regs(c.head_dim, c.block_m, c.block_n, c.causal, c.varlen, e4m3_kperm,
                                               bf16),
                  "HALF_LAST": gluon_half_last(c.head_dim, c.block_m, c.block_n, c.causal, c.varlen, e4m3_kperm),
                  # HALF_FIRST (a sliding window's first tile over its upper half): a sweep switch, slower.
                  "HALF_FIRST": False,
                  # LAZY_RESCALE (BF16: a row's frame kept until its maximum grows by 2^16, the accumulator's rescale
                  # skipped per warp): a sweep switch (bench/sweep_gluon.py), no gain (docs/perf/NOTES.md, 2026-12-05).
                  "LAZY_RESCALE": False,
                  # The consumers' registers: the kernel's own choice for its consumer count (_worker_regs).
                  "CONSUMER_REGS": 0,
                  # WINDOW_ALIGN (a left window's tiles from a multiple of 128 below its first key): a sweep switch.
                  "WINDOW_ALIGN": 0,
                  "INT8_INF_SELECTS": gluon_int8_inf_selects(c.head_dim, c.block_m, c.block_n, c.causal,
                                                             c.is_int8_qk, c.row_sum_mma),
                  # INT8_ROWMAX_LOCAL (the INT8 row maximum with one cross-lane reduction a row) and RING_UNSIGNED
                  # (the key loop's ring stage and phase in unsigned arithmetic): the same output bits, 12 and 3-4
                  # instructions a tile fewer in the INT8 D=64 loop (ptxas). On for the 192-row D=64 instance: H100,
                  # 2026-12-06 (bench/sweep_gluon.py --int8, two runs in opposite orders) +2.7% full S=2048, +4.9%
                  # causal S=2048, +0.1% full S=8192 (where the library runs it), +2.5% causal S=8192; the 128-row
                  # kernel's two runs: -2.6% to +2.5%, mean -0.35%: off there.
                  "INT8_ROWMAX_LOCAL": loop_switches, "RING_UNSIGNED": loop_switches,
                  "K_DESCALE_PAIRED": c.k_descale_paired}
    return params, types, constexprs, c.warps, c.stages


def compile_spec(c: FmhaConfig):
    """(params, pointer types, constexprs, num_warps, num_stages) of this instance."""
    if c.k_descale_paired and not (c.family == "gluon" and c.is_int8_qk and c.block_descale and c.block_n == 128):
        # One k descale a tile is the Gluon INT8 softmax's (fmha_fwd_gluon.py K_DESCALE_PAIRED); a 64-key tile
        # reads one already, a 256-key one (SPLIT_S) keeps its four.
        raise ValueError(f"{name_of(c)}: kpair is a gluon i8 bdesc variant with 128-key tiles")
    if c.family == "gluon":
        return _gluon_compile_spec(c)
    if c.v_key_permuted:
        raise ValueError(f"{name_of(c)}: vkperm is a gluon-kernel variant")
    if c.varlen:
        raise ValueError(f"{name_of(c)}: varlen is a gluon-kernel variant (every Triton instance takes cu_seqlens)")
    if c.row_sum_mma:
        raise ValueError(f"{name_of(c)}: lsum is a gluon-kernel variant")
    _, _, params, _ = kernel_of(c)
    if c.is_int8_qk and (c.v_type != "e4m3" or not c.block_descale):
        raise ValueError(f"{name_of(c)}: INT8 Q.K^T instances read e4m3 V and per-block descales (bdesc)")
    if c.block_descale and c.block_n > 2 * 64:
        # The kernel reads the two 64-token k descale blocks a key tile can span (fmha_fwd_triton._attn_tile).
        raise ValueError(f"{name_of(c)}: per-block descales (bdesc) need BLOCK_N <= 128")
    io = TRITON_TYPES[c.qk_type]
    types = {"Q": f"*{io}", "K": f"*{io}", "V": f"*{TRITON_TYPES[c.v_type]}", "O": f"*{TRITON_TYPES[c.out_type]}",
             "LSE": "*fp32", "q_descale": "*fp32", "k_descale": "*fp32", "v_descale": "*fp32",
             "cu_seqlens_q": "*i32", "cu_seqlens_k": "*i32"}
    constexprs = {"HEAD_DIM": c.head_dim, "BLOCK_M": c.block_m, "BLOCK_N": c.block_n, "CAUSAL": c.causal,
                  "V_TRANSPOSED": c.reads_v_transposed, "WARP_SPECIALIZE": c.warp_specialized, "EVEN_N": c.even_n,
                  "BLOCK_DESCALE": c.block_descale, "SOFTCAP": c.softcap}
    return params, types, constexprs, c.warps, c.stages


# Registers per thread for two CTAs of 8 warps per SM (65536 / (2 x 256)).
TWO_CTAS_8_WARPS_REGS = 128


def compile_options(c: FmhaConfig):
    """Extra triton.compile options. The D=64 Triton instances (8 warps) fit two CTAs per SM in shared memory and
    reached 128 registers on their own until the sliding-window bounds (2026-12-01) pushed ptxas to ~200: one CTA
    per SM, 34% slower on the H200 (501 -> 333 TFLOP/s at S=2048). They are capped at 128, which compiles without
    spills (check_sass refuses local-memory traffic); the INT8 per-block-descale ones would spill and keep theirs."""
    if c.family == "triton" and c.head_dim == 64 and c.warps == 8 and not c.block_descale:
        return {"maxnreg": TWO_CTAS_8_WARPS_REGS}
    if single_warpgroup(c):
        return {"maxnreg": SOLO_REGS}
    return {}


def check_sass(c: FmhaConfig, mma_counts, sass="", ttgir=""):
    """FP8 dots must be FP8 wgmma (QGMMA) and INT8 Q.K^T integer wgmma (IGMMA); HMMA/IMMA alone means Triton
    fell back to a slow path. Q.K^T must take Q from shared memory: a Q that passes through registers (e.g. a q
    load under a branch) costs the registers of a whole tile and made the D=64 instance 55% slower on the H200;
    P.V's A operand (P) is the only register operand expected."""
    cap = compile_options(c).get("maxnreg")
    if cap and single_warpgroup(c):
        # The single-warpgroup kernel: nothing in its key-tile loop (a spill there costs every tile); a few local
        # accesses per query block outside it are allowed (2 at INT8 D=64).
        from sass_loops import innermost_mma_loops
        spilling = [lp for lp in innermost_mma_loops(sass) if lp[2]["LDL"] + lp[2]["STL"]]
        if spilling:
            raise RuntimeError(f"{name_of(c)}: local memory in the key-tile loop under the {cap}-register cap "
                               f"({[(hex(lp[0]), lp[2]['LDL'] + lp[2]['STL']) for lp in spilling]})")
    elif cap and re.search(r"\b(LDL|STL)\b", sass):
        raise RuntimeError(f"{name_of(c)}: spills to local memory under the {cap}-register cap")
    if ttgir and c.family == "triton" and not any(
            " : !ttg.memdesc" in line for line in ttgir.splitlines() if "warp_group_dot " in line):
        raise RuntimeError(f"{name_of(c)}: no wgmma takes its A operand from shared memory (Q went through "
                           "registers)")
    if (c.is_fp8 or c.v_type in ("e4m3", "e5m2")) and mma_counts.get("QGMMA", 0) == 0:
        raise RuntimeError(f"{name_of(c)}: no QGMMA in SASS ({mma_counts}); the FP8 dots fell back to a slow path")
    if c.is_int8_qk and mma_counts.get("IGMMA", 0) == 0:
        raise RuntimeError(f"{name_of(c)}: no IGMMA in SASS ({mma_counts}); the INT8 Q.K^T fell back to a slow path")


def requires(c: FmhaConfig):
    """Helper instances this one cannot run without: FP8 reads V transposed (transpose_v of its head dim, the
    key-permuted variant for vkperm)."""
    if not c.reads_v_transposed:
        return []
    from operations.transpose_v import TransposeConfig

    return [TransposeConfig("u8", 128, c.head_dim, 4, key_permuted=c.v_key_permuted)]


# ---- C++ record (src/fmha/fmha_kernel_config.h) ------------------------------------------------------------

CPP_HEADER = "fmha/fmha_kernel_config.h"


def cpp_config(c: FmhaConfig):
    """(C++ type, initializer) of the instance's configuration record."""
    t = CPP_TYPES
    b = lambda x: "true" if x else "false"  # noqa: E731
    return ("fmha::detail::FmhaKernelConfig",
            f"{{DataType::{t[c.qk_type]}, DataType::{t[c.v_type]}, DataType::{t[c.acc_type]}, "
            f"DataType::{t[c.out_type]}, {c.block_m}, {c.block_n}, {c.head_dim}, {c.warps}, {c.stages}, "
            f"{b(c.causal)}, {b(c.warp_specialized)}, {b(c.even_n)}, {b(c.reads_v_transposed)}, "
            f"{b(c.v_key_permuted)}, {b(c.block_descale)}, {b(c.softcap)}, {b(c.varlen)}, "
            f"{b(c.k_descale_unit_stride)}, {gluon_programs_per_sm(c)}, {b(c.k_descale_paired)}}}")
