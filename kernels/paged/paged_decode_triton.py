"""Decode attention over a paged FP8 KV cache, and the append that fills it (issue 9's first kernels).

The cache (docs/PAGED_CACHE.md):
    k_pages, v_pages   e4m3 [num_pages, PAGE, heads_kv, head_dim]  (token-major, as vLLM's key/value cache)
    k_descale, v_descale  float32, element (page, kv head) at page * stride_page + head * stride_head: per
                          (page, kv head), or per kv head with stride_page = 0 (static, calibrated)
    block_table        int32 [batch, max_pages]: the pages of sequence b in order
    seqlens            int32 [batch]: tokens in the cache per sequence (the new queries' own keys included)

Decode: q [batch, q_len, heads_q, head_dim] (q_len 1..8 new tokens per sequence: speculative decoding, causal
among them: query t sees keys < seqlen - q_len + t + 1), bf16. One program per (sequence, kv head, split of the
keys): it reads each K/V row of its split once for all the query heads of its kv head (GQA: group = heads_q /
heads_kv) and all q_len tokens, q_len * group rows padded to at least 16 for the MMA. Decode is bound by reading
the cache, so both products run as small bf16 MMAs on operands widened in registers: bf16 q and e4m3 k are exact
in bf16, so Q.K^T has exact products; P (times the v descale) rounds to bf16. Scores and P.V accumulate in float32
with the online softmax; each key's page gives its k descale (score column) and v descale (P column). A split
writes its partial output with (max, sum) per row; the combine kernel merges the splits (one split: the decode
kernel writes O directly). Keys past a sequence's length are never loaded (masked loads), so a free slot
poisoned with NaN cannot reach O.
"""

import triton
import triton.language as tl
from triton.language.extra.cuda import gdc_wait

from common.numerics import E4M3_MAX, LOG2E
from common.softcap import softcap as _softcap

_E4M3_MAX = tl.constexpr(E4M3_MAX)
_LOG2E = tl.constexpr(LOG2E)
_NEG_BIG = tl.constexpr(-1.0e30)
# Splits the combine reads per load (64 x HEAD_DIM float32 partials: 64 registers per thread at D=128).
_SPLIT_BLOCK = tl.constexpr(64)


@triton.jit
def paged_append_kernel(
    K, V, KPages, VPages, KDescale, VDescale, BlockTable, Positions,
    new_tokens, heads_kv, num_pages, max_pages,
    stride_kb, stride_ks, stride_kh, stride_vb, stride_vs, stride_vh,
    descale_stride_page, descale_stride_head,
    HEAD_DIM: tl.constexpr, PAGE: tl.constexpr,
):
    """Writes new_tokens bf16 K/V rows per sequence into their pages as e4m3 (K token-major, V transposed inside
    the page): token t of sequence b goes to
    position Positions[b] + t, i.e. page BlockTable[b, pos // PAGE], slot pos % PAGE, quantized with that page's
    (kv head's) descale: x / descale saturated to +-448. One program per (sequence, token, kv head). A position
    outside the block table or a table entry outside [0, num_pages) writes nothing (the table is not read past
    its row, the pages never outside the cache)."""
    pid = tl.program_id(0)
    h = pid % heads_kv
    bt = pid // heads_kv
    t = bt % new_tokens
    b = bt // new_tokens
    pos = tl.load(Positions + b) + t
    in_table = (pos >= 0) & (pos < max_pages * PAGE)
    page = tl.load(BlockTable + b.to(tl.int64) * max_pages + tl.where(in_table, pos // PAGE, 0)).to(tl.int64)
    ok = in_table & (page >= 0) & (page < num_pages)
    page = tl.where(ok, page, 0)
    slot = pos % PAGE
    offs_d = tl.arange(0, HEAD_DIM)
    dst = ((page * PAGE + slot) * heads_kv + h) * HEAD_DIM + offs_d
    # V^T inside the page: [heads_kv, HEAD_DIM, PAGE], so a (page, kv head) slice is one contiguous block with the
    # tokens innermost, the K-major operand the FP8 P.V MMA needs.
    dst_v = ((page * heads_kv + h) * HEAD_DIM + offs_d) * PAGE + slot
    dsc = page * descale_stride_page + h * descale_stride_head
    for which in tl.static_range(2):
        if which == 0:
            x = tl.load(K + b.to(tl.int64) * stride_kb + t * stride_ks + h * stride_kh + offs_d).to(tl.float32)
            z = x / tl.load(KDescale + dsc)
            z = tl.where(z == z, tl.minimum(tl.maximum(z, -_E4M3_MAX), _E4M3_MAX), z)
            tl.store(KPages + dst, z.to(tl.float8e4nv), mask=(offs_d < HEAD_DIM) & ok)
        else:
            x = tl.load(V + b.to(tl.int64) * stride_vb + t * stride_vs + h * stride_vh + offs_d).to(tl.float32)
            z = x / tl.load(VDescale + dsc)
            z = tl.where(z == z, tl.minimum(tl.maximum(z, -_E4M3_MAX), _E4M3_MAX), z)
            tl.store(VPages + dst_v, z.to(tl.float8e4nv), mask=(offs_d < HEAD_DIM) & ok)


@triton.jit
def _two_e4m3_terms(x):
    """x (float32, |x| <= 448) as hi + lo, both e4m3: hi = x rounded, lo = the remainder rounded. hi + lo holds x
    to about 8 significant bits (bf16's precision) where lo is a normal e4m3 value (|x| >= 0.25)."""
    hi = x.to(tl.float8e4nv)
    lo = (x - hi.to(tl.float32)).to(tl.float8e4nv)
    return hi, lo


@triton.jit
def _max_of_pairs(a0, b0, a1, b1):
    return tl.maximum(a0, a1), tl.maximum(b0, b1)


@triton.jit
def _decode_block(start, key_hi, limit, low, low_min, limit_max, qt_hi, qt_lo, row_scale, softcap, m_i, l_i, acc,
                  bad_pages,
                  KPages, VPages, KDescale, VDescale, table_row, hk, heads_kv, num_pages,
                  descale_stride_page, descale_stride_head,
                  HEAD_DIM: tl.constexpr, PAGE: tl.constexpr, BLOCK_N: tl.constexpr, MASKED: tl.constexpr,
                  SOFTCAP: tl.constexpr):
    """One iteration: BLOCK_N keys from NP pages of SUB tokens (several whole small pages, or a part of one large
    page; every iteration starts on a multiple of BLOCK_N: the host rounds a split's pages to whole iterations).
    Transposed products, so that the keys are the MMA's M dimension (64 per warpgroup) and the few query rows its
    N dimension: S^T = K Q^T, O^T += V^T P^T. Both are FP8 MMAs on the cache's bytes as they are. MASKED: the
    block reaches past key_hi (the tail of a split or sequence): keys past it are not loaded at all (a
    NaN-poisoned free slot never reaches a register); otherwise every key is live and the loads are unmasked."""
    NP: tl.constexpr = BLOCK_N // PAGE if BLOCK_N > PAGE else 1
    SUB: tl.constexpr = BLOCK_N // NP
    offs_p = tl.arange(0, NP)
    offs_t = tl.arange(0, SUB)
    offs_d = tl.arange(0, HEAD_DIM)
    key = start + tl.arange(0, BLOCK_N)
    first_page = start // PAGE
    if PAGE > BLOCK_N:
        in_page = tl.multiple_of(start % PAGE, BLOCK_N) + offs_t  # inside one page
    else:
        in_page = offs_t  # whole pages
    if MASKED:
        live_pt = (start + offs_p[:, None] * SUB + offs_t[None, :]) < key_hi  # [NP, SUB]
        page_live = (first_page + offs_p) * PAGE < key_hi
        page = tl.load(table_row + first_page + offs_p, mask=page_live, other=0)
    else:
        page_live = offs_p >= 0
        page = tl.load(table_row + first_page + offs_p)
    bad_pages = bad_pages | (page_live & ((page < 0) | (page >= num_pages))).to(tl.int32)
    page = tl.minimum(tl.maximum(page, 0), num_pages - 1).to(tl.int64)
    k_base = page * (PAGE * heads_kv * HEAD_DIM) + hk * HEAD_DIM  # [NP]
    k_ptr = KPages + k_base[:, None, None] + (in_page * (heads_kv * HEAD_DIM))[None, :, None] + offs_d[None, None, :]
    v_base = (page * heads_kv + hk) * (HEAD_DIM * PAGE)  # [NP]
    v_ptr = VPages + v_base[None, :, None] + (offs_d * PAGE)[:, None, None] + in_page[None, None, :]
    dsc = page * descale_stride_page + hk * descale_stride_head  # [NP]
    if MASKED:
        k = tl.load(k_ptr, mask=live_pt[:, :, None], other=0.0)
        vt = tl.load(v_ptr, mask=live_pt[None, :, :], other=0.0)
        kd = tl.load(KDescale + dsc, mask=page_live, other=0.0)
        vd = tl.load(VDescale + dsc, mask=page_live, other=0.0)
    else:
        k = tl.load(k_ptr)
        vt = tl.load(v_ptr)
        kd = tl.load(KDescale + dsc)
        vd = tl.load(VDescale + dsc)
    k = tl.reshape(k, (BLOCK_N, HEAD_DIM))
    vt = tl.reshape(vt, (HEAD_DIM, BLOCK_N))
    kd = tl.reshape(tl.broadcast_to(kd[:, None], (NP, SUB)), (BLOCK_N,))
    vd = tl.reshape(tl.broadcast_to(vd[:, None], (NP, SUB)), (BLOCK_N,))
    st = tl.dot(k, qt_lo, tl.dot(k, qt_hi))  # [BLOCK_N, ROWS]
    # Natural-log units (softmax_scale q.k), soft-capped when asked, then log2 units for exp2.
    st = st * kd[:, None] * row_scale[None, :]
    if SOFTCAP:
        st = _softcap(st, softcap)
    st = st * _LOG2E
    visible = (key[:, None] < limit[None, :]) & (key[:, None] >= low[None, :])
    if MASKED:
        visible = visible & (key < key_hi)[:, None]
    st = tl.where(visible, st, float("-inf"))
    # P^T times each key's v descale relative to the largest magnitude among the keys some row sees (a key no row
    # sees, e.g. before a window inside the block, must not coarsen the others), times 448, as two e4m3 terms (a
    # negative descale, which x = e4m3 * descale allows, stays within +-448). The ratio is taken first: 448 / vd_max
    # overflows for descales below ~1e-36.
    seen = (key >= low_min) & (key < limit_max)
    if MASKED:
        seen = seen & (key < key_hi)
    # The keys are the MMA's M dimension and span the four warps: every reduction over them goes through shared
    # memory between two barriers. The scores' maximum and the v descales' maximum go through one reduction of a
    # pair (+2-3.5% TB/s on the H200 against two, docs/perf/NOTES.md); vd_max comes out once per column (the same
    # value in each).
    m_tile, vd_max = tl.reduce((st, tl.broadcast_to(tl.where(seen, tl.abs(vd), 0.0)[:, None], st.shape)), 0,
                               _max_of_pairs)
    vd_max = tl.where(vd_max > 0, vd_max, 1.0)
    m_new = tl.maximum(m_i, m_tile)
    alpha = tl.math.exp2(m_i - m_new)
    prob = tl.where(visible, tl.math.exp2(st - m_new[None, :]), 0.0)
    l_i = l_i * alpha[None, :] + prob  # [BLOCK_N, ROWS]: summed over the keys once, after the loop
    p_hi, p_lo = _two_e4m3_terms(prob * ((vd[:, None] / vd_max[None, :]) * _E4M3_MAX))
    acc = acc * alpha[None, :] + tl.dot(vt, p_lo, tl.dot(vt, p_hi)) * (vd_max / _E4M3_MAX)[None, :]
    return m_new, l_i, acc, bad_pages


@triton.jit
def _decode_range(key_lo, key_hi, limit, low, low_min, limit_max, qt_hi, qt_lo, row_scale, softcap, m_i, l_i, acc,
                  bad_pages,
                  KPages, VPages, KDescale, VDescale, table_row, hk, heads_kv, num_pages,
                  descale_stride_page, descale_stride_head,
                  HEAD_DIM: tl.constexpr, PAGE: tl.constexpr, BLOCK_N: tl.constexpr, SOFTCAP: tl.constexpr):
    """The split's keys [key_lo, key_hi): whole blocks unmasked (pipelined), then the block past the end masked."""
    full_end = key_lo + tl.maximum(key_hi - key_lo, 0) // BLOCK_N * BLOCK_N
    for start in tl.range(key_lo, full_end, BLOCK_N):
        m_i, l_i, acc, bad_pages = _decode_block(
            start, key_hi, limit, low, low_min, limit_max, qt_hi, qt_lo, row_scale, softcap, m_i, l_i, acc,
            bad_pages, KPages, VPages,
            KDescale, VDescale, table_row, hk, heads_kv, num_pages, descale_stride_page, descale_stride_head,
            HEAD_DIM, PAGE, BLOCK_N, False, SOFTCAP)
    if full_end < key_hi:
        m_i, l_i, acc, bad_pages = _decode_block(
            full_end, key_hi, limit, low, low_min, limit_max, qt_hi, qt_lo, row_scale, softcap, m_i, l_i, acc,
            bad_pages, KPages, VPages,
            KDescale, VDescale, table_row, hk, heads_kv, num_pages, descale_stride_page, descale_stride_head,
            HEAD_DIM, PAGE, BLOCK_N, True, SOFTCAP)
    return m_i, l_i, acc, bad_pages


@triton.jit
def paged_decode_kernel(
    Q, KPages, VPages, KDescale, VDescale, BlockTable, Seqlens, O, PartialO, PartialML,
    softmax_scale, q_len, heads_q, heads_kv, num_pages, max_pages, pages_per_split, num_splits, row_chunks,
    stride_qb, stride_qs, stride_qh, stride_ob, stride_os, stride_oh,
    descale_stride_page, descale_stride_head, window_left, softcap,
    HEAD_DIM: tl.constexpr, PAGE: tl.constexpr, ROWS: tl.constexpr, BLOCK_N: tl.constexpr,
):
    """Program (b, kv head, chunk of ROWS rows, split). Row r is query token r // group of query head
    kv_head * group + r % group; rows >= q_len * group are padding (never stored). A sequence whose length
    exceeds its block table (max_pages * PAGE) or whose table names a page outside [0, num_pages) gets NaN in
    its output rows: the kernel never reads outside the cache or the table.

    q enters the MMA as two e4m3 terms per row (q * 448 / max|q_row| = hi + lo: bf16-like precision), P likewise;
    K and V^T are the cache's bytes, never widened (the first versions widened them to bf16 or float32 in
    registers and were bound by those instructions). Whole blocks run unmasked; the block that reaches past the
    split's or the sequence's end runs masked, once.

    window_left >= 0: query token t (at position p = seqlen - q_len + t) sees keys p - window_left <= j <= p
    (sliding-window attention; the right side is causal). The splits then cover only the keys some row can see:
    from the iteration holding seqlen - q_len - window_left on; blocks before it are never loaded. softcap > 0:
    scores s become softcap * tanh(s / softcap) (Gemma 2)."""
    pid = tl.program_id(0)
    split = pid % num_splits
    rest = pid // num_splits
    chunk = rest % row_chunks
    bh = rest // row_chunks
    hk = bh % heads_kv
    b = bh // heads_kv
    group = heads_q // heads_kv
    seqlen = tl.load(Seqlens + b)
    bad = (seqlen < 0) | (seqlen > max_pages * PAGE)
    seqlen = tl.minimum(tl.maximum(seqlen, 0), max_pages * PAGE)
    offs_r = chunk * ROWS + tl.arange(0, ROWS)
    offs_d = tl.arange(0, HEAD_DIM)
    tok = offs_r // group
    head = hk * group + offs_r % group
    row_ok = offs_r < q_len * group
    q = tl.load(Q + b.to(tl.int64) * stride_qb + tok[:, None].to(tl.int64) * stride_qs + head[:, None] * stride_qh +
                offs_d[None, :], mask=row_ok[:, None], other=0.0).to(tl.float32)
    # Each row scaled to e4m3's range by its own factor (a zero row keeps 1; a NaN row stays NaN).
    q_amax = tl.max(tl.abs(q), 1)
    # (448 / amax overflows below ~1e-36: such rows are scaled as if their largest entry were 1e-30.)
    q_scale = tl.where(q_amax > 0, _E4M3_MAX / tl.maximum(q_amax, 1e-30), 1.0)
    q_hi, q_lo = _two_e4m3_terms(q * q_scale[:, None])
    qt_hi = tl.trans(q_hi)
    qt_lo = tl.trans(q_lo)
    row_scale = softmax_scale / q_scale
    # Keys query token t may see: those before seqlen - q_len + t + 1 (causal among the new tokens), and with a
    # window, none before seqlen - q_len + t - window_left.
    limit = seqlen - q_len + tok + 1
    # In 64 bits: a window near 2^31 must not wrap (seqlen - q_len - window_left would).
    if window_left >= 0:
        low = tl.maximum(limit.to(tl.int64) - 1 - window_left, -1).to(tl.int32)
        win_lo = (tl.maximum(seqlen.to(tl.int64) - q_len - window_left, 0) // BLOCK_N * BLOCK_N).to(tl.int32)
    else:
        low = tl.zeros_like(limit) - 1
        win_lo = seqlen * 0
    # The keys some row of this program sees lie in [low_min, limit_max) (padding rows only widen it).
    low_min = tl.min(low, 0)
    limit_max = tl.max(limit, 0)
    m_i = tl.full([ROWS], _NEG_BIG, tl.float32)
    # P's row sums are kept per key position (each thread its own keys) and reduced over the keys once after the
    # loop, instead of a reduction across the four warps (shared memory and barriers) every iteration: BAR.SYNC
    # 80 -> 71 per 128 keys, +8-10% TB/s on the H200 (docs/perf/NOTES.md, "DEFERRED_SUM").
    l_i = tl.zeros([BLOCK_N, ROWS], tl.float32)
    acc = tl.zeros([HEAD_DIM, ROWS], tl.float32)  # O^T
    # The splits cover num_splits * pages_per_split pages from win_lo on (planned from the host's max_seqlen and
    # window): a longer sequence would lose its last pages silently; it gets NaN rows instead.
    bad = bad | ((seqlen - win_lo).to(tl.int64) > num_splits.to(tl.int64) * pages_per_split * PAGE)
    key_lo = win_lo + split * pages_per_split * PAGE
    key_hi = tl.minimum(key_lo + pages_per_split * PAGE, seqlen)
    table_row = BlockTable + b.to(tl.int64) * max_pages
    NP: tl.constexpr = BLOCK_N // PAGE if BLOCK_N > PAGE else 1
    bad_pages = tl.zeros([NP], tl.int32)
    # Two copies of the loop, without and with soft-capping: computing tanh on every score and selecting it away
    # cost a quarter of the loop's instructions (1156 vs 871 SASS per warp per 128 keys) for the common case.
    if softcap > 0:
        m_i, l_i, acc, bad_pages = _decode_range(
            key_lo, key_hi, limit, low, low_min, limit_max, qt_hi, qt_lo, row_scale, softcap, m_i, l_i, acc,
            bad_pages, KPages, VPages,
            KDescale, VDescale, table_row, hk, heads_kv, num_pages, descale_stride_page, descale_stride_head,
            HEAD_DIM, PAGE, BLOCK_N, True)
    else:
        m_i, l_i, acc, bad_pages = _decode_range(
            key_lo, key_hi, limit, low, low_min, limit_max, qt_hi, qt_lo, row_scale, softcap, m_i, l_i, acc,
            bad_pages, KPages, VPages,
            KDescale, VDescale, table_row, hk, heads_kv, num_pages, descale_stride_page, descale_stride_head,
            HEAD_DIM, PAGE, BLOCK_N, False)
    bad = bad | (tl.max(bad_pages, 0) != 0)
    # An invalid table or length poisons the whole split (and so the combined rows): NaN, never garbage.
    l_i = tl.sum(l_i, 0)
    l_i = tl.where(bad, float("nan"), l_i)
    if num_splits == 1:
        out = acc / tl.where(l_i == 0.0, 1.0, l_i)[None, :]
        tl.store(O + b.to(tl.int64) * stride_ob + tok[None, :].to(tl.int64) * stride_os + head[None, :] * stride_oh +
                 offs_d[:, None], out.to(O.dtype.element_ty), mask=row_ok[None, :])
    else:
        # Partials: [batch, heads_kv, row_chunks, num_splits, ROWS, HEAD_DIM] and [..., ROWS, 2] (max, sum).
        prow = pid.to(tl.int64) * ROWS + tl.arange(0, ROWS)
        tl.store(PartialO + prow[None, :] * HEAD_DIM + offs_d[:, None], acc)
        tl.store(PartialML + prow * 2, m_i)
        tl.store(PartialML + prow * 2 + 1, l_i)


@triton.jit
def paged_combine_kernel(
    PartialO, PartialML, O, q_len, heads_q, heads_kv, num_splits, row_chunks,
    stride_ob, stride_os, stride_oh,
    HEAD_DIM: tl.constexpr, ROWS: tl.constexpr, AFTER_DECODE: tl.constexpr = False,
):
    """Program (b, kv head, row chunk, row): O = sum_s acc_s 2^(m_s - M) / sum_s l_s 2^(m_s - M), M the largest m_s.
    The splits are read _SPLIT_BLOCK at a time (one load of their partials, not one per split: a loop with a load
    per split waited for each load in turn, batch 1 at 128k, 33 splits: 19 us of a 92 us call on the H200,
    docs/perf/NOTES.md), and each block's (m, l) and partial outputs are loaded together and merged online
    (running maximum, the sums rescaled when it grows): one round trip to memory per block, where a first pass for
    M and a second for the sums took two. Up to _SPLIT_BLOCK splits (batch 1 at 128k: 33) the result is the
    two-pass formula's, bit for bit (the running maximum is M from the first block on)."""
    pid = tl.program_id(0)  # ((b * heads_kv + kv head) * row_chunks + chunk) * ROWS + row
    r = pid % ROWS
    bh = pid // ROWS
    chunk = bh % row_chunks
    hk = (bh // row_chunks) % heads_kv
    b = bh // row_chunks // heads_kv
    group = heads_q // heads_kv
    row = chunk * ROWS + r
    # A padding row (past the chunk's query rows: half the programs at one token and GQA 4:1 with 8 rows) loads
    # nothing; its store is masked below.
    real = row < q_len * group
    if AFTER_DECODE:
        # Launched as a programmatic dependent of the decode (src/paged/paged.cpp: the library's instances): wait
        # for its partials to be complete and visible before the first load (a no-op under an ordinary launch;
        # off for Triton's interpreter, which has no inline PTX).
        gdc_wait()
    offs_s = tl.arange(0, _SPLIT_BLOCK)
    offs_d = tl.arange(0, HEAD_DIM)
    m = _NEG_BIG
    acc = tl.zeros([HEAD_DIM], tl.float32)
    l = 0.0
    for s0 in tl.range(0, num_splits, _SPLIT_BLOCK):
        live = (s0 + offs_s < num_splits) & real
        prow = (bh.to(tl.int64) * num_splits + s0 + offs_s) * ROWS + r
        m_s = tl.load(PartialML + prow * 2, mask=live, other=_NEG_BIG)
        l_s = tl.load(PartialML + prow * 2 + 1, mask=live, other=0.0)
        part = tl.load(PartialO + prow[:, None] * HEAD_DIM + offs_d[None, :], mask=live[:, None], other=0.0)
        m_new = tl.maximum(m, tl.max(m_s, 0))
        # The sums so far move to the new maximum (a factor of 1 while it stays; 0 for the start's _NEG_BIG).
        alpha = tl.math.exp2(m - m_new)
        w = tl.where(live, tl.math.exp2(m_s - m_new), 0.0)
        l = l * alpha + tl.sum(l_s * w, 0)
        acc = acc * alpha + tl.sum(part * w[:, None], 0)
        m = m_new
    tok = row // group
    head = hk * group + row % group
    out = acc / tl.where(l == 0.0, 1.0, l)
    tl.store(O + b.to(tl.int64) * stride_ob + tok.to(tl.int64) * stride_os + head * stride_oh + offs_d,
             out.to(O.dtype.element_ty), mask=real)
