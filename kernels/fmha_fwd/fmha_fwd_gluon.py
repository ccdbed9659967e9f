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
                  192-row block, Q as three 64-row TMA boxes, 160-168 registers a consumer thread instead of 240;
     consumer 3   NUM_CONSUMERS = 4, 256-row blocks (INT8 D=64 with 64-key tiles; an experiment of
                  bench/sweep_gluon.py, not in the library): 112-120 registers, no S-ahead (_worker_regs))

Files: this module is the kernel itself (shared memory, barriers, the partitions and their registers); its parts
are gluon_schedule.py (the persistent schedule and a block's key range, shared by both partitions),
gluon_producer.py (TMA loads, the in-kernel V transpose), gluon_consumer.py (a consumer warpgroup's loop and its
epilogue), gluon_softmax.py (one key tile's online softmax and P), gluon_mma.py (the S and P.V products) and
gluon_constants.py.

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

Persistent: at most one program per SM (the consumers' registers leave room for one CTA; bench/sweep_gluon.py's
CTAS_PER_SM=2 experiment compiles at 80 registers a thread, consumers at 104 (CONSUMER_REGS), to fit two) walks the
query blocks program_id, program_id + num_programs, ...; the producer loads the next block's Q as soon as both
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
from triton.experimental.gluon.language.nvidia.hopper import fence_async_shared, mbarrier

from fmha_fwd.gluon_constants import WG_M
from fmha_fwd.gluon_consumer import _consumer
from fmha_fwd.gluon_producer import _producer, _producer_warps, _vt_smem_layout
from fmha_fwd.gluon_schedule import TILE_INFO
from fmha_fwd.gluon_softmax import _store_e4m3_ones, _sum_width


@gluon.constexpr_function
def _worker_regs(NUM_CONSUMERS, CONSUMER_REGS):
    """Registers a thread of each worker consumer warpgroup asks for (setmaxnreg); the default partition (consumer 0)
    gets what the others leave of the pool, the producer 24 (with or without TRANSPOSE_V: 32 left the first consumer
    232 instead of 240, and ptxas spilled at D=64; the transposes fit in 24). Triton pads the producer warp to a
    warpgroup and starts every thread with the pool divided evenly, rounded down to a multiple of 8:
      two consumers    12 warps, 168 a thread: 240 for the worker, 240 left to the default partition;
      three            16 warps, 128: 160 each, 168 left;
      four             20 warps, 96 (61440 of the 65536): 112 each, 120 left.
    CONSUMER_REGS (a sweep switch; 0 in the library's instances) overrides it, e.g. for a kernel compiled with a
    lower maxnreg so that two CTAs share an SM."""
    if CONSUMER_REGS:
        return CONSUMER_REGS
    return {2: 240, 3: 160, 4: 112}[NUM_CONSUMERS]


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
    HALF_LAST: gl.constexpr = False, HALF_FIRST: gl.constexpr = False, LAZY_RESCALE: gl.constexpr = False,
    INT8_INF_SELECTS: gl.constexpr = True, CONSUMER_REGS: gl.constexpr = 0, WINDOW_ALIGN: gl.constexpr = 0,
    INT8_ROWMAX_LOCAL: gl.constexpr = False, RING_UNSIGNED: gl.constexpr = False,
    K_DESCALE_PAIRED: gl.constexpr = False,
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
    # NUM_CONSUMERS = 4 (256-row query blocks): four consumer warpgroups of 112-120 registers, SageAttention's count
    # of independent warpgroups per SM (its INT8 Q.K^T kernel at D=64: four single-warpgroup CTAs); with so few
    # registers only 64-key tiles at D=64 fit (_consumer's S_AHEAD budget).
    gl.static_assert(NUM_CONSUMERS == 2 or ((NUM_CONSUMERS == 3 or NUM_CONSUMERS == 4) and not V_NATURAL and not VARLEN
                                            and not TRANSPOSE_V and HEAD_DIM <= 128),
                     "three or four consumers: no bf16, varlen or in-kernel V transpose; head_dim <= 128")
    # WINDOW_ALIGN (a sweep switch, 0 in the library's instances): the key tiles of a block start on a multiple of it
    # below the block's lowest visible key instead of a multiple of BLOCK_N (common/key_range.py: ALIGN), so that a
    # left window's first tile wastes fewer keys. Dense only: a varlen V^T pads each sequence's columns to BLOCK_N's
    # alignment, which a shifted 256-key tile could pass.
    gl.static_assert(WINDOW_ALIGN == 0 or (not VARLEN and BLOCK_N % WINDOW_ALIGN == 0 and WINDOW_ALIGN % 64 == 0),
                     "WINDOW_ALIGN: dense, a multiple of 64 dividing BLOCK_N")
    # INT8_ROWMAX_LOCAL: the INT8 row maximum of a 128-key tile from each thread's scaled half maxima, one cross-lane
    # reduction a row instead of one a half (gluon_softmax _row_max_local; the same bits). RING_UNSIGNED: the
    # consumers' ring stage and phase of a key tile in unsigned arithmetic (_consumer; the same schedule). Where the
    # library turns them on: codegen's int8_loop_switches.
    gl.static_assert(not INT8_ROWMAX_LOCAL or (QK_INT8 and BLOCK_DESCALE and BLOCK_N == 128),
                     "INT8_ROWMAX_LOCAL: INT8 Q.K^T with per-block descales, 128-key tiles")
    # K_DESCALE_PAIRED: the caller's k descales come in equal pairs (entries 2i and 2i + 1 alike: one scale per 128
    # keys, which the int8_qk mode's quantization writes), so a 128-key tile reads one descale, takes its row maximum
    # from the raw scores and scales in the exponential's FFMA alone (gluon_softmax _softmax_tile_int8; the same bits
    # as the per-block path on such descales). The host runs these instances only when Arguments says the descales
    # pair (src/fmha/fmha_heuristic.cpp).
    gl.static_assert(not K_DESCALE_PAIRED or (QK_INT8 and BLOCK_DESCALE and BLOCK_N == 128 and WINDOW_ALIGN % 128 == 0),
                     "K_DESCALE_PAIRED: INT8 Q.K^T with per-block descales, 128-key tiles starting on a pair")
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
    if NUM_CONSUMERS >= 3:
        # A TMA box has power-of-two extents: the host's Q box is one warpgroup's 64 rows, three (four) of them a
        # block.
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
    o_smem2 = o_smem0  # a third consumer's (NUM_CONSUMERS >= 3)
    o_smem3 = o_smem0  # a fourth consumer's (NUM_CONSUMERS = 4)
    if NUM_CONSUMERS >= 3:
        o_smem2 = gl.allocate_shared_memory(o_desc.dtype, o_desc.block_type.shape, o_desc.layout)
    if NUM_CONSUMERS == 4:
        o_smem3 = gl.allocate_shared_memory(o_desc.dtype, o_desc.block_type.shape, o_desc.layout)
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
    # (The constexprs and functions are written into each partition's tuple, one literal list per consumer count: kept
    # in a tuple variable, or a list built in a static loop, Triton 3.6 makes them tensors ("cannot convert
    # JITFunction ... to tensor").)
    WORKER_REGS: gl.constexpr = _worker_regs(NUM_CONSUMERS, CONSUMER_REGS)
    if NUM_CONSUMERS == 4:
        gl.warp_specialize([
            (_consumer, (o_smem0, shared, 0, HEAD_DIM, BLOCK_M, BLOCK_N, CAUSAL, NUM_STAGES, KEY_PERMUTED, SUM_ON_TC,
                         QK_INT8, BLOCK_DESCALE, V_NATURAL, PV_PIPELINED, VARLEN, Q_BUFFERS,
                         TILE_INFO_HANDOFF, Q_IN_REGS, HALF_LAST, HALF_FIRST, LAZY_RESCALE,
                         INT8_INF_SELECTS, WORKER_REGS, WINDOW_ALIGN, INT8_ROWMAX_LOCAL, RING_UNSIGNED,
                         K_DESCALE_PAIRED)),
            (_consumer, (o_smem1, shared, 1, HEAD_DIM, BLOCK_M, BLOCK_N, CAUSAL, NUM_STAGES, KEY_PERMUTED, SUM_ON_TC,
                         QK_INT8, BLOCK_DESCALE, V_NATURAL, PV_PIPELINED, VARLEN, Q_BUFFERS,
                         TILE_INFO_HANDOFF, Q_IN_REGS, HALF_LAST, HALF_FIRST, LAZY_RESCALE,
                         INT8_INF_SELECTS, WORKER_REGS, WINDOW_ALIGN, INT8_ROWMAX_LOCAL, RING_UNSIGNED,
                         K_DESCALE_PAIRED)),
            (_consumer, (o_smem2, shared, 2, HEAD_DIM, BLOCK_M, BLOCK_N, CAUSAL, NUM_STAGES, KEY_PERMUTED, SUM_ON_TC,
                         QK_INT8, BLOCK_DESCALE, V_NATURAL, PV_PIPELINED, VARLEN, Q_BUFFERS,
                         TILE_INFO_HANDOFF, Q_IN_REGS, HALF_LAST, HALF_FIRST, LAZY_RESCALE,
                         INT8_INF_SELECTS, WORKER_REGS, WINDOW_ALIGN, INT8_ROWMAX_LOCAL, RING_UNSIGNED,
                         K_DESCALE_PAIRED)),
            (_consumer, (o_smem3, shared, 3, HEAD_DIM, BLOCK_M, BLOCK_N, CAUSAL, NUM_STAGES, KEY_PERMUTED, SUM_ON_TC,
                         QK_INT8, BLOCK_DESCALE, V_NATURAL, PV_PIPELINED, VARLEN, Q_BUFFERS,
                         TILE_INFO_HANDOFF, Q_IN_REGS, HALF_LAST, HALF_FIRST, LAZY_RESCALE,
                         INT8_INF_SELECTS, WORKER_REGS, WINDOW_ALIGN, INT8_ROWMAX_LOCAL, RING_UNSIGNED,
                         K_DESCALE_PAIRED)),
            (_producer, (producer_args, HEAD_DIM, BLOCK_M, BLOCK_N, CAUSAL, NUM_STAGES, V_NATURAL, VARLEN,
                         TRANSPOSE_V, RAW_STAGES, Q_BUFFERS, TILE_INFO_HANDOFF, WINDOW_ALIGN)),
        ], [4, 4, 4, _producer_warps(TRANSPOSE_V)], [WORKER_REGS, WORKER_REGS, WORKER_REGS, 24])
    elif NUM_CONSUMERS == 3:
        gl.warp_specialize([
            (_consumer, (o_smem0, shared, 0, HEAD_DIM, BLOCK_M, BLOCK_N, CAUSAL, NUM_STAGES, KEY_PERMUTED, SUM_ON_TC,
                         QK_INT8, BLOCK_DESCALE, V_NATURAL, PV_PIPELINED, VARLEN, Q_BUFFERS,
                         TILE_INFO_HANDOFF, Q_IN_REGS, HALF_LAST, HALF_FIRST, LAZY_RESCALE,
                         INT8_INF_SELECTS, WORKER_REGS, WINDOW_ALIGN, INT8_ROWMAX_LOCAL, RING_UNSIGNED,
                         K_DESCALE_PAIRED)),
            (_consumer, (o_smem1, shared, 1, HEAD_DIM, BLOCK_M, BLOCK_N, CAUSAL, NUM_STAGES, KEY_PERMUTED, SUM_ON_TC,
                         QK_INT8, BLOCK_DESCALE, V_NATURAL, PV_PIPELINED, VARLEN, Q_BUFFERS,
                         TILE_INFO_HANDOFF, Q_IN_REGS, HALF_LAST, HALF_FIRST, LAZY_RESCALE,
                         INT8_INF_SELECTS, WORKER_REGS, WINDOW_ALIGN, INT8_ROWMAX_LOCAL, RING_UNSIGNED,
                         K_DESCALE_PAIRED)),
            (_consumer, (o_smem2, shared, 2, HEAD_DIM, BLOCK_M, BLOCK_N, CAUSAL, NUM_STAGES, KEY_PERMUTED, SUM_ON_TC,
                         QK_INT8, BLOCK_DESCALE, V_NATURAL, PV_PIPELINED, VARLEN, Q_BUFFERS,
                         TILE_INFO_HANDOFF, Q_IN_REGS, HALF_LAST, HALF_FIRST, LAZY_RESCALE,
                         INT8_INF_SELECTS, WORKER_REGS, WINDOW_ALIGN, INT8_ROWMAX_LOCAL, RING_UNSIGNED,
                         K_DESCALE_PAIRED)),
            (_producer, (producer_args, HEAD_DIM, BLOCK_M, BLOCK_N, CAUSAL, NUM_STAGES, V_NATURAL, VARLEN,
                         TRANSPOSE_V, RAW_STAGES, Q_BUFFERS, TILE_INFO_HANDOFF, WINDOW_ALIGN)),
        ], [4, 4, _producer_warps(TRANSPOSE_V)], [WORKER_REGS, WORKER_REGS, 24])
    else:
        gl.warp_specialize([
            (_consumer, (o_smem0, shared, 0, HEAD_DIM, BLOCK_M, BLOCK_N, CAUSAL, NUM_STAGES, KEY_PERMUTED, SUM_ON_TC,
                         QK_INT8, BLOCK_DESCALE, V_NATURAL, PV_PIPELINED, VARLEN, Q_BUFFERS,
                         TILE_INFO_HANDOFF, Q_IN_REGS, HALF_LAST, HALF_FIRST, LAZY_RESCALE,
                         INT8_INF_SELECTS, WORKER_REGS, WINDOW_ALIGN, INT8_ROWMAX_LOCAL, RING_UNSIGNED,
                         K_DESCALE_PAIRED)),
            (_consumer, (o_smem1, shared, 1, HEAD_DIM, BLOCK_M, BLOCK_N, CAUSAL, NUM_STAGES, KEY_PERMUTED, SUM_ON_TC,
                         QK_INT8, BLOCK_DESCALE, V_NATURAL, PV_PIPELINED, VARLEN, Q_BUFFERS,
                         TILE_INFO_HANDOFF, Q_IN_REGS, HALF_LAST, HALF_FIRST, LAZY_RESCALE,
                         INT8_INF_SELECTS, WORKER_REGS, WINDOW_ALIGN, INT8_ROWMAX_LOCAL, RING_UNSIGNED,
                         K_DESCALE_PAIRED)),
            (_producer, (producer_args, HEAD_DIM, BLOCK_M, BLOCK_N, CAUSAL, NUM_STAGES, V_NATURAL, VARLEN,
                         TRANSPOSE_V, RAW_STAGES, Q_BUFFERS, TILE_INFO_HANDOFF, WINDOW_ALIGN)),
        ], [4, _producer_warps(TRANSPOSE_V)], [WORKER_REGS, 24])
