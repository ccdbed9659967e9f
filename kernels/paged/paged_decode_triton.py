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

from common.numerics import E4M3_MAX, LOG2E

_E4M3_MAX = tl.constexpr(E4M3_MAX)
_LOG2E = tl.constexpr(LOG2E)
_NEG_BIG = tl.constexpr(-1.0e30)


@triton.jit
def paged_append_kernel(
    K, V, KPages, VPages, KDescale, VDescale, BlockTable, Positions,
    new_tokens, heads_kv, num_pages, max_pages,
    stride_kb, stride_ks, stride_kh, stride_vb, stride_vs, stride_vh,
    descale_stride_page, descale_stride_head,
    HEAD_DIM: tl.constexpr, PAGE: tl.constexpr,
):
    """Writes new_tokens bf16 K/V rows per sequence into their pages as e4m3: token t of sequence b goes to
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
            tl.store(VPages + dst, z.to(tl.float8e4nv), mask=(offs_d < HEAD_DIM) & ok)


@triton.jit
def paged_decode_kernel(
    Q, KPages, VPages, KDescale, VDescale, BlockTable, Seqlens, O, PartialO, PartialML,
    softmax_scale, q_len, heads_q, heads_kv, num_pages, max_pages, pages_per_split, num_splits, row_chunks,
    stride_qb, stride_qs, stride_qh, stride_ob, stride_os, stride_oh,
    descale_stride_page, descale_stride_head,
    HEAD_DIM: tl.constexpr, PAGE: tl.constexpr, ROWS: tl.constexpr, BLOCK_N: tl.constexpr,
):
    """Program (b, kv head, chunk of ROWS rows, split). Row r is query token r // group of query head
    kv_head * group + r % group; rows >= q_len * group are padding (never stored). A sequence whose length
    exceeds its block table (max_pages * PAGE) or whose table names a page outside [0, num_pages) gets NaN in
    its output rows: the kernel never reads outside the cache or the table.

    Each iteration takes BLOCK_N keys, gathered row by row from their pages (BLOCK_N / PAGE pages of 16 tokens,
    or a part of one large page), so small pages cost no more iterations than large ones. Keys past the split or
    the sequence are not loaded at all (masked loads fill zeros): a NaN-poisoned free slot never reaches a
    register. Q.K^T: bf16 q times e4m3 k widened to bf16, both exact, float32 sums; each key's k descale scales
    its score column. P.V: P times each key's v descale, rounded to bf16 (8 bits, finer than the prefill
    kernel's e4m3 P), times V widened to bf16. Neither operand is widened to float32 in shared memory (the first
    version did, and spent its time there: 1.0 TB/s)."""
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
                offs_d[None, :], mask=row_ok[:, None], other=0.0)
    # Keys query token t may see: those before seqlen - q_len + t + 1 (causal among the new tokens).
    limit = seqlen - q_len + tok + 1
    m_i = tl.full([ROWS], _NEG_BIG, tl.float32)
    l_i = tl.zeros([ROWS], tl.float32)
    acc = tl.zeros([ROWS, HEAD_DIM], tl.float32)
    qk_scale = softmax_scale * _LOG2E
    n_pages = tl.cdiv(seqlen, PAGE)
    # The splits cover num_splits * pages_per_split pages (planned from the host's max_seqlen): a longer sequence
    # would lose its last pages silently; it gets NaN rows instead.
    bad = bad | (n_pages > num_splits * pages_per_split)
    key_lo = split * pages_per_split * PAGE
    key_hi = tl.minimum(key_lo + pages_per_split * PAGE, seqlen)
    offs_n = tl.arange(0, BLOCK_N)
    table_row = BlockTable + b.to(tl.int64) * max_pages
    bad_pages = tl.zeros([BLOCK_N], tl.int32)
    for start in tl.range(key_lo, key_hi, BLOCK_N):
        key = start + offs_n
        live = key < key_hi
        page = tl.load(table_row + key // PAGE, mask=live, other=0)
        bad_pages = bad_pages | (live & ((page < 0) | (page >= num_pages))).to(tl.int32)
        page = tl.minimum(tl.maximum(page, 0), num_pages - 1).to(tl.int64)
        rows = ((page * PAGE + key % PAGE) * heads_kv + hk) * HEAD_DIM
        k = tl.load(KPages + rows[:, None] + offs_d[None, :], mask=live[:, None], other=0.0)
        v = tl.load(VPages + rows[:, None] + offs_d[None, :], mask=live[:, None], other=0.0)
        dsc = page * descale_stride_page + hk * descale_stride_head
        kd = tl.load(KDescale + dsc, mask=live, other=0.0)
        vd = tl.load(VDescale + dsc, mask=live, other=0.0)
        s = tl.dot(q, tl.trans(k.to(tl.bfloat16))) * (qk_scale * kd)[None, :]
        visible = (key[None, :] < limit[:, None]) & live[None, :]
        s = tl.where(visible, s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        alpha = tl.math.exp2(m_i - m_new)
        prob = tl.where(visible, tl.math.exp2(s - m_new[:, None]), 0.0)
        l_i = l_i * alpha + tl.sum(prob, 1)
        acc = acc * alpha[:, None] + tl.dot((prob * vd[None, :]).to(tl.bfloat16), v.to(tl.bfloat16))
        m_i = m_new
    bad = bad | (tl.max(bad_pages, 0) != 0)
    # An invalid table or length poisons the whole split (and so the combined rows): NaN, never garbage.
    l_i = tl.where(bad, float("nan"), l_i)
    if num_splits == 1:
        out = acc / tl.where(l_i == 0.0, 1.0, l_i)[:, None]
        tl.store(O + b.to(tl.int64) * stride_ob + tok[:, None].to(tl.int64) * stride_os + head[:, None] * stride_oh +
                 offs_d[None, :], out.to(O.dtype.element_ty), mask=row_ok[:, None])
    else:
        # Partials: [batch, heads_kv, row_chunks, num_splits, ROWS, HEAD_DIM] and [..., ROWS, 2] (max, sum).
        prow = pid.to(tl.int64) * ROWS + tl.arange(0, ROWS)
        tl.store(PartialO + prow[:, None] * HEAD_DIM + offs_d[None, :], acc)
        tl.store(PartialML + prow * 2, m_i)
        tl.store(PartialML + prow * 2 + 1, l_i)


@triton.jit
def paged_combine_kernel(
    PartialO, PartialML, O, q_len, heads_q, heads_kv, num_splits, row_chunks,
    stride_ob, stride_os, stride_oh,
    HEAD_DIM: tl.constexpr, ROWS: tl.constexpr,
):
    """Program (b, kv head, row chunk): O = sum_s acc_s 2^(m_s - M) / sum_s l_s 2^(m_s - M), M the largest m_s."""
    bh = tl.program_id(0)  # (b * heads_kv + kv head) * row_chunks + chunk
    chunk = bh % row_chunks
    hk = (bh // row_chunks) % heads_kv
    b = bh // row_chunks // heads_kv
    group = heads_q // heads_kv
    offs_r = chunk * ROWS + tl.arange(0, ROWS)
    offs_d = tl.arange(0, HEAD_DIM)
    m = tl.full([ROWS], _NEG_BIG, tl.float32)
    local = tl.arange(0, ROWS)
    for s in tl.range(0, num_splits):
        prow = (bh.to(tl.int64) * num_splits + s) * ROWS + local
        m = tl.maximum(m, tl.load(PartialML + prow * 2))
    acc = tl.zeros([ROWS, HEAD_DIM], tl.float32)
    l = tl.zeros([ROWS], tl.float32)
    for s in tl.range(0, num_splits):
        prow = (bh.to(tl.int64) * num_splits + s) * ROWS + local
        w = tl.math.exp2(tl.load(PartialML + prow * 2) - m)
        l += tl.load(PartialML + prow * 2 + 1) * w
        acc += tl.load(PartialO + prow[:, None] * HEAD_DIM + offs_d[None, :]) * w[:, None]
    tok = offs_r // group
    head = hk * group + offs_r % group
    out = acc / tl.where(l == 0.0, 1.0, l)[:, None]
    tl.store(O + b.to(tl.int64) * stride_ob + tok[:, None].to(tl.int64) * stride_os + head[:, None] * stride_oh +
             offs_d[None, :], out.to(O.dtype.element_ty), mask=(offs_r < q_len * group)[:, None])
