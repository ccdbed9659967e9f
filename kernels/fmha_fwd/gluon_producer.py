"""The Gluon attention kernel's producer partition: TMA loads of each query block's Q and of its K and V^T tiles into
the ring (_producer), V tiles of one packed sequence through a descriptor of its own rows (_sequence_v,
_load_v_rows), and the vnat instances' in-kernel V transpose (TRANSPOSE_V: _transpose_step, _transpose_v_tile).
fmha_fwd_gluon.py's docstring describes the design."""

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (
    fence_async_shared,
    mbarrier,
    tma,
)

from fmha_fwd.gluon_constants import WG_M
from fmha_fwd.gluon_schedule import _causal_section, _put_tile_info, _q_box, _q_slot, _tile, _tile_ahead


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
              RAW_STAGES: gl.constexpr, Q_BUFFERS: gl.constexpr, TILE_INFO_HANDOFF: gl.constexpr,
              WINDOW_ALIGN: gl.constexpr = 0):
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
            BLOCK_N, HEAD_DIM, CAUSAL, VARLEN, WINDOW_ALIGN)
        v_seq = _sequence_v(V, stride_vs, stride_vh, k_row0, sk0, heads_q // group_size, v_loaded, 0,
                            vt_desc, HEAD_DIM, BLOCK_N, V_SLOTS)
        v_seq_b = b0
    for tile in range(gl.program_id(0), num_tiles, gl.num_programs(0)):
        (b, h, h_kv, bh, start_m, lo_off, hi_off, n_start, lo_masked_end, full_end, n_end,
         bc, q_row, k_row, v_col, sq, sk, bad) = _tile(
            ahead, heads_q, group_size, seqlen_q, seqlen_k, window_left, window_right, total_q, total_k, BLOCK_M,
            BLOCK_N, HEAD_DIM, CAUSAL, VARLEN, WINDOW_ALIGN)
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
