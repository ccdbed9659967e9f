"""Attention forward for Hopper in Gluon (triton.experimental.gluon): FP8 e4m3 Q, K, V, BF16 O, hand-scheduled.

The same computation and the same rounding as fmha_fwd_triton.py (docs/CONVENTIONS.md, "FP8 numerics"), with
the schedule written out instead of left to Triton's pipeliner. One program computes one BLOCK_M x HEAD_DIM
tile of O for one (batch, head_q), in three warp-specialized partitions:

    producer      1 warp, few registers: one TMA load of the Q block, then a NUM_STAGES-deep ring of K and
                  V^T tiles, each stage guarded by a "ready" mbarrier (TMA transaction count) and an "empty"
                  mbarrier (both consumers release it)
    consumer 0    the default partition (num_warps = 4, one warpgroup): query rows [0, 64) of the block
    consumer 1    a 4-warp worker: query rows [64, 128)
    (consumer 2   NUM_CONSUMERS = 3, the 192-row instances (INT8 D=64 full attention): rows [128, 192) of a
                  192-row block, Q as three 64-row TMA boxes, 160-168 registers a consumer thread instead of 240)

Each consumer warpgroup runs its own online softmax over its 64 rows with wgmma: S = Q K^T with Q and K from
shared memory (K viewed K-major through a permuted view), then P (rounded to e4m3 in registers, the dot
operand layout of the A operand) times V^T's tile viewed as [BLOCK_N, HEAD_DIM] K-major. Per KV tile j a
warpgroup waits for S_j, runs the softmax, then issues P_j V_j and S_{j+1} back to back and folds P_j V_j
into the accumulator while S_{j+1} runs (except at 256-key tiles and D=128, where S_{j+1} beside the fresh
product does not fit the registers: there P_j V_j is folded first, _consumer's S_AHEAD); the two warpgroups share
the K/V ring but not their softmax state, so one's exponentials run under the other's MMAs. Two things in that
order are deliberate (see SASS):
  * P_j is made and consumed within one loop step: carried across the loop's back edge (as an earlier
    version issued P_{j-1} V_{j-1} with S_j), Triton keeps its e4m3 values as separate bytes and unpacks and
    repacks them, ~120 PRMT per tile and warp;
  * the two consumer warpgroups are left to run free: making them take turns on the tensor cores or on the
    exponential unit (named barriers) measured slower (docs/perf/NOTES.md).

KEY_PERMUTED: the accumulator fragment of S holds, per thread, keys 2t, 2t+1, 8+2t, 9+2t, ... of each
16-key group, while the A fragment of P.V wants keys 4t..4t+3. Relabelling the keys of P (a reshape and
permute that Triton proves to be free) and storing V^T with the same key order makes the conversion a
no-op (no shuffles, no byte permutes); P.V is the same sum. Position 16h + 4t + 2j + e of each 32-key block
of such a V^T holds key 16h + 8j + 2t + e.

Numerics (as the Triton kernel, tile by tile, except l under SUM_ON_TC; both consumers walk the KV tiles of the
Triton kernel's 128-row block, with the same masked / unmasked split, sliding windows included: tiles outside
a block's window are never loaded, tiles on its edges are masked):
  * scores in the exp2 domain, softmax_scale * q_descale * k_descale * log2(e) folded into one qk_scale;
  * each KV tile's P is taken against the tile's own row maximum, floored at (running max - REF_FLOOR), and
    biased by 2^P_EXPONENT_BIAS before the cast to e4m3; accumulator and row sum live in a per-row frame f;
  * two-level accumulation (FP8): each tile's P V goes into a fresh FP32 accumulator, then
    acc = acc * 2^(f_old - f_new) + pv; BF16 accumulates in the MMA (acc rescaled first: one level);
  * O = acc / l * v_descale; a row that saw no key (l == 0) gets O = 0 and LSE = -inf; a NaN row gets NaN
    (tested as l == 0, not l > 0).

Host TMA descriptors (encoded by the runtime; Triton order, innermost last):
    q_desc   Q   [batch, seqlen_q, heads_q, HEAD_DIM]    block [1, BLOCK_M, 1, HEAD_DIM]   e4m3
    k_desc   K   [batch, seqlen_k, heads_kv, HEAD_DIM]   block [1, BLOCK_N, 1, HEAD_DIM]   e4m3
    vt_desc  V^T [batch, heads_kv, HEAD_DIM, extent]     block [1, 1, HEAD_DIM, BLOCK_N]   e4m3 (sequence contiguous)
    o_desc   O   [batch, seqlen_q, heads_q, HEAD_DIM]    block [1, BLOCK_M // 2, 1, HEAD_DIM]  bf16
Four dimensions so that TMA clips at each sequence's end (zero fill on loads, dropped stores) instead of
running into the next head or batch. V^T's sequence extent: seqlen_k for a caller's sequence-contiguous V
(the zero fill past seqlen_k is what keeps a caller's NaN padding out of the P.V product), the padded row
length for the V^T fp8attn's transpose wrote (zeros in its padding; with KEY_PERMUTED, positions past
seqlen_k hold keys before it). Each descriptor's shared
layout is a rank-4 NVMMASharedLayout (128-byte swizzle); the kernel reshapes the 4-D shared block to 2-D for
wgmma. Triton splits O's box into two [1, 64, 1, 64] stores (128 bf16 columns exceed the 128-byte swizzle
span): encode each CUtensorMap with the box that tensordesc_meta records, not the block above.

Varlen (the VARLEN instances, up to head_dim 128, packed sequences only; cu_seqlens as the Triton kernel's; the
host passes the V^T alignment, 128 or 256 with 256-key tiles, as `varlen`: _vt_align): the descriptors cover the
packed q, k, o as [1, total, heads, head_dim] and the V^T row as [1, heads_kv, head_dim, row], and every partition
offsets sequence b's blocks by its offsets (_sequence). The grid walks the blocks of the longest sequence for each
sequence and skips those past a sequence's end. A Q block or K tile that runs past its sequence reads the next
sequence's rows: Q rows that are never stored, K columns the softmax masks (a select, so their NaNs vanish). V
tiles never leave the sequence: FP8's V^T pads each sequence's columns with zeros to the alignment (the transpose);
BF16, and e4m3 with TRANSPOSE_V, read V as given: a key tile inside its sequence through the host descriptor of the
packed V, one that reaches past the sequence's end through a descriptor of the sequence's own rows made on the
device (_sequence_v; TMA zero-fills past its end). O rows of a sequence's last block go out through masked register
stores (O, stride_os, stride_oh), not a TMA box, which would write the next
sequence's rows. LSE stays [batch, heads_q, max_seqlen_q].

Unlike Triton 3.6's tl.range(warp_specialize=True), the partitions here keep the row frame, so LSE is right.

Persistent: at most one program per SM (the consumers' registers leave room for one CTA) walks the query
blocks program_id, program_id + num_programs, ...; the producer loads the next block's Q as soon as both
consumers have issued their last S of the current one, and the K/V ring runs on across blocks, so a block's
loads overlap the previous block's last P.V and output store. TILE_INFO_HANDOFF (per instance,
codegen/operations/fmha_fwd.py gluon_tile_info_handoff): only the producer computes a block's place in the
schedule and its key bounds (the schedule's divisions, the key range, varlen's offsets and checks) and hands
them to the consumers with the block's Q (_put_tile_info: 32 words of shared memory per Q buffer, written before
the arrive that makes the buffer ready; each consumer reads them after its q_ready wait with one shared load and
a warp reduction a word); otherwise each consumer warpgroup computes them too, a tile ahead.
Q_BUFFERS = 2 (a switch for bench/sweep_gluon.py, off in the library's instances, not adopted): two Q buffers, block
c in buffer c % 2 with its own q_ready and q_empty, so that the next block's Q loads while the consumers still run
the current one (the producer waits for the block before that one to be released): at S=512-2048 a block has 2-8 key
tiles, and the Q load behind the slower consumer's last S of a block may sit on the path to the next block's first
MMA. Q's shared memory doubles (+16 KB at 128 x 128 e4m3, +24 KB for 192-row blocks); head_dim 256 has no room for
it.
Q_IN_REGS (per instance, codegen/operations/fmha_fwd.py gluon_q_in_regs: the dense e4m3 full-attention 256-key
instance at D=128): each consumer loads its 64 rows of Q into registers once per block as the A operand of every S
product (HEAD_DIM / 8 registers a thread) and hands the Q buffer back at once, so S reads only K from shared memory
and the producer loads the next block's Q under the whole block (one buffer, not Q_BUFFERS' two). Elsewhere the
registers are short (spills at 128-key D=128 and at D=256) or the measured kernel was slower (D=64, causal, vnat).

BF16 at D=256: one [64, 256] accumulator per warpgroup (one-level accumulation), and the two consumer warpgroups
share one O buffer (shared memory: Q 64 KB and the K/V ring 128 KB leave room for one), taking turns through the
o_free mbarrier, released after a warpgroup's TMA store has read it.

SUM_ON_TC (the "lsum" instances, extra set; off elsewhere): each tile's row sums of P come from the tensor cores
(P times a [BLOCK_N, SUM_N] operand whose first column is ones, SUM_N = 16 by default: _sum_width) instead of
BLOCK_N / 2 FADDs per thread (D=128: 675 -> 624 SASS instructions per loop iteration). They are then sums of the
e4m3-rounded P, the weights P V actually applies, accumulated by the MMA: an accuracy variant, 1-5% slower on the
H200 (the row-sum MMA shares P.V's wait and the tensor pipe).

SPLIT_S (INT8 Q.K^T with 256-key tiles, D=64): Triton 3.6 does not lower the m64n256k32 integer wgmma, so S is two
[64, 128] products over the halves of the K slot (two commit groups), the softmax runs once per 256 keys over four
64-key descale blocks (_softmax_tile_int8_split), and P.V is two chained K=128 products over the halves of the V^T
slot (the key permutation stays within 32-key blocks, so each half keeps P's order).

The library compiles both: KEY_PERMUTED ("vkperm") for the V^T its kperm transpose writes, and the plain
order for a caller's sequence-contiguous V.

TRANSPOSE_V (the "vnat" Gluon instances, picked by the tuning table for short rows; e4m3, dense or varlen,
key-permuted, D <= 128): vt_desc is V as the caller gives it, [batch, seqlen_k, heads_kv, HEAD_DIM], block
[1, BLOCK_N, 1, HEAD_DIM], and the producer (then a whole warpgroup, one warp per SM sub-partition) transposes each
tile into the key-permuted V^T ring itself, as FlashAttention-3 does: TMA into one of RAW_STAGES raw slots, then,
one tile later, 32-bit shared loads, byte permutes and stmatrix stores (_transpose_v_tile). This removes the separate
transpose kernel (0.074 ms a call across the suite: +6% geometric mean against cuDNN with V^T given), at the
price of a raw slot of shared memory per stage and the producer's issue slots: the kernel runs 9-12% slower than
on a given V^T (H200, 2026-12-02), so it wins end to end only where the transpose weighs most (short rows).
"""

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
from common.int8_scores import int8_scores, key_block_descale_at, key_block_descale_pair, key_block_descales
from common.key_range import keep_mask, key_range
from common.varlen import VT_ALIGN_GLUON, varlen_check, varlen_offsets, varlen_vt_start

LOG2E = gl.constexpr(numerics.LOG2E)
LN2 = gl.constexpr(numerics.LN2)
P_EXPONENT_BIAS = gl.constexpr(numerics.P_EXPONENT_BIAS)
INT_TO_FLOAT_BITS = gl.constexpr(numerics.INT_TO_FLOAT_BITS)
INT_TO_FLOAT_OFFSET = gl.constexpr(numerics.INT_TO_FLOAT_OFFSET)
NEG_BIG = gl.constexpr(numerics.NEG_BIG)
REF_FLOOR = gl.constexpr(numerics.REF_FLOOR)
DESCALE_BLOCK = gl.constexpr(numerics.DESCALE_BLOCK_TOKENS)
FLT_MIN = gl.constexpr(1.1754943508222875e-38)  # float32's smallest normal

# Rows per consumer warpgroup (one wgmma M extent over 4 warps).
WG_M = gl.constexpr(64)


@gluon.constexpr_function
def _vt_align(BLOCK_N):
    """The varlen V^T column alignment of an instance: VT_ALIGN_GLUON, or the key tile where it is wider (256-key
    tiles: no tile of one sequence may reach the next one's columns). The host passes the same as `varlen`
    (fmha::detail::varlen_vt_align)."""
    return max(VT_ALIGN_GLUON, BLOCK_N)


# Causal schedules walk heads in sections whose K and V together stay within this many bytes (H200: 50 MB of
# L2, shared with the Q and O streams).
CAUSAL_SECTION_BYTES = gl.constexpr(16 * 1024 * 1024)


@gluon.jit
def _sequence(b, seqlen_q, seqlen_k, offs, total_q, total_k, VARLEN: gl.constexpr, BLOCK_N: gl.constexpr):
    """Where sequence b lives: (batch coordinate, its first q row, first key row, first V^T column, its query and
    key lengths, bad). Dense: (b, 0, 0, 0, seqlen_q, seqlen_k, False). Varlen (packed, the descriptors' batch
    dimension is 1): the offsets' rows, the V^T column from common/varlen.py, the lengths from the offsets (offs:
    _tile_ahead's, loaded a tile ahead). Offsets that fail the checks (fmha_fwd_triton's, the V transpose's): no
    key is read, and the rows inside q get NaN. VARLEN: whether the instance has the varlen path at all (the
    "varlen" instances)."""
    bc = b
    q_row = b * 0
    k_row = b * 0
    v_col = b * 0
    sq = seqlen_q
    sk = seqlen_k
    bad = b < 0
    if VARLEN:  # packed sequences only (the host refuses a dense call on a _varlen instance)
        q_prev, q_start, q_end, k_prev, k_start, k_end = offs
        q_ok = varlen_check(q_prev, q_start, q_end, total_q)
        k_ok = varlen_check(k_prev, k_start, k_end, total_k)
        bad = ~q_ok | (q_end - q_start > seqlen_q) | ~k_ok | (k_end - k_start > seqlen_k)
        bc = b * 0
        q_row = gl.where(q_ok, q_start, 0)
        sq = gl.where(q_ok, gl.minimum(q_end - q_start, seqlen_q), 0)
        k_row = gl.where(bad, 0, k_start)
        sk = gl.where(bad, 0, k_end - k_start)
        # The V^T alignment as a constant (the host passes the same as `varlen`): a shift, not a division per tile.
        v_col = varlen_vt_start(k_row, b, _vt_align(BLOCK_N))
    return bc, q_row, k_row, v_col, sq, sk, bad


@gluon.jit
def _causal_section(seqlen_k, batch_heads, HEAD_DIM: gl.constexpr):
    """The causal schedule's heads per section (_tile): as many as have K and V within CAUSAL_SECTION_BYTES. Once
    per program, outside the tile loop (a 64-bit division)."""
    kv_bytes = 2 * gl.maximum(seqlen_k, 1).to(gl.int64) * HEAD_DIM
    section = gl.maximum(CAUSAL_SECTION_BYTES // kv_bytes, 1).to(gl.int32)
    return gl.minimum(section, batch_heads)


@gluon.jit
def _tile_order(tile, num_m_blocks, batch_heads, section, CAUSAL: gl.constexpr):
    """Work item `tile` -> (bh, pid_m): the persistent schedule's order (_tile says which). section:
    _causal_section's (causal only)."""
    if CAUSAL:
        first_bh = tile // (section * num_m_blocks) * section
        heads_here = gl.minimum(section, batch_heads - first_bh)  # the last section may be short
        r = tile - first_bh * num_m_blocks
        pid_m = num_m_blocks - 1 - r // heads_here
        bh = first_bh + r % heads_here
    else:
        pid_m = tile % num_m_blocks
        bh = tile // num_m_blocks
    return bh, pid_m


@gluon.jit
def _tile_ahead(tile, num_tiles, num_m_blocks, batch_heads, heads_q, group_size, section, cu_seqlens_q,
                cu_seqlens_k, CAUSAL: gl.constexpr, VARLEN: gl.constexpr):
    """What _tile needs of work item `tile` that costs time: its place in the schedule (b, h, h_kv, pid_m:
    _tile_order's and the head split's divisions) and, varlen, its sequence's offsets (common/varlen.py:
    varlen_offsets for q and k, loaded). Computed a tile ahead, so that a tile's start waits for neither (at S=1024
    causal a tile is ~10 us and the dependent load ~1 us): by the producer while it waits for the tile before to
    release its Q buffer, and, without TILE_INFO_HANDOFF, by each consumer under the tile before's first S MMA
    (with it the consumers get the producer's result with the Q: _put_tile_info). A tile past the last gives the
    last tile's.
    Returns (b, h, h_kv, pid_m, q_prev, q_start, q_end, k_prev, k_start, k_end); dense: zero offsets, no load."""
    bh, pid_m = _tile_order(gl.minimum(tile, num_tiles - 1), num_m_blocks, batch_heads, section, CAUSAL)
    b = bh // heads_q
    h = bh % heads_q
    if VARLEN:
        q_prev, q_start, q_end = varlen_offsets(cu_seqlens_q, b)
        k_prev, k_start, k_end = varlen_offsets(cu_seqlens_k, b)
    else:
        q_prev = tile * 0
        q_start = q_prev
        q_end = q_prev
        k_prev = q_prev
        k_start = q_prev
        k_end = q_prev
    return b, h, h // group_size, pid_m, q_prev, q_start, q_end, k_prev, k_start, k_end


@gluon.jit
def _tile(ahead, heads_q, group_size, seqlen_q, seqlen_k, window_left, window_right, total_q, total_k,
          BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, HEAD_DIM: gl.constexpr, CAUSAL: gl.constexpr,
          VARLEN: gl.constexpr):
    """A work item of the persistent schedule, from _tile_ahead's (b, h, h_kv, pid_m, varlen offsets) -> (b, h,
    h_kv, bh, start_m, lo_off, hi_off, n_start, lo_masked_end, full_end, n_end, and _sequence's bc, q_row, k_row,
    v_col, sq, sk, bad).

    Full attention: query blocks fastest, so that the programs working at the same time share a head's K and V
    in L2. Causal: heads in sections whose K and V fit CAUSAL_SECTION_BYTES, and within a section the query
    blocks from the last (the longest rows) to the first, across the section's heads, so that long blocks
    start first and short ones fill the tail. (Longest-first across all heads at once: -13% at S=8192, K and V
    of 132 heads in flight; head by head: -30% at S=512, the tail unbalanced; docs/perf/NOTES.md.)
    Varlen: the blocks of the longest sequence (seqlen_q) for every sequence; a block at or past its own sequence's
    end (start_m >= sq) gets no key tiles (and stores nothing).
    The key bounds are the Triton kernel's (common/key_range.py, sliding windows included), per sequence."""
    b, h, h_kv, pid_m, q_prev, q_start, q_end, k_prev, k_start, k_end = ahead
    offs = (q_prev, q_start, q_end, k_prev, k_start, k_end)
    bh = b * heads_q + h
    start_m = pid_m * BLOCK_M
    bc, q_row, k_row, v_col, sq, sk, bad = _sequence(b, seqlen_q, seqlen_k, offs, total_q, total_k, VARLEN, BLOCK_N)
    lo_off, hi_off, n_start, lo_masked_end, full_end, n_end = key_range(start_m, sq, sk, window_left,
                                                                        window_right, BLOCK_M, BLOCK_N, CAUSAL)
    if VARLEN:
        # A block past its sequence's end sees no key (its producer still loads the block's Q rows, and its
        # consumers store none of them): the same flow as any block, no branch around it.
        past_end = start_m >= sq
        lo_masked_end = gl.where(past_end, n_start, lo_masked_end)
        full_end = gl.where(past_end, n_start, full_end)
        n_end = gl.where(past_end, n_start, n_end)
    return (b, h, h_kv, bh, start_m, lo_off, hi_off, n_start, lo_masked_end, full_end, n_end,
            bc, q_row, k_row, v_col, sq, sk, bad)


@gluon.jit
def _q_slot(q_bufs, count, Q_BUFFERS: gl.constexpr):
    """The Q buffer of the program's query block number `count`, or its q_ready or q_empty mbarrier or its tile
    info slot (TILE_INFO_HANDOFF): the one there is (Q_BUFFERS = 1), else buffer count % Q_BUFFERS, whose waits
    take phase (count // Q_BUFFERS) & 1."""
    if Q_BUFFERS == 1:
        slot = q_bufs
    else:
        slot = q_bufs.index(count % Q_BUFFERS)
    return slot


@gluon.jit
def _q_box(q_smem, count, c: gl.constexpr, Q_BUFFERS: gl.constexpr, BOXES: gl.constexpr):
    """Three consumers: 64-row box c of the program's query block number `count`. Q_BUFFERS = 2 keeps the two
    blocks' BOXES boxes one after the other in one dimension ([2, 3, ...] is not a shared shape: only the leading
    extent may be other than a power of two)."""
    if Q_BUFFERS == 1:
        box = q_smem.index(c)
    else:
        box = q_smem.index((count % Q_BUFFERS) * BOXES + c)
    return box


# A query block's place and key bounds, handed from the producer to the consumers with its Q (_put_tile_info,
# _get_tile_info): the producer computes them anyway, and each consumer warpgroup computing them again (the
# schedule's divisions, the key range, varlen's checks and offsets) was most of its per-tile scalar work.
TILE_INFO = gl.constexpr(32)  # int32 slots, one per lane: b, h, h_kv, start_m, lo_off, hi_off, n_start,
# lo_masked_end, full_end, n_end, bc, q_row, sq, sk, bad (0 / 1); the rest unused


@gluon.constexpr_function
def _info_layout(WARPS):
    """The [TILE_INFO] int32 slot over a partition of WARPS warps: word i on lane i, the same in every warp."""
    return gl.BlockedLayout([1], [32], [WARPS], [0])


@gluon.jit
def _put_tile_info(slot, b, h, h_kv, start_m, lo_off, hi_off, n_start, lo_masked_end, full_end, n_end, bc, q_row,
                   sq, sk, bad, WARPS: gl.constexpr):
    """The producer: this block's values into its Q buffer's info slot, before the arrive that makes the Q buffer
    ready (whose release the consumers' wait acquires). The partition's barrier orders every thread's stores
    before the one-thread arrive. The slot is free: the consumers read it before they release the Q buffer,
    whose release the producer waited for (Triton puts a barrier over the consumer warpgroup before its
    one-thread arrive on q_empty, so every warp's loads of the slot precede the release; checked in the PTX)."""
    i = gl.arange(0, TILE_INFO, layout=_info_layout(WARPS))
    words = (b, h, h_kv, start_m, lo_off, hi_off, n_start, lo_masked_end, full_end, n_end, bc, q_row, sq, sk,
             bad.to(gl.int32))
    v = gl.zeros([TILE_INFO], gl.int32, _info_layout(WARPS))
    for k in gl.static_range(len(words)):
        v = gl.where(i == k, words[k], v)
    slot.store(v)
    gl.thread_barrier()


@gluon.jit
def _info(words, lane, k: gl.constexpr):
    """Word k of a tile's info (words: the slot loaded, one word a lane) as a warp-uniform scalar: a maximum over
    the warp, which Triton lowers to redux.sync; its result lands in a uniform register, where a plain shared
    load's would take a register of every thread (the consumers' key loops run out of registers otherwise)."""
    return gl.max(gl.where(lane == k, words, -2147483647 - 1), axis=0)


@gluon.jit
def _get_tile_info(slot):
    """A consumer warpgroup: the values _put_tile_info wrote, after the Q buffer's q_ready wait (one shared load
    a thread, one warp reduction a word)."""
    lane = gl.arange(0, TILE_INFO, layout=_info_layout(4))
    w = slot.load(_info_layout(4))
    return (_info(w, lane, 0), _info(w, lane, 1), _info(w, lane, 2), _info(w, lane, 3), _info(w, lane, 4),
            _info(w, lane, 5), _info(w, lane, 6), _info(w, lane, 7), _info(w, lane, 8), _info(w, lane, 9),
            _info(w, lane, 10), _info(w, lane, 11), _info(w, lane, 12), _info(w, lane, 13),
            _info(w, lane, 14) != 0)


@gluon.jit
def _sequence_v(V, stride_vs, stride_vh, k_row, sk, heads_kv, loaded, it, v_desc, HEAD_DIM: gl.constexpr,
                BLOCK_N: gl.constexpr, SLOTS: gl.constexpr):
    """Varlen with V as given (BF16, and e4m3 with TRANSPOSE_V): a TMA descriptor of one sequence's V rows alone,
    [1, sk, heads_kv, HEAD_DIM], so that a key tile reaching past the sequence's end is zero-filled instead of
    reading the next sequence's rows (P is 0 there, but 0 x NaN is NaN: a neighbour's non-finite V would leak; the
    V^T fp8attn writes gets the same from its zero-padded columns). Made on the device in the program's global
    scratch (128 bytes per call site) and rewritten when a tile reaching past its sequence's end belongs to
    another sequence than the last such tile, so the V loads still in flight, which may read the previous one,
    must land first: the last SLOTS issued, each completing on its slot of `loaded` (older ones have been
    consumed, their slots reused): the V ring's v_ready (BF16) or the raw slots' raw_ready (TRANSPOSE_V, whose
    last load is transposed only after the next one is issued: waiting for it here is the wait the transpose
    makes anyway). v_desc: the host descriptor whose block and shared layout it copies."""
    for i in gl.static_range(SLOTS):
        j = it - 1 - i
        if j >= 0:
            mbarrier.wait(loaded.index(j % SLOTS), (j // SLOTS) & 1)
    # (The batch dimension, of extent 1, never steps; its stride only has to be a valid one.)
    return tma.make_tensor_descriptor(V + k_row.to(gl.int64) * stride_vs, [1, gl.maximum(sk, 1), heads_kv, HEAD_DIM],
                                      [stride_vs, stride_vs, stride_vh, 1], [1, BLOCK_N, 1, HEAD_DIM], v_desc.layout)


@gluon.jit
def _load_v_rows(vt_desc, v_seq, bc, k_row, start_n, sk, h_kv, bar, dst, SEQ_V: gl.constexpr, BLOCK_N: gl.constexpr):
    """Key tile start_n of V as given (BF16; e4m3 with TRANSPOSE_V, into a raw slot) into dst, completing on bar.
    SEQ_V (varlen): a tile that reaches past the sequence's end through v_seq, the descriptor of the sequence's own
    rows (_sequence_v), which TMA zero-fills past it; the others through the host descriptor of the packed V."""
    if SEQ_V:
        if start_n + BLOCK_N > sk:
            tma.async_copy_global_to_shared(v_seq, [0, start_n, h_kv, 0], bar, dst)
        else:
            tma.async_copy_global_to_shared(vt_desc, [bc, k_row + start_n, h_kv, 0], bar, dst)
    else:
        tma.async_copy_global_to_shared(vt_desc, [bc, k_row + start_n, h_kv, 0], bar, dst)


@gluon.jit
def _producer(args, HEAD_DIM: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, CAUSAL: gl.constexpr,
              NUM_STAGES: gl.constexpr, V_NATURAL: gl.constexpr, VARLEN: gl.constexpr, TRANSPOSE_V: gl.constexpr,
              RAW_STAGES: gl.constexpr, Q_BUFFERS: gl.constexpr, TILE_INFO_HANDOFF: gl.constexpr):
    """TMA loads for every tile of this program: the Q block (once both consumers are done with the previous
    one; with Q_BUFFERS = 2, with the one before it, whose buffer it takes), then its K and V^T tiles through the
    ring. `it` counts ring slots across tiles, so the next tile's K and V stream in while the consumers finish the
    current one. Varlen: rows are the packed tensors' (the descriptors' batch dimension is 1); a Q block or K tile
    that runs past its sequence reads the next sequence's rows, which the consumers never store (Q) or mask out of
    the softmax (K); V^T tiles stay inside the sequence's zero-padded columns (common/varlen.py), and BF16 V tiles
    reaching past the sequence's end inside a descriptor of the sequence's own rows (_sequence_v). args: the
    kernel's producer_args, unpacked here."""
    (q_desc, k_desc, vt_desc, q_smem, k_bufs, v_bufs, q_ready, q_empty, k_ready, k_empty, v_ready, v_empty, batch,
     seqlen_q, seqlen_k, heads_q, group_size, window_left, window_right, cu_seqlens_q, cu_seqlens_k, varlen, total_q,
     total_k, V, stride_vs, stride_vh, v_raw, raw_ready, info) = args
    num_m_blocks = gl.cdiv(seqlen_q, BLOCK_M)
    batch_heads = batch * heads_q
    it = 0
    count = 0
    # TRANSPOSE_V: 1 while raw load it - 1 waits for its transpose (made when the next load is issued).
    pending = 0
    num_tiles = num_m_blocks * batch_heads
    section = _causal_section(seqlen_k, batch_heads, HEAD_DIM)
    ahead = _tile_ahead(gl.program_id(0), num_tiles, num_m_blocks, batch_heads, heads_q, group_size, section,
                        cu_seqlens_q, cu_seqlens_k, CAUSAL, VARLEN)
    # Varlen with V as given (BF16, or e4m3 transposed here): V tiles that reach past a sequence's end go through
    # a descriptor of the sequence's own rows (_sequence_v), whose loads complete on the raw slots' barriers when
    # this partition transposes them.
    SEQ_V: gl.constexpr = VARLEN and (V_NATURAL or TRANSPOSE_V)
    if TRANSPOSE_V:
        v_loaded = raw_ready
        V_SLOTS: gl.constexpr = RAW_STAGES
    else:
        v_loaded = v_ready
        V_SLOTS: gl.constexpr = NUM_STAGES
    v_seq = vt_desc  # SEQ_V: replaced below by the sequence's own descriptor; otherwise unused
    if SEQ_V:
        # A key tile inside its sequence reads V through the host descriptor (the packed V); only a
        # tile reaching past the sequence's end reads it through a descriptor of the sequence's own rows, which
        # TMA zero-fills past the end (_sequence_v). That descriptor (of sequence v_seq_b) is kept, and remade
        # (and so waited for) only when a later such tile belongs to another sequence. (Remade whenever the
        # program's tile changed sequence, about every 8th tile at 32 x 1024 causal, the drained ring cost
        # BF16 varlen ~3% more than e4m3 there: 0.904 vs 0.929 of dense, H200 2026-12-02.)
        (b0, h0, hkv0, bh0, sm0, lo0, hi0, ns0, lme0, fe0, ne0, bc0, qr0, k_row0, vc0, sq0, sk0, bad0) = _tile(
            ahead, heads_q, group_size, seqlen_q, seqlen_k, window_left, window_right, total_q, total_k, BLOCK_M,
            BLOCK_N, HEAD_DIM, CAUSAL, VARLEN)
        v_seq = _sequence_v(V, stride_vs, stride_vh, k_row0, sk0, heads_q // group_size, v_loaded, 0,
                            vt_desc, HEAD_DIM, BLOCK_N, V_SLOTS)
        v_seq_b = b0
    for tile in range(gl.program_id(0), num_tiles, gl.num_programs(0)):
        (b, h, h_kv, bh, start_m, lo_off, hi_off, n_start, lo_masked_end, full_end, n_end,
         bc, q_row, k_row, v_col, sq, sk, bad) = _tile(
            ahead, heads_q, group_size, seqlen_q, seqlen_k, window_left, window_right, total_q, total_k, BLOCK_M,
            BLOCK_N, HEAD_DIM, CAUSAL, VARLEN)
        ahead = _tile_ahead(tile + gl.num_programs(0), num_tiles, num_m_blocks, batch_heads, heads_q, group_size,
                            section, cu_seqlens_q, cu_seqlens_k, CAUSAL, VARLEN)
        # A fresh mbarrier counts as having completed the phase before phase 0: the first wait on phase 1
        # goes straight through (Q_BUFFERS = 2: the first wait on each buffer, blocks 0 and 1).
        mbarrier.wait(_q_slot(q_empty, count, Q_BUFFERS), ((count // Q_BUFFERS) & 1) ^ 1)
        if TILE_INFO_HANDOFF:
            _put_tile_info(_q_slot(info, count, Q_BUFFERS), b, h, h_kv, start_m, lo_off, hi_off, n_start,
                           lo_masked_end, full_end, n_end, bc, q_row, sq, sk, bad, _producer_warps(TRANSPOSE_V))
        q_full = _q_slot(q_ready, count, Q_BUFFERS)
        if BLOCK_M == 2 * WG_M:
            mbarrier.expect(q_full, q_desc.block_type.nbytes)
            tma.async_copy_global_to_shared(q_desc, [bc, q_row + start_m, h, 0], q_full,
                                            _q_slot(q_smem, count, Q_BUFFERS))
        else:  # three consumers: a box of 64 rows each (the kernel's NUM_CONSUMERS)
            mbarrier.expect(q_full, (BLOCK_M // WG_M) * q_desc.block_type.nbytes)
            for c in gl.static_range(BLOCK_M // WG_M):
                tma.async_copy_global_to_shared(q_desc, [bc, q_row + start_m + c * WG_M, h, 0], q_full,
                                                _q_box(q_smem, count, c, Q_BUFFERS, BLOCK_M // WG_M))
        if SEQ_V:
            # After the Q load, so that its wait for the previous tile's last V loads does not hold back the next
            # block's Q (with the wait first: 0.90x of the dense call at S=1024 causal, H200 2026-12-02). Only
            # when this block's last key tile (tiles of BLOCK_N from n_start, a multiple of it) reaches past the
            # sequence's end.
            crosses = (n_end > n_start) & (n_start + gl.cdiv(n_end - n_start, BLOCK_N) * BLOCK_N > sk)
            if crosses & (b != v_seq_b):
                v_seq = _sequence_v(V, stride_vs, stride_vh, k_row, sk, heads_q // group_size, v_loaded, it,
                                    vt_desc, HEAD_DIM, BLOCK_N, V_SLOTS)
                v_seq_b = b
        for start_n in range(n_start, n_end, BLOCK_N):
            s = it % NUM_STAGES
            phase = (it // NUM_STAGES) & 1
            mbarrier.wait(k_empty.index(s), phase ^ 1)
            # Rows past the tensor's end are zero-filled by TMA and still count toward the transaction bytes.
            mbarrier.expect(k_ready.index(s), k_desc.block_type.nbytes)
            tma.async_copy_global_to_shared(k_desc, [bc, k_row + start_n, h_kv, 0], k_ready.index(s),
                                            k_bufs.index(s))
            if TRANSPOSE_V:
                # V as given into a raw slot; this partition transposes it into the V^T ring one tile later
                # (_transpose_step), so the load's latency overlaps the previous tile's transpose. With one raw
                # slot the previous tile's transpose must read it first.
                if RAW_STAGES == 1:
                    if pending != 0:
                        _transpose_step(it - 1, v_raw, raw_ready, v_bufs, v_ready, v_empty, BLOCK_N, HEAD_DIM,
                                        NUM_STAGES, RAW_STAGES)
                r = it % RAW_STAGES
                mbarrier.expect(raw_ready.index(r), vt_desc.block_type.nbytes)
                _load_v_rows(vt_desc, v_seq, bc, k_row, start_n, sk, h_kv, raw_ready.index(r), v_raw.index(r), SEQ_V,
                             BLOCK_N)
                if RAW_STAGES > 1:
                    if pending != 0:
                        _transpose_step(it - 1, v_raw, raw_ready, v_bufs, v_ready, v_empty, BLOCK_N, HEAD_DIM,
                                        NUM_STAGES, RAW_STAGES)
                pending = 1
            else:
                mbarrier.wait(v_empty.index(s), phase ^ 1)
                mbarrier.expect(v_ready.index(s), vt_desc.block_type.nbytes)
                if V_NATURAL:  # BF16: V itself, [batch, seqlen_k, heads_kv, HEAD_DIM] (varlen: per sequence)
                    _load_v_rows(vt_desc, v_seq, bc, k_row, start_n, sk, h_kv, v_ready.index(s), v_bufs.index(s),
                                 SEQ_V, BLOCK_N)
                else:
                    tma.async_copy_global_to_shared(vt_desc, [bc, h_kv, 0, v_col + start_n], v_ready.index(s),
                                                    v_bufs.index(s))
            it += 1
        if TRANSPOSE_V:
            # A block without key tiles (a varlen block past its sequence's end, a causal block above the diagonal
            # when seqlen_q > seqlen_k): the last load's transpose cannot wait for the next block's first load,
            # since the consumers finish the block before it only with it, and this partition's next Q load waits
            # for them to be done with the empty block's Q (they would wait for each other).
            if (n_end <= n_start) & (pending != 0):
                _transpose_step(it - 1, v_raw, raw_ready, v_bufs, v_ready, v_empty, BLOCK_N, HEAD_DIM, NUM_STAGES,
                                RAW_STAGES)
                pending = 0
        count += 1
    if TRANSPOSE_V:
        if pending != 0:
            _transpose_step(it - 1, v_raw, raw_ready, v_bufs, v_ready, v_empty, BLOCK_N, HEAD_DIM, NUM_STAGES,
                            RAW_STAGES)


@gluon.jit
def _transpose_step(j, v_raw, raw_ready, v_bufs, v_ready, v_empty, BLOCK_N: gl.constexpr, HEAD_DIM: gl.constexpr,
                    NUM_STAGES: gl.constexpr, RAW_STAGES: gl.constexpr):
    """TRANSPOSE_V: ring slot j's V tile, landed in raw slot j % RAW_STAGES, into the V^T ring (key-permuted),
    then released to the consumers. The fence makes the generic-proxy stores visible to wgmma (async proxy) and
    orders this tile's raw reads before the TMA that next overwrites the slot; the barrier makes all four warps'
    stores complete before the one-thread arrive."""
    s = j % NUM_STAGES
    r = j % RAW_STAGES
    mbarrier.wait(raw_ready.index(r), (j // RAW_STAGES) & 1)
    mbarrier.wait(v_empty.index(s), ((j // NUM_STAGES) & 1) ^ 1)
    _transpose_v_tile(v_raw.index(r), v_bufs.index(s), BLOCK_N, HEAD_DIM)
    fence_async_shared()
    gl.thread_barrier()
    mbarrier.arrive(v_ready.index(s), count=1)


@gluon.jit
def _k_tile(k_bufs, s, BLOCK_N: gl.constexpr, HEAD_DIM: gl.constexpr):
    """Stage s of the K ring, [BLOCK_N, HEAD_DIM] head_dim contiguous, viewed K-major as S = Q K^T's B."""
    return k_bufs.index(s).reshape([BLOCK_N, HEAD_DIM]).permute((1, 0))


@gluon.jit
def _v_tile(v_bufs, s, BLOCK_N: gl.constexpr, HEAD_DIM: gl.constexpr, V_NATURAL: gl.constexpr):
    """Stage s of the V ring as P.V's B operand [BLOCK_N, HEAD_DIM]. FP8: V^T's [HEAD_DIM, BLOCK_N] tile
    (sequence contiguous) viewed K-major (FP8 wgmma needs both operands K-major). BF16 (V_NATURAL): V's own
    [BLOCK_N, HEAD_DIM] tile, head_dim contiguous (16-bit wgmma reads an N-major B)."""
    if V_NATURAL:
        tile = v_bufs.index(s).reshape([BLOCK_N, HEAD_DIM])
    else:
        tile = v_bufs.index(s).reshape([HEAD_DIM, BLOCK_N]).permute((1, 0))
    return tile


@gluon.constexpr_function
def _transpose_layout(HEAD_DIM, CHUNK):
    """Distribution of a [CHUNK, HEAD_DIM] e4m3 chunk of a V tile over the 4-warp producer (TRANSPOSE_V): each
    thread holds keys {2t, 2t+1, 8+2t, 9+2t} + 16a (one key-permuted group: they become 4 consecutive positions
    of the key-permuted V^T) at 4 consecutive dims (one 32-bit shared load per key). Lanes: t (2 bits), a (1 bit),
    4-dim words (2 bits); warps and then registers cover the rest. The loads are 2-way bank conflicted on
    128-byte swizzled rows (counted, not measured); Triton writes the transposed words with stmatrix (sm_90a SASS:
    32 LDS, 96 PRMT, 8 STSM.x4 a thread per 128x128 tile)."""
    reg = [[0, 1], [0, 2], [1, 0], [8, 0]]
    lane = [[2, 0], [4, 0], [16, 0], [0, 4], [0, 8]]
    rest = [[0, d] for d in (16, 32, 64, 128) if d < HEAD_DIM] + [[k, 0] for k in (32, 64, 128) if k < CHUNK]
    warp = rest[:2]
    reg = reg + rest[2:]
    assert len(warp) == 2, "4 producer warps"
    return gl.DistributedLinearLayout(reg, lane, warp, [], [CHUNK, HEAD_DIM])


@gluon.constexpr_function
def _vt_smem_layout(BLOCK_N):
    """The V^T ring's shared layout under TRANSPOSE_V: what a V^T descriptor's TMA would write (rank 4, rows of
    BLOCK_N e4m3 bytes, 128-byte swizzle)."""
    return gl.NVMMASharedLayout(swizzle_byte_width=min(128, BLOCK_N), element_bitwidth=8, rank=4)


@gluon.constexpr_function
def _producer_warps(TRANSPOSE_V):
    """One warp issues TMA; TRANSPOSE_V's transposes take a warpgroup (one warp per SM sub-partition)."""
    return 4 if TRANSPOSE_V else 1


@gluon.jit
def _transpose_v_tile(raw, dst, BLOCK_N: gl.constexpr, HEAD_DIM: gl.constexpr):
    """raw [1, BLOCK_N, 1, HEAD_DIM] (V as TMA loaded it) -> dst [1, 1, HEAD_DIM, BLOCK_N], the key-permuted V^T
    (position 16h + 4t + 2j + e of each 32-key block holds key 16h + 8j + 2t + e), in chunks of CHUNK keys
    (32 keys: 16 bytes a thread per chunk at D=64, 32 at D=128; the producer has 24 registers). Triton puts a
    partition barrier before the stores of every chunk after the first (apparently its barrier analysis does not
    tell the raw slot and the V^T stage apart through the partition's arguments): 3 per 128-key tile."""
    CH: gl.constexpr = 32
    layout: gl.constexpr = _transpose_layout(HEAD_DIM, CH)
    src = raw.reshape([BLOCK_N, HEAD_DIM])
    out = dst.reshape([HEAD_DIM, BLOCK_N])
    for c in gl.static_range(BLOCK_N // CH):
        x = src.slice(c * CH, CH, dim=0).load(layout)
        x = gl.reshape(x, [CH // 32, 2, 2, 4, 2, HEAD_DIM])
        x = gl.permute(x, (0, 1, 3, 2, 4, 5))
        x = gl.reshape(x, [CH, HEAD_DIM])
        out.slice(c * CH, CH, dim=1).store(gl.permute(x, (1, 0)))


@gluon.jit
def _pv_parts(p8, v_bufs, s, acc, rescale, BLOCK_N: gl.constexpr, HEAD_DIM: gl.constexpr, PV_N: gl.constexpr,
              layout: gl.constexpr):
    """P.V at HEAD_DIM = 4 PV_N, in four column parts: the two-level accumulation needs a fresh product beside
    the accumulator, and a whole [64, 256] product (128 registers) next to O (128) does not fit the 240 registers
    a consumer thread gets. Parts 0-2 are issued, waited for and folded one at a time (32 registers in flight);
    part 3 is returned in flight and the caller waits for it and folds it before issuing the next S (issuing S
    behind part 3 spilled 4x more, docs/perf/NOTES.md), so at D=256 a warpgroup's P.V and its next S do not
    overlap; the other warpgroup's work fills the tensor cores meanwhile. acc is a tuple of four [64, PV_N]
    accumulators; returns (acc with parts 0-2 folded, part 3's product)."""
    vt = v_bufs.index(s).reshape([HEAD_DIM, BLOCK_N])
    a0 = acc[0] * rescale[:, None] + warpgroup_mma_wait(num_outstanding=0, deps=(warpgroup_mma(
        p8, vt.slice(0, PV_N, dim=0).permute((1, 0)), gl.zeros([WG_M, PV_N], gl.float32, layout), use_acc=False,
        is_async=True), ))
    a1 = acc[1] * rescale[:, None] + warpgroup_mma_wait(num_outstanding=0, deps=(warpgroup_mma(
        p8, vt.slice(PV_N, PV_N, dim=0).permute((1, 0)), gl.zeros([WG_M, PV_N], gl.float32, layout), use_acc=False,
        is_async=True), ))
    a2 = acc[2] * rescale[:, None] + warpgroup_mma_wait(num_outstanding=0, deps=(warpgroup_mma(
        p8, vt.slice(2 * PV_N, PV_N, dim=0).permute((1, 0)), gl.zeros([WG_M, PV_N], gl.float32, layout),
        use_acc=False, is_async=True), ))
    pv3 = warpgroup_mma(p8, vt.slice(3 * PV_N, PV_N, dim=0).permute((1, 0)),
                        gl.zeros([WG_M, PV_N], gl.float32, layout), use_acc=False, is_async=True)
    return (a0, a1, a2, acc[3]), pv3


@gluon.jit
def _pv_part(p8, vt, c: gl.constexpr, PV_N: gl.constexpr, layout: gl.constexpr):
    """Column part c of P.V (V^T rows c * PV_N ...), issued into a fresh accumulator."""
    return warpgroup_mma(p8, vt.slice(c * PV_N, PV_N, dim=0).permute((1, 0)),
                         gl.zeros([WG_M, PV_N], gl.float32, layout), use_acc=False, is_async=True)


@gluon.jit
def _pv_parts_pipelined(p8, v_bufs, s, acc, rescale, BLOCK_N: gl.constexpr, HEAD_DIM: gl.constexpr,
                        PV_N: gl.constexpr, layout: gl.constexpr):
    """PV_PIPELINED: P.V at HEAD_DIM = 8 PV_N (PV_N = 32) in eight column parts, two in flight: part c + 1 is
    issued before part c is waited for and folded, so each part's MMA latency runs under the previous part's fold
    (_pv_parts waits for each of its four parts in turn). Two [64, 32] products in flight take the 32 registers one
    [64, 64] part takes there. Returns (acc with parts 0-6 folded, part 7's product in flight)."""
    vt = v_bufs.index(s).reshape([HEAD_DIM, BLOCK_N])
    r = rescale[:, None]
    q = _pv_part(p8, vt, 0, PV_N, layout)
    out = ()
    for c in gl.static_range(1, HEAD_DIM // PV_N):
        q_next = _pv_part(p8, vt, c, PV_N, layout)
        out = out + (acc[c - 1] * r + warpgroup_mma_wait(num_outstanding=1, deps=(q, )), )
        q = q_next
    return out + (acc[HEAD_DIM // PV_N - 1], ), q


@gluon.jit
def _pv_issue(p8, v_bufs, s, acc, rescale, BLOCK_N: gl.constexpr, HEAD_DIM: gl.constexpr, PV_N: gl.constexpr,
              V_NATURAL: gl.constexpr, layout: gl.constexpr, SPLIT_S: gl.constexpr = False):
    """Issues one KV tile's P.V; returns (acc, the product in flight), for _pv_fold once it is done.
    FP8: into a fresh accumulator (two-level accumulation; D=256: parts 0-2 already folded, see _pv_parts).
    BF16: into acc * rescale itself (one level: 16-bit products accumulate in float32 exactly enough; the two
    levels are for FP8's limited accumulator), no fresh product beside O, 64 registers fewer; at D=256 too, in one
    [64, 256] product (wgmma's widest N)."""
    if SPLIT_S:  # P as two 128-key operands (_softmax_tile_int8_split), chained into one product
        vt = v_bufs.index(s).reshape([HEAD_DIM, BLOCK_N])
        HALF: gl.constexpr = BLOCK_N // 2
        pv = warpgroup_mma(p8[0], vt.slice(0, HALF, dim=1).permute((1, 0)),
                           gl.zeros([WG_M, HEAD_DIM], gl.float32, layout), use_acc=False, is_async=True)
        pv = warpgroup_mma(p8[1], vt.slice(HALF, HALF, dim=1).permute((1, 0)), pv, use_acc=True, is_async=True)
    elif HEAD_DIM > 128 and not V_NATURAL and HEAD_DIM == 8 * PV_N:
        acc, pv = _pv_parts_pipelined(p8, v_bufs, s, acc, rescale, BLOCK_N, HEAD_DIM, PV_N, layout)
    elif HEAD_DIM > 128 and not V_NATURAL:
        acc, pv = _pv_parts(p8, v_bufs, s, acc, rescale, BLOCK_N, HEAD_DIM, PV_N, layout)
    elif V_NATURAL:
        pv = warpgroup_mma(p8, _v_tile(v_bufs, s, BLOCK_N, HEAD_DIM, V_NATURAL), acc * rescale[:, None],
                           use_acc=True, is_async=True)
    else:
        pv = warpgroup_mma(p8, _v_tile(v_bufs, s, BLOCK_N, HEAD_DIM, V_NATURAL),
                           gl.zeros([WG_M, HEAD_DIM], gl.float32, layout), use_acc=False, is_async=True)
    return acc, pv


@gluon.jit
def _pv_fold(acc, pv, rescale, HEAD_DIM: gl.constexpr, V_NATURAL: gl.constexpr, PV_N: gl.constexpr):
    """The accumulator after _pv_issue's product `pv` has completed."""
    if HEAD_DIM > 128 and not V_NATURAL:  # column parts: the last one is in flight
        out = ()
        for c in gl.static_range(HEAD_DIM // PV_N - 1):
            out = out + (acc[c], )
        out = out + (acc[HEAD_DIM // PV_N - 1] * rescale[:, None] + pv, )
    elif V_NATURAL:
        out = pv
    else:
        out = acc * rescale[:, None] + pv
    return out


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
def _s_zeros(M: gl.constexpr, N: gl.constexpr, layout: gl.constexpr, QK_INT8: gl.constexpr):
    """The S accumulator: int32 for INT8 Q.K^T (integer wgmma), float32 otherwise."""
    if QK_INT8:
        return gl.zeros([M, N], gl.int32, layout)
    else:
        return gl.zeros([M, N], gl.float32, layout)


@gluon.jit
def _softmax_tile(qk, l_i, m_i, f_i, start_n, lo_masked_end, full_end, offs_m, qk_scale, lo_off, hi_off, seqlen_k,
                  kd_base, k_descale_stride_blk, CAUSAL: gl.constexpr, PV_N: gl.constexpr, BLOCK_N: gl.constexpr,
                  KEY_PERMUTED: gl.constexpr, SUM_ON_TC: gl.constexpr, QK_INT8: gl.constexpr,
                  BLOCK_DESCALE: gl.constexpr, V_NATURAL: gl.constexpr):
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
                                  kd_base, k_descale_stride_blk, PV_N, BLOCK_N, KEY_PERMUTED, SUM_ON_TC)
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
    m_new = gl.maximum(m_i, m_tile)
    ref = gl.maximum(m_tile, m_new - REF_FLOOR)  # finite: m_new >= NEG_BIG
    # P_tile = exp2(S - ref) * 2^8, rounded to e4m3 in registers.
    frame = ref - P_EXPONENT_BIAS
    p = gl.exp2(qk * qk_scale - frame[:, None])
    p8, l_i, rescale = _p_operand(p, l_i, f_i, frame, PV_N, BLOCK_N, KEY_PERMUTED, SUM_ON_TC, V_NATURAL)
    return p8, l_i, m_new, frame, rescale


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
def _softmax_tile_int8(qk, l_i, m_i, f_i, start_n, masked, offs_m, qk_scale, lo_off, hi_off, seqlen_k, kd_base,
                       k_descale_stride_blk, PV_N: gl.constexpr, BLOCK_N: gl.constexpr, KEY_PERMUTED: gl.constexpr,
                       SUM_ON_TC: gl.constexpr):
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
    normal float, so a masked score (-inf) times it stays -inf, not NaN."""
    gl.static_assert(BLOCK_N <= 2 * DESCALE_BLOCK, "a key tile spans at most two descale blocks")
    s_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                       instr_shape=[16, BLOCK_N, 32])
    col = gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, s_layout))
    x = (qk + INT_TO_FLOAT_BITS).to(gl.float32, bitcast=True)
    if masked:  # uniform branch, as _softmax_tile's
        x = gl.where(keep_mask(start_n + col, offs_m, lo_off, hi_off, seqlen_k), x, float("-inf"))
    kd0, kd1 = key_block_descale_pair(kd_base, k_descale_stride_blk, start_n, seqlen_k)
    s0 = gl.maximum(qk_scale * kd0, FLT_MIN)
    s1 = gl.maximum(qk_scale * kd1, FLT_MIN)
    first = (col < DESCALE_BLOCK)[None, :]
    x0 = gl.max(gl.where(first, x, float("-inf")), 1)
    x1 = gl.max(gl.where(first, float("-inf"), x), 1)
    # A half with no visible key (x = -inf) stays -inf, whatever its scale (a zero descale would make NaN).
    m0 = gl.where(x0 == float("-inf"), x0, (x0 - INT_TO_FLOAT_OFFSET) * s0)
    m1 = gl.where(x1 == float("-inf"), x1, (x1 - INT_TO_FLOAT_OFFSET) * s1)
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
                             kd_base, k_descale_stride_blk, PV_N: gl.constexpr, KEY_PERMUTED: gl.constexpr):
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
    # The tile starts on a multiple of 256, so on a descale block; the blocks past seqlen_k read 1.0 (masked keys).
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
    # A block with no visible key (x = -inf) stays -inf, whatever its scale (a zero descale would make NaN).
    m0 = gl.where(x0 == float("-inf"), x0, (x0 - INT_TO_FLOAT_OFFSET) * s0)
    m1 = gl.where(x1 == float("-inf"), x1, (x1 - INT_TO_FLOAT_OFFSET) * s1)
    m2 = gl.where(x2 == float("-inf"), x2, (x2 - INT_TO_FLOAT_OFFSET) * s2)
    m3 = gl.where(x3 == float("-inf"), x3, (x3 - INT_TO_FLOAT_OFFSET) * s3)
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
                 BLOCK_DESCALE: gl.constexpr, V_NATURAL: gl.constexpr, SPLIT_S: gl.constexpr):
    """_softmax_tile, or _softmax_tile_int8_split for S in two halves (SPLIT_S)."""
    if SPLIT_S:
        masked = (start_n < lo_masked_end) | (start_n >= full_end)
        r = _softmax_tile_int8_split(qk[0], qk[1], l_i, m_i, f_i, start_n, masked, offs_m, qk_scale, lo_off, hi_off,
                                     seqlen_k, kd_base, k_descale_stride_blk, PV_N, KEY_PERMUTED)
    else:
        r = _softmax_tile(qk, l_i, m_i, f_i, start_n, lo_masked_end, full_end, offs_m, qk_scale, lo_off, hi_off,
                          seqlen_k, kd_base, k_descale_stride_blk, CAUSAL, PV_N, BLOCK_N, KEY_PERMUTED, SUM_ON_TC,
                          QK_INT8, BLOCK_DESCALE, V_NATURAL)
    return r


@gluon.jit
def _s_issue(q_tile, k_bufs, s, BLOCK_N: gl.constexpr, HEAD_DIM: gl.constexpr, s_layout: gl.constexpr,
             QK_INT8: gl.constexpr, SPLIT_S: gl.constexpr):
    """Issues S = Q K^T of ring stage s: one product, or (SPLIT_S) two [64, 128] ones over the two halves of a
    256-key tile (two commit groups)."""
    if SPLIT_S:
        kt = k_bufs.index(s).reshape([BLOCK_N, HEAD_DIM])
        HALF: gl.constexpr = BLOCK_N // 2
        qa = warpgroup_mma(q_tile, kt.slice(0, HALF, dim=0).permute((1, 0)), _s_zeros(WG_M, HALF, s_layout, QK_INT8),
                           use_acc=False, is_async=True)
        qb = warpgroup_mma(q_tile, kt.slice(HALF, HALF, dim=0).permute((1, 0)),
                           _s_zeros(WG_M, HALF, s_layout, QK_INT8), use_acc=False, is_async=True)
        qk = (qa, qb)
    else:
        qk = warpgroup_mma(q_tile, _k_tile(k_bufs, s, BLOCK_N, HEAD_DIM), _s_zeros(WG_M, BLOCK_N, s_layout, QK_INT8),
                           use_acc=False, is_async=True)
    return qk


@gluon.jit
def _half_tile(q_tile, k_bufs, v_bufs, s, phase, k_ready, k_empty, v_ready, v_empty, acc, l_i, m_i, f_i, start_n,
               lo_masked_end, full_end, offs_m, qk_scale, lo_off, hi_off, seqlen_k, kd_base, k_descale_stride_blk,
               CAUSAL: gl.constexpr, BLOCK_N: gl.constexpr, HEAD_DIM: gl.constexpr, KEY_PERMUTED: gl.constexpr,
               UPPER: gl.constexpr, q_release, RELEASE_Q: gl.constexpr):
    """A key tile of which one half holds no key any row of the block sees: S and P.V over the other BLOCK_N / 2 keys
    only, masked, from ring stage s (loaded whole by the producer). Decided per consumer warpgroup, on its own 64
    rows. HALF_LAST: a block's last tile whose upper half lies past every row's last key (256-key tiles: the causal
    diagonal of a block starting on a multiple of 256, half of a sliding window's blocks; 128-key tiles: the first
    warpgroup of every causal block); HALF_FIRST (UPPER): a block's first tile whose lower half lies below every
    row's first key (a sliding window's left edge). start_n: the first key of the half computed. RELEASE_Q: the
    block's last read of Q (a last tile, Q in shared memory): q_release is arrived right after S, before the wait for
    V (with TRANSPOSE_V the producer makes the last tile's V^T ready only once it has loaded the next block's Q).
    Returns (acc, l_i, m_i, f_i) after the tile."""
    HALF: gl.constexpr = BLOCK_N // 2
    h_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, HALF, 32])
    o_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                       instr_shape=[16, HEAD_DIM, 32])
    mbarrier.wait(k_ready.index(s), phase)
    kt = k_bufs.index(s).reshape([BLOCK_N, HEAD_DIM]).slice(HALF if UPPER else 0, HALF, dim=0).permute((1, 0))
    qk = warpgroup_mma(q_tile, kt, gl.zeros([WG_M, HALF], gl.float32, h_layout), use_acc=False, is_async=True)
    qk = warpgroup_mma_wait(num_outstanding=0, deps=(qk, ))
    mbarrier.arrive(k_empty.index(s), count=1)
    if RELEASE_Q:
        mbarrier.arrive(q_release, count=1)
    # The row statistics in the half tile's row layout and back (the same rows per thread whatever N: no data moves).
    row_full: gl.constexpr = gl.SliceLayout(1, gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                                         instr_shape=[16, BLOCK_N, 32]))
    row_half: gl.constexpr = gl.SliceLayout(1, h_layout)
    p8, l_i, m_i, f_i, rescale = _softmax_tile(qk, gl.convert_layout(l_i, row_half), gl.convert_layout(m_i, row_half),
                                               gl.convert_layout(f_i, row_half), start_n, lo_masked_end, full_end,
                                               gl.convert_layout(offs_m, row_half), qk_scale, lo_off, hi_off, seqlen_k,
                                               kd_base, k_descale_stride_blk, CAUSAL, HEAD_DIM, HALF, KEY_PERMUTED,
                                               False, False, False, False)
    l_i = gl.convert_layout(l_i, row_full)
    m_i = gl.convert_layout(m_i, row_full)
    f_i = gl.convert_layout(f_i, row_full)
    mbarrier.wait(v_ready.index(s), phase)
    vt = v_bufs.index(s).reshape([HEAD_DIM, BLOCK_N]).slice(HALF if UPPER else 0, HALF, dim=1).permute((1, 0))
    pv = warpgroup_mma(p8, vt, gl.zeros([WG_M, HEAD_DIM], gl.float32, o_layout), use_acc=False, is_async=True)
    pv = warpgroup_mma_wait(num_outstanding=0, deps=(pv, ))
    mbarrier.arrive(v_empty.index(s), count=1)
    return acc * rescale[:, None] + pv, l_i, m_i, f_i


@gluon.jit
def _s_wait(qk, SPLIT_S: gl.constexpr):
    """Waits for everything issued (S included): the scores, one tensor or the two halves."""
    if SPLIT_S:
        qk = warpgroup_mma_wait(num_outstanding=0, deps=qk)
    else:
        qk = warpgroup_mma_wait(num_outstanding=0, deps=(qk, ))
    return qk


@gluon.jit
def _store_o(o_desc, o_smem, o_tile, acc, inv_l, bc, row, h, PARTS: gl.constexpr, NUM_PARTS: gl.constexpr,
             PV_N: gl.constexpr):
    """O = acc * inv_l through shared memory and a TMA store at packed row `row` (TMA drops the rows past a dense
    call's seqlen_q); the store completes under the next tile's work."""
    if PARTS:
        for c in gl.static_range(NUM_PARTS):
            o_tile.slice(c * PV_N, PV_N, dim=1).store((acc[c] * inv_l[:, None]).to(o_desc.dtype))
    else:
        o_tile.store((acc * inv_l[:, None]).to(o_desc.dtype))
    fence_async_shared()
    tma.async_copy_shared_to_global(o_desc, [bc, row, h, 0], o_smem)


@gluon.constexpr_function
def _s_ahead_budget(BLOCK_M):
    """Registers a consumer thread may hold in S_{j+1}, P_j, O and the fresh P.V product for the S-ahead schedule
    (_consumer): 224 of the 240 with two consumer warpgroups; with three (BLOCK_M = 192, 168 registers) 144, which
    lets D=64 with 128-key tiles keep it."""
    return 224 if BLOCK_M == 128 else 144


@gluon.jit
def _consumer(o_smem, shared, WG: gl.constexpr, HEAD_DIM: gl.constexpr, BLOCK_M: gl.constexpr,
              BLOCK_N: gl.constexpr, CAUSAL: gl.constexpr, NUM_STAGES: gl.constexpr, KEY_PERMUTED: gl.constexpr,
              SUM_ON_TC: gl.constexpr, QK_INT8: gl.constexpr, BLOCK_DESCALE: gl.constexpr, V_NATURAL: gl.constexpr,
              PV_PIPELINED: gl.constexpr, VARLEN: gl.constexpr, Q_BUFFERS: gl.constexpr,
              TILE_INFO_HANDOFF: gl.constexpr, Q_IN_REGS: gl.constexpr = False, HALF_LAST: gl.constexpr = False,
              HALF_FIRST: gl.constexpr = False):
    """One warpgroup: query rows [WG * 64, WG * 64 + 64) of each tile's block, every KV tile of the block.
    o_smem: this warpgroup's O buffer; shared: the arguments every consumer gets alike (fmha_fwd_gluon_kernel).

    Per KV tile j: wait for S_j, run its softmax, then issue P_j V_j and S_{j+1} together and fold P_j V_j
    into the accumulator as soon as it is done, while S_{j+1} still runs (S_AHEAD; at 256-key tiles and D=128,
    P_j V_j is waited for and folded before S_{j+1} is issued). P_j is made and used within the
    step (carried across the loop's back edge, its e4m3 bytes would be unpacked and repacked). FP8 at HEAD_DIM =
    256: O is four [64, 64] accumulators and P.V runs in four column parts (_pv_parts); BF16 at 256: one [64, 256]
    accumulator, O buffer shared (o_free)."""
    (o_desc, LSE, q_smem, o_free, k_bufs, v_bufs, ones_smem, q_ready, q_empty, k_ready, k_empty, v_ready, v_empty,
     q_descale, k_descale, v_descale, q_descale_stride_b, q_descale_stride_h, k_descale_stride_b, k_descale_stride_h,
     v_descale_stride_b, v_descale_stride_h, q_descale_stride_hq, q_descale_stride_blk, k_descale_stride_blk,
     softmax_scale, batch, seqlen_q, seqlen_k, heads_q, group_size, write_lse, window_left, window_right, O, stride_os,
     stride_oh, cu_seqlens_q, cu_seqlens_k, varlen, total_q, total_k, info) = shared
    # FP8 at D=256: O in four column parts (PARTS, _pv_parts); BF16 keeps one [64, 256] accumulator (one-level
    # accumulation needs no fresh product beside it).
    PARTS: gl.constexpr = HEAD_DIM > 128 and not V_NATURAL
    # PV_PIPELINED: eight [64, 32] parts, two in flight (_pv_parts_pipelined), instead of four [64, 64] ones.
    PV_N: gl.constexpr = (32 if PV_PIPELINED else 64) if PARTS else HEAD_DIM
    NUM_PARTS: gl.constexpr = HEAD_DIM // PV_N
    # S_AHEAD: S_{j+1} issued beside P_j V_j, folded while S_{j+1} runs, when the registers hold S_{j+1} (BLOCK_N / 2
    # a thread), P_j (BLOCK_N / 8), O and the fresh product (HEAD_DIM / 2 each) at once: 208 at 128-key tiles and
    # D=128, 224 at 256-key tiles and D=64. At 256-key tiles and D=128 (288) ptxas serializes every wgmma and spills
    # (C7512), so there P_j V_j is waited for and folded first; the 256-key tile is still the faster one where the
    # loop dominates (docs/perf/NOTES.md, 2026-12-02). D=256 (column parts) and BF16 keep their own schedule.
    S_AHEAD: gl.constexpr = PARTS or V_NATURAL or (BLOCK_N // 2 + BLOCK_N // 8 + HEAD_DIM <= _s_ahead_budget(BLOCK_M))
    gl.static_assert(S_AHEAD or not SUM_ON_TC, "SUM_ON_TC needs the S-ahead schedule")
    # BF16 at D=256: both warpgroups share one O buffer (shared memory), taking turns (o_free).
    O_SHARED: gl.constexpr = HEAD_DIM > 128 and V_NATURAL
    gl.static_assert(not PARTS or ((NUM_PARTS == 4 or NUM_PARTS == 8) and not SUM_ON_TC),
                     "D=256: FP8, four or eight parts, no SUM_ON_TC")
    gl.static_assert(not V_NATURAL or not (KEY_PERMUTED or SUM_ON_TC or QK_INT8), "BF16: plain V, no switches")
    MMA_K: gl.constexpr = 16 if V_NATURAL else 32  # wgmma's K per instruction: 16-bit or 8-bit operands
    # SPLIT_S: INT8 with 256-key tiles computes S as two [64, 128] products (Triton 3.6 does not lower the
    # m64n256k32 integer wgmma) and P.V as two chained K=128 ones; one softmax step per 256 keys all the same.
    SPLIT_S: gl.constexpr = QK_INT8 and BLOCK_N == 256
    gl.static_assert(not SPLIT_S or (BLOCK_DESCALE and not SUM_ON_TC and not PARTS),
                     "INT8 256-key tiles: per-block descales, no SUM_ON_TC, D <= 128")
    S_N: gl.constexpr = BLOCK_N // 2 if SPLIT_S else BLOCK_N  # N of one S product
    S_GROUPS: gl.constexpr = 2 if SPLIT_S else 1  # commit groups of one S issue
    o_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                       instr_shape=[16, PV_N, MMA_K])
    s_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                       instr_shape=[16, S_N, MMA_K])
    row_layout: gl.constexpr = gl.SliceLayout(1, s_layout)
    # SUM_ON_TC: the row sums of P come from the tensor cores, as P times an [BLOCK_N, SUM_N] operand whose first
    # column is ones (ones_smem): BLOCK_N / 32 small MMAs per tile instead of BLOCK_N / 2 FADDs per thread.
    SUM_N: gl.constexpr = _sum_width(SUM_ON_TC)
    sum_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                         instr_shape=[16, SUM_N, 32])
    o_tile = o_smem.reshape([WG_M, HEAD_DIM])
    num_m_blocks = gl.cdiv(seqlen_q, BLOCK_M)
    batch_heads = batch * heads_q

    it = 0  # ring slots consumed, across tiles (the producer counts the same way)
    count = 0  # tiles done
    num_tiles = num_m_blocks * batch_heads
    if not TILE_INFO_HANDOFF:
        section = _causal_section(seqlen_k, batch_heads, HEAD_DIM)
        ahead = _tile_ahead(gl.program_id(0), num_tiles, num_m_blocks, batch_heads, heads_q, group_size, section,
                            cu_seqlens_q, cu_seqlens_k, CAUSAL, VARLEN)
    for tile in range(gl.program_id(0), num_tiles, gl.num_programs(0)):
        if TILE_INFO_HANDOFF:
            # The block's place and key bounds come with its Q (_put_tile_info): read once the Q buffer is ready.
            mbarrier.wait(_q_slot(q_ready, count, Q_BUFFERS), (count // Q_BUFFERS) & 1)
            (b, h, h_kv, start_m, lo_off, hi_off, n_start, lo_masked_end, full_end, n_end, bc, q_row, sq, sk,
             bad) = _get_tile_info(_q_slot(info, count, Q_BUFFERS))
            bh = b * heads_q + h
        else:
            (b, h, h_kv, bh, start_m, lo_off, hi_off, n_start, lo_masked_end, full_end, n_end,
             bc, q_row, k_row, v_col, sq, sk, bad) = _tile(
                ahead, heads_q, group_size, seqlen_q, seqlen_k, window_left, window_right, total_q, total_k, BLOCK_M,
                BLOCK_N, HEAD_DIM, CAUSAL, VARLEN)
            next_tile = tile + gl.num_programs(0)
        b64 = b.to(gl.int64)
        h_kv64 = h_kv.to(gl.int64)
        qd_base = (q_descale + b64 * q_descale_stride_b + h_kv64 * q_descale_stride_h +
                   h.to(gl.int64) * q_descale_stride_hq)
        kd_base = k_descale + b64 * k_descale_stride_b + h_kv64 * k_descale_stride_h
        vd = gl.load(v_descale + b64 * v_descale_stride_b + h_kv64 * v_descale_stride_h)
        row0 = start_m + WG * WG_M
        if BLOCK_DESCALE:
            # A warpgroup's 64 rows are one 64-row q block (start_m is a multiple of 128): one scalar per tile;
            # the k descales go per key column (_softmax_tile).
            gl.static_assert(WG_M == DESCALE_BLOCK, "a q descale block is one warpgroup's rows")
            # The second warpgroup's rows may all lie past seqlen_q (no descale block there): 1.0, unused.
            qd = gl.load(qd_base + (row0 // DESCALE_BLOCK).to(gl.int64) * q_descale_stride_blk, mask=row0 < sq,
                         other=1.0)
            qk_scale = softmax_scale * qd * LOG2E
        else:
            qk_scale = softmax_scale * gl.load(qd_base) * gl.load(kd_base) * LOG2E

        offs_m = row0 + gl.arange(0, WG_M, layout=row_layout)
        m_i = gl.full([WG_M], NEG_BIG, gl.float32, row_layout)
        f_i = gl.full([WG_M], NEG_BIG, gl.float32, row_layout)  # frame of acc and l: 2^f_i scales them
        l_i = gl.zeros([WG_M], gl.float32, row_layout)
        if PARTS:
            acc = ()
            for c in gl.static_range(NUM_PARTS):
                acc = acc + (gl.zeros([WG_M, PV_N], gl.float32, o_layout), )
        else:
            acc = gl.zeros([WG_M, HEAD_DIM], gl.float32, o_layout)

        if not TILE_INFO_HANDOFF:
            mbarrier.wait(_q_slot(q_ready, count, Q_BUFFERS), (count // Q_BUFFERS) & 1)
        # This warpgroup's rows of the Q block, straight from shared memory as the A operand.
        if BLOCK_M == 2 * WG_M:
            q_tile = _q_slot(q_smem, count, Q_BUFFERS).reshape([BLOCK_M, HEAD_DIM]).slice(WG * WG_M, WG_M, dim=0)
        else:  # three consumers: Q in one 64-row buffer per warpgroup
            q_tile = _q_box(q_smem, count, WG, Q_BUFFERS, BLOCK_M // WG_M).reshape([WG_M, HEAD_DIM])
        if Q_IN_REGS:
            # Q as the register A operand of every S of the block (HEAD_DIM / 8 registers a thread in FP8), and its
            # buffer handed back at once: the producer loads the next block's Q under this whole block.
            q_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=s_layout,
                                                         k_width=4 if MMA_K == 32 else 2)
            q_tile = q_tile.load(q_layout)
            mbarrier.arrive(_q_slot(q_empty, count, Q_BUFFERS), count=1)
        n_tiles = gl.cdiv(n_end - n_start, BLOCK_N)  # n_start is a multiple of BLOCK_N
        # HALF_LAST: the last tile's upper half is past every row's keys (_half_tile); the tile before it closes the
        # loop as the last whole one.
        half = 0
        j0 = 0  # the first tile of the loop (HALF_FIRST: 1 when tile 0 is a half tile)
        if HALF_LAST or HALF_FIRST:
            gl.static_assert(not (SPLIT_S or PARTS or V_NATURAL or SUM_ON_TC or QK_INT8 or BLOCK_DESCALE),
                             "HALF_LAST / HALF_FIRST: e4m3 at D <= 128")
        if HALF_LAST:
            # This warpgroup's own rows decide (its last row's last key): with 128-key tiles the first warpgroup
            # of every causal block sees only the lower half of the diagonal tile.
            n_end_wg = gl.minimum(n_end, gl.maximum(row0 + WG_M + hi_off, 0))
            half = ((n_tiles >= 2) & (n_end_wg - (n_start + (n_tiles - 1) * BLOCK_N) <= BLOCK_N // 2)).to(gl.int32)
        if HALF_FIRST:
            # No row of this warpgroup sees the lower half of tile 0: its first row's lowest key is past it. At least
            # three tiles, so that a whole tile closes the loop whatever HALF_LAST does.
            j0 = ((n_tiles >= 3) & (row0 + lo_off >= n_start + BLOCK_N // 2)).to(gl.int32)
        if n_tiles > 0:
            if HALF_FIRST:
                if j0 != 0:
                    acc, l_i, m_i, f_i = _half_tile(
                        q_tile, k_bufs, v_bufs, it % NUM_STAGES, (it // NUM_STAGES) & 1, k_ready, k_empty, v_ready,
                        v_empty, acc, l_i, m_i, f_i, n_start + BLOCK_N // 2, lo_masked_end, full_end, offs_m,
                        qk_scale, lo_off, hi_off, sk, kd_base, k_descale_stride_blk, CAUSAL, BLOCK_N, HEAD_DIM,
                        KEY_PERMUTED, True, _q_slot(q_empty, count, Q_BUFFERS), False)
            s0 = (it + j0) % NUM_STAGES
            mbarrier.wait(k_ready.index(s0), ((it + j0) // NUM_STAGES) & 1)
            qk = _s_issue(q_tile, k_bufs, s0, BLOCK_N, HEAD_DIM, s_layout, QK_INT8, SPLIT_S)
            if not TILE_INFO_HANDOFF:
                # The next tile's place in the schedule (and varlen offsets, loaded) under this first S MMA,
                # instead of on the path between this tile's O store and the next tile's first MMA.
                ahead = _tile_ahead(next_tile, num_tiles, num_m_blocks, batch_heads, heads_q, group_size, section,
                                    cu_seqlens_q, cu_seqlens_k, CAUSAL, VARLEN)
            for j in range(j0, n_tiles - 1 - half):
                s = (it + j) % NUM_STAGES
                nxt = (it + j + 1) % NUM_STAGES
                qk = _s_wait(qk, SPLIT_S)
                mbarrier.arrive(k_empty.index(s), count=1)
                start_n = n_start + j * BLOCK_N
                p8, l_i, m_i, f_i, rescale = _softmax_any(qk, l_i, m_i, f_i, start_n, lo_masked_end,
                                                          full_end, offs_m, qk_scale, lo_off, hi_off,
                                                          sk, kd_base, k_descale_stride_blk, CAUSAL,
                                                          PV_N, BLOCK_N,
                                                          KEY_PERMUTED, SUM_ON_TC, QK_INT8, BLOCK_DESCALE,
                                                          V_NATURAL, SPLIT_S)
                mbarrier.wait(v_ready.index(s), ((it + j) // NUM_STAGES) & 1)
                acc, pv = _pv_issue(p8, v_bufs, s, acc, rescale, BLOCK_N, HEAD_DIM, PV_N, V_NATURAL, o_layout,
                                    SPLIT_S)
                if PARTS:  # FP8 D=256: part 3 folded before the next S (fewer spills; _pv_parts)
                    pv = warpgroup_mma_wait(num_outstanding=0, deps=(pv, ))
                    acc = _pv_fold(acc, pv, rescale, HEAD_DIM, V_NATURAL, PV_N)
                if SUM_ON_TC:
                    ls = warpgroup_mma(p8, ones_smem.permute((1, 0)), gl.zeros([WG_M, SUM_N], gl.float32, sum_layout),
                                       use_acc=False, is_async=True)
                if S_AHEAD:
                    mbarrier.wait(k_ready.index(nxt), ((it + j + 1) // NUM_STAGES) & 1)
                    qk = _s_issue(q_tile, k_bufs, nxt, BLOCK_N, HEAD_DIM, s_layout, QK_INT8, SPLIT_S)
                    if SUM_ON_TC:
                        pv, ls = warpgroup_mma_wait(num_outstanding=1, deps=(pv, ls))
                        l_i = l_i * gl.convert_layout(rescale, row_layout) + _tile_row_sum(ls, row_layout)
                    elif not PARTS:  # P_j V_j done, S_{j+1} (one or two groups) still running
                        pv = warpgroup_mma_wait(num_outstanding=S_GROUPS, deps=(pv, ))
                    mbarrier.arrive(v_empty.index(s), count=1)
                    if not PARTS:
                        acc = _pv_fold(acc, pv, rescale, HEAD_DIM, V_NATURAL, PV_N)
                else:  # P_j V_j waited for and folded before S_{j+1} is issued (S_AHEAD above says why)
                    pv = warpgroup_mma_wait(num_outstanding=0, deps=(pv, ))
                    mbarrier.arrive(v_empty.index(s), count=1)
                    acc = _pv_fold(acc, pv, rescale, HEAD_DIM, V_NATURAL, PV_N)
                    mbarrier.wait(k_ready.index(nxt), ((it + j + 1) // NUM_STAGES) & 1)
                    qk = _s_issue(q_tile, k_bufs, nxt, BLOCK_N, HEAD_DIM, s_layout, QK_INT8, SPLIT_S)
            # The last whole KV tile: its softmax, then its P V alone. Q is not read again (but by a half tile):
            # hand it back.
            last = it + n_tiles - 1 - half
            qk = _s_wait(qk, SPLIT_S)
            mbarrier.arrive(k_empty.index(last % NUM_STAGES), count=1)
            if not Q_IN_REGS:
                if half == 0:
                    mbarrier.arrive(_q_slot(q_empty, count, Q_BUFFERS), count=1)
            start_n = n_start + (n_tiles - 1 - half) * BLOCK_N
            p8, l_i, m_i, f_i, rescale = _softmax_any(qk, l_i, m_i, f_i, start_n,
                                                      lo_masked_end, full_end, offs_m,
                                                      qk_scale, lo_off, hi_off, sk, kd_base,
                                                      k_descale_stride_blk, CAUSAL,
                                                      PV_N, BLOCK_N, KEY_PERMUTED, SUM_ON_TC, QK_INT8,
                                                      BLOCK_DESCALE, V_NATURAL, SPLIT_S)
            mbarrier.wait(v_ready.index(last % NUM_STAGES), (last // NUM_STAGES) & 1)
            acc, pv = _pv_issue(p8, v_bufs, last % NUM_STAGES, acc, rescale, BLOCK_N, HEAD_DIM, PV_N, V_NATURAL,
                                o_layout, SPLIT_S)
            if SUM_ON_TC:
                ls = warpgroup_mma(p8, ones_smem.permute((1, 0)), gl.zeros([WG_M, SUM_N], gl.float32, sum_layout),
                                   use_acc=False, is_async=True)
                pv, ls = warpgroup_mma_wait(num_outstanding=0, deps=(pv, ls))
                l_i = l_i * gl.convert_layout(rescale, row_layout) + _tile_row_sum(ls, row_layout)
            else:
                pv = warpgroup_mma_wait(num_outstanding=0, deps=(pv, ))
            mbarrier.arrive(v_empty.index(last % NUM_STAGES), count=1)
            acc = _pv_fold(acc, pv, rescale, HEAD_DIM, V_NATURAL, PV_N)
            if HALF_LAST:
                if half != 0:
                    hs = (last + 1) % NUM_STAGES
                    acc, l_i, m_i, f_i = _half_tile(
                        q_tile, k_bufs, v_bufs, hs, ((last + 1) // NUM_STAGES) & 1, k_ready, k_empty, v_ready,
                        v_empty, acc, l_i, m_i, f_i, start_n + BLOCK_N, lo_masked_end, full_end, offs_m, qk_scale,
                        lo_off, hi_off, sk, kd_base, k_descale_stride_blk, CAUSAL, BLOCK_N, HEAD_DIM, KEY_PERMUTED,
                        False, _q_slot(q_empty, count, Q_BUFFERS), not Q_IN_REGS)
        else:
            if not Q_IN_REGS:
                mbarrier.arrive(_q_slot(q_empty, count, Q_BUFFERS), count=1)
            if not TILE_INFO_HANDOFF:
                ahead = _tile_ahead(next_tile, num_tiles, num_m_blocks, batch_heads, heads_q, group_size, section,
                                    cu_seqlens_q, cu_seqlens_k, CAUSAL, VARLEN)
        it += n_tiles
        count += 1

        # O = acc / l * v_descale (the frame cancels). l == 0: no key seen, O = 0, LSE = -inf. NaN fails every
        # comparison, so a NaN row keeps NaN in both (and a varlen sequence whose offsets fail the checks gets it).
        l_i = gl.where(bad, float("nan"), l_i)
        no_keys = l_i == 0.0
        inv_l = gl.where(no_keys, 0.0, vd / gl.where(no_keys, 1.0, l_i))
        inv_l = gl.convert_layout(inv_l, gl.SliceLayout(1, o_layout))
        if O_SHARED:
            # Uses of the one O buffer alternate: warpgroup 0's tile, warpgroup 1's, warpgroup 0's next, ...; use
            # u = 2 * tile + WG waits for phase u - 1, whose parity is WG ^ 1 whatever the tile (a fresh mbarrier
            # passes the first wait, on parity 1). Neither warpgroup can get two uses ahead: its next use needs
            # the other's release. The release follows the store's wait_group and the barrier Triton puts between
            # it and the arrive (each warp issues part of the O box's TMA copies).
            mbarrier.wait(o_free, WG ^ 1)
        else:
            # The previous tile's store must have read o_smem before it is overwritten.
            tma.store_wait(pendings=0)
        if not VARLEN:  # a dense instance (the host refuses varlen on it)
            _store_o(o_desc, o_smem, o_tile, acc, inv_l, bc, q_row + row0, h, PARTS, NUM_PARTS, PV_N)
        elif row0 + WG_M > sq:
            # Varlen, this warpgroup's rows reach past its sequence: the packed O's next rows are another
            # sequence's, which a TMA box would overwrite; stores from registers, masked to the sequence.
            rows = row0 + gl.arange(0, WG_M, layout=gl.SliceLayout(1, o_layout))
            cols = gl.arange(0, PV_N, layout=gl.SliceLayout(0, o_layout))
            # (No column parts here: they are head_dim 256's, which has no varlen path.)
            o_rows = O + (q_row + rows).to(gl.int64)[:, None] * stride_os + h.to(gl.int64) * stride_oh
            gl.store(o_rows + cols[None, :], (acc * inv_l[:, None]).to(o_desc.dtype), mask=(rows < sq)[:, None])
        else:
            _store_o(o_desc, o_smem, o_tile, acc, inv_l, bc, q_row + row0, h, PARTS, NUM_PARTS, PV_N)
        if O_SHARED:
            tma.store_wait(pendings=0)  # the store has read o_smem: the other warpgroup may write it
            mbarrier.arrive(o_free, count=1)

        # LSE: [batch, heads_q, seqlen_q] float32, natural log; write_lse is a runtime flag.
        lse = gl.where(no_keys, float("-inf"), (f_i + gl.log2(gl.where(no_keys, 1.0, l_i))) * LN2)
        lse_ptr = LSE + bh.to(gl.int64) * seqlen_q + offs_m
        gl.store(lse_ptr, lse, mask=(offs_m < sq) & (write_lse != 0))
    tma.store_wait(pendings=0)


@gluon.jit
def fmha_fwd_gluon_kernel(
    q_desc, k_desc, vt_desc, o_desc, LSE,
    q_descale, k_descale, v_descale,
    q_descale_stride_b, q_descale_stride_h,
    k_descale_stride_b, k_descale_stride_h,
    v_descale_stride_b, v_descale_stride_h,
    q_descale_stride_hq, q_descale_stride_blk, k_descale_stride_blk,
    window_left, window_right, softcap,  # windows: -1 unlimited; soft-capping is refused by the host (Triton only)
    softmax_scale,
    seqlen_q, seqlen_k, heads_q, group_size, write_lse,
    batch,
    O, stride_os, stride_oh, cu_seqlens_q, cu_seqlens_k, varlen, total_q, total_k,
    V, stride_vs, stride_vh,  # BF16 varlen: V's pointer and row / head strides (elements), for _sequence_v
    HEAD_DIM: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr,
    CAUSAL: gl.constexpr, NUM_STAGES: gl.constexpr, KEY_PERMUTED: gl.constexpr, SUM_ON_TC: gl.constexpr,
    QK_INT8: gl.constexpr, BLOCK_DESCALE: gl.constexpr, V_NATURAL: gl.constexpr = False,
    PV_PIPELINED: gl.constexpr = False, VARLEN: gl.constexpr = False, TRANSPOSE_V: gl.constexpr = False,
    RAW_STAGES: gl.constexpr = 2, NUM_CONSUMERS: gl.constexpr = 2, K_DESCALE_UNIT_STRIDE: gl.constexpr = False,
    Q_BUFFERS: gl.constexpr = 1, TILE_INFO_HANDOFF: gl.constexpr = False, Q_IN_REGS: gl.constexpr = False,
    HALF_LAST: gl.constexpr = False, HALF_FIRST: gl.constexpr = False,
):
    gl.static_assert(BLOCK_M == NUM_CONSUMERS * WG_M, "consumer warpgroups of 64 rows")
    if K_DESCALE_UNIT_STRIDE:
        # The k descales of consecutive key blocks are adjacent (what the quantize operation writes; the host
        # refuses other strides to these instances): a constant stride takes the run-time stride's 64-bit address
        # arithmetic out of every tile (INT8 loop at D=64 770 -> 751 instructions, D=128 807 -> 791 and fewer
        # spills). Named like the argument so that every use below sees the constant.
        gl.static_assert(QK_INT8 and BLOCK_DESCALE, "the unit k descale stride is an INT8 per-block option")
        k_descale_stride_blk = 1
    # NUM_CONSUMERS = 3 (192-row query blocks): three consumer warpgroups of 160-168 registers, so that each SM
    # sub-partition has three consumer warps to issue from instead of two (ncu, H200: 0.55 eligible warps of 3 per
    # scheduler at D=128). Dense e4m3 or INT8 Q.K^T with a V^T up to head_dim 128 only.
    gl.static_assert(NUM_CONSUMERS == 2 or (NUM_CONSUMERS == 3 and not V_NATURAL and not VARLEN and not TRANSPOSE_V
                                            and HEAD_DIM <= 128),
                     "three consumers: no bf16, varlen or in-kernel V transpose; head_dim <= 128")
    # VARLEN: up to head_dim 128 (codegen/operations/fmha_fwd.py says why).
    gl.static_assert(not VARLEN or HEAD_DIM <= 128, "varlen: up to head_dim 128")
    gl.static_assert(gl.num_warps() == 4, "the default partition is one consumer warpgroup")
    # Persistent: each program walks tiles program_id, program_id + num_programs, ... of the
    # cdiv(seqlen_q, BLOCK_M) * batch * heads_q query blocks (the runtime launches at most one program per SM:
    # the consumers' registers leave room for one CTA).
    # Q_BUFFERS = 2: a Q buffer per block in flight (block c in buffer c % 2: _q_slot, _q_box), so that the next
    # block's Q loads while the consumers still run the current one. D=256 has no room for a second one (its
    # instances use 224 KB of the 227 already; a second Q is 32 KB more in e4m3, 64 KB in bf16).
    gl.static_assert(Q_BUFFERS == 1 or (Q_BUFFERS == 2 and HEAD_DIM <= 128),
                     "one Q buffer, or two up to head_dim 128 (shared memory)")
    if NUM_CONSUMERS == 3:
        # A TMA box has power-of-two extents: the host's Q box is one warpgroup's 64 rows, three of them a block.
        q_smem = gl.allocate_shared_memory(q_desc.dtype, [Q_BUFFERS * NUM_CONSUMERS] + q_desc.block_type.shape,
                                           q_desc.layout)
    elif Q_BUFFERS == 1:
        q_smem = gl.allocate_shared_memory(q_desc.dtype, q_desc.block_type.shape, q_desc.layout)
    else:
        q_smem = gl.allocate_shared_memory(q_desc.dtype, [Q_BUFFERS] + q_desc.block_type.shape, q_desc.layout)
    k_bufs = gl.allocate_shared_memory(k_desc.dtype, [NUM_STAGES] + k_desc.block_type.shape, k_desc.layout)
    if TRANSPOSE_V:
        # vt_desc is V itself, [batch, seqlen_k, heads_kv, HEAD_DIM] e4m3, block [1, BLOCK_N, 1, HEAD_DIM]: raw
        # slots for its tiles, and the V^T ring the producer writes (key-permuted) from them.
        gl.static_assert(KEY_PERMUTED and not V_NATURAL and not QK_INT8 and HEAD_DIM <= 128,
                         "TRANSPOSE_V: e4m3, key-permuted, head_dim <= 128")
        v_raw = gl.allocate_shared_memory(vt_desc.dtype, [RAW_STAGES] + vt_desc.block_type.shape, vt_desc.layout)
        v_bufs = gl.allocate_shared_memory(vt_desc.dtype, [NUM_STAGES, 1, 1, HEAD_DIM, BLOCK_N],
                                           _vt_smem_layout(BLOCK_N))
    else:
        v_bufs = gl.allocate_shared_memory(vt_desc.dtype, [NUM_STAGES] + vt_desc.block_type.shape, vt_desc.layout)
        v_raw = v_bufs  # unused (a placeholder of the parameter)
    o_smem0 = gl.allocate_shared_memory(o_desc.dtype, o_desc.block_type.shape, o_desc.layout)
    o_smem2 = o_smem0  # a third consumer's (NUM_CONSUMERS = 3)
    if NUM_CONSUMERS == 3:
        o_smem2 = gl.allocate_shared_memory(o_desc.dtype, o_desc.block_type.shape, o_desc.layout)
    if V_NATURAL and HEAD_DIM > 128:
        # BF16 at D=256: Q (64 KB), two K and two V stages (128 KB) and one O buffer (32 KB) fill the 227 KB; the
        # consumers take turns on it (o_free: released once a warpgroup's TMA store has read it).
        o_smem1 = o_smem0
        o_free = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
        mbarrier.init(o_free, count=1)
    else:
        o_smem1 = gl.allocate_shared_memory(o_desc.dtype, o_desc.block_type.shape, o_desc.layout)
        o_free = o_smem0  # unused (a placeholder of the parameter)

    # [SUM_N, BLOCK_N] e4m3, K-major for the row-sum MMA (SUM_ON_TC): row 0 ones, the other rows zeros.
    SUM_N: gl.constexpr = _sum_width(SUM_ON_TC)
    ones_smem = gl.allocate_shared_memory(gl.float8e4nv, [SUM_N, BLOCK_N],
                                          gl.NVMMASharedLayout(swizzle_byte_width=min(128, BLOCK_N),
                                                               element_bitwidth=8, rank=2))
    if SUM_ON_TC:
        _store_e4m3_ones(ones_smem, False)
        fence_async_shared()

    if Q_BUFFERS == 1:
        q_ready = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
        q_empty = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    else:
        q_ready = gl.allocate_shared_memory(gl.int64, [Q_BUFFERS, 1], mbarrier.MBarrierLayout())
        q_empty = gl.allocate_shared_memory(gl.int64, [Q_BUFFERS, 1], mbarrier.MBarrierLayout())
    # TILE_INFO_HANDOFF: a block's place and key bounds, written by the producer with its Q (_put_tile_info), one
    # slot per Q buffer.
    if not TILE_INFO_HANDOFF:
        info = q_ready  # unused (a placeholder of the parameter)
    elif Q_BUFFERS == 1:
        info = gl.allocate_shared_memory(gl.int32, [TILE_INFO], gl.SwizzledSharedLayout(1, 1, 1, [0]))
    else:
        info = gl.allocate_shared_memory(gl.int32, [Q_BUFFERS, TILE_INFO], gl.SwizzledSharedLayout(1, 1, 1, [0]))
    k_ready = gl.allocate_shared_memory(gl.int64, [NUM_STAGES, 1], mbarrier.MBarrierLayout())
    k_empty = gl.allocate_shared_memory(gl.int64, [NUM_STAGES, 1], mbarrier.MBarrierLayout())
    v_ready = gl.allocate_shared_memory(gl.int64, [NUM_STAGES, 1], mbarrier.MBarrierLayout())
    v_empty = gl.allocate_shared_memory(gl.int64, [NUM_STAGES, 1], mbarrier.MBarrierLayout())
    if TRANSPOSE_V:
        raw_ready = gl.allocate_shared_memory(gl.int64, [RAW_STAGES, 1], mbarrier.MBarrierLayout())
        for i in gl.static_range(RAW_STAGES):
            mbarrier.init(raw_ready.index(i), count=1)
    else:
        raw_ready = q_ready  # unused (a placeholder of the parameter)
    if Q_BUFFERS == 1:
        mbarrier.init(q_ready, count=1)
        mbarrier.init(q_empty, count=NUM_CONSUMERS)  # released by every consumer warpgroup
    else:
        for i in gl.static_range(Q_BUFFERS):
            mbarrier.init(q_ready.index(i), count=1)
            mbarrier.init(q_empty.index(i), count=NUM_CONSUMERS)
    for i in gl.static_range(NUM_STAGES):
        mbarrier.init(k_ready.index(i), count=1)
        mbarrier.init(v_ready.index(i), count=1)
        mbarrier.init(k_empty.index(i), count=NUM_CONSUMERS)
        mbarrier.init(v_empty.index(i), count=NUM_CONSUMERS)

    # What every consumer warpgroup gets alike (_consumer unpacks it); each has its own O buffer and index.
    shared = (o_desc, LSE, q_smem, o_free, k_bufs, v_bufs, ones_smem, q_ready, q_empty, k_ready, k_empty, v_ready,
              v_empty, q_descale, k_descale, v_descale, q_descale_stride_b, q_descale_stride_h, k_descale_stride_b,
              k_descale_stride_h, v_descale_stride_b, v_descale_stride_h, q_descale_stride_hq, q_descale_stride_blk,
              k_descale_stride_blk, softmax_scale, batch, seqlen_q, seqlen_k, heads_q, group_size, write_lse,
              window_left, window_right, O, stride_os, stride_oh, cu_seqlens_q, cu_seqlens_k, varlen, total_q, total_k,
              info)
    producer_args = (q_desc, k_desc, vt_desc, q_smem, k_bufs, v_bufs, q_ready, q_empty, k_ready, k_empty, v_ready,
                     v_empty, batch, seqlen_q, seqlen_k, heads_q, group_size, window_left, window_right, cu_seqlens_q,
                     cu_seqlens_k, varlen, total_q, total_k, V, stride_vs, stride_vh, v_raw, raw_ready, info)
    # (The constexprs and functions are written into each partition's tuple: kept in a tuple variable, Triton 3.6
    # made them tensors.)
    if NUM_CONSUMERS == 3:
        # Three consumer warpgroups of 160 registers (the default partition gets 168 of what is left) and the producer
        # warp's 24, over 16 warps (Triton pads the partitions to whole warpgroups; 65536 registers in all).
        gl.warp_specialize([
            (_consumer, (o_smem0, shared, 0, HEAD_DIM, BLOCK_M, BLOCK_N, CAUSAL, NUM_STAGES, KEY_PERMUTED, SUM_ON_TC,
                         QK_INT8, BLOCK_DESCALE, V_NATURAL, PV_PIPELINED, VARLEN, Q_BUFFERS,
                         TILE_INFO_HANDOFF, Q_IN_REGS, HALF_LAST, HALF_FIRST)),
            (_consumer, (o_smem1, shared, 1, HEAD_DIM, BLOCK_M, BLOCK_N, CAUSAL, NUM_STAGES, KEY_PERMUTED, SUM_ON_TC,
                         QK_INT8, BLOCK_DESCALE, V_NATURAL, PV_PIPELINED, VARLEN, Q_BUFFERS,
                         TILE_INFO_HANDOFF, Q_IN_REGS, HALF_LAST, HALF_FIRST)),
            (_consumer, (o_smem2, shared, 2, HEAD_DIM, BLOCK_M, BLOCK_N, CAUSAL, NUM_STAGES, KEY_PERMUTED, SUM_ON_TC,
                         QK_INT8, BLOCK_DESCALE, V_NATURAL, PV_PIPELINED, VARLEN, Q_BUFFERS,
                         TILE_INFO_HANDOFF, Q_IN_REGS, HALF_LAST, HALF_FIRST)),
            (_producer, (producer_args, HEAD_DIM, BLOCK_M, BLOCK_N, CAUSAL, NUM_STAGES, V_NATURAL, VARLEN,
                         TRANSPOSE_V, RAW_STAGES, Q_BUFFERS, TILE_INFO_HANDOFF)),
        ], [4, 4, _producer_warps(TRANSPOSE_V)], [160, 160, 24])
    else:
        # 24 registers for the producer with or without TRANSPOSE_V: the pool is 168 a thread over the 12 warps
        # (64512); 32 left one consumer warpgroup 232 instead of 240 (ptxas: spills at D=64), and the transposes fit
        # in 24 (no spill at D=64 or 128 with 128-key tiles; 4 spill instructions at 128x256x128).
        gl.warp_specialize([
            (_consumer, (o_smem0, shared, 0, HEAD_DIM, BLOCK_M, BLOCK_N, CAUSAL, NUM_STAGES, KEY_PERMUTED, SUM_ON_TC,
                         QK_INT8, BLOCK_DESCALE, V_NATURAL, PV_PIPELINED, VARLEN, Q_BUFFERS,
                         TILE_INFO_HANDOFF, Q_IN_REGS, HALF_LAST, HALF_FIRST)),
            (_consumer, (o_smem1, shared, 1, HEAD_DIM, BLOCK_M, BLOCK_N, CAUSAL, NUM_STAGES, KEY_PERMUTED, SUM_ON_TC,
                         QK_INT8, BLOCK_DESCALE, V_NATURAL, PV_PIPELINED, VARLEN, Q_BUFFERS,
                         TILE_INFO_HANDOFF, Q_IN_REGS, HALF_LAST, HALF_FIRST)),
            (_producer, (producer_args, HEAD_DIM, BLOCK_M, BLOCK_N, CAUSAL, NUM_STAGES, V_NATURAL, VARLEN,
                         TRANSPOSE_V, RAW_STAGES, Q_BUFFERS, TILE_INFO_HANDOFF)),
        ], [4, _producer_warps(TRANSPOSE_V)], [240, 24])
