"""A consumer warpgroup of the Gluon attention kernel (_consumer): its 64 rows of every query block the program takes,
over every key tile of the block (S, softmax and P.V in the order fmha_fwd_gluon.py's docstring gives), HALF_LAST's
and HALF_FIRST's half tiles (_half_tile), then O (_store_o) and the LSE."""

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (
    fence_async_shared,
    mbarrier,
    tma,
    warpgroup_mma,
    warpgroup_mma_wait,
)

from fmha_fwd.gluon_constants import DESCALE_BLOCK, LN2, LOG2E, NEG_BIG, WG_M
from fmha_fwd.gluon_mma import _pv_fold, _pv_issue, _rescale_by_warp, _s_issue, _s_wait
from fmha_fwd.gluon_schedule import (_causal_section, _get_tile_info, _q_box, _q_slot, _ring_slot, _tile,
                                     _tile_ahead)
from fmha_fwd.gluon_softmax import _softmax_any, _softmax_tile, _sum_width, _tile_row_sum


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
def _s_ahead_budget(WORKER_REGS):
    """Registers a consumer thread may hold in S_{j+1}, P_j, O and the fresh P.V product for the S-ahead schedule
    (_consumer): 16 fewer than the worker consumers get (the kernel's _worker_regs): 224 with two consumer
    warpgroups, 144 with three (which lets D=64 with 128-key tiles keep it), 96 with four (64-key tiles at D=64 need
    104: without S-ahead ptxas spills nothing, with it 28 local loads and stores a tile)."""
    return WORKER_REGS - 16


@gluon.jit
def _consumer(o_smem, shared, WG: gl.constexpr, HEAD_DIM: gl.constexpr, BLOCK_M: gl.constexpr,
              BLOCK_N: gl.constexpr, CAUSAL: gl.constexpr, NUM_STAGES: gl.constexpr, KEY_PERMUTED: gl.constexpr,
              SUM_ON_TC: gl.constexpr, QK_INT8: gl.constexpr, BLOCK_DESCALE: gl.constexpr, V_NATURAL: gl.constexpr,
              PV_PIPELINED: gl.constexpr, VARLEN: gl.constexpr, Q_BUFFERS: gl.constexpr,
              TILE_INFO_HANDOFF: gl.constexpr, Q_IN_REGS: gl.constexpr = False, HALF_LAST: gl.constexpr = False,
              HALF_FIRST: gl.constexpr = False, LAZY_RESCALE: gl.constexpr = False,
              INT8_INF_SELECTS: gl.constexpr = True, WORKER_REGS: gl.constexpr = 240,
              WINDOW_ALIGN: gl.constexpr = 0, INT8_ROWMAX_LOCAL: gl.constexpr = False,
              RING_UNSIGNED: gl.constexpr = False, K_DESCALE_PAIRED: gl.constexpr = False):
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
    S_AHEAD: gl.constexpr = PARTS or V_NATURAL or (BLOCK_N // 2 + BLOCK_N // 8 + HEAD_DIM
                                                   <= _s_ahead_budget(WORKER_REGS))
    gl.static_assert(S_AHEAD or not SUM_ON_TC, "SUM_ON_TC needs the S-ahead schedule")
    # BF16 at D=256: both warpgroups share one O buffer (shared memory), taking turns (o_free).
    O_SHARED: gl.constexpr = HEAD_DIM > 128 and V_NATURAL
    gl.static_assert(not PARTS or ((NUM_PARTS == 4 or NUM_PARTS == 8) and not SUM_ON_TC),
                     "D=256: FP8, four or eight parts, no SUM_ON_TC")
    gl.static_assert(not V_NATURAL or not (KEY_PERMUTED or SUM_ON_TC or QK_INT8), "BF16: plain V, no switches")
    gl.static_assert(not LAZY_RESCALE or V_NATURAL, "LAZY_RESCALE: BF16 (one-level accumulation) only")
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
                BLOCK_N, HEAD_DIM, CAUSAL, VARLEN, WINDOW_ALIGN)
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
        n_tiles = gl.cdiv(n_end - n_start, BLOCK_N)  # the tiles' grid starts at n_start (key_range)
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
                slot = _ring_slot(it + j, RING_UNSIGNED)
                s = (slot % NUM_STAGES).to(gl.int32)
                nxt = ((slot + 1) % NUM_STAGES).to(gl.int32)
                qk = _s_wait(qk, SPLIT_S)
                mbarrier.arrive(k_empty.index(s), count=1)
                start_n = n_start + j * BLOCK_N
                p8, l_i, m_i, f_i, rescale = _softmax_any(qk, l_i, m_i, f_i, start_n, lo_masked_end,
                                                          full_end, offs_m, qk_scale, lo_off, hi_off,
                                                          sk, kd_base, k_descale_stride_blk, CAUSAL,
                                                          PV_N, BLOCK_N,
                                                          KEY_PERMUTED, SUM_ON_TC, QK_INT8, BLOCK_DESCALE,
                                                          V_NATURAL, SPLIT_S, LAZY_RESCALE, INT8_INF_SELECTS,
                                                          INT8_ROWMAX_LOCAL, K_DESCALE_PAIRED)
                if LAZY_RESCALE:
                    acc = _rescale_by_warp(acc, rescale)
                mbarrier.wait(v_ready.index(s), ((slot // NUM_STAGES) & 1).to(gl.int32))
                acc, pv = _pv_issue(p8, v_bufs, s, acc, rescale, BLOCK_N, HEAD_DIM, PV_N, V_NATURAL, o_layout,
                                    SPLIT_S, LAZY_RESCALE)
                if PARTS:  # FP8 D=256: part 3 folded before the next S (fewer spills; _pv_parts)
                    pv = warpgroup_mma_wait(num_outstanding=0, deps=(pv, ))
                    acc = _pv_fold(acc, pv, rescale, HEAD_DIM, V_NATURAL, PV_N)
                if SUM_ON_TC:
                    ls = warpgroup_mma(p8, ones_smem.permute((1, 0)), gl.zeros([WG_M, SUM_N], gl.float32, sum_layout),
                                       use_acc=False, is_async=True)
                if S_AHEAD:
                    mbarrier.wait(k_ready.index(nxt), (((slot + 1) // NUM_STAGES) & 1).to(gl.int32))
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
                    mbarrier.wait(k_ready.index(nxt), (((slot + 1) // NUM_STAGES) & 1).to(gl.int32))
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
                                                      BLOCK_DESCALE, V_NATURAL, SPLIT_S, LAZY_RESCALE,
                                                      INT8_INF_SELECTS, INT8_ROWMAX_LOCAL, K_DESCALE_PAIRED)
            if LAZY_RESCALE:
                acc = _rescale_by_warp(acc, rescale)
            mbarrier.wait(v_ready.index(last % NUM_STAGES), (last // NUM_STAGES) & 1)
            acc, pv = _pv_issue(p8, v_bufs, last % NUM_STAGES, acc, rescale, BLOCK_N, HEAD_DIM, PV_N, V_NATURAL,
                                o_layout, SPLIT_S, LAZY_RESCALE)
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
