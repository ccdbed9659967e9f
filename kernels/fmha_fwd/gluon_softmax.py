"""The Gluon attention kernel's online softmax of one key tile: FP8 or BF16 scores (_softmax_tile), INT8 scores with
per-block k descales (_softmax_tile_int8, and _softmax_tile_int8_split for 256-key tiles), P as the A operand of P.V
(_p_operand, _p8: KEY_PERMUTED's relabelling of the keys), and SUM_ON_TC's ones operand (_store_e4m3_ones,
_sum_width, _tile_row_sum). The numerics are fmha_fwd_triton._attn_tile's (docs/CONVENTIONS.md, "FP8 numerics")."""

from triton.experimental import gluon
from triton.experimental.gluon import language as gl

from common.int8_scores import int8_scores, key_block_descale_at, key_block_descale_pair, key_block_descales
from common.key_range import keep_mask
from fmha_fwd.gluon_constants import (
    DESCALE_BLOCK,
    FLT_MIN,
    INT_TO_FLOAT_BITS,
    INT_TO_FLOAT_OFFSET,
    LAZY_GROWTH,
    P_EXPONENT_BIAS,
    REF_FLOOR,
    WG_M,
)


@gluon.jit
def _store_e4m3_ones(smem, ALL_ROWS: gl.constexpr):
    """Writes 1.0 into row 0 of an e4m3 [N, K] shared buffer (every row if ALL_ROWS), zeros elsewhere, as bytes
    (0x38 is e4m3's 1.0). Not as float32 converted to e4m3: Triton 3.6 turns a constant's conversion into one
    cvt.e4m3x2 whose 16-bit result it packs twice into a 32-bit register, and ptxas compiles that pack to an F2FP
    that keeps the register's old upper half, so half the bytes stored were garbage (bench/probe_sum_on_tc.py
    found it: the row sums came out wrong whenever the operand was stored from registers, right when TMA wrote it)."""
    N: gl.constexpr = smem.shape[0]
    K: gl.constexpr = smem.shape[1]
    layout: gl.constexpr = gl.BlockedLayout([1, 16], [8, 4], [gl.num_warps(), 1], [1, 0])
    row = gl.arange(0, N, layout=gl.SliceLayout(1, layout))
    if ALL_ROWS:
        ones = gl.full([N, K], 0x38, gl.int32, layout).to(gl.uint8)
    else:
        ones = (gl.where(row[:, None] == 0, 0x38, 0) + gl.zeros([N, K], gl.int32, layout)).to(gl.uint8)
    smem._reinterpret(gl.uint8, [N, K], smem.layout).store(ones)


@gluon.constexpr_function
def _sum_width(SUM_ON_TC):
    """N of SUM_ON_TC's ones operand: 16 for SUM_ON_TC = 1 (or True), else the value itself (bench/sweep_gluon.py
    tries 8, 16, 32, 64). With N = 8 the row sums came out wrong on the H200 (2026-12-02: about half of the
    operand read from outside its [8, BLOCK_N] buffer; Triton 3.6 sets the descriptor's stride byte offset to 0
    for an 8-row operand), so the default is the next width. Off: 8 (the placeholder buffer stays 8 rows, so the
    instances without the switch keep their shared memory)."""
    if not SUM_ON_TC:
        return 8
    width = 16 if SUM_ON_TC == 1 else SUM_ON_TC
    assert width in (8, 16, 32, 64), f"SUM_ON_TC: the ones operand is 8, 16, 32 or 64 wide, not {width}"
    return width


@gluon.jit
def _tile_row_sum(ls, row_layout: gl.constexpr):
    """Row sums of P from the [64, SUM_N] product P x [ones, zeros...]: column 0 holds them, the others are 0."""
    return gl.convert_layout(gl.sum(ls, 1), row_layout)


@gluon.jit
def _softmax_tile(qk, l_i, m_i, f_i, start_n, lo_masked_end, full_end, offs_m, qk_scale, lo_off, hi_off, seqlen_k,
                  kd_base, k_descale_stride_blk, CAUSAL: gl.constexpr, PV_N: gl.constexpr, BLOCK_N: gl.constexpr,
                  KEY_PERMUTED: gl.constexpr, SUM_ON_TC: gl.constexpr, QK_INT8: gl.constexpr,
                  BLOCK_DESCALE: gl.constexpr, V_NATURAL: gl.constexpr, LAZY_RESCALE: gl.constexpr = False,
                  INT8_INF_SELECTS: gl.constexpr = True, INT8_ROWMAX_LOCAL: gl.constexpr = False,
                  K_DESCALE_PAIRED: gl.constexpr = False):
    """Online softmax of one KV tile's scores (see fmha_fwd_triton._attn_tile): returns P in e4m3, in the
    A-operand layout of the P.V wgmma, the new row sum, maximum and frame, and the factor that moves the
    accumulator from the old frame to the new one. PV_N: the N extent of the P.V products (HEAD_DIM, or a
    quarter of it at HEAD_DIM = 256)."""
    MMA_K: gl.constexpr = 16 if V_NATURAL else 32  # wgmma's K per instruction: 16-bit or 8-bit operands
    s_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                       instr_shape=[16, BLOCK_N, MMA_K])
    # Keys [lo_masked_end, full_end) need no mask; the others are a window's left edge or past full_end
    # (key_range).
    masked = (start_n < lo_masked_end) | (start_n >= full_end)
    if QK_INT8 and BLOCK_DESCALE:
        return _softmax_tile_int8(qk, l_i, m_i, f_i, start_n, masked, offs_m, qk_scale, lo_off, hi_off, seqlen_k,
                                  kd_base, k_descale_stride_blk, PV_N, BLOCK_N, KEY_PERMUTED, SUM_ON_TC,
                                  INT8_INF_SELECTS, INT8_ROWMAX_LOCAL, K_DESCALE_PAIRED)
    if QK_INT8:  # per-tensor descales (already in qk_scale)
        qk = int8_scores(qk, None, False)
    elif BLOCK_DESCALE:  # each key column's block descale (common/int8_scores.py)
        gl.static_assert(BLOCK_N <= 2 * DESCALE_BLOCK, "a key tile spans at most two descale blocks")
        qk = qk * key_block_descales(kd_base, k_descale_stride_blk, start_n,
                                     gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, s_layout)), seqlen_k)[None, :]
    if masked:  # uniform branch: only the tiles at the sequence end, the causal diagonal or a window's edges
        cols = start_n + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, s_layout))
        # Row i keeps keys i + lo_off <= j < min(seqlen_k, i + hi_off + 1), one compare per score (keep_mask).
        # (Applying the lower bound only on a window's left-edge tiles, behind a nested run-time branch, grew the
        # loop from 739 to 929 SASS instructions per warp: ptxas duplicated the softmax.)
        qk = gl.where(keep_mask(cols, offs_m, lo_off, hi_off, seqlen_k), qk, float("-inf"))

    m_tile = gl.max(qk, 1) * qk_scale  # -inf for a row with no visible key in this tile
    if LAZY_RESCALE:
        return _softmax_tile_lazy(qk, m_tile, l_i, m_i, f_i, qk_scale, PV_N, BLOCK_N)
    m_new = gl.maximum(m_i, m_tile)
    ref = gl.maximum(m_tile, m_new - REF_FLOOR)  # finite: m_new >= NEG_BIG
    # P_tile = exp2(S - ref) * 2^8, rounded to e4m3 in registers.
    frame = ref - P_EXPONENT_BIAS
    p = gl.exp2(qk * qk_scale - frame[:, None])
    p8, l_i, rescale = _p_operand(p, l_i, f_i, frame, PV_N, BLOCK_N, KEY_PERMUTED, SUM_ON_TC, V_NATURAL)
    return p8, l_i, m_new, frame, rescale


@gluon.jit
def _softmax_tile_lazy(qk, m_tile, l_i, m_i, f_i, qk_scale, PV_N: gl.constexpr, BLOCK_N: gl.constexpr):
    """LAZY_RESCALE (BF16 only): a row keeps its frame f_i until a tile's maximum exceeds it by more than
    LAZY_GROWTH (P then stays at most 2^LAZY_GROWTH, far inside bf16's and float32's range), so
    after a row's first tiles its rescale factor is exactly 1 and the consumer's warps whose rows all kept their
    frame skip the accumulator's rescale (gluon_mma._rescale_by_warp). FP8 needs each tile's own frame (e4m3's
    2^-9 floor) and pays its rescale inside the two-level fold anyway. Returns _softmax_tile's five values; m_i
    passes through unused (the frame alone tracks the row)."""
    grow = m_tile > f_i + LAZY_GROWTH  # false for -inf (no visible key): the frame stays
    frame = gl.where(grow, m_tile - P_EXPONENT_BIAS, f_i)
    p = gl.exp2(qk * qk_scale - frame[:, None])
    rescale = gl.where(grow, gl.exp2(f_i - frame), 1.0)
    l_i = l_i * rescale + gl.sum(p, 1)
    o_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                       instr_shape=[16, PV_N, 16])
    p8 = _p8(p, PV_N, BLOCK_N, False, True)
    return p8, l_i, m_i, frame, gl.convert_layout(rescale, gl.SliceLayout(1, o_layout))


@gluon.jit
def _p_operand(p, l_i, f_i, frame, PV_N: gl.constexpr, BLOCK_N: gl.constexpr, KEY_PERMUTED: gl.constexpr,
               SUM_ON_TC: gl.constexpr, V_NATURAL: gl.constexpr):
    """A tile's P (float32, S's layout, relative to its frame) -> (P as the A operand of P.V, the row sum, the
    factor that moves the accumulator from the old frame f_i to this one, in O's row layout)."""
    MMA_K: gl.constexpr = 16 if V_NATURAL else 32  # wgmma's K per instruction: 16-bit or 8-bit operands
    o_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                       instr_shape=[16, PV_N, MMA_K])
    rescale = gl.exp2(f_i - frame)
    if not SUM_ON_TC:  # else the caller adds the tile's sum from the tensor cores
        l_i = l_i * rescale + gl.sum(p, 1)
    p8 = _p8(p, PV_N, BLOCK_N, KEY_PERMUTED, V_NATURAL)
    # Row vectors live in S's row layout; O's is the same when BLOCK_N == HEAD_DIM (then this is free).
    return p8, l_i, gl.convert_layout(rescale, gl.SliceLayout(1, o_layout))


@gluon.jit
def _p8(p, PV_N: gl.constexpr, BLOCK_N: gl.constexpr, KEY_PERMUTED: gl.constexpr, V_NATURAL: gl.constexpr):
    """P (float32, S's layout) as the A operand of P.V: e4m3 (bf16 for V_NATURAL) in the dot-operand layout."""
    MMA_K: gl.constexpr = 16 if V_NATURAL else 32  # wgmma's K per instruction: 16-bit or 8-bit operands
    o_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                       instr_shape=[16, PV_N, MMA_K])
    p_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=o_layout, k_width=4)
    if V_NATURAL:
        # BF16: P rounded to bf16; for 16-bit operands S's accumulator fragment already is the A fragment of
        # P.V (k_width 2), so the conversion moves no data.
        p8 = gl.convert_layout(p.to(gl.bfloat16), gl.DotOperandLayout(operand_index=0, parent=o_layout, k_width=2))
    elif KEY_PERMUTED:
        # Within each 32-key block, wgmma's A fragment holds keys 4t..4t+3 and 16+4t..19+4t in thread t of a
        # quad, while the accumulator fragment holds keys 2t, 2t+1, 8+2t, 9+2t, 16+2t, ... Relabel the keys so
        # that the two coincide (swap the "which n8 block" and "which thread" digits of the key index); V^T's
        # keys are stored in the same order (docs: the permuted V^T), so P.V is unchanged.
        pp = gl.reshape(p, [WG_M, BLOCK_N // 32, 2, 2, 4, 2])
        pp = gl.permute(pp, (0, 1, 2, 4, 3, 5))
        pp = gl.reshape(pp, [WG_M, BLOCK_N])
        pp = gl.convert_layout(pp, p_layout, assert_trivial=True)
        # Four values per asm: two cvt.e4m3x2 straight into one 32-bit A-fragment register (Triton's own cast
        # splits the pairs into bytes and reassembles them: 3 PRMT/SHF more per 4 values).
        p8 = gl.inline_asm_elementwise(
            "{ .reg .b16 lo, hi; cvt.rn.satfinite.e4m3x2.f32 lo, $2, $1; cvt.rn.satfinite.e4m3x2.f32 hi, $4, $3; "
            "mov.b32 $0, {lo, hi}; }", "=r,r,r,r,r", [pp], gl.float8e4nv, True, 4)
    else:
        p8 = gl.convert_layout(p.to(gl.float8e4nv), p_layout)
    return p8


@gluon.jit
def _block_max(xm, s, INF_SELECTS: gl.constexpr):
    """A 64-key descale block's largest scaled score from its largest x (1.5 * 2^23 + score, or -inf where no key
    is visible) and its scale s (>= FLT_MIN): -inf stays -inf, whatever the scale (a zero one would make NaN, hence
    the clamp). INF_SELECTS also selects -inf explicitly (_softmax_tile_int8: the same bits)."""
    if INF_SELECTS:
        return gl.where(xm == float("-inf"), xm, (xm - INT_TO_FLOAT_OFFSET) * s)
    return (xm - INT_TO_FLOAT_OFFSET) * s


@gluon.jit
def _row_max_local(x, s0, s1, BLOCK_N: gl.constexpr, INF_SELECTS: gl.constexpr):
    """_softmax_tile_int8's row maximum (INT8_ROWMAX_LOCAL), its halves scaled before the lanes meet: each thread's
    largest x in each 64-key half (its own registers), scaled (_block_max), the larger of the two, then one
    reduction across the four lanes of a row, where the default reduces each half across the lanes (four
    shuffle-and-max steps a thread more) and max(x, -inf) of the halves' selects stays in the loop (maxnum
    cannot drop it: x might be NaN). In the accumulator fragment a thread's keys of a row are
    8 * i + 2 * (lane % 4) + e (i: 16 n8 blocks, e: 2; registers hold i and e): the reshape's
    [half, i % 8, lane % 4, e] moves no data. The same bits: x - OFFSET is exact and the scale s >= FLT_MIN, so
    (x - OFFSET) * s is non-decreasing in x (a rounded product of a positive scale) and the maximum of the scaled
    values is the scaled maximum; -inf stays -inf, and max is exact in any order (no NaN, and no -0: x - OFFSET is
    an integer, a non-zero one times s is at least FLT_MIN in magnitude). (ptxas: 12 instructions a tile fewer in
    the unmasked loop at D=64, 4 SHFL and 8 FMNMX.)"""
    gl.static_assert(BLOCK_N == 2 * DESCALE_BLOCK, "ROWMAX_LOCAL: a 128-key tile, two descale blocks")
    row_layout: gl.constexpr = gl.SliceLayout(1, x.type.layout)
    xr = gl.max(gl.max(gl.reshape(x, [WG_M, 2, BLOCK_N // 16, 4, 2]), 4), 2)  # [rows, half, lane % 4]
    x0, x1 = gl.split(gl.permute(xr, (0, 2, 1)))
    m = gl.maximum(_block_max(x0, s0, INF_SELECTS), _block_max(x1, s1, INF_SELECTS))
    # Butterfly shuffles leave every lane of the row with the maximum: S's row layout, no data moves.
    return gl.convert_layout(gl.max(m, 1), row_layout, assert_trivial=True)


@gluon.jit
def _softmax_tile_int8(qk, l_i, m_i, f_i, start_n, masked, offs_m, qk_scale, lo_off, hi_off, seqlen_k, kd_base,
                       k_descale_stride_blk, PV_N: gl.constexpr, BLOCK_N: gl.constexpr, KEY_PERMUTED: gl.constexpr,
                       SUM_ON_TC: gl.constexpr, INF_SELECTS: gl.constexpr = True,
                       ROWMAX_LOCAL: gl.constexpr = False, PAIRED: gl.constexpr = False):
    """_softmax_tile for INT8 Q.K^T with per-block k descales: the int32 scores as x = 1.5 * 2^23 + score (an
    integer add, exact: common/int8_scores.py), and each 64-key half of the tile (one k descale block) scaled
    inside the exponential's FFMA: exp2(x * s_h - (1.5 * 2^23 * s_h + frame)) with s_h = qk_scale * kd_h, so a
    score costs the add and the FFMA that the FP8 path spends too (int8_scores' separate descale FFMA per score
    made the INT8 loop 832 SASS instructions per warp per tile against FP8's 675). The halves' selects are per
    register, resolved at compile time (a thread's columns 0-63 and 64-127 are separate registers). The row
    maximum from each half's largest x, exactly. The constant's one rounding (of about 2^24 s_h) moves a row's
    largest exponent argument off P_EXPONENT_BIAS by at most ~s_h: P stays below 448 (e4m3's largest) while
    s_h < 0.5 (a float32 emulation: P <= 259 at s_h = 0.01, 394 at 0.46), i.e. below q and k amax of ~250 each at
    D=128; real scales are far smaller. A scale of 0 (a zero K block's descale) is raised to the smallest
    normal float, so a masked score (-inf) times it stays -inf, not NaN. The same clamp makes a half with no
    visible key (x = -inf) come out -inf from (x - OFFSET) * s; INF_SELECTS (the codegen's policy,
    gluon_int8_inf_selects) also selects -inf there explicitly: the same bits either way (checked on the GPU),
    and which of the two ptxas schedules faster differs per instance. ROWMAX_LOCAL: the row maximum from each
    thread's scaled half maxima (_row_max_local), the same bits. PAIRED (K_DESCALE_PAIRED): the tile's two k
    descales are equal, read once; the same bits on such descales, ~14 instructions a tile fewer (D=128)."""
    gl.static_assert(BLOCK_N <= 2 * DESCALE_BLOCK, "a key tile spans at most two descale blocks")
    s_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                       instr_shape=[16, BLOCK_N, 32])
    col = gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, s_layout))
    x = (qk + INT_TO_FLOAT_BITS).to(gl.float32, bitcast=True)
    if masked:  # uniform branch, as _softmax_tile's
        x = gl.where(keep_mask(start_n + col, offs_m, lo_off, hi_off, seqlen_k), x, float("-inf"))
    if PAIRED:
        # One descale for the tile (the caller's pairs are equal; start_n is a multiple of 128, so its block is the
        # pair's first): the row maximum of the raw x, then scaled once. With kd0 == kd1 the per-block path below
        # computes the same s, the same maximum (max of the scaled halves = the scaled max) and the same constant:
        # the same bits, with no per-half statistics and one load.
        st = gl.maximum(qk_scale * key_block_descale_at(kd_base, k_descale_stride_blk, start_n // DESCALE_BLOCK,
                                                        seqlen_k), FLT_MIN)
        m_tile = _block_max(gl.max(x, 1), st, INF_SELECTS)
        m_new = gl.maximum(m_i, m_tile)
        ref = gl.maximum(m_tile, m_new - REF_FLOOR)  # finite: m_new >= NEG_BIG
        frame = ref - P_EXPONENT_BIAS
        p = gl.exp2(x * st - (INT_TO_FLOAT_OFFSET * st + frame)[:, None])
        p8, l_i, rescale = _p_operand(p, l_i, f_i, frame, PV_N, BLOCK_N, KEY_PERMUTED, SUM_ON_TC, False)
        return p8, l_i, m_new, frame, rescale
    kd0, kd1 = key_block_descale_pair(kd_base, k_descale_stride_blk, start_n, seqlen_k)
    s0 = gl.maximum(qk_scale * kd0, FLT_MIN)
    s1 = gl.maximum(qk_scale * kd1, FLT_MIN)
    first = (col < DESCALE_BLOCK)[None, :]
    if ROWMAX_LOCAL:
        m_tile = _row_max_local(x, s0, s1, BLOCK_N, INF_SELECTS)
    else:
        x0 = gl.max(gl.where(first, x, float("-inf")), 1)
        x1 = gl.max(gl.where(first, float("-inf"), x), 1)
        m0 = _block_max(x0, s0, INF_SELECTS)
        m1 = _block_max(x1, s1, INF_SELECTS)
        m_tile = gl.maximum(m0, m1)  # -inf for a row with no visible key in this tile
    m_new = gl.maximum(m_i, m_tile)
    ref = gl.maximum(m_tile, m_new - REF_FLOOR)  # finite: m_new >= NEG_BIG
    frame = ref - P_EXPONENT_BIAS
    c0 = INT_TO_FLOAT_OFFSET * s0 + frame
    c1 = INT_TO_FLOAT_OFFSET * s1 + frame
    p = gl.exp2(x * gl.where(first, s0, s1) - gl.where(first, c0[:, None], c1[:, None]))
    p8, l_i, rescale = _p_operand(p, l_i, f_i, frame, PV_N, BLOCK_N, KEY_PERMUTED, SUM_ON_TC, False)
    return p8, l_i, m_new, frame, rescale


@gluon.jit
def _softmax_tile_int8_split(qa, qb, l_i, m_i, f_i, start_n, masked, offs_m, qk_scale, lo_off, hi_off, seqlen_k,
                             kd_base, k_descale_stride_blk, PV_N: gl.constexpr, KEY_PERMUTED: gl.constexpr,
                             INF_SELECTS: gl.constexpr = True):
    """_softmax_tile_int8 for a 256-key tile whose scores come as two [64, 128] int32 products (SPLIT_S: Triton 3.6
    does not lower the m64n256k32 integer wgmma): four 64-key descale blocks, one row maximum, frame and rescale for
    the 256 keys (what the 256-key tile saves per key: the fold, the barriers, the row statistics), P as two
    128-key A operands for two chained P.V products."""
    HALF: gl.constexpr = 128
    s_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                       instr_shape=[16, HALF, 32])
    col = gl.arange(0, HALF, layout=gl.SliceLayout(0, s_layout))
    xa = (qa + INT_TO_FLOAT_BITS).to(gl.float32, bitcast=True)
    xb = (qb + INT_TO_FLOAT_BITS).to(gl.float32, bitcast=True)
    if masked:  # uniform branch, as _softmax_tile's
        xa = gl.where(keep_mask(start_n + col, offs_m, lo_off, hi_off, seqlen_k), xa, float("-inf"))
        xb = gl.where(keep_mask(start_n + HALF + col, offs_m, lo_off, hi_off, seqlen_k), xb, float("-inf"))
    # The tile starts on a multiple of 64 (256, or WINDOW_ALIGN's), so on a descale block; past seqlen_k: 1.0.
    blk = start_n // DESCALE_BLOCK
    s0 = gl.maximum(qk_scale * key_block_descale_at(kd_base, k_descale_stride_blk, blk, seqlen_k), FLT_MIN)
    s1 = gl.maximum(qk_scale * key_block_descale_at(kd_base, k_descale_stride_blk, blk + 1, seqlen_k), FLT_MIN)
    s2 = gl.maximum(qk_scale * key_block_descale_at(kd_base, k_descale_stride_blk, blk + 2, seqlen_k), FLT_MIN)
    s3 = gl.maximum(qk_scale * key_block_descale_at(kd_base, k_descale_stride_blk, blk + 3, seqlen_k), FLT_MIN)
    first = (col < DESCALE_BLOCK)[None, :]
    x0 = gl.max(gl.where(first, xa, float("-inf")), 1)
    x1 = gl.max(gl.where(first, float("-inf"), xa), 1)
    x2 = gl.max(gl.where(first, xb, float("-inf")), 1)
    x3 = gl.max(gl.where(first, float("-inf"), xb), 1)
    m0 = _block_max(x0, s0, INF_SELECTS)
    m1 = _block_max(x1, s1, INF_SELECTS)
    m2 = _block_max(x2, s2, INF_SELECTS)
    m3 = _block_max(x3, s3, INF_SELECTS)
    m_tile = gl.maximum(gl.maximum(m0, m1), gl.maximum(m2, m3))  # -inf for a row with no visible key
    m_new = gl.maximum(m_i, m_tile)
    ref = gl.maximum(m_tile, m_new - REF_FLOOR)  # finite: m_new >= NEG_BIG
    frame = ref - P_EXPONENT_BIAS
    c0 = INT_TO_FLOAT_OFFSET * s0 + frame
    c1 = INT_TO_FLOAT_OFFSET * s1 + frame
    c2 = INT_TO_FLOAT_OFFSET * s2 + frame
    c3 = INT_TO_FLOAT_OFFSET * s3 + frame
    pa = gl.exp2(xa * gl.where(first, s0, s1) - gl.where(first, c0[:, None], c1[:, None]))
    pb = gl.exp2(xb * gl.where(first, s2, s3) - gl.where(first, c2[:, None], c3[:, None]))
    rescale = gl.exp2(f_i - frame)
    l_i = l_i * rescale + gl.sum(pa + pb, 1)  # one cross-thread reduction for both halves
    o_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                       instr_shape=[16, PV_N, 32])
    p8 = (_p8(pa, PV_N, HALF, KEY_PERMUTED, False), _p8(pb, PV_N, HALF, KEY_PERMUTED, False))
    return p8, l_i, m_new, frame, gl.convert_layout(rescale, gl.SliceLayout(1, o_layout))


@gluon.jit
def _softmax_any(qk, l_i, m_i, f_i, start_n, lo_masked_end, full_end, offs_m, qk_scale, lo_off, hi_off, seqlen_k,
                 kd_base, k_descale_stride_blk, CAUSAL: gl.constexpr, PV_N: gl.constexpr, BLOCK_N: gl.constexpr,
                 KEY_PERMUTED: gl.constexpr, SUM_ON_TC: gl.constexpr, QK_INT8: gl.constexpr,
                 BLOCK_DESCALE: gl.constexpr, V_NATURAL: gl.constexpr, SPLIT_S: gl.constexpr,
                 LAZY_RESCALE: gl.constexpr = False, INT8_INF_SELECTS: gl.constexpr = True,
                 INT8_ROWMAX_LOCAL: gl.constexpr = False, K_DESCALE_PAIRED: gl.constexpr = False):
    """_softmax_tile, or _softmax_tile_int8_split for S in two halves (SPLIT_S)."""
    if SPLIT_S:
        masked = (start_n < lo_masked_end) | (start_n >= full_end)
        r = _softmax_tile_int8_split(qk[0], qk[1], l_i, m_i, f_i, start_n, masked, offs_m, qk_scale, lo_off, hi_off,
                                     seqlen_k, kd_base, k_descale_stride_blk, PV_N, KEY_PERMUTED, INT8_INF_SELECTS)
    else:
        r = _softmax_tile(qk, l_i, m_i, f_i, start_n, lo_masked_end, full_end, offs_m, qk_scale, lo_off, hi_off,
                          seqlen_k, kd_base, k_descale_stride_blk, CAUSAL, PV_N, BLOCK_N, KEY_PERMUTED, SUM_ON_TC,
                          QK_INT8, BLOCK_DESCALE, V_NATURAL, LAZY_RESCALE, INT8_INF_SELECTS, INT8_ROWMAX_LOCAL,
                          K_DESCALE_PAIRED)
    return r
