"""Attention forward (FlashAttention-2 style) for Hopper, FP8 e4m3 or BF16 inputs, BF16 output.

One program computes one BLOCK_M x HEAD_DIM tile of O for one (batch, head_q):

    S = (Q K^T) * softmax_scale * q_descale * k_descale        (FP32 accumulators)
    P = exp(S - rowmax(S)),  O = (P V) * v_descale / rowsum(P)

FP8 specifics (docs/CONVENTIONS.md, "FP8 numerics"):
  * Each KV tile's P is rounded to the input type against the tile's OWN row maximum and multiplied by
    2^P_EXPONENT_BIAS before the cast, so that the largest probability of every tile lands near the top of
    e4m3's range. Rounding against the running maximum instead flushes everything below ~2^-9 of it to
    zero, which is what makes FP8 error grow with sequence length when an attention sink is present.
  * Two-level accumulation: each tile's P.V goes into a fresh FP32 accumulator and is then added to O in
    FP32 (Hopper's FP8 MMA keeps only ~13-14 mantissa bits in its accumulator).
  * V is read transposed (HEAD_DIM rows, sequence contiguous) because FP8 wgmma needs both operands
    K-major; the runtime transposes the caller's V into a workspace when it is not already in that form.

Warp specialization (WARP_SPECIALIZE, Triton 3.6 on Hopper) needs TMA loads, hence device-side tensor
descriptors, and it is only correct when no masked tile runs in the kernel (docs/perf/NOTES.md): the
manifest uses it with EVEN_N (non-causal, seqlen_k % BLOCK_N == 0), which compiles no masked path at all.
It also hands a wrong frame f_i out of the loop (O is right, LSE is not), so the runtime never asks a
warp-specialized instance for LSE.

Causal masking is bottom-right aligned: query row i sees keys j <= i + (seqlen_k - seqlen_q). A query row
that sees no key at all gets O = 0 and LSE = -inf.

Sliding windows (local attention, FlashAttention's convention, runtime): with c = seqlen_k - seqlen_q, row i sees
keys i + c - window_left <= j <= i + c + window_right (a negative window is unlimited on that side; causal caps
the right side at 0). Tiles entirely outside a block's window are never loaded; tiles crossing its edges are
masked. Logit soft-capping (SOFTCAP, Gemma 2): scores s = softmax_scale * q.k become cap * tanh(s / cap).

Descales: q's is indexed by (batch, kv head, query head, block of DESCALE_BLOCK query rows) through four
strides, k's by (batch, kv head, block of DESCALE_BLOCK keys), v's by (batch, kv head); a zero stride
broadcasts. BLOCK_DESCALE instances apply per-block descales inside the tile (S scaled per key column and per
query row); the others read one q and one k descale per program (the block strides must then be 0).

INT8 Q.K^T (Q and K int8, V e4m3; the "int8_qk" accuracy mode, with per-block descales from the quantize
operation): the dot accumulates in int32 (exact: |q . k| <= 127^2 * 256 < 2^22, so the float32 conversion,
an integer add rather than I2F, is exact too), and P.V stays FP8 with the same per-tile P rounding and two-level
accumulation.
"""

import triton
import triton.language as tl

from common import numerics
from common.softcap import softcap as _softcap
from common.int8_scores import int8_scores, key_block_descales
from common.key_range import key_range
from common.varlen import varlen_range, varlen_vt_start

# The constants live in common/numerics.py, shared with the tests' emulation (why each value: see there).
LOG2E = tl.constexpr(numerics.LOG2E)
LN2 = tl.constexpr(numerics.LN2)
P_EXPONENT_BIAS = tl.constexpr(numerics.P_EXPONENT_BIAS)
NEG_BIG = tl.constexpr(numerics.NEG_BIG)
REF_FLOOR = tl.constexpr(numerics.REF_FLOOR)
DESCALE_BLOCK = tl.constexpr(numerics.DESCALE_BLOCK_TOKENS)


@triton.jit
def _mask_tile(qk, start_n, offs_m, offs_n, lo_off, hi_off, seqlen_k):
    """Row i keeps keys i + lo_off <= j <= i + hi_off, j < seqlen_k (lo_off, hi_off: very negative / large
    when a side is unlimited; hi_off = seqlen_k - seqlen_q for causal)."""
    cols = start_n + offs_n
    col_limit = tl.minimum(offs_m + hi_off + 1, seqlen_k)
    keep = (cols[None, :] < col_limit[:, None]) & (cols[None, :] >= (offs_m + lo_off)[:, None])
    return tl.where(keep, qk, float("-inf"))


@triton.jit
def _attn_tile(acc, l_i, m_i, f_i, q, k_desc, v_desc, start_n, offs_m, offs_n, qk_scale, lo_off, hi_off,
               seqlen_k, k_block_descale, k_descale_stride_blk, softcap, MASKED: tl.constexpr,
               V_TRANSPOSED: tl.constexpr, BLOCK_DESCALE: tl.constexpr, SOFTCAP: tl.constexpr):
    """One KV tile of the online softmax.

    State per query row: m = running maximum of S (exp2 domain); acc and l hold O and rowsum(P) in a
    per-row frame f, i.e. the true sums are acc * 2^f and l * 2^f. Each tile's P is taken against the
    tile's own reference r (its row maximum, floored at m - 64) and biased by 2^8, so the tile's largest
    probability rounds at the top of the FP8 range whatever came before; then the frame moves to r - 8:

        acc <- acc * 2^(f - (r - 8)) + P_tile V_tile,   l <- l * 2^(f - (r - 8)) + rowsum(P_tile)

    one FMA per accumulator element, as in plain two-level accumulation. The floor keeps every rescale
    factor within 2^64 (tiles more than 2^-64 below the running maximum do not count anyway), so nothing
    overflows FP32.
    """
    # TMA zero-fills the rows of a partial last tile; the mask below removes them from the softmax.
    k = k_desc.load([start_n, 0])
    if V_TRANSPOSED:
        v = v_desc.load([0, start_n])
        v = tl.trans(v)  # (HEAD_DIM, BLOCK_N) sequence-contiguous -> (BLOCK_N, HEAD_DIM), K-major for wgmma
    else:
        v = v_desc.load([start_n, 0])
    # S = Q K^T in the exp2 domain: qk_scale (> 0; a scalar, or per query row with BLOCK_DESCALE) carries
    # softmax_scale * descales * log2(e). The scale is applied inside the exp2's FMA rather than as a separate
    # multiply over the tile.
    qk = tl.dot(q, tl.trans(k))
    if BLOCK_DESCALE:  # each key column's block descale (positive: the maxima below stay maxima after the row scale)
        kd_cols = key_block_descales(k_block_descale, k_descale_stride_blk, start_n, offs_n, seqlen_k)
    if qk.dtype == tl.int32:  # INT8 Q, K (common/int8_scores.py)
        qk = int8_scores(qk, kd_cols if BLOCK_DESCALE else None, BLOCK_DESCALE)
    elif BLOCK_DESCALE:
        qk = qk * kd_cols[None, :]
    if SOFTCAP:
        # qk_scale here is softmax_scale * descales (natural units); the capped scores go to the exp2 domain.
        qk = _softcap(qk * qk_scale, softcap) * LOG2E
    if MASKED:
        qk = _mask_tile(qk, start_n, offs_m, offs_n, lo_off, hi_off, seqlen_k)
    if SOFTCAP:
        m_tile = tl.max(qk, 1)  # -inf for a row with no visible key in this tile
    else:
        m_tile = tl.max(qk, 1) * qk_scale
    m_new = tl.maximum(m_i, m_tile)
    ref = tl.maximum(m_tile, m_new - REF_FLOOR)  # finite: m_new >= NEG_BIG
    # P_tile = exp2(S - ref) * 2^8, rounded to V's type.
    if SOFTCAP:
        p = tl.math.exp2(qk - (ref - P_EXPONENT_BIAS)[:, None])
    elif BLOCK_DESCALE:
        p = tl.math.exp2(qk * qk_scale[:, None] - (ref - P_EXPONENT_BIAS)[:, None])
    else:
        p = tl.math.exp2(qk * qk_scale - (ref - P_EXPONENT_BIAS)[:, None])
    frame = ref - P_EXPONENT_BIAS
    rescale = tl.math.exp2(f_i - frame)
    l_i = l_i * rescale + tl.sum(p, 1)
    # Two-level accumulation: this tile's P V in a fresh FP32 accumulator, then added in FP32.
    pv = tl.dot(p.to(v.dtype), v)
    acc = acc * rescale[:, None] + pv
    return acc, l_i, m_new, frame


@triton.jit
def fmha_fwd_kernel(
    Q, K, V, O, LSE,
    q_descale, k_descale, v_descale,
    q_descale_stride_b, q_descale_stride_h,
    k_descale_stride_b, k_descale_stride_h,
    v_descale_stride_b, v_descale_stride_h,
    q_descale_stride_hq, q_descale_stride_blk, k_descale_stride_blk,
    window_left, window_right, softcap,
    softmax_scale,
    seqlen_q, seqlen_k, heads_q, group_size, write_lse,
    stride_qb, stride_qh, stride_qs,
    stride_kb, stride_kh, stride_ks,
    stride_vb, stride_vh, stride_vs,
    stride_ob, stride_oh, stride_os,
    cu_seqlens_q, cu_seqlens_k, varlen, total_q, total_k,
    HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
    CAUSAL: tl.constexpr, V_TRANSPOSED: tl.constexpr,
    WARP_SPECIALIZE: tl.constexpr, EVEN_N: tl.constexpr, BLOCK_DESCALE: tl.constexpr, SOFTCAP: tl.constexpr,
):
    # One-dimensional grid of num_m_blocks * batch * heads_q programs, query blocks fastest: the programs of
    # one (batch, head) run side by side and share its K and V in L2, and no grid dimension limits batch *
    # heads (grid y stops at 65535). Causal rows near the end see the most keys, so the heaviest blocks are
    # launched first and the short ones fill the tail of the wave.
    num_m_blocks = tl.cdiv(seqlen_q, BLOCK_M)
    pid = tl.program_id(0)
    pid_m = pid % num_m_blocks
    bh = pid // num_m_blocks
    if CAUSAL:
        pid_m = num_m_blocks - 1 - pid_m
    b = bh // heads_q
    h = bh % heads_q
    h_kv = h // group_size
    start_m = pid_m * BLOCK_M

    # Varlen (packed sequences, varlen != 0): sequence b's query rows start at cu_seqlens_q[b] of the packed q
    # and o, its keys at cu_seqlens_k[b] of k (the batch strides are 0); seqlen_q and seqlen_k come in as the
    # longest lengths (the grid's) and become this sequence's own. V^T (FP8) holds each sequence's keys from
    # v_start = roundup(cu_seqlens_k[b], varlen) + varlen b (varlen: the alignment, 16 from the host for this
    # kernel), so that every sequence's TMA base is 16-byte aligned (transpose_v_kernel writes it so). LSE stays
    # [batch, heads_q, max_seqlen_q].
    # Offsets that are not monotonic, leave the packed tensors (total_q, total_k) or give a sequence longer than
    # the grid's lengths: nothing is read for that sequence; its rows, where its query range is inside q, get
    # NaN (O and LSE); outside, nothing is written.
    max_seqlen_q = seqlen_q
    q_start = seqlen_q * 0
    k_start = seqlen_k * 0
    v_start = seqlen_k * 0
    bad_seq = seqlen_q < 0
    q_extent = seqlen_q
    if varlen != 0:
        q_start, q_end, q_ok = varlen_range(cu_seqlens_q, b, total_q)
        k_start, k_end, k_ok = varlen_range(cu_seqlens_k, b, total_k)
        bad_seq = ~q_ok | (q_end - q_start > seqlen_q) | ~k_ok | (k_end - k_start > seqlen_k)
        q_start = tl.where(q_ok, q_start, 0)
        seqlen_q = tl.where(q_ok, tl.minimum(q_end - q_start, max_seqlen_q), 0)
        k_start = tl.where(bad_seq, 0, k_start)
        seqlen_k = tl.where(bad_seq, 0, k_end - k_start)
        v_start = varlen_vt_start(k_start, b, varlen)
        # TMA cannot describe an empty dimension: an empty (or unusable) sequence's q and o descriptors cover row
        # 0 of q instead, which exists (the host launches nothing when total_q is 0); nothing is stored there.
        q_start = tl.where(seqlen_q > 0, q_start, 0)
        q_extent = tl.maximum(seqlen_q, 1)
    # Batch/head offsets in 64 bits (the strides are int64 parameters): b * stride_b passes 2^31 on large
    # caches and long contexts.
    b64 = b.to(tl.int64)
    q_base = Q + b64 * stride_qb + q_start.to(tl.int64) * stride_qs + h.to(tl.int64) * stride_qh
    k_base = K + b64 * stride_kb + k_start.to(tl.int64) * stride_ks + h_kv.to(tl.int64) * stride_kh
    if V_TRANSPOSED:
        v_base = V + b64 * stride_vb + h_kv.to(tl.int64) * stride_vh + v_start.to(tl.int64)
    else:
        v_base = V + b64 * stride_vb + k_start.to(tl.int64) * stride_vs + h_kv.to(tl.int64) * stride_vh
    o_base = O + b64 * stride_ob + q_start.to(tl.int64) * stride_os + h.to(tl.int64) * stride_oh

    # Device-side TMA descriptors over this (batch, head)'s slice: TMA zero-fills rows past the sequence
    # end on loads and drops them on stores, and warp specialization needs TMA loads to build its
    # producer partition.
    q_desc = tl.make_tensor_descriptor(q_base, [q_extent, HEAD_DIM], [stride_qs, 1], [BLOCK_M, HEAD_DIM])
    k_desc = tl.make_tensor_descriptor(k_base, [seqlen_k, HEAD_DIM], [stride_ks, 1], [BLOCK_N, HEAD_DIM])
    if V_TRANSPOSED:
        # V^T: HEAD_DIM rows of stride_vs elements, the sequence contiguous.
        v_desc = tl.make_tensor_descriptor(v_base, [HEAD_DIM, seqlen_k], [stride_vs, 1], [HEAD_DIM, BLOCK_N])
    else:
        v_desc = tl.make_tensor_descriptor(v_base, [seqlen_k, HEAD_DIM], [stride_vs, 1], [BLOCK_N, HEAD_DIM])
    o_desc = tl.make_tensor_descriptor(o_base, [q_extent, HEAD_DIM], [stride_os, 1], [BLOCK_M, HEAD_DIM])

    h_kv64 = h_kv.to(tl.int64)
    q_descale_base = q_descale + b64 * q_descale_stride_b + h_kv64 * q_descale_stride_h + \
        h.to(tl.int64) * q_descale_stride_hq
    k_descale_base = k_descale + b64 * k_descale_stride_b + h_kv64 * k_descale_stride_h
    vd = tl.load(v_descale + b64 * v_descale_stride_b + h_kv64 * v_descale_stride_h)
    offs_m = start_m + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    if BLOCK_DESCALE:
        # Per query row: its block's q descale (k's per key column, in the tile).
        qd_rows = tl.load(q_descale_base + (offs_m // DESCALE_BLOCK).to(tl.int64) * q_descale_stride_blk,
                          mask=offs_m < seqlen_q, other=1.0)
        tl.static_assert(not SOFTCAP, "soft-capping with per-block descales is not compiled")
        qk_scale = softmax_scale * LOG2E * qd_rows
    elif SOFTCAP:
        qk_scale = softmax_scale * tl.load(q_descale_base) * tl.load(k_descale_base)  # natural units (_attn_tile)
    else:
        qk_scale = softmax_scale * tl.load(q_descale_base) * tl.load(k_descale_base) * LOG2E
    m_i = tl.full([BLOCK_M], NEG_BIG, dtype=tl.float32)
    f_i = tl.full([BLOCK_M], NEG_BIG, dtype=tl.float32)  # frame of acc and l: 2^f_i scales them to true sums
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    # Unconditional: a q that comes out of a branch is a register value, and the Q.K^T wgmma then takes it from
    # registers instead of shared memory (measured on the H200: the D=64 instance 55% slower). A varlen block past
    # its sequence's end loads TMA's zero fill (or, for an empty sequence, row 0 of q) and uses none of it.
    q = q_desc.load([start_m, 0])

    # Row i sees keys i + lo_off <= j <= i + hi_off (and j < seqlen_k); tile ranges: common/key_range.py.
    lo_off, hi_off, n_start, lo_masked_end, full_end, n_end = key_range(start_m, seqlen_q, seqlen_k, window_left,
                                                                        window_right, BLOCK_M, BLOCK_N, CAUSAL)
    if start_m >= seqlen_q:  # varlen: a query block past this sequence's end (the grid is the longest's)
        lo_masked_end = n_start
        full_end = n_start
        n_end = n_start

    # [n_start, lo_masked_end) masked (a window's left edge), [lo_masked_end, full_end) unmasked,
    # [full_end, n_end) masked (sequence end, causal diagonal, a window's right edge).
    if not EVEN_N:
        for start_n in range(n_start, lo_masked_end, BLOCK_N):
            acc, l_i, m_i, f_i = _attn_tile(acc, l_i, m_i, f_i, q, k_desc, v_desc, start_n, offs_m, offs_n,
                                            qk_scale, lo_off, hi_off, seqlen_k, k_descale_base, k_descale_stride_blk,
                                            softcap, True, V_TRANSPOSED, BLOCK_DESCALE, SOFTCAP)
    for start_n in tl.range(lo_masked_end, full_end, BLOCK_N, warp_specialize=WARP_SPECIALIZE):
        acc, l_i, m_i, f_i = _attn_tile(acc, l_i, m_i, f_i, q, k_desc, v_desc, start_n, offs_m, offs_n, qk_scale,
                                        lo_off, hi_off, seqlen_k, k_descale_base, k_descale_stride_blk, softcap,
                                        False, V_TRANSPOSED, BLOCK_DESCALE, SOFTCAP)
    if not EVEN_N:
        for start_n in range(full_end, n_end, BLOCK_N):
            acc, l_i, m_i, f_i = _attn_tile(acc, l_i, m_i, f_i, q, k_desc, v_desc, start_n, offs_m, offs_n,
                                            qk_scale, lo_off, hi_off, seqlen_k, k_descale_base, k_descale_stride_blk,
                                            softcap, True, V_TRANSPOSED, BLOCK_DESCALE, SOFTCAP)

    # O = acc / l * v_descale (the frame cancels). A row that saw no key (l == 0) gets O = 0 and LSE = -inf;
    # a row whose scores hold NaN has l = NaN and gets NaN in both (NaN fails every comparison, so it is
    # tested as "not zero" rather than "positive").
    no_keys = l_i == 0.0
    inv_l = tl.where(no_keys, 0.0, vd / tl.where(no_keys, 1.0, l_i))
    inv_l = tl.where(bad_seq, float("nan"), inv_l)
    out = acc * inv_l[:, None]
    if start_m < seqlen_q:  # varlen: no store for a block past this sequence's end (it may be the next's rows)
        o_desc.store([start_m, 0], out.to(O.dtype.element_ty))
    # LSE is [batch, heads_q, seqlen_q] contiguous float32, natural log; write_lse is a runtime flag (part of
    # the mask) so LSE does not double the instances. Warp-specialized instances return a wrong frame f_i out
    # of their loop (Triton 3.6; O is right): the runtime never asks them for LSE.
    lse = tl.where(no_keys, float("-inf"), (f_i + tl.math.log2(tl.where(no_keys, 1.0, l_i))) * LN2)
    lse = tl.where(bad_seq, float("nan"), lse)
    lse_ptr = LSE + bh.to(tl.int64) * max_seqlen_q + offs_m
    tl.store(lse_ptr, lse, mask=(offs_m < seqlen_q) & (write_lse != 0))
