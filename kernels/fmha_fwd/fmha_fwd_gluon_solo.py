"""Attention forward in Gluon with single-warpgroup CTAs, several per SM, no warp specialization: SageAttention's
organisation of its Hopper INT8 Q.K^T kernel. The library's 64-row instances (INT8 Q.K^T at head_dim 64,
`..._64x128x64_w4_s2_..._vkperm_bdesc_gluon`, four programs an SM: codegen/operations/fmha_fwd.py
gluon_programs_per_sm), and a variant of bench/sweep_gluon.py (NUM_CONSUMERS=1,MAXNREG=128,CTAS_PER_SM=4).

The library's kernel (fmha_fwd_gluon.py) runs one CTA per SM: a producer warp and two or three consumer warpgroups
of 64 query rows sharing one K/V ring. Each consumer's chain (S, softmax, P.V) is hidden only by the other consumers,
and the producer warp's registers are padded to a warpgroup's. Here a CTA is one warpgroup of 64 query rows that
issues its own TMA loads; at 128 registers a thread (the sweep's MAXNREG=128) four CTAs share an SM, so four
independent chains hide each other's latency with the instructions per key of the library's 128-row kernel (128-key
tiles fit 128 registers when S_{j+1} is not issued beside P_j V_j: every wgmma is waited for at once, as in
SageAttention).

Per key tile j of a query block (ring stage s = j % NUM_STAGES):
    wait K_j, S_j = Q K_j^T, wait S_j; all four warps past it (a barrier), K_{j+NUM_STAGES} into stage s
    softmax (the library's _softmax_any: FP8 or INT8 Q.K^T with per-block descales, the same numerics)
    wait V_j, P_j V_j, wait, fold into O; all four warps past it, V_{j+NUM_STAGES} into stage s
Blocks are walked persistently (program_id, program_id + num_programs, ...: the sweep's CTAS_PER_SM=4 launches four
programs per SM); a block's first NUM_STAGES tiles are loaded with its Q, so the loads do not run across blocks.

Measured (H200, 2026-12-05, bench/sweep_gluon.py --int8, D=64): +4% at S=2048 full over the 192-row kernel, +8% at
causal S=2048 and +5% at causal S=8192 over the 128-row one, -7% at full S=8192 (there the 192-row kernel's longer
loop with S-ahead wins); FP8 keeps the warp-specialized kernel (its 256-key tiles).

The same argument list as fmha_fwd_gluon_kernel, so that the sweep and the launcher drive either; dense calls only
(no varlen), e4m3 or INT8 Q.K^T with a V^T (key-permuted or not), head_dim up to 128; softcap is not applied (the
host refuses soft-capping on Gluon instances, the sweep passes 0; BF16, TRANSPOSE_V and SUM_ON_TC are not parameters
here, so a sweep that sets them fails at launch).

Four CTAs an SM hold only at D=64 with a ring of 2 (45 KB of shared memory a CTA, no spills in the key loop at 128
registers: codegen/compile_variant.py); a ring of 3 (61.5 KB) leaves room for three, and D=128 spills at 128
registers (~120 local loads and stores a tile) and takes 90 KB (two CTAs). The sweep's CTAS_PER_SM must match, or a
quarter of the persistent programs waits for others to exit.
"""

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import mbarrier, tma, warpgroup_mma_wait

from fmha_fwd.gluon_consumer import _store_o
from fmha_fwd.gluon_constants import DESCALE_BLOCK, LN2, LOG2E, NEG_BIG, WG_M
from fmha_fwd.gluon_mma import _pv_fold, _pv_issue, _s_issue, _s_wait
from fmha_fwd.gluon_schedule import _causal_section, _ring_slot, _tile, _tile_ahead
from fmha_fwd.gluon_softmax import _softmax_any


@gluon.jit
def _load_k(k_desc, k_bufs, k_ready, i, bc, k_row, h_kv, start_n, NUM_STAGES: gl.constexpr,
            RING_UNSIGNED: gl.constexpr = False):
    """Ring slot i's K tile (keys start_n ...) into stage i % NUM_STAGES."""
    s = (_ring_slot(i, RING_UNSIGNED) % NUM_STAGES).to(gl.int32)
    mbarrier.expect(k_ready.index(s), k_desc.block_type.nbytes)
    tma.async_copy_global_to_shared(k_desc, [bc, k_row + start_n, h_kv, 0], k_ready.index(s), k_bufs.index(s))


@gluon.jit
def _load_v(vt_desc, v_bufs, v_ready, i, bc, v_col, h_kv, start_n, NUM_STAGES: gl.constexpr,
            RING_UNSIGNED: gl.constexpr = False):
    """Ring slot i's V^T tile (key columns start_n ...) into stage i % NUM_STAGES."""
    s = (_ring_slot(i, RING_UNSIGNED) % NUM_STAGES).to(gl.int32)
    mbarrier.expect(v_ready.index(s), vt_desc.block_type.nbytes)
    tma.async_copy_global_to_shared(vt_desc, [bc, h_kv, 0, v_col + start_n], v_ready.index(s), v_bufs.index(s))


@gluon.jit
def _step(qk, acc, l_i, m_i, f_i, it, j, n_tiles, n_start, lo_masked_end, full_end, offs_m, qk_scale, lo_off, hi_off,
          sk, kd_base, k_descale_stride_blk, k_desc, vt_desc, k_bufs, v_bufs, k_ready, v_ready, bc, k_row, v_col, h_kv,
          o_layout: gl.constexpr, HEAD_DIM: gl.constexpr, BLOCK_N: gl.constexpr, CAUSAL: gl.constexpr,
          NUM_STAGES: gl.constexpr, KEY_PERMUTED: gl.constexpr, QK_INT8: gl.constexpr, BLOCK_DESCALE: gl.constexpr,
          INT8_INF_SELECTS: gl.constexpr, INT8_ROWMAX_LOCAL: gl.constexpr = False,
          RING_UNSIGNED: gl.constexpr = False, K_DESCALE_PAIRED: gl.constexpr = False):
    """Key tile j of the block (ring slot it + j) after its S (qk) is done: K's stage refilled with tile
    j + NUM_STAGES, the softmax, P.V waited for and folded, V's stage refilled. Returns (acc, l_i, m_i, f_i)."""
    slot = _ring_slot(it + j, RING_UNSIGNED)
    s = (slot % NUM_STAGES).to(gl.int32)
    refill = j + NUM_STAGES < n_tiles
    start_refill = n_start + (j + NUM_STAGES) * BLOCK_N
    if refill:
        # Every warp past its wait for S_j before TMA overwrites stage s's K. (Triton 3.6 puts a barrier there
        # itself, but only because no barrier lies between a wgmma's issue and its wait: it treats the wgmma's read
        # as done at issue. This one replaces it; the SASS keeps the same barriers.)
        gl.thread_barrier()
        _load_k(k_desc, k_bufs, k_ready, it + j + NUM_STAGES, bc, k_row, h_kv, start_refill, NUM_STAGES,
                RING_UNSIGNED)
    p8, l_i, m_i, f_i, rescale = _softmax_any(qk, l_i, m_i, f_i, n_start + j * BLOCK_N, lo_masked_end, full_end,
                                              offs_m, qk_scale, lo_off, hi_off, sk, kd_base, k_descale_stride_blk,
                                              CAUSAL, HEAD_DIM, BLOCK_N, KEY_PERMUTED, False, QK_INT8, BLOCK_DESCALE,
                                              False, False, False, INT8_INF_SELECTS, INT8_ROWMAX_LOCAL,
                                              K_DESCALE_PAIRED)
    mbarrier.wait(v_ready.index(s), ((slot // NUM_STAGES) & 1).to(gl.int32))
    acc, pv = _pv_issue(p8, v_bufs, s, acc, rescale, BLOCK_N, HEAD_DIM, HEAD_DIM, False, o_layout)
    pv = warpgroup_mma_wait(num_outstanding=0, deps=(pv, ))
    if refill:
        gl.thread_barrier()  # every warp past its wait for P_j V_j before TMA overwrites stage s's V^T (as above)
        _load_v(vt_desc, v_bufs, v_ready, it + j + NUM_STAGES, bc, v_col, h_kv, start_refill, NUM_STAGES,
                RING_UNSIGNED)
    # Folded before the next S is issued (the caller): S_{j+1} (BLOCK_N / 2 registers a thread) beside O and the
    # fresh product (HEAD_DIM / 2 each) would not fit 128 registers at 128-key tiles.
    return _pv_fold(acc, pv, rescale, HEAD_DIM, False, HEAD_DIM), l_i, m_i, f_i


@gluon.jit
def fmha_fwd_gluon_kernel(
    q_desc, k_desc, vt_desc, o_desc, LSE,
    q_descale, k_descale, v_descale,
    q_descale_stride_b, q_descale_stride_h,
    k_descale_stride_b, k_descale_stride_h,
    v_descale_stride_b, v_descale_stride_h,
    q_descale_stride_hq, q_descale_stride_blk, k_descale_stride_blk,
    window_left, window_right, softcap,
    softmax_scale,
    seqlen_q, seqlen_k, heads_q, group_size, write_lse,
    batch,
    O, stride_os, stride_oh, cu_seqlens_q, cu_seqlens_k, varlen, total_q, total_k,
    V, stride_vs, stride_vh,
    HEAD_DIM: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr,
    CAUSAL: gl.constexpr, NUM_STAGES: gl.constexpr, KEY_PERMUTED: gl.constexpr,
    QK_INT8: gl.constexpr, BLOCK_DESCALE: gl.constexpr, INT8_INF_SELECTS: gl.constexpr = True,
    K_DESCALE_UNIT_STRIDE: gl.constexpr = False, INT8_ROWMAX_LOCAL: gl.constexpr = False,
    RING_UNSIGNED: gl.constexpr = False, K_DESCALE_PAIRED: gl.constexpr = False,
):
    if K_DESCALE_UNIT_STRIDE:  # as the library's kernel: the k descales of consecutive key blocks adjacent
        gl.static_assert(QK_INT8 and BLOCK_DESCALE, "the unit k descale stride is an INT8 per-block option")
        k_descale_stride_blk = 1
    # INT8_ROWMAX_LOCAL, RING_UNSIGNED: fmha_fwd_gluon.py's switches (codegen's int8_loop_switches).
    gl.static_assert(not INT8_ROWMAX_LOCAL or (QK_INT8 and BLOCK_DESCALE and BLOCK_N == 128),
                     "INT8_ROWMAX_LOCAL: INT8 Q.K^T with per-block descales, 128-key tiles")
    # K_DESCALE_PAIRED: fmha_fwd_gluon.py's (one k descale a 128-key tile).
    gl.static_assert(not K_DESCALE_PAIRED or (QK_INT8 and BLOCK_DESCALE and BLOCK_N == 128),
                     "K_DESCALE_PAIRED: INT8 Q.K^T with per-block descales, 128-key tiles")
    gl.static_assert(BLOCK_M == WG_M, "one warpgroup of 64 query rows a CTA (the sweep's NUM_CONSUMERS=1)")
    gl.static_assert(gl.num_warps() == 4, "one warpgroup")
    gl.static_assert(HEAD_DIM <= 128 and BLOCK_N <= 128, "head_dim and key tiles up to 128")
    q_smem = gl.allocate_shared_memory(q_desc.dtype, q_desc.block_type.shape, q_desc.layout)
    k_bufs = gl.allocate_shared_memory(k_desc.dtype, [NUM_STAGES] + k_desc.block_type.shape, k_desc.layout)
    v_bufs = gl.allocate_shared_memory(vt_desc.dtype, [NUM_STAGES] + vt_desc.block_type.shape, vt_desc.layout)
    o_smem = gl.allocate_shared_memory(o_desc.dtype, o_desc.block_type.shape, o_desc.layout)
    q_ready = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    k_ready = gl.allocate_shared_memory(gl.int64, [NUM_STAGES, 1], mbarrier.MBarrierLayout())
    v_ready = gl.allocate_shared_memory(gl.int64, [NUM_STAGES, 1], mbarrier.MBarrierLayout())
    mbarrier.init(q_ready, count=1)
    for i in gl.static_range(NUM_STAGES):
        mbarrier.init(k_ready.index(i), count=1)
        mbarrier.init(v_ready.index(i), count=1)

    MMA_K: gl.constexpr = 32  # 8-bit operands
    o_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                       instr_shape=[16, HEAD_DIM, MMA_K])
    s_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                       instr_shape=[16, BLOCK_N, MMA_K])
    row_layout: gl.constexpr = gl.SliceLayout(1, s_layout)
    q_tile = q_smem.reshape([WG_M, HEAD_DIM])
    o_tile = o_smem.reshape([WG_M, HEAD_DIM])
    num_m_blocks = gl.cdiv(seqlen_q, BLOCK_M)
    batch_heads = batch * heads_q
    num_tiles = num_m_blocks * batch_heads
    section = _causal_section(seqlen_k, batch_heads, HEAD_DIM)

    it = 0  # ring slots used, across blocks
    count = 0  # blocks done
    for tile in range(gl.program_id(0), num_tiles, gl.num_programs(0)):
        ahead = _tile_ahead(tile, num_tiles, num_m_blocks, batch_heads, heads_q, group_size, section, cu_seqlens_q,
                            cu_seqlens_k, CAUSAL, False)
        (b, h, h_kv, bh, start_m, lo_off, hi_off, n_start, lo_masked_end, full_end, n_end,
         bc, q_row, k_row, v_col, sq, sk, bad) = _tile(
            ahead, heads_q, group_size, seqlen_q, seqlen_k, window_left, window_right, total_q, total_k, BLOCK_M,
            BLOCK_N, HEAD_DIM, CAUSAL, False)
        n_tiles = gl.cdiv(n_end - n_start, BLOCK_N)  # n_start is a multiple of BLOCK_N
        # Every warp is past the previous block's last S (its Q reads) before TMA overwrites the Q buffer.
        gl.thread_barrier()
        mbarrier.expect(q_ready, q_desc.block_type.nbytes)
        tma.async_copy_global_to_shared(q_desc, [bc, q_row + start_m, h, 0], q_ready, q_smem)
        for i in gl.static_range(NUM_STAGES):
            if i < n_tiles:
                _load_k(k_desc, k_bufs, k_ready, it + i, bc, k_row, h_kv, n_start + i * BLOCK_N, NUM_STAGES)
                _load_v(vt_desc, v_bufs, v_ready, it + i, bc, v_col, h_kv, n_start + i * BLOCK_N, NUM_STAGES)

        b64 = b.to(gl.int64)
        h_kv64 = h_kv.to(gl.int64)
        qd_base = (q_descale + b64 * q_descale_stride_b + h_kv64 * q_descale_stride_h +
                   h.to(gl.int64) * q_descale_stride_hq)
        kd_base = k_descale + b64 * k_descale_stride_b + h_kv64 * k_descale_stride_h
        vd = gl.load(v_descale + b64 * v_descale_stride_b + h_kv64 * v_descale_stride_h)
        if BLOCK_DESCALE:
            qd = gl.load(qd_base + (start_m // DESCALE_BLOCK).to(gl.int64) * q_descale_stride_blk)
            qk_scale = softmax_scale * qd * LOG2E
        else:
            qk_scale = softmax_scale * gl.load(qd_base) * gl.load(kd_base) * LOG2E
        offs_m = start_m + gl.arange(0, WG_M, layout=row_layout)
        m_i = gl.full([WG_M], NEG_BIG, gl.float32, row_layout)
        f_i = gl.full([WG_M], NEG_BIG, gl.float32, row_layout)
        l_i = gl.zeros([WG_M], gl.float32, row_layout)
        acc = gl.zeros([WG_M, HEAD_DIM], gl.float32, o_layout)

        mbarrier.wait(q_ready, count & 1)
        if n_tiles > 0:
            mbarrier.wait(k_ready.index(it % NUM_STAGES), (it // NUM_STAGES) & 1)
            qk = _s_issue(q_tile, k_bufs, it % NUM_STAGES, BLOCK_N, HEAD_DIM, s_layout, QK_INT8, False)
            # Every tile but the last issues the next one's S once its own P.V is folded; the last one's step is
            # the same without it (an S in flight is another type than a waited one: no conditional issue).
            for j in range(0, n_tiles - 1):
                qk = _s_wait(qk, False)
                acc, l_i, m_i, f_i = _step(qk, acc, l_i, m_i, f_i, it, j, n_tiles, n_start, lo_masked_end, full_end,
                                           offs_m, qk_scale, lo_off, hi_off, sk, kd_base, k_descale_stride_blk,
                                           k_desc, vt_desc, k_bufs, v_bufs, k_ready, v_ready, bc, k_row, v_col,
                                           h_kv, o_layout, HEAD_DIM, BLOCK_N, CAUSAL, NUM_STAGES, KEY_PERMUTED,
                                           QK_INT8, BLOCK_DESCALE, INT8_INF_SELECTS, INT8_ROWMAX_LOCAL, RING_UNSIGNED,
                                           K_DESCALE_PAIRED)
                slot = _ring_slot(it + j + 1, RING_UNSIGNED)
                nxt = (slot % NUM_STAGES).to(gl.int32)
                mbarrier.wait(k_ready.index(nxt), ((slot // NUM_STAGES) & 1).to(gl.int32))
                qk = _s_issue(q_tile, k_bufs, nxt, BLOCK_N, HEAD_DIM, s_layout, QK_INT8, False)
            qk = _s_wait(qk, False)
            acc, l_i, m_i, f_i = _step(qk, acc, l_i, m_i, f_i, it, n_tiles - 1, n_tiles, n_start, lo_masked_end,
                                       full_end, offs_m, qk_scale, lo_off, hi_off, sk, kd_base, k_descale_stride_blk,
                                       k_desc, vt_desc, k_bufs, v_bufs, k_ready, v_ready, bc, k_row, v_col, h_kv,
                                       o_layout, HEAD_DIM, BLOCK_N, CAUSAL, NUM_STAGES, KEY_PERMUTED, QK_INT8,
                                       BLOCK_DESCALE, INT8_INF_SELECTS, INT8_ROWMAX_LOCAL, RING_UNSIGNED,
                                       K_DESCALE_PAIRED)
        it += n_tiles
        count += 1

        # O = acc / l * v_descale, LSE: the library consumer's epilogue (gluon_consumer._consumer), written out
        # again here so that the library kernel's SASS stays as measured (moved into shared helpers, four of its
        # instances compiled with instructions outside the loops in another order).
        l_i = gl.where(bad, float("nan"), l_i)
        no_keys = l_i == 0.0
        inv_l = gl.where(no_keys, 0.0, vd / gl.where(no_keys, 1.0, l_i))
        inv_l = gl.convert_layout(inv_l, gl.SliceLayout(1, o_layout))
        tma.store_wait(pendings=0)  # the previous block's store has read o_smem
        _store_o(o_desc, o_smem, o_tile, acc, inv_l, bc, q_row + start_m, h, False, 1, HEAD_DIM)
        lse = gl.where(no_keys, float("-inf"), (f_i + gl.log2(gl.where(no_keys, 1.0, l_i))) * LN2)
        lse_ptr = LSE + bh.to(gl.int64) * seqlen_q + offs_m
        gl.store(lse_ptr, lse, mask=(offs_m < sq) & (write_lse != 0))
    tma.store_wait(pendings=0)
