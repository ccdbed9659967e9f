"""Attention forward for Hopper in Gluon (triton.experimental.gluon): FP8 e4m3 Q, K, V, BF16 O, hand-scheduled.

The same computation and the same rounding as fmha_fwd_triton.py (docs/CONVENTIONS.md, "FP8 numerics"), with
the schedule written out instead of left to Triton's pipeliner. One program computes one BLOCK_M x HEAD_DIM
tile of O for one (batch, head_q), in three warp-specialized partitions:

    producer      1 warp, few registers: one TMA load of the Q block, then a NUM_STAGES-deep ring of K and
                  V^T tiles, each stage guarded by a "ready" mbarrier (TMA transaction count) and an "empty"
                  mbarrier (both consumers release it)
    consumer 0    the default partition (num_warps = 4, one warpgroup): query rows [0, 64) of the block
    consumer 1    a 4-warp worker: query rows [64, 128)

Each consumer warpgroup runs its own online softmax over its 64 rows with wgmma: S = Q K^T with Q and K from
shared memory (K viewed K-major through a permuted view), then P (rounded to e4m3 in registers, the dot
operand layout of the A operand) times V^T's tile viewed as [BLOCK_N, HEAD_DIM] K-major. Per KV tile j a
warpgroup waits for S_j, runs the softmax, then issues P_j V_j and S_{j+1} back to back and folds P_j V_j
into the accumulator while S_{j+1} runs; the two warpgroups share the K/V ring but not their softmax state,
so one's exponentials run under the other's MMAs. Two things in that order are deliberate (see SASS):
  * P_j is made and consumed within one loop step: carried across the loop's back edge (as an earlier
    version issued P_{j-1} V_{j-1} with S_j), Triton keeps its e4m3 values as separate bytes and unpacks and
    repacks them, ~120 PRMT per tile and warp;
  * with PINGPONG the warpgroups take turns issuing through named barriers; ptxas hoists a plain bar.sync
    above the softmax, so the turn's barrier id is computed from the softmax's row sum (_turn_wait_after).

KEY_PERMUTED: the accumulator fragment of S holds, per thread, keys 2t, 2t+1, 8+2t, 9+2t, ... of each
16-key group, while the A fragment of P.V wants keys 4t..4t+3. Relabelling the keys of P (a reshape and
permute that Triton proves to be free) and storing V^T with the same key order makes the conversion a
no-op (no shuffles, no byte permutes); P.V is the same sum. Position 16h + 4t + 2j + e of each 32-key block
of such a V^T holds key 16h + 8j + 2t + e.

Numerics (identical to the Triton kernel, tile by tile; both consumers walk the same KV tiles as the
Triton kernel's 128-row block, with the same masked / unmasked split):
  * scores in the exp2 domain, softmax_scale * q_descale * k_descale * log2(e) folded into one qk_scale;
  * each KV tile's P is taken against the tile's own row maximum, floored at (running max - REF_FLOOR), and
    biased by 2^P_EXPONENT_BIAS before the cast to e4m3; accumulator and row sum live in a per-row frame f;
  * two-level accumulation: each tile's P V goes into a fresh FP32 accumulator, then
    acc = acc * 2^(f_old - f_new) + pv;
  * O = acc / l * v_descale; a row that saw no key (l == 0) gets O = 0 and LSE = -inf; a NaN row gets NaN
    (tested as l == 0, not l > 0).

Host TMA descriptors (encoded by the runtime; Triton order, innermost last):
    q_desc   Q   [batch, seqlen_q, heads_q, HEAD_DIM]    block [1, BLOCK_M, 1, HEAD_DIM]   e4m3
    k_desc   K   [batch, seqlen_k, heads_kv, HEAD_DIM]   block [1, BLOCK_N, 1, HEAD_DIM]   e4m3
    vt_desc  V^T [batch, heads_kv, HEAD_DIM, seqlen_k]   block [1, 1, HEAD_DIM, BLOCK_N]   e4m3 (sequence contiguous)
    o_desc   O   [batch, seqlen_q, heads_q, HEAD_DIM]    block [1, BLOCK_M // 2, 1, HEAD_DIM]  bf16
Four dimensions so that TMA clips at each sequence's end (zero fill on loads, dropped stores) instead of
running into the next head or batch. V^T's sequence extent must be seqlen_k (not the padded row length): the
zero fill past seqlen_k is what keeps a caller's NaN padding out of the P.V product. Each descriptor's shared
layout is a rank-4 NVMMASharedLayout (128-byte swizzle); the kernel reshapes the 4-D shared block to 2-D for
wgmma. Triton splits O's box into two [1, 64, 1, 64] stores (128 bf16 columns exceed the 128-byte swizzle
span): encode each CUtensorMap with the box that tensordesc_meta records, not the block above.

Unlike Triton 3.6's tl.range(warp_specialize=True), the partitions here keep the row frame, so LSE is right.

Not yet: persistent scheduling, the key-permuted V^T in the library's transpose.
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

LOG2E = gl.constexpr(numerics.LOG2E)
LN2 = gl.constexpr(numerics.LN2)
P_EXPONENT_BIAS = gl.constexpr(numerics.P_EXPONENT_BIAS)
NEG_BIG = gl.constexpr(numerics.NEG_BIG)
REF_FLOOR = gl.constexpr(numerics.REF_FLOOR)

# Rows per consumer warpgroup (one wgmma M extent over 4 warps).
WG_M = gl.constexpr(64)


@gluon.jit
def _producer(q_desc, k_desc, vt_desc, q_smem, k_bufs, v_bufs, q_bar, k_ready, k_empty, v_ready, v_empty,
              b, h, h_kv, start_m, n_end, BLOCK_N: gl.constexpr, NUM_STAGES: gl.constexpr):
    """TMA loads: the Q block once, then K and V^T tiles [0, n_end) through the ring."""
    mbarrier.expect(q_bar, q_desc.block_type.nbytes)
    tma.async_copy_global_to_shared(q_desc, [b, start_m, h, 0], q_bar, q_smem)
    it = 0
    for start_n in range(0, n_end, BLOCK_N):
        s = it % NUM_STAGES
        phase = (it // NUM_STAGES) & 1
        # A fresh mbarrier counts as having completed the phase before phase 0: the first pass waits on
        # phase 1 and goes straight through.
        mbarrier.wait(k_empty.index(s), phase ^ 1)
        # Rows past seqlen_k are zero-filled by TMA and still count toward the transaction bytes.
        mbarrier.expect(k_ready.index(s), k_desc.block_type.nbytes)
        tma.async_copy_global_to_shared(k_desc, [b, start_n, h_kv, 0], k_ready.index(s), k_bufs.index(s))
        mbarrier.wait(v_empty.index(s), phase ^ 1)
        mbarrier.expect(v_ready.index(s), vt_desc.block_type.nbytes)
        tma.async_copy_global_to_shared(vt_desc, [b, h_kv, 0, start_n], v_ready.index(s), v_bufs.index(s))
        it += 1


# Named barriers of the ping-pong between the two consumer warpgroups (ids 8 and 9: Triton itself uses the low
# ids). bar.sync waits until 256 threads (this warpgroup's 128 and the other's 128) have reached the barrier;
# bar.arrive counts the other warpgroup's threads in without waiting. Gluon has no API for them in 3.6.
@gluon.jit
def _turn_wait(WG: gl.constexpr):
    """Wait for this warpgroup's turn to issue MMAs (the other one has issued its own)."""
    if WG == 0:
        gl.inline_asm_elementwise("bar.sync 8, 256; mov.u32 $0, 0;", "=r", [], gl.int32, False, 1)
    else:
        gl.inline_asm_elementwise("bar.sync 9, 256; mov.u32 $0, 0;", "=r", [], gl.int32, False, 1)


# ptxas schedules a bar.sync like any instruction without operands: it moved the turn wait above the whole
# softmax that precedes it in the source (seen in SASS), which serializes the two warpgroups again. Computing
# the barrier id from the softmax's last result (max(0 * l + id, id): the id even when l is inf or NaN) pins
# the wait after it. Two row values per thread (pack=2): one barrier per thread.
@gluon.jit
def _turn_wait_after(l_i, WG: gl.constexpr):
    """_turn_wait, ordered after the computation of l_i (a row vector, two rows per thread)."""
    if WG == 0:
        gl.inline_asm_elementwise(
            "{ .reg .f32 t; .reg .u32 id; fma.rn.f32 t, $2, 0f00000000, 0f41000000; max.f32 t, t, 0f41000000; "
            "cvt.rzi.u32.f32 id, t; bar.sync id, 256; mov.u32 $0, 0; mov.u32 $1, 0; }",
            "=r,=r,r,r", [l_i], gl.int32, False, 2)
    else:
        gl.inline_asm_elementwise(
            "{ .reg .f32 t; .reg .u32 id; fma.rn.f32 t, $2, 0f00000000, 0f41100000; max.f32 t, t, 0f41100000; "
            "cvt.rzi.u32.f32 id, t; bar.sync id, 256; mov.u32 $0, 0; mov.u32 $1, 0; }",
            "=r,=r,r,r", [l_i], gl.int32, False, 2)


@gluon.jit
def _turn_pass(WG: gl.constexpr):
    """Hand the tensor cores to the other warpgroup."""
    if WG == 0:
        gl.inline_asm_elementwise("bar.arrive 9, 256; mov.u32 $0, 0;", "=r", [], gl.int32, False, 1)
    else:
        gl.inline_asm_elementwise("bar.arrive 8, 256; mov.u32 $0, 0;", "=r", [], gl.int32, False, 1)


@gluon.jit
def _k_tile(k_bufs, s, BLOCK_N: gl.constexpr, HEAD_DIM: gl.constexpr):
    """Stage s of the K ring, [BLOCK_N, HEAD_DIM] head_dim contiguous, viewed K-major as S = Q K^T's B."""
    return k_bufs.index(s).reshape([BLOCK_N, HEAD_DIM]).permute((1, 0))


@gluon.jit
def _v_tile(v_bufs, s, BLOCK_N: gl.constexpr, HEAD_DIM: gl.constexpr):
    """Stage s of the V^T ring, [HEAD_DIM, BLOCK_N] sequence contiguous, viewed as [BLOCK_N, HEAD_DIM] K-major
    (FP8 wgmma needs both operands K-major)."""
    return v_bufs.index(s).reshape([HEAD_DIM, BLOCK_N]).permute((1, 0))


@gluon.jit
def _softmax_tile(qk, l_i, m_i, f_i, start_n, masked, offs_m, qk_scale, causal_offset, seqlen_k,
                  CAUSAL: gl.constexpr, HEAD_DIM: gl.constexpr, BLOCK_N: gl.constexpr, KEY_PERMUTED: gl.constexpr):
    """Online softmax of one KV tile's scores (see fmha_fwd_triton._attn_tile): returns P in e4m3, in the
    A-operand layout of the P.V wgmma, the new row sum, maximum and frame, and the factor that moves the
    accumulator from the old frame to the new one."""
    s_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                       instr_shape=[16, BLOCK_N, 32])
    o_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                       instr_shape=[16, HEAD_DIM, 32])
    p_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=o_layout, k_width=4)
    if masked:  # uniform branch: only the tiles at the sequence end or on the causal diagonal pay for it
        cols = start_n + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, s_layout))
        if CAUSAL:
            # Row i sees keys j < min(seqlen_k, i + causal_offset + 1): one compare per element.
            col_limit = gl.minimum(offs_m + causal_offset + 1, seqlen_k)
            keep = cols[None, :] < col_limit[:, None]
        else:
            keep = cols[None, :] < seqlen_k
        qk = gl.where(keep, qk, float("-inf"))

    m_tile = gl.max(qk, 1) * qk_scale  # -inf for a row with no visible key in this tile
    m_new = gl.maximum(m_i, m_tile)
    ref = gl.maximum(m_tile, m_new - REF_FLOOR)  # finite: m_new >= NEG_BIG
    # P_tile = exp2(S - ref) * 2^8, rounded to e4m3 in registers.
    frame = ref - P_EXPONENT_BIAS
    p = gl.exp2(qk * qk_scale - frame[:, None])
    rescale = gl.exp2(f_i - frame)
    l_i = l_i * rescale + gl.sum(p, 1)
    p8 = p.to(gl.float8e4nv)
    if KEY_PERMUTED:
        # Within each 32-key block, wgmma's A fragment holds keys 4t..4t+3 and 16+4t..19+4t in thread t of a
        # quad, while the accumulator fragment holds keys 2t, 2t+1, 8+2t, 9+2t, 16+2t, ... Relabel the keys so
        # that the two coincide (swap the "which n8 block" and "which thread" digits of the key index); V^T's
        # keys are stored in the same order (docs: the permuted V^T), so P.V is unchanged.
        pp = gl.reshape(p, [WG_M, BLOCK_N // 32, 2, 2, 4, 2])
        pp = gl.permute(pp, (0, 1, 2, 4, 3, 5))
        pp = gl.reshape(pp, [WG_M, BLOCK_N])
        pp = gl.convert_layout(pp, gl.DotOperandLayout(operand_index=0, parent=o_layout, k_width=4), assert_trivial=True)
        # Four values per asm: two cvt.e4m3x2 straight into one 32-bit A-fragment register (Triton's own cast
        # splits the pairs into bytes and reassembles them: 3 PRMT/SHF more per 4 values).
        p8 = gl.inline_asm_elementwise(
            "{ .reg .b16 lo, hi; cvt.rn.satfinite.e4m3x2.f32 lo, $2, $1; cvt.rn.satfinite.e4m3x2.f32 hi, $4, $3; "
            "mov.b32 $0, {lo, hi}; }", "=r,r,r,r,r", [pp], gl.float8e4nv, True, 4)
    else:
        p8 = gl.convert_layout(p8, p_layout)
    # Row vectors live in S's row layout; O's is the same when BLOCK_N == HEAD_DIM (then this is free).
    return p8, l_i, m_new, frame, gl.convert_layout(rescale, gl.SliceLayout(1, o_layout))


@gluon.jit
def _consumer(o_desc, LSE, q_smem, o_smem, k_bufs, v_bufs, q_bar, k_ready, k_empty, v_ready, v_empty,
              qk_scale, vd, b, h, bh, start_m, seqlen_q, seqlen_k, causal_offset, n_full, n_end, write_lse,
              WG: gl.constexpr, HEAD_DIM: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr,
              CAUSAL: gl.constexpr, NUM_STAGES: gl.constexpr, PINGPONG: gl.constexpr,
              KEY_PERMUTED: gl.constexpr):
    """One warpgroup: query rows [WG * 64, WG * 64 + 64) of the block, every KV tile of the block.

    Software-pipelined by one tile: step j issues S_j = Q K_j and then P_{j-1} V_{j-1}, both asynchronous,
    waits for S_j only, runs tile j's softmax while P_{j-1} V_{j-1} is still on the tensor cores, then folds
    that product into the accumulator. With PINGPONG the two warpgroups also take turns issuing (named
    barriers), so one's softmax runs under the other's MMAs."""
    o_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                       instr_shape=[16, HEAD_DIM, 32])
    s_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                       instr_shape=[16, BLOCK_N, 32])
    row_layout: gl.constexpr = gl.SliceLayout(1, s_layout)

    row0 = start_m + WG * WG_M
    offs_m = row0 + gl.arange(0, WG_M, layout=row_layout)
    m_i = gl.full([WG_M], NEG_BIG, gl.float32, row_layout)
    f_i = gl.full([WG_M], NEG_BIG, gl.float32, row_layout)  # frame of acc and l: 2^f_i scales them to true sums
    l_i = gl.zeros([WG_M], gl.float32, row_layout)
    acc = gl.zeros([WG_M, HEAD_DIM], gl.float32, o_layout)

    # This warpgroup's rows of the Q block, straight from shared memory as the A operand.
    q_tile = q_smem.reshape([BLOCK_M, HEAD_DIM]).slice(WG * WG_M, WG_M, dim=0)
    mbarrier.wait(q_bar, 0)

    # Tiles [0, n_full) need no mask; [n_full, n_end) are masked (sequence end, causal diagonal). `it` counts
    # the tiles of the ring. A "turn" is one group of MMAs a warpgroup issues: S_0, then (P_j V_j, S_{j+1})
    # for each tile, then the last P V. Ping-pong order: WG0's turn, WG1's turn, WG0's next turn, ... Each
    # warpgroup passes the turn after each of its turns, except WG1 after its last (nobody waits for it), so
    # the named barriers balance; both warpgroups walk the same tiles, hence take the same number of turns.
    n_tiles = gl.cdiv(n_end, BLOCK_N)
    if n_tiles > 0:
        if PINGPONG:
            if WG == 1:
                _turn_wait(WG)
        mbarrier.wait(k_ready.index(0), 0)
        qk = warpgroup_mma(q_tile, _k_tile(k_bufs, 0, BLOCK_N, HEAD_DIM), gl.zeros([WG_M, BLOCK_N], gl.float32,
                           s_layout), use_acc=False, is_async=True)
        if PINGPONG:
            _turn_pass(WG)
        # Step j: S_j is in flight; wait for it, run tile j's softmax, then issue P_j V_j and S_{j+1} together
        # and fold P_j V_j in as soon as it is done, while S_{j+1} still runs. P_j is made and used within the
        # step (carried across the loop's back edge, its e4m3 bytes would be unpacked and repacked).
        for it in range(0, n_tiles - 1):
            s = it % NUM_STAGES
            nxt = (it + 1) % NUM_STAGES
            qk = warpgroup_mma_wait(num_outstanding=0, deps=(qk, ))
            mbarrier.arrive(k_empty.index(s), count=1)
            p8, l_i, m_i, f_i, rescale = _softmax_tile(qk, l_i, m_i, f_i, it * BLOCK_N, it * BLOCK_N >= n_full,
                                                       offs_m, qk_scale, causal_offset, seqlen_k, CAUSAL, HEAD_DIM,
                                                       BLOCK_N, KEY_PERMUTED)
            if PINGPONG:
                _turn_wait_after(l_i, WG)
            mbarrier.wait(v_ready.index(s), (it // NUM_STAGES) & 1)
            pv = warpgroup_mma(p8, _v_tile(v_bufs, s, BLOCK_N, HEAD_DIM), gl.zeros([WG_M, HEAD_DIM], gl.float32,
                               o_layout), use_acc=False, is_async=True)
            mbarrier.wait(k_ready.index(nxt), ((it + 1) // NUM_STAGES) & 1)
            qk = warpgroup_mma(q_tile, _k_tile(k_bufs, nxt, BLOCK_N, HEAD_DIM), gl.zeros([WG_M, BLOCK_N],
                               gl.float32, s_layout), use_acc=False, is_async=True)
            if PINGPONG:
                _turn_pass(WG)
            pv = warpgroup_mma_wait(num_outstanding=1, deps=(pv, ))
            mbarrier.arrive(v_empty.index(s), count=1)
            acc = acc * rescale[:, None] + pv
        # The last tile: its softmax, then its P V alone.
        last = (n_tiles - 1) % NUM_STAGES
        qk = warpgroup_mma_wait(num_outstanding=0, deps=(qk, ))
        mbarrier.arrive(k_empty.index(last), count=1)
        p8, l_i, m_i, f_i, rescale = _softmax_tile(qk, l_i, m_i, f_i, (n_tiles - 1) * BLOCK_N,
                                                   (n_tiles - 1) * BLOCK_N >= n_full, offs_m, qk_scale,
                                                   causal_offset, seqlen_k, CAUSAL, HEAD_DIM, BLOCK_N, KEY_PERMUTED)
        if PINGPONG:
            _turn_wait_after(l_i, WG)
        mbarrier.wait(v_ready.index(last), ((n_tiles - 1) // NUM_STAGES) & 1)
        pv = warpgroup_mma(p8, _v_tile(v_bufs, last, BLOCK_N, HEAD_DIM), gl.zeros([WG_M, HEAD_DIM], gl.float32,
                           o_layout), use_acc=False, is_async=True)
        if PINGPONG:
            if WG == 0:
                _turn_pass(WG)
        pv = warpgroup_mma_wait(num_outstanding=0, deps=(pv, ))
        mbarrier.arrive(v_empty.index(last), count=1)
        acc = acc * rescale[:, None] + pv

    # O = acc / l * v_descale (the frame cancels). l == 0: no key seen, O = 0, LSE = -inf. NaN fails every
    # comparison, so a NaN row keeps NaN in both.
    no_keys = l_i == 0.0
    inv_l = gl.where(no_keys, 0.0, vd / gl.where(no_keys, 1.0, l_i))
    out = acc * gl.convert_layout(inv_l, gl.SliceLayout(1, o_layout))[:, None]
    o_tile = o_smem.reshape([WG_M, HEAD_DIM])
    o_tile.store(out.to(o_desc.dtype))
    fence_async_shared()
    # TMA drops the rows past seqlen_q.
    tma.async_copy_shared_to_global(o_desc, [b, row0, h, 0], o_smem)

    # LSE: [batch, heads_q, seqlen_q] float32, natural log; write_lse is a runtime flag.
    lse = gl.where(no_keys, float("-inf"), (f_i + gl.log2(gl.where(no_keys, 1.0, l_i))) * LN2)
    lse_ptr = LSE + bh.to(gl.int64) * seqlen_q + offs_m
    gl.store(lse_ptr, lse, mask=(offs_m < seqlen_q) & (write_lse != 0))
    tma.store_wait(pendings=0)


@gluon.jit
def _consumer1(o_desc, LSE, q_smem, o_smem, k_bufs, v_bufs, q_bar, k_ready, k_empty, v_ready, v_empty,
               qk_scale, vd, b, h, bh, start_m, seqlen_q, seqlen_k, causal_offset, n_full, n_end, write_lse,
               HEAD_DIM: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, CAUSAL: gl.constexpr,
               NUM_STAGES: gl.constexpr, PINGPONG: gl.constexpr, KEY_PERMUTED: gl.constexpr):
    _consumer(o_desc, LSE, q_smem, o_smem, k_bufs, v_bufs, q_bar, k_ready, k_empty, v_ready, v_empty,
              qk_scale, vd, b, h, bh, start_m, seqlen_q, seqlen_k, causal_offset, n_full, n_end, write_lse,
              1, HEAD_DIM, BLOCK_M, BLOCK_N, CAUSAL, NUM_STAGES, PINGPONG, KEY_PERMUTED)


@gluon.jit
def fmha_fwd_gluon_kernel(
    q_desc, k_desc, vt_desc, o_desc, LSE,
    q_descale, k_descale, v_descale,
    q_descale_stride_b, q_descale_stride_h,
    k_descale_stride_b, k_descale_stride_h,
    v_descale_stride_b, v_descale_stride_h,
    softmax_scale,
    seqlen_q, seqlen_k, heads_q, group_size, write_lse,
    HEAD_DIM: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr,
    CAUSAL: gl.constexpr, NUM_STAGES: gl.constexpr, PINGPONG: gl.constexpr, KEY_PERMUTED: gl.constexpr,
):
    gl.static_assert(BLOCK_M == 2 * WG_M, "two consumer warpgroups of 64 rows")
    gl.static_assert(gl.num_warps() == 4, "the default partition is one consumer warpgroup")

    # One-dimensional grid of num_m_blocks * batch * heads_q programs, query blocks fastest (the programs of
    # one (batch, head) share its K and V in L2); causal: the heaviest blocks first.
    num_m_blocks = gl.cdiv(seqlen_q, BLOCK_M)
    pid = gl.program_id(0)
    pid_m = pid % num_m_blocks
    bh = pid // num_m_blocks
    if CAUSAL:
        pid_m = num_m_blocks - 1 - pid_m
    b = bh // heads_q
    h = bh % heads_q
    h_kv = h // group_size
    start_m = pid_m * BLOCK_M

    b64 = b.to(gl.int64)
    h_kv64 = h_kv.to(gl.int64)
    qd = gl.load(q_descale + b64 * q_descale_stride_b + h_kv64 * q_descale_stride_h)
    kd = gl.load(k_descale + b64 * k_descale_stride_b + h_kv64 * k_descale_stride_h)
    vd = gl.load(v_descale + b64 * v_descale_stride_b + h_kv64 * v_descale_stride_h)
    qk_scale = softmax_scale * qd * kd * LOG2E

    causal_offset = seqlen_k - seqlen_q
    n_full = (seqlen_k // BLOCK_N) * BLOCK_N
    n_end = seqlen_k
    if CAUSAL:
        # Keys every row of the block may see: j <= start_m + causal_offset.
        first_row_limit = start_m + causal_offset + 1
        n_full = gl.minimum(n_full, gl.maximum(first_row_limit, 0) // BLOCK_N * BLOCK_N)
        n_end = gl.minimum(seqlen_k, gl.maximum(start_m + BLOCK_M + causal_offset, 0))

    q_smem = gl.allocate_shared_memory(q_desc.dtype, q_desc.block_type.shape, q_desc.layout)
    k_bufs = gl.allocate_shared_memory(k_desc.dtype, [NUM_STAGES] + k_desc.block_type.shape, k_desc.layout)
    v_bufs = gl.allocate_shared_memory(vt_desc.dtype, [NUM_STAGES] + vt_desc.block_type.shape, vt_desc.layout)
    o_smem0 = gl.allocate_shared_memory(o_desc.dtype, o_desc.block_type.shape, o_desc.layout)
    o_smem1 = gl.allocate_shared_memory(o_desc.dtype, o_desc.block_type.shape, o_desc.layout)

    q_bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    k_ready = gl.allocate_shared_memory(gl.int64, [NUM_STAGES, 1], mbarrier.MBarrierLayout())
    k_empty = gl.allocate_shared_memory(gl.int64, [NUM_STAGES, 1], mbarrier.MBarrierLayout())
    v_ready = gl.allocate_shared_memory(gl.int64, [NUM_STAGES, 1], mbarrier.MBarrierLayout())
    v_empty = gl.allocate_shared_memory(gl.int64, [NUM_STAGES, 1], mbarrier.MBarrierLayout())
    mbarrier.init(q_bar, count=1)
    for i in gl.static_range(NUM_STAGES):
        mbarrier.init(k_ready.index(i), count=1)
        mbarrier.init(v_ready.index(i), count=1)
        # Released by both consumer warpgroups.
        mbarrier.init(k_empty.index(i), count=2)
        mbarrier.init(v_empty.index(i), count=2)

    gl.warp_specialize([
        (_consumer, (o_desc, LSE, q_smem, o_smem0, k_bufs, v_bufs, q_bar, k_ready, k_empty, v_ready, v_empty,
                     qk_scale, vd, b, h, bh, start_m, seqlen_q, seqlen_k, causal_offset, n_full, n_end, write_lse,
                     0, HEAD_DIM, BLOCK_M, BLOCK_N, CAUSAL, NUM_STAGES, PINGPONG, KEY_PERMUTED)),
        (_consumer1, (o_desc, LSE, q_smem, o_smem1, k_bufs, v_bufs, q_bar, k_ready, k_empty, v_ready, v_empty,
                      qk_scale, vd, b, h, bh, start_m, seqlen_q, seqlen_k, causal_offset, n_full, n_end, write_lse,
                      HEAD_DIM, BLOCK_M, BLOCK_N, CAUSAL, NUM_STAGES, PINGPONG, KEY_PERMUTED)),
        (_producer, (q_desc, k_desc, vt_desc, q_smem, k_bufs, v_bufs, q_bar, k_ready, k_empty, v_ready, v_empty,
                     b, h, h_kv, start_m, n_end, BLOCK_N, NUM_STAGES)),
    ], [4, 1], [248, 24])
