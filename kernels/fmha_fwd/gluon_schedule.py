"""The Gluon attention kernel's persistent schedule, shared by its producer and consumer partitions: which query block
a program takes next and in what order (_tile_ahead, _tile_order, _causal_section), where the block's sequence lives,
dense or packed (_sequence), which key tiles it visits (_tile, from common/key_range.py), the Q buffer of a block
(_q_slot, _q_box), a K/V ring slot's stage and phase arithmetic (_ring_slot), and TILE_INFO_HANDOFF's hand-off of a
block's place and bounds from the producer to the consumers (_put_tile_info, _get_tile_info). fmha_fwd_gluon.py's
docstring describes the design."""

from triton.experimental import gluon
from triton.experimental.gluon import language as gl

from common.key_range import key_range
from common.varlen import VT_ALIGN_GLUON, varlen_check, varlen_offsets, varlen_vt_start


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
          VARLEN: gl.constexpr, WINDOW_ALIGN: gl.constexpr = 0):
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
    The key bounds are the Triton kernel's (common/key_range.py, sliding windows included), per sequence;
    WINDOW_ALIGN is key_range's ALIGN (the kernel's switch)."""
    b, h, h_kv, pid_m, q_prev, q_start, q_end, k_prev, k_start, k_end = ahead
    offs = (q_prev, q_start, q_end, k_prev, k_start, k_end)
    bh = b * heads_q + h
    start_m = pid_m * BLOCK_M
    bc, q_row, k_row, v_col, sq, sk, bad = _sequence(b, seqlen_q, seqlen_k, offs, total_q, total_k, VARLEN, BLOCK_N)
    lo_off, hi_off, n_start, lo_masked_end, full_end, n_end = key_range(start_m, sq, sk, window_left,
                                                                        window_right, BLOCK_M, BLOCK_N, CAUSAL,
                                                                        WINDOW_ALIGN)
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
def _ring_slot(i, RING_UNSIGNED: gl.constexpr):
    """K/V ring slot i (never negative) as its stage (slot % NUM_STAGES) and phase ((slot // NUM_STAGES) & 1) are
    taken from it: unsigned with RING_UNSIGNED, so that they are a mask and a shift where signed % and // round
    toward zero (3 uniform instructions more each); callers cast the stage and phase back to int32."""
    return i.to(gl.uint32) if RING_UNSIGNED else i


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
