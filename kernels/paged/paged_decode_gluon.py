"""Decode attention over the paged FP8 KV cache in Gluon: whole page slices loaded by TMA from a producer warp.

The same computation as paged_decode_triton.paged_decode_kernel, with its numerics except where UNIFORM_PAGE
(below) rounds in another order (its programs, one per (sequence,
kv head, chunk of ROWS query rows, split of the keys), are the work items here; the same partial output for the
same combine kernel), with the loads taken off the MMA warps. In the Triton kernel every thread computes the addresses of its
part of each K and V tile and issues cp.async itself: 255 registers, two CTAs per SM, and the H200 profile shows
the loads issued late (DRAM 77%, 0.56 eligible warps per scheduler). Here:

    producer   1 warp: per BLOCK_N keys (one ring stage) reads the block table and issues one TMA box per page
               slice: K [SUB, HEAD_DIM] and V^T [HEAD_DIM, SUB] (SUB = min(PAGE, BLOCK_N) tokens), the stage's
               "ready" mbarrier counting their bytes. A page past the split, or a table entry outside the cache,
               is loaded from a coordinate past the cache's end: TMA fills zeros (and counts the bytes).
    consumer   the default partition, one warpgroup: keys on the MMA's M dimension, the query rows on N (ROWS,
               padded to 8 or more), as the Triton kernel: S^T = K Q^T (K from shared memory, Q^T as two e4m3
               terms held in shared memory for the whole item), the online softmax over the keys, P^T (two
               e4m3 terms, times each key's v descale relative to the tile's largest) written to shared memory,
               O^T += V^T P^T. S^T of the next stage is issued as soon as P.V is, so it runs under P.V.

Persistent: the work items are the Triton kernel's programs (num_items of them); each program walks items
program_id, program_id + num_programs, ... and both partitions count ring iterations across items, so the
producer loads the next item's first pages while the consumer finishes the current one (its last blocks, O's
store, the next Q's load). The host launches 2 or 3 programs per SM (src/paged/decode_grid.h).

HEAD_PAIRS (the library's `_pairs_gluon` instance, the heuristic's pick from 256 pairs of kv heads; a switch of
bench/sweep_decode.py too): each work item is a pair of adjacent kv heads (b, 2p, 2p + 1) instead of one, for calls
whose rows fit half of ROWS (q_len x the query heads per kv head <= ROWS / 2, e.g. GQA 32/8 with one token on the r8
instance, which otherwise computes 8 MMA columns for 4 rows) and need no split. Q's rows 0..ROWS/2-1 are the first
head's, the rest the second's; each stage holds both heads' K and V^T slices (the same pages), S^T is taken against
each head's K and each column keeps its head's product, and O^T likewise: one online softmax over [BLOCK_N, ROWS]
per stage for twice the bytes, and half as many item boundaries (bench_decode's (64, 8k), (128, 4k)'s bytes in half
the items, read ~2% faster).
The host (or the sweep) launches batch * heads_kv / 2 items with one row chunk and one split; with PAIR_SPLITS
(on in the library's head-pair instance: codegen/operations/paged.py LIBRARY_PAIR_SPLITS, carried by the C++ record
so that the host plans splits only for an instance compiled with it) batch * heads_kv / 2 * splits items, each
head's rows written into its own kv head's partials.

UNIFORM_PAGE (on in the library's instances; it applies where PAGE >= BLOCK_N): a stage's keys lie in one page,
so its block table entry and k / v descales are scalars, the k descale joins each row's scale (one FFMA a score into
the exponential), P comes out of the exponential scaled to 448 (the v descale is then P.V's scale: no per-key
factor relative to the stage's largest v descale), and the masks are built only for stages where some row's visible
keys end (_softmax_block_page). Pages of 16 keep the general path (_softmax_block).

Tail: the block that reaches past the split's (or sequence's) end masks its scores; its V^T columns past the end
are zeroed in shared memory before P.V (P is 0 there, but a free slot poisoned with NaN times 0 is NaN).

K_HEAD_MAJOR (a switch of bench/sweep_decode.py, off in the library's instances, not measured yet): K pages stored
head-major, [num_pages, heads_kv, PAGE, HEAD_DIM] (a converted vLLM key cache, as the V^T pages are), so that one kv
head's slice of a page is one contiguous piece (8 KB at pages of 64) instead of PAGE rows of HEAD_DIM bytes
heads_kv * HEAD_DIM apart; k_desc is then [num_pages * heads_kv * PAGE, HEAD_DIM] with the same box.

TMA descriptors (host; two dimensions, innermost last):
    k_desc    K pages as [num_pages * PAGE, heads_kv * HEAD_DIM]      box [SUB, HEAD_DIM]   128-byte swizzle
    vt_desc   V^T pages as [num_pages * heads_kv * HEAD_DIM, PAGE]   box [HEAD_DIM, SUB]   SUB-byte swizzle (<= 128)
              pages of 16: the same bytes as [num_pages * heads_kv * HEAD_DIM * 16 / 128, 128], box [HEAD_DIM / 8,
              128], unswizzled: a page's V^T slice is 2 KB in one piece, loaded as 16 rows of 128 bytes rather
              than 128 rows of 16 (TMA's cost goes with its rows; H200: 3.45 TB/s with 16-byte rows), and
              written row-major, the bytes of _vt_core_layout
"""

import math

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (
    fence_async_shared,
    mbarrier,
    tma,
    warpgroup_mma,
    warpgroup_mma_wait,
)

from common import numerics

LOG2E = gl.constexpr(numerics.LOG2E)
E4M3_MAX = gl.constexpr(numerics.E4M3_MAX)
NEG_BIG = gl.constexpr(numerics.NEG_BIG)
# log2(448): P's exponent offset on the page path (_softmax_block_page), so that P comes out of the exponential
# already scaled to e4m3's largest value.
LOG2_E4M3_MAX = gl.constexpr(math.log2(numerics.E4M3_MAX))


@gluon.constexpr_function
def _vt_core_layout(head_dim, block_n):
    """A stage's V^T as [HEAD_DIM, BLOCK_N] over wgmma's unswizzled core matrices, for pages of 16 tokens. A page
    slice of V^T is [HEAD_DIM, 16] e4m3: rows of 16 bytes, narrower than any swizzle and than the MMA's 32-byte K
    step, so the slices cannot be separate MMA operands. TMA writes each slice row-major (HEAD_DIM x 16 bytes),
    which is a column of core matrices (8 rows x 16 bytes, 128 contiguous bytes) stacked along M; the stage's
    slices one after the other are then one unswizzled K-major operand: core matrices 128 bytes apart along M,
    HEAD_DIM * 16 bytes apart along K. Offset bits, lowest first: the 16 keys of a row, the rows, the slice."""
    bases = [[0, 1 << i] for i in range(4)]
    bases += [[1 << i, 0] for i in range(head_dim.bit_length() - 1)]
    bases += [[0, 16 << i] for i in range((block_n // 16).bit_length() - 1)]
    return gl.SharedLinearLayout(bases)


@gluon.jit
def _program(w, num_splits, row_chunks, heads_kv, HEAD_PAIRS: gl.constexpr = False,
             PAIR_SPLITS: gl.constexpr = False):
    """Work item w -> (b, kv head, row chunk, split), the Triton kernel's program order; with HEAD_PAIRS the kv
    head is the first of the item's pair (one split and one row chunk: the host's contract; PAIR_SPLITS: splits,
    fastest, as without pairs)."""
    if HEAD_PAIRS:
        pairs = heads_kv // 2
        if PAIR_SPLITS:
            rest = w // num_splits
            return rest // pairs, rest % pairs * 2, w * 0, w % num_splits
        return w // pairs, w % pairs * 2, w * 0, w * 0
    split = w % num_splits
    rest = w // num_splits
    chunk = rest % row_chunks
    bh = rest // row_chunks
    return bh // heads_kv, bh % heads_kv, chunk, split


@gluon.jit
def _row_map(rows, chunk, hk, group, q_len, ROWS: gl.constexpr, HEAD_PAIRS: gl.constexpr):
    """Query row r of an item (rows: arange(ROWS) in some layout) -> (token, query head, live, second head of the
    pair). Without HEAD_PAIRS, row chunk * ROWS + r of kv head hk's group, tokens outer; with it, rows below ROWS / 2
    are kv head hk's and the rest hk + 1's, each half the group's rows from 0."""
    if HEAD_PAIRS:
        HALF: gl.constexpr = ROWS // 2
        second = rows >= HALF
        local = rows % HALF
        head = (hk + second.to(gl.int32)) * group + local % group
        return local // group, head, local < q_len * group, second
    offs = chunk * ROWS + rows
    return offs // group, hk * group + offs % group, offs < q_len * group, rows < 0


@gluon.jit
def _split_keys(seqlen, q_len, window_left, split, pages_per_split, num_splits, PAGE: gl.constexpr,
                BLOCK_N: gl.constexpr, BALANCED_SPLITS: gl.constexpr = False):
    """The split's keys [key_lo, key_hi), win_lo (the first key block a window lets some row see) and the keys all
    splits cover from win_lo (a longer sequence is the host's error: its rows come out NaN). BALANCED_SPLITS (a
    sweep switch): pages_per_split carries the plan's iterations of BLOCK_N keys over all splits together, T, and
    split s takes iterations [s * T // S, (s + 1) * T // S), so the splits differ by one iteration at most (a split
    count that is not a divisor of the pages leaves the last split short otherwise: at (8, 128k) with 33 splits of
    63 pages the last one has 32, and with a persistent grid the programs that draw those do half the work)."""
    if window_left >= 0:
        win_lo = (gl.maximum(seqlen.to(gl.int64) - q_len - window_left, 0) // BLOCK_N * BLOCK_N).to(gl.int32)
    else:
        win_lo = seqlen * 0
    if BALANCED_SPLITS:
        it_lo = (split.to(gl.int64) * pages_per_split // num_splits).to(gl.int32)
        it_hi = ((split + 1).to(gl.int64) * pages_per_split // num_splits).to(gl.int32)
        key_lo = win_lo + it_lo * BLOCK_N
        key_hi = gl.minimum(win_lo + it_hi * BLOCK_N, seqlen)
        span = pages_per_split.to(gl.int64) * BLOCK_N
    else:
        key_lo = win_lo + split * pages_per_split * PAGE
        key_hi = gl.minimum(key_lo + pages_per_split * PAGE, seqlen)
        span = num_splits.to(gl.int64) * pages_per_split * PAGE
    return win_lo, key_lo, key_hi, span


@gluon.jit
def _seqlen(Seqlens, b, max_pages, PAGE: gl.constexpr):
    return _checked_seqlen(gl.load(Seqlens + b), max_pages, PAGE)


@gluon.jit
def _checked_seqlen(seqlen, max_pages, PAGE: gl.constexpr):
    """A sequence's length clamped to what its table holds, and whether it had to be (bad: NaN rows)."""
    bad = (seqlen < 0) | (seqlen > max_pages * PAGE)
    return gl.minimum(gl.maximum(seqlen, 0), max_pages * PAGE), bad


@gluon.jit
def _block_pages(table_row, start, key_hi, num_pages, PAGE: gl.constexpr, NP: gl.constexpr, SUB: gl.constexpr):
    """The pages of the block of keys from `start`, one per slice (a tuple of NP), loaded from the block table.
    Past the split or outside the cache: num_pages, a coordinate past the cache's end, which TMA fills with zeros."""
    pages = ()
    for p in gl.static_range(NP):
        first = start + p * SUB
        live = first < key_hi
        page = gl.load(table_row + first // PAGE, mask=live, other=-1)
        pages = pages + (gl.where(live & (page >= 0) & (page < num_pages), page, num_pages), )
    return pages


@gluon.jit
def _producer(k_desc, vt_desc, k_bufs, v_bufs, ready, empty, BlockTable, Seqlens, q_len, heads_kv, num_pages,
              max_pages, pages_per_split, num_splits, row_chunks, window_left, num_items,
              HEAD_DIM: gl.constexpr, PAGE: gl.constexpr, BLOCK_N: gl.constexpr, NUM_STAGES: gl.constexpr,
              HEAD_PAIRS: gl.constexpr, K_HEAD_MAJOR: gl.constexpr, PAIR_SPLITS: gl.constexpr = False,
              BALANCED_SPLITS: gl.constexpr = False):
    """TMA loads of every block of this program's work items into the ring (with HEAD_PAIRS both heads' slices of
    the block's pages into the stage's two buffers, s * 2 and s * 2 + 1). (Loading the block table's entries a
    block ahead, and the next item's length an item ahead, measured no faster on the H200: docs/perf/NOTES.md.)"""
    NP: gl.constexpr = BLOCK_N // PAGE if BLOCK_N > PAGE else 1
    SUB: gl.constexpr = BLOCK_N // NP
    VROWS: gl.constexpr = vt_desc.block_type.shape[0]  # V^T rows per slice: HEAD_DIM; pages of 16: HEAD_DIM / 8
    HEADS: gl.constexpr = 2 if HEAD_PAIRS else 1
    it = 0  # ring iterations so far, across this program's work items (the ring runs on from one to the next)
    for w in range(gl.program_id(0), num_items, gl.num_programs(0)):
        b, hk, chunk, split = _program(w, num_splits, row_chunks, heads_kv, HEAD_PAIRS, PAIR_SPLITS)
        seqlen, bad = _seqlen(Seqlens, b, max_pages, PAGE)
        win_lo, key_lo, key_hi, _ = _split_keys(seqlen, q_len, window_left, split, pages_per_split, num_splits, PAGE,
                                                BLOCK_N, BALANCED_SPLITS)
        table_row = BlockTable + b.to(gl.int64) * max_pages
        n_blocks = gl.cdiv(gl.maximum(key_hi - key_lo, 0), BLOCK_N)
        for i in range(n_blocks):
            start = key_lo + i * BLOCK_N
            s = it % NUM_STAGES
            mbarrier.wait(empty.index(s), ((it // NUM_STAGES) & 1) ^ 1)
            mbarrier.expect(ready.index(s), HEADS * NP * (k_desc.block_type.nbytes + vt_desc.block_type.nbytes))
            pages = _block_pages(table_row, start, key_hi, num_pages, PAGE, NP, SUB)
            for h in gl.static_range(HEADS):
                for p in gl.static_range(NP):
                    page = pages[p]
                    in_page = (start + p * SUB) % PAGE
                    if K_HEAD_MAJOR:  # K pages [num_pages, heads_kv, PAGE, HEAD_DIM]: a head's page in one piece
                        k_at = [(page * heads_kv + hk + h) * PAGE + in_page, 0]
                    else:
                        k_at = [page * PAGE + in_page, (hk + h) * HEAD_DIM]
                    tma.async_copy_global_to_shared(k_desc, k_at, ready.index(s),
                                                    k_bufs.index(s * HEADS + h).slice(p * SUB, SUB, dim=0))
                    tma.async_copy_global_to_shared(vt_desc, [(page * heads_kv + hk + h) * VROWS, in_page],
                                                    ready.index(s),
                                                    v_bufs.index(s * HEADS + h).slice(p * VROWS, VROWS, dim=0))
            it += 1


@gluon.jit
def _max_of_pairs(a0, b0, a1, b1):
    return gl.maximum(a0, a1), gl.maximum(b0, b1)


@gluon.jit
def _two_e4m3_terms(x):
    """x (float32, |x| <= 448) as hi + lo, both e4m3, as the Triton kernel's. hi is x rounded to e4m3's 3 mantissa
    bits in integer arithmetic (to nearest, ties to even), so that lo = x - hi needs no conversion of hi back from
    e4m3: that conversion (F2FP.F16.E4M3.UNPACK_B of packed pairs) came out wrong for every other pair of values
    in this kernel's register layouts on the H200 (lo held hi's bytes there; 2026-12-02, docs/perf/NOTES.md).
    Below e4m3's normal range (|x| < 2^-6, i.e. 3.5e-5 of the row's largest value or less) hi's cast rounds once
    more, to the subnormal grid; lo then misses that difference."""
    bits = x.to(gl.int32, bitcast=True)
    hi_f = ((bits + 0x7FFFF + ((bits >> 20) & 1)) & -1048576).to(gl.float32, bitcast=True)
    return hi_f.to(gl.float8e4nv), (x - hi_f).to(gl.float8e4nv)


@gluon.jit
def _zero_tail(v_bufs, s, start, key_hi, NP: gl.constexpr, SUB: gl.constexpr):
    """V^T entries of keys at or past key_hi set to zero (the tail block only; P is 0 there, but a free slot
    poisoned with NaN times 0 is NaN). A slice's view [VROWS, VCOLS] holds its V^T [HEAD_DIM, SUB] row after
    row: one row of SUB keys per row of the view (swizzled, VCOLS = SUB) or, at pages of 16 (unswizzled, VCOLS =
    128), 8 rows of V^T of 16 keys per row of the view; the key of column c is c % SUB either way."""
    VROWS: gl.constexpr = v_bufs.shape[1] // NP
    VCOLS: gl.constexpr = v_bufs.shape[2]
    gl.static_assert(VCOLS % SUB == 0, "whole rows of V^T per row of the view")
    layout: gl.constexpr = gl.BlockedLayout([1, 16], [32 // (VCOLS // 16), VCOLS // 16], [4, 1], [1, 0])
    # The key of each column, the same in every row of the view (its rows hold whole rows of V^T, each the
    # slice's SUB keys in order), broadcast over the rows so that the mask has the shape of the loaded
    # values.
    c = gl.arange(0, VCOLS, layout=gl.SliceLayout(0, layout))[None, :]
    key = c % SUB + gl.arange(0, VROWS, layout=gl.SliceLayout(1, layout))[:, None] * 0
    for p in gl.static_range(NP):
        buf = v_bufs.index(s).slice(p * VROWS, VROWS, dim=0)
        v = buf.load(layout).to(gl.int8, bitcast=True)
        v = gl.where(start + p * SUB + key < key_hi, v, gl.zeros_like(v))
        buf.store(v.to(gl.float8e4nv, bitcast=True))


@gluon.jit
def _issue_s(k_bufs, s, qt_hi, qt_lo, BLOCK_N: gl.constexpr, ROWS: gl.constexpr, acc_layout: gl.constexpr):
    """S^T = K Q^T for stage s, Q as its two e4m3 terms (two chained MMAs), in flight."""
    st = warpgroup_mma(k_bufs.index(s), qt_hi, gl.zeros([BLOCK_N, ROWS], gl.float32, acc_layout), use_acc=False,
                       is_async=True)
    return warpgroup_mma(k_bufs.index(s), qt_lo, st, is_async=True)


@gluon.jit
def _issue_pv(v_bufs, s, p_hi_smem, p_lo_smem, HEAD_DIM: gl.constexpr, ROWS: gl.constexpr, NP: gl.constexpr,
              acc_layout: gl.constexpr):
    """O^T's fresh product V^T P^T for stage s (each page slice, each P term: 2 NP chained MMAs; pages of 16: the
    stage as one operand, 2 MMAs), in flight."""
    SUB: gl.constexpr = p_hi_smem.shape[1] // NP
    if v_bufs.type.layout.swizzle_byte_width == 0:  # V^T in chunks of 16 keys: one operand (_vt_core_layout)
        vt = v_bufs.index(s)._reinterpret(gl.float8e4nv, [HEAD_DIM, NP * SUB], _vt_core_layout(HEAD_DIM, NP * SUB))
        pv = warpgroup_mma(vt, p_hi_smem.permute((1, 0)), gl.zeros([HEAD_DIM, ROWS], gl.float32, acc_layout),
                           use_acc=False, is_async=True)
        pv = warpgroup_mma(vt, p_lo_smem.permute((1, 0)), pv, is_async=True)
    else:
        stage = v_bufs.index(s)
        pv = warpgroup_mma(stage.slice(0, HEAD_DIM, dim=0), p_hi_smem.slice(0, SUB, dim=1).permute((1, 0)),
                           gl.zeros([HEAD_DIM, ROWS], gl.float32, acc_layout), use_acc=False, is_async=True)
        pv = warpgroup_mma(stage.slice(0, HEAD_DIM, dim=0), p_lo_smem.slice(0, SUB, dim=1).permute((1, 0)), pv,
                           is_async=True)
        for p in gl.static_range(1, NP):
            vt = stage.slice(p * HEAD_DIM, HEAD_DIM, dim=0)
            pv = warpgroup_mma(vt, p_hi_smem.slice(p * SUB, SUB, dim=1).permute((1, 0)), pv, is_async=True)
            pv = warpgroup_mma(vt, p_lo_smem.slice(p * SUB, SUB, dim=1).permute((1, 0)), pv, is_async=True)
    return pv


@gluon.jit
def _issue_s_item(k_bufs, s, qt_hi, qt_lo, BLOCK_N: gl.constexpr, ROWS: gl.constexpr, acc_layout: gl.constexpr,
                  HEAD_PAIRS: gl.constexpr):
    """S^T of stage s for the item's kv head, or for both heads of its pair (a tuple of one or two products)."""
    if HEAD_PAIRS:
        return (_issue_s(k_bufs, s * 2, qt_hi, qt_lo, BLOCK_N, ROWS, acc_layout),
                _issue_s(k_bufs, s * 2 + 1, qt_hi, qt_lo, BLOCK_N, ROWS, acc_layout))
    else:
        return (_issue_s(k_bufs, s, qt_hi, qt_lo, BLOCK_N, ROWS, acc_layout), )


@gluon.jit
def _issue_pv_item(v_bufs, s, p_hi_smem, p_lo_smem, HEAD_DIM: gl.constexpr, ROWS: gl.constexpr, NP: gl.constexpr,
                   acc_layout: gl.constexpr, HEAD_PAIRS: gl.constexpr):
    """V^T P^T of stage s for the item's kv head, or for both heads of its pair (one P^T: each head's columns
    are taken from its own product by _wait_merged)."""
    if HEAD_PAIRS:
        return (_issue_pv(v_bufs, s * 2, p_hi_smem, p_lo_smem, HEAD_DIM, ROWS, NP, acc_layout),
                _issue_pv(v_bufs, s * 2 + 1, p_hi_smem, p_lo_smem, HEAD_DIM, ROWS, NP, acc_layout))
    else:
        return (_issue_pv(v_bufs, s, p_hi_smem, p_lo_smem, HEAD_DIM, ROWS, NP, acc_layout), )


@gluon.jit
def _wait_merged(products, second, num_outstanding: gl.constexpr, HEAD_PAIRS: gl.constexpr):
    """Wait until at most num_outstanding MMAs are in flight and return the product (with HEAD_PAIRS, the first
    head's columns from the first product and the second head's, where `second`, from the other)."""
    if HEAD_PAIRS:
        first, other = warpgroup_mma_wait(num_outstanding=num_outstanding, deps=products)
        return gl.where(second[None, :], other, first)
    else:
        return warpgroup_mma_wait(num_outstanding=num_outstanding, deps=products)


@gluon.jit
def _softmax_block(st, start, key_hi, m_i, l_i, bad_keys, row_scale, limit, low, low_min, limit_max,
                   v_bufs, s, p_hi_smem, p_lo_smem, KDescale, VDescale, table_row, hk, num_pages,
                   descale_stride_page, descale_stride_head, second, HEAD_DIM: gl.constexpr, PAGE: gl.constexpr,
                   ROWS: gl.constexpr, BLOCK_N: gl.constexpr, acc_layout: gl.constexpr, HEAD_PAIRS: gl.constexpr):
    """The online softmax of one stage's S^T (the Triton kernel's _decode_block): P^T's two terms written to
    shared memory (and the tail's V^T columns zeroed), fenced for the P.V MMAs. Returns (m_new, alpha, the
    P.V product's scale, l_i, bad_keys). With HEAD_PAIRS the columns where `second` is set are kv head hk + 1's:
    their keys' descales are that head's."""
    NP: gl.constexpr = BLOCK_N // PAGE if BLOCK_N > PAGE else 1
    SUB: gl.constexpr = BLOCK_N // NP
    key_l: gl.constexpr = gl.SliceLayout(1, acc_layout)
    key = start + gl.arange(0, BLOCK_N, layout=key_l)
    live = key < key_hi
    page = gl.load(table_row + key // PAGE, mask=live, other=0)
    bad_keys = bad_keys | (live & ((page < 0) | (page >= num_pages))).to(gl.int32)
    page = gl.minimum(gl.maximum(page, 0), num_pages - 1).to(gl.int64)
    dsc = page * descale_stride_page + hk * descale_stride_head
    kd = gl.load(KDescale + dsc, mask=live, other=0.0)[:, None]
    vd = gl.load(VDescale + dsc, mask=live, other=0.0)[:, None]
    if HEAD_PAIRS:  # each column its kv head's descales ([BLOCK_N, ROWS])
        kd_2 = gl.load(KDescale + dsc + descale_stride_head, mask=live, other=0.0)[:, None]
        vd_2 = gl.load(VDescale + dsc + descale_stride_head, mask=live, other=0.0)[:, None]
        kd = gl.where(second[None, :], kd_2, kd)
        vd = gl.where(second[None, :], vd_2, vd)
    st = st * kd * row_scale[None, :] * LOG2E
    visible = _visible(key, limit, low, live)
    st = gl.where(visible, st, float("-inf"))
    # P^T times each key's v descale relative to the largest magnitude among the keys some row sees, times 448 (the
    # Triton kernel's); the scores' maximum and that largest descale in one reduction over the keys.
    seen = (key >= low_min) & (key < limit_max) & live
    m_tile, vd_max = gl.reduce((st, gl.where(seen[:, None], gl.abs(vd), 0.0) + gl.zeros_like(st)), 0,
                               _max_of_pairs)
    vd_max = gl.where(vd_max > 0, vd_max, 1.0)
    m_new = gl.maximum(m_i, m_tile)
    alpha = gl.exp2(m_i - m_new)
    prob = gl.where(visible, gl.exp2(st - m_new[None, :]), 0.0)
    l_i = l_i * alpha[None, :] + prob
    _store_p(prob * ((vd / vd_max[None, :]) * E4M3_MAX), p_hi_smem, p_lo_smem, v_bufs, s, start, key_hi, NP, SUB,
             BLOCK_N, HEAD_PAIRS)
    return m_new, alpha, vd_max / E4M3_MAX, l_i, bad_keys


@gluon.jit
def _visible(key, limit, low, live):
    """[keys, rows]: which row sees which key (keys [low, limit) of each row's, live keys only)."""
    return (key[:, None] < limit[None, :]) & (key[:, None] >= low[None, :]) & live[:, None]


@gluon.jit
def _store_p(p, p_hi_smem, p_lo_smem, v_bufs, s, start, key_hi, NP: gl.constexpr, SUB: gl.constexpr,
             BLOCK_N: gl.constexpr, HEAD_PAIRS: gl.constexpr):
    """P^T's two e4m3 terms (p: [BLOCK_N, ROWS], at most 448) written to shared memory for P.V, the tail stage's
    V^T columns past key_hi zeroed, fenced for the MMAs."""
    p_hi, p_lo = _two_e4m3_terms(p)
    p_hi_smem.store(gl.permute(p_hi, (1, 0)))
    p_lo_smem.store(gl.permute(p_lo, (1, 0)))
    if start + BLOCK_N > key_hi:
        if HEAD_PAIRS:
            _zero_tail(v_bufs, s * 2, start, key_hi, NP, SUB)
            _zero_tail(v_bufs, s * 2 + 1, start, key_hi, NP, SUB)
        else:
            _zero_tail(v_bufs, s, start, key_hi, NP, SUB)
    fence_async_shared()


@gluon.jit
def _softmax_block_page(st, start, key_hi, m_i, l_i, bad_keys, row_scale, row_scale_min, limit, low, limit_min,
                        low_max,
                        v_bufs, s, p_hi_smem, p_lo_smem, KDescale, VDescale, table_row, hk, num_pages,
                        descale_stride_page, descale_stride_head, second, HEAD_DIM: gl.constexpr,
                        PAGE: gl.constexpr, ROWS: gl.constexpr, BLOCK_N: gl.constexpr, acc_layout: gl.constexpr,
                        HEAD_PAIRS: gl.constexpr):
    """_softmax_block for a stage inside one page (PAGE >= BLOCK_N, the UNIFORM_PAGE path): one block table entry
    and one k and one v descale per kv head for every key of the stage, so the per-key work of the general path
    goes: the table entry and descales are scalar loads, the k descale joins each row's scale (one FFMA a score
    makes the exponential's argument), P needs no per-key v descale relative to the stage's largest (the v descale
    is the P.V product's scale, and P is scaled to 448 inside the exponential: 2^(s - m + log2 448)), and the
    masks are applied only where some row's visible keys end inside the stage (the sequence's or the split's last
    stage, speculative tokens' diagonal, a window's edge): elsewhere every row sees every key. Same results as the
    general path up to float rounding; l and O's accumulator both carry the factor 448, which the division by l
    (and the split-KV combine, whose splits all carry it) cancels. Returns _softmax_block's five values."""
    NP: gl.constexpr = 1
    key_l: gl.constexpr = gl.SliceLayout(1, acc_layout)
    page = gl.load(table_row + start // PAGE)  # start < key_hi: the stage's first key is always live
    bad_keys = bad_keys | ((page < 0) | (page >= num_pages)).to(gl.int32)
    page = gl.minimum(gl.maximum(page, 0), num_pages - 1).to(gl.int64)
    dsc = page * descale_stride_page + hk * descale_stride_head
    kd = gl.load(KDescale + dsc)
    vd = gl.load(VDescale + dsc)
    # Each row's scale of the raw product (row_scale = softmax_scale / the row's q scale). Where it is positive for
    # every row the row maximum is taken on the raw product and scaled after, and the scale enters the exponential's
    # FFMA. The test is on the smallest row scale times the descale, as rounded (rounding is monotone, so every
    # row's product is at least that): a descale so small that a product rounds to 0 would otherwise make a masked
    # -inf times 0 NaN. A zero, negative, NaN or vanishing scale takes the products scaled first, as the general
    # path does: the same results as it for any descale.
    positive = (row_scale_min > 0) & (row_scale_min * (kd * LOG2E) > 0)
    if HEAD_PAIRS:  # each column its kv head's descales
        kd_2 = gl.load(KDescale + dsc + descale_stride_head)
        positive = positive & (row_scale_min * (kd_2 * LOG2E) > 0)
        kd = gl.where(second, kd_2, kd)
        vd = gl.where(second, gl.load(VDescale + dsc + descale_stride_head), vd)
    rs = row_scale * (kd * LOG2E)
    if positive:
        x = st
        sc = rs
    else:
        x = st * rs[None, :]
        sc = gl.full_like(rs, 1.0)
    if (start < low_max) | (start + BLOCK_N > gl.minimum(limit_min, key_hi)):
        key = start + gl.arange(0, BLOCK_N, layout=key_l)
        x = gl.where(_visible(key, limit, low, key < key_hi), x, float("-inf"))
    m_new = gl.maximum(m_i, gl.max(x, 0) * sc)
    alpha = gl.exp2(m_i - m_new)
    # exp2(-inf) = 0 for the masked scores; P in [0, 448].
    prob = gl.exp2(x * sc[None, :] - (m_new - LOG2_E4M3_MAX)[None, :])
    l_i = l_i * alpha[None, :] + prob
    _store_p(prob, p_hi_smem, p_lo_smem, v_bufs, s, start, key_hi, NP, BLOCK_N, BLOCK_N, HEAD_PAIRS)
    return m_new, alpha, vd + gl.zeros_like(m_new), l_i, bad_keys


@gluon.jit
def _softmax_stage(st, start, key_hi, m_i, l_i, bad_keys, row_scale, row_scale_min, limit, low, low_min, limit_max,
                   limit_min, low_max, v_bufs, s, p_hi_smem, p_lo_smem, KDescale, VDescale, table_row, hk, num_pages,
                   descale_stride_page, descale_stride_head, second, HEAD_DIM: gl.constexpr, PAGE: gl.constexpr,
                   ROWS: gl.constexpr, BLOCK_N: gl.constexpr, acc_layout: gl.constexpr, HEAD_PAIRS: gl.constexpr,
                   UNIFORM_PAGE: gl.constexpr):
    """One stage's softmax: the page path where a stage lies inside one page (and UNIFORM_PAGE), else the general
    one."""
    if UNIFORM_PAGE and PAGE >= BLOCK_N:
        gl.static_assert(PAGE % BLOCK_N == 0, "a stage inside one page")
        return _softmax_block_page(st, start, key_hi, m_i, l_i, bad_keys, row_scale, row_scale_min, limit, low,
                                   limit_min, low_max,
                                   v_bufs, s, p_hi_smem, p_lo_smem, KDescale, VDescale, table_row, hk, num_pages,
                                   descale_stride_page, descale_stride_head, second, HEAD_DIM, PAGE, ROWS, BLOCK_N,
                                   acc_layout, HEAD_PAIRS)
    else:
        return _softmax_block(st, start, key_hi, m_i, l_i, bad_keys, row_scale, limit, low, low_min, limit_max,
                              v_bufs, s, p_hi_smem, p_lo_smem, KDescale, VDescale, table_row, hk, num_pages,
                              descale_stride_page, descale_stride_head, second, HEAD_DIM, PAGE, ROWS, BLOCK_N,
                              acc_layout, HEAD_PAIRS)


@gluon.jit
def _item_q(Q, Seqlens, w, num_items, q_len, heads_q, heads_kv, num_splits, row_chunks, stride_qb, stride_qs,
            stride_qh, HEAD_DIM: gl.constexpr, ROWS: gl.constexpr, HEAD_PAIRS: gl.constexpr,
            PAIR_SPLITS: gl.constexpr = False):
    """Work item w's query rows as loaded (bf16, [ROWS, HEAD_DIM], rows past the chunk's 0) and its sequence's
    length, unchecked; nothing is loaded for w >= num_items (PREFETCH_ITEM loads them an item ahead)."""
    q_layout: gl.constexpr = gl.BlockedLayout([1, 8], [2, 16], [4, 1], [1, 0])
    live = w < num_items
    b, hk, chunk, split = _program(w, num_splits, row_chunks, heads_kv, HEAD_PAIRS, PAIR_SPLITS)
    group = heads_q // heads_kv
    offs_dq = gl.arange(0, HEAD_DIM, layout=gl.SliceLayout(0, q_layout))
    tok_q, head_q, row_ok, second = _row_map(gl.arange(0, ROWS, layout=gl.SliceLayout(1, q_layout)), chunk, hk,
                                             group, q_len, ROWS, HEAD_PAIRS)
    q = gl.load(Q + b.to(gl.int64) * stride_qb + tok_q[:, None].to(gl.int64) * stride_qs +
                head_q[:, None].to(gl.int64) * stride_qh + offs_dq[None, :],
                mask=(row_ok & live)[:, None], other=0.0)
    return q, gl.load(Seqlens + b, mask=live, other=0)


@gluon.jit
def _consumer(k_bufs, v_bufs, q_hi_smem, q_lo_smem, p_hi_smem, p_lo_smem, ready, empty,
              Q, KDescale, VDescale, BlockTable, Seqlens, O, PartialO, PartialML,
              softmax_scale, q_len, heads_q, heads_kv, num_pages, max_pages, pages_per_split, num_splits, row_chunks,
              stride_qb, stride_qs, stride_qh, stride_ob, stride_os, stride_oh,
              descale_stride_page, descale_stride_head, window_left, num_items,
              HEAD_DIM: gl.constexpr, PAGE: gl.constexpr, ROWS: gl.constexpr, BLOCK_N: gl.constexpr,
              NUM_STAGES: gl.constexpr, PREFETCH_ITEM: gl.constexpr, HEAD_PAIRS: gl.constexpr,
              UNIFORM_PAGE: gl.constexpr, PAIR_SPLITS: gl.constexpr = False, BALANCED_SPLITS: gl.constexpr = False):
    it = 0  # ring iterations consumed so far, across work items (the producer's count)
    if PREFETCH_ITEM:
        q_next, seqlen_next = _item_q(Q, Seqlens, gl.program_id(0), num_items, q_len, heads_q, heads_kv, num_splits,
                                      row_chunks, stride_qb, stride_qs, stride_qh, HEAD_DIM, ROWS, HEAD_PAIRS,
                                      PAIR_SPLITS)
    for w in range(gl.program_id(0), num_items, gl.num_programs(0)):
        if PREFETCH_ITEM:
            # The next item's Q and length, loaded now and used an item later (their load latency at each
            # item's start is otherwise the consumer's).
            q, seqlen = q_next, seqlen_next
            q_next, seqlen_next = _item_q(Q, Seqlens, w + gl.num_programs(0), num_items, q_len, heads_q, heads_kv,
                                          num_splits, row_chunks, stride_qb, stride_qs, stride_qh, HEAD_DIM, ROWS,
                                          HEAD_PAIRS, PAIR_SPLITS)
        else:
            q, seqlen = _item_q(Q, Seqlens, w, w + 1, q_len, heads_q, heads_kv, num_splits, row_chunks, stride_qb,
                                stride_qs, stride_qh, HEAD_DIM, ROWS, HEAD_PAIRS, PAIR_SPLITS)
        it = _consume_item(w, it, q, seqlen, k_bufs, v_bufs, q_hi_smem, q_lo_smem, p_hi_smem, p_lo_smem, ready,
                           empty, KDescale, VDescale, BlockTable, O, PartialO, PartialML,
                           softmax_scale, q_len, heads_q, heads_kv, num_pages, max_pages, pages_per_split,
                           num_splits, row_chunks, stride_ob, stride_os, stride_oh,
                           descale_stride_page, descale_stride_head, window_left,
                           HEAD_DIM, PAGE, ROWS, BLOCK_N, NUM_STAGES, HEAD_PAIRS, UNIFORM_PAGE, PAIR_SPLITS,
                           BALANCED_SPLITS)


@gluon.jit
def _consume_item(w, it, q_rows, seqlen_raw, k_bufs, v_bufs, q_hi_smem, q_lo_smem, p_hi_smem, p_lo_smem, ready,
                  empty, KDescale, VDescale, BlockTable, O, PartialO, PartialML,
                  softmax_scale, q_len, heads_q, heads_kv, num_pages, max_pages, pages_per_split, num_splits,
                  row_chunks, stride_ob, stride_os, stride_oh,
                  descale_stride_page, descale_stride_head, window_left,
                  HEAD_DIM: gl.constexpr, PAGE: gl.constexpr, ROWS: gl.constexpr, BLOCK_N: gl.constexpr,
                  NUM_STAGES: gl.constexpr, HEAD_PAIRS: gl.constexpr, UNIFORM_PAGE: gl.constexpr,
                  PAIR_SPLITS: gl.constexpr = False, BALANCED_SPLITS: gl.constexpr = False):
    """One work item (the Triton kernel's program w), its blocks at ring iterations it, it + 1, ...; returns the
    ring iteration after its last block. q_rows, seqlen_raw: its Q rows and sequence length as loaded (_item_q).
    Every MMA of the previous item has been waited for, so Q's and P's shared memory are free to overwrite."""
    NP: gl.constexpr = BLOCK_N // PAGE if BLOCK_N > PAGE else 1
    # S^T [BLOCK_N, ROWS] and O^T [HEAD_DIM, ROWS] share one accumulator layout: keys (or head dims) over the
    # warps' rows, query rows over N.
    acc_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                         instr_shape=[16, ROWS, 32])
    key_l: gl.constexpr = gl.SliceLayout(1, acc_layout)
    row_l: gl.constexpr = gl.SliceLayout(0, acc_layout)

    # The next stage's S^T stays in flight while a P.V is waited for: its two MMAs per kv head.
    S_IN_FLIGHT: gl.constexpr = 4 if HEAD_PAIRS else 2
    b, hk, chunk, split = _program(w, num_splits, row_chunks, heads_kv, HEAD_PAIRS, PAIR_SPLITS)
    group = heads_q // heads_kv
    seqlen, bad = _checked_seqlen(seqlen_raw, max_pages, PAGE)
    # Q: each row scaled to e4m3's range by its own factor, as two e4m3 terms (the Triton kernel's).
    q = q_rows.to(gl.float32)
    q_amax = gl.max(gl.abs(q), 1)
    q_scale = gl.where(q_amax > 0, E4M3_MAX / gl.maximum(q_amax, 1e-30), 1.0)
    q_hi, q_lo = _two_e4m3_terms(q * q_scale[:, None])
    q_hi_smem.store(q_hi)
    q_lo_smem.store(q_lo)
    fence_async_shared()
    row_scale = gl.convert_layout(softmax_scale / q_scale, row_l)
    row_scale_min = gl.min(row_scale, 0)  # the page path's test of positive row scales

    tok, head, row_ok, second = _row_map(gl.arange(0, ROWS, layout=row_l), chunk, hk, group, q_len, ROWS,
                                         HEAD_PAIRS)
    limit = seqlen - q_len + tok + 1
    if window_left >= 0:
        low = gl.maximum(limit.to(gl.int64) - 1 - window_left, -1).to(gl.int32)
    else:
        low = gl.zeros_like(limit) - 1
    low_min = gl.min(low, 0)
    limit_max = gl.max(limit, 0)
    # The page path's test for a stage that needs no mask: every real row sees keys [low_max, limit_min).
    limit_min = gl.min(gl.where(row_ok, limit, 2147483647), 0)
    low_max = gl.max(gl.where(row_ok, low, -1), 0)
    win_lo, key_lo, key_hi, span = _split_keys(seqlen, q_len, window_left, split, pages_per_split, num_splits, PAGE,
                                               BLOCK_N, BALANCED_SPLITS)
    bad = bad | ((seqlen - win_lo).to(gl.int64) > span)
    table_row = BlockTable + b.to(gl.int64) * max_pages

    m_i = gl.full([ROWS], NEG_BIG, gl.float32, row_l)
    l_i = gl.zeros([BLOCK_N, ROWS], gl.float32, acc_layout)  # summed over the keys after the loop
    acc = gl.zeros([HEAD_DIM, ROWS], gl.float32, acc_layout)  # O^T
    bad_keys = gl.zeros([BLOCK_N], gl.int32, key_l)
    n_blocks = gl.cdiv(gl.maximum(key_hi - key_lo, 0), BLOCK_N)
    qt_hi = q_hi_smem.permute((1, 0))
    qt_lo = q_lo_smem.permute((1, 0))
    if n_blocks > 0:
        mbarrier.wait(ready.index(it % NUM_STAGES), (it // NUM_STAGES) & 1)
        st = _issue_s_item(k_bufs, it % NUM_STAGES, qt_hi, qt_lo, BLOCK_N, ROWS, acc_layout, HEAD_PAIRS)
        for i in range(n_blocks - 1):
            s = (it + i) % NUM_STAGES
            m_new, alpha, scale_pv, l_i, bad_keys = _softmax_stage(
                _wait_merged(st, second, 0, HEAD_PAIRS), key_lo + i * BLOCK_N, key_hi, m_i, l_i,
                bad_keys, row_scale, row_scale_min, limit, low, low_min, limit_max, limit_min, low_max, v_bufs, s,
                p_hi_smem, p_lo_smem, KDescale, VDescale, table_row, hk, num_pages, descale_stride_page,
                descale_stride_head, second, HEAD_DIM, PAGE, ROWS, BLOCK_N, acc_layout, HEAD_PAIRS, UNIFORM_PAGE)
            pv = _issue_pv_item(v_bufs, s, p_hi_smem, p_lo_smem, HEAD_DIM, ROWS, NP, acc_layout, HEAD_PAIRS)
            # The next stage's S^T runs under this P.V (the wait leaves its MMAs in flight).
            nxt = (it + i + 1) % NUM_STAGES
            mbarrier.wait(ready.index(nxt), ((it + i + 1) // NUM_STAGES) & 1)
            st = _issue_s_item(k_bufs, nxt, qt_hi, qt_lo, BLOCK_N, ROWS, acc_layout, HEAD_PAIRS)
            pv = _wait_merged(pv, second, S_IN_FLIGHT, HEAD_PAIRS)
            mbarrier.arrive(empty.index(s), count=1)
            acc = acc * alpha[None, :] + pv * scale_pv[None, :]
            m_i = m_new
        last = n_blocks - 1
        s = (it + last) % NUM_STAGES
        m_new, alpha, scale_pv, l_i, bad_keys = _softmax_stage(
            _wait_merged(st, second, 0, HEAD_PAIRS), key_lo + last * BLOCK_N, key_hi, m_i, l_i,
            bad_keys, row_scale, row_scale_min, limit, low, low_min, limit_max, limit_min, low_max, v_bufs, s,
            p_hi_smem, p_lo_smem, KDescale, VDescale, table_row, hk, num_pages, descale_stride_page,
            descale_stride_head, second, HEAD_DIM, PAGE, ROWS, BLOCK_N, acc_layout, HEAD_PAIRS, UNIFORM_PAGE)
        pv = _wait_merged(_issue_pv_item(v_bufs, s, p_hi_smem, p_lo_smem, HEAD_DIM, ROWS, NP, acc_layout, HEAD_PAIRS),
                          second, 0, HEAD_PAIRS)
        mbarrier.arrive(empty.index(s), count=1)
        acc = acc * alpha[None, :] + pv * scale_pv[None, :]
        m_i = m_new

    bad = bad | (gl.max(bad_keys, 0) != 0)
    l_row = gl.sum(l_i, 0)
    l_row = gl.where(bad, float("nan"), l_row)
    offs_d = gl.arange(0, HEAD_DIM, layout=key_l)
    # Head pairs write O with one split, the host's contract; PAIR_SPLITS (the record's pair_splits) writes each
    # head's rows (half the item's: rows past q_len * group are the combine's padding rows, which it never reads)
    # into that kv head's partials, as a one-head item of that head, split and chunk 0 would.
    if (HEAD_PAIRS and not PAIR_SPLITS) or num_splits == 1:
        out = acc / gl.where(l_row == 0.0, 1.0, l_row)[None, :]
        o_ptr = (O + b.to(gl.int64) * stride_ob + tok[None, :].to(gl.int64) * stride_os +
                 head[None, :].to(gl.int64) * stride_oh + offs_d[:, None])
        gl.store(o_ptr, out.to(gl.bfloat16), mask=row_ok[None, :])
    else:
        # Partials: [batch, heads_kv, row_chunks, num_splits, ROWS, HEAD_DIM] and [..., ROWS, 2] (max, sum).
        if PAIR_SPLITS:
            HALF: gl.constexpr = ROWS // 2
            rows = gl.arange(0, ROWS, layout=row_l)
            head_item = ((b * heads_kv + hk + second.to(gl.int32)) * row_chunks + chunk) * num_splits + split
            prow = head_item.to(gl.int64) * ROWS + rows % HALF
        else:
            prow = w.to(gl.int64) * ROWS + gl.arange(0, ROWS, layout=row_l)
        gl.store(PartialO + prow[None, :] * HEAD_DIM + offs_d[:, None], acc)
        gl.store(PartialML + prow * 2, m_i)
        gl.store(PartialML + prow * 2 + 1, l_row)
    return it + n_blocks


@gluon.jit
def paged_decode_gluon_kernel(
    k_desc, vt_desc, Q, KDescale, VDescale, BlockTable, Seqlens, O, PartialO, PartialML,
    softmax_scale, q_len, heads_q, heads_kv, num_pages, max_pages, pages_per_split, num_splits, row_chunks,
    stride_qb, stride_qs, stride_qh, stride_ob, stride_os, stride_oh,
    descale_stride_page, descale_stride_head, window_left, softcap, num_items,
    HEAD_DIM: gl.constexpr, PAGE: gl.constexpr, ROWS: gl.constexpr, BLOCK_N: gl.constexpr,
    NUM_STAGES: gl.constexpr, PREFETCH_ITEM: gl.constexpr = False, HEAD_PAIRS: gl.constexpr = False,
    K_HEAD_MAJOR: gl.constexpr = False, UNIFORM_PAGE: gl.constexpr = True, PAIR_SPLITS: gl.constexpr = False,
    BALANCED_SPLITS: gl.constexpr = False,
):
    """paged_decode_triton.paged_decode_kernel's arguments and outputs, with the cache read through k_desc / vt_desc
    and its programs walked as num_items work items (module docstring). No soft-capping: `softcap` is in the list
    only so that both kernels share their arguments (the host runs soft-capped calls on the Triton kernel)."""
    gl.static_assert(gl.num_warps() == 4, "the default partition is one consumer warpgroup")
    gl.static_assert(not PAIR_SPLITS or HEAD_PAIRS, "PAIR_SPLITS: head pairs split over the keys")
    gl.static_assert(ROWS % 8 == 0 and ROWS <= 64, "ROWS: a multiple of 8 up to 64 (the MMA's N)")
    NP: gl.constexpr = BLOCK_N // PAGE if BLOCK_N > PAGE else 1
    SUB: gl.constexpr = BLOCK_N // NP
    gl.static_assert((SUB == 16) == (vt_desc.layout.swizzle_byte_width == 0),
                     "V^T slices of 16 tokens unswizzled (_vt_core_layout), wider ones swizzled")
    HEADS: gl.constexpr = 2 if HEAD_PAIRS else 1
    # Per stage one buffer per kv head of the item (stage s, head h: buffer s * HEADS + h).
    k_bufs = gl.allocate_shared_memory(gl.float8e4nv, [NUM_STAGES * HEADS, BLOCK_N, HEAD_DIM], k_desc.layout)
    # Per stage, the NP slices' V^T as the descriptor's boxes one after the other ([NP * VROWS, VCOLS]).
    v_bufs = gl.allocate_shared_memory(gl.float8e4nv, [NUM_STAGES * HEADS, NP * vt_desc.block_type.shape[0],
                                                       vt_desc.block_type.shape[1]], vt_desc.layout)
    q_layout: gl.constexpr = gl.NVMMASharedLayout(swizzle_byte_width=128, element_bitwidth=8, rank=2)
    q_hi_smem = gl.allocate_shared_memory(gl.float8e4nv, [ROWS, HEAD_DIM], q_layout)
    q_lo_smem = gl.allocate_shared_memory(gl.float8e4nv, [ROWS, HEAD_DIM], q_layout)
    # P^T as [ROWS, BLOCK_N], keys contiguous (the K-major B operand of P.V), one slice per page part.
    p_layout: gl.constexpr = gl.NVMMASharedLayout(swizzle_byte_width=min(128, BLOCK_N), element_bitwidth=8, rank=2)
    p_hi_smem = gl.allocate_shared_memory(gl.float8e4nv, [ROWS, BLOCK_N], p_layout)
    p_lo_smem = gl.allocate_shared_memory(gl.float8e4nv, [ROWS, BLOCK_N], p_layout)
    ready = gl.allocate_shared_memory(gl.int64, [NUM_STAGES, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [NUM_STAGES, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(NUM_STAGES):
        mbarrier.init(ready.index(i), count=1)
        mbarrier.init(empty.index(i), count=1)
    gl.warp_specialize([
        (_consumer, (k_bufs, v_bufs, q_hi_smem, q_lo_smem, p_hi_smem, p_lo_smem, ready, empty,
                     Q, KDescale, VDescale, BlockTable, Seqlens, O, PartialO, PartialML,
                     softmax_scale, q_len, heads_q, heads_kv, num_pages, max_pages, pages_per_split, num_splits,
                     row_chunks, stride_qb, stride_qs, stride_qh, stride_ob, stride_os, stride_oh,
                     descale_stride_page, descale_stride_head, window_left, num_items,
                     HEAD_DIM, PAGE, ROWS, BLOCK_N, NUM_STAGES, PREFETCH_ITEM, HEAD_PAIRS, UNIFORM_PAGE,
                     PAIR_SPLITS, BALANCED_SPLITS)),
        (_producer, (k_desc, vt_desc, k_bufs, v_bufs, ready, empty, BlockTable, Seqlens, q_len, heads_kv,
                     num_pages, max_pages, pages_per_split, num_splits, row_chunks, window_left, num_items,
                     HEAD_DIM, PAGE, BLOCK_N, NUM_STAGES, HEAD_PAIRS, K_HEAD_MAJOR, PAIR_SPLITS,
                     BALANCED_SPLITS)),
    ], [1], [24])
