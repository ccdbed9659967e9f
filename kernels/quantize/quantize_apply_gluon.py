"""The quantize operation's apply stage in Gluon: persistent, with the input blocks streamed in by TMA.

The same computation as quantize_triton.py's quantize_apply_kernel for the [b, s, h, d] output (Q and K; the V^T
layouts stay there), head dims 64 and 128, and the same result byte for byte (the GPU tests compare them,
tests/gpu/test_quantize.py; bench/sweep_quantize.py too for 64-token blocks):
y = x diag(signs) H / sqrt(d) (rotate), minus the head's mean (smooth), then a descale (this block's finite amax /
QMAX with per_block, else the one read from Descale[bh // group]) and q = saturate(y / descale) in e4m3 or int8.

Why a second kernel: the Triton apply is one program per 64-token block, so each program waits for its whole load
before the rotation and for the rotation before its stores, and stages the rotation matrix (8-32 KiB) in shared
memory again for every 16 KiB block it rotates. The rotated int8 applies read 1.1-1.4 TB/s where the unrotated
e4m3 ones read ~2.9 (docs/perf/NOTES.md, 2026-12-04). Here a program walks blocks pid, pid + programs, ... with
NUM_STAGES of them in flight through TMA (an mbarrier per slot), keeps the rotation matrix in shared memory for its
whole life (one load), rotates with one wgmma chain per 64 rows of a block (x from shared memory, the matrix as the
N-major B operand: 16-bit wgmma takes it), and stores the quantized block through shared memory and a TMA store that
runs under the next block's work (OUT_BUFFERS output buffers: codegen's gluon_apply_ring, 2 for 64-token blocks, 1
for 128-token ones).

Same numbers as the Triton kernel: the rotation is the same product (wgmma, K = 16 per instruction, in ascending
order, float32 accumulation: the Triton apply's tl.dot lowers to the same HGMMA chain), times the same 1/sqrt(d),
minus the same mean, and the descale and quantized values come from the Triton apply's own function
(quantize_triton.quantize_block, called here on y in this kernel's layout). Rows past seqlen are zero (TMA's fill;
after smoothing, masked to zero) and never stored (TMA clips the store).

BLOCK_S = 128 (the block_pair granularity, int8 K for the kpair attention instances): one descale per 128 tokens,
from the amax of both 64-row halves, written to both of the block's 64-token entries of Descale [batch, heads,
cdiv(seqlen, 64)] (the second only where it exists), as the Triton apply's PAIRED path; the rotation is two
64-row wgmmas of the same chain (rows are independent), so the bytes are the Triton paired apply's.

Host TMA descriptors (Triton order, innermost last):
    x_desc    X    [batch, seqlen, heads, HEAD_DIM]  bf16/fp16   block [1, BLOCK_S, 1, HEAD_DIM]
    out_desc  Out  [batch, seqlen, heads, HEAD_DIM]  e4m3/int8   block [1, BLOCK_S, 1, HEAD_DIM]
Descale: per_block, [batch, heads, cdiv(seqlen, 64)] written (64-token blocks: slot = item, num_blocks being that
count; 128-token blocks: num_blocks = cdiv(seqlen, 128), entries 2 blk and 2 blk + 1); else read at bh // group.
Mean: [batch * heads, HEAD_DIM] float32 (the stats and reduce stages'). Rotation: diag(signs) H [HEAD_DIM, HEAD_DIM]
in x's type, row-major (quantize_rotation_kernel's table). num_items = batch * heads * num_blocks; the grid is at
most that.
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

from quantize.quantize_triton import inv_sqrt, pair_slots, quantize_block


def buffer_bytes(head_dim, stages, out_buffers, block_s=64, in_bytes=2, out_bytes=1):
    """Shared memory of the kernel's buffers: the ring of input blocks, the output blocks and the rotation matrix
    (what sizes its programs an SM; the compiled kernel adds its mbarriers and reduction scratch, under 256 bytes:
    tests/cpu/test_quantize_gluon_compile.py)."""
    return ((stages * in_bytes + out_buffers * out_bytes) * block_s * head_dim
            + head_dim * head_dim * in_bytes)


@gluon.jit
def _place(item, num_blocks, heads):
    """(bh, block, b, h) of a work item: consecutive items are consecutive token blocks of one (batch, head), as the
    Triton apply's programs (its default order)."""
    bh = item // num_blocks
    blk = item % num_blocks
    return bh, blk, bh // heads, bh % heads


@gluon.jit
def _load_block(x_desc, buf, bar, item, num_blocks, heads, BLOCK_S: gl.constexpr):
    """TMA of one item's [BLOCK_S, HEAD_DIM] block into buf, completing on bar (rows past seqlen: zeros)."""
    bh, blk, b, h = _place(item, num_blocks, heads)
    mbarrier.expect(bar, x_desc.block_type.nbytes)
    tma.async_copy_global_to_shared(x_desc, [b, blk * BLOCK_S, h, 0], bar, buf)


@gluon.jit
def quantize_apply_gluon_kernel(
    x_desc, out_desc, Descale, Mean, Rotation,
    seqlen, heads, num_blocks, rotate, smooth, per_block, group, num_items,
    HEAD_DIM: gl.constexpr, BLOCK_S: gl.constexpr, OUT_INT8: gl.constexpr, NUM_STAGES: gl.constexpr,
    OUT_BUFFERS: gl.constexpr,
):
    # 64 rows: one wgmma M extent over the 4 warps; 128: a block_pair block (two of them, one descale).
    gl.static_assert(BLOCK_S == 64 or (BLOCK_S == 128 and OUT_INT8), "blocks of 64 tokens, or 128 (int8 block_pair)")
    PAIRED: gl.constexpr = BLOCK_S == 128
    gl.static_assert(HEAD_DIM == 64 or HEAD_DIM == 128, "head_dim 64 or 128 (256 rotates by factors: Triton apply)")
    gl.static_assert(gl.num_warps() == 4, "one warpgroup")
    # The rotation's accumulator, and the layout every later step keeps (no data moves between them).
    acc_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                         instr_shape=[16, HEAD_DIM, 16])
    rows_layout: gl.constexpr = gl.SliceLayout(1, acc_layout)
    cols_layout: gl.constexpr = gl.SliceLayout(0, acc_layout)
    INV_SQRT_D: gl.constexpr = inv_sqrt(HEAD_DIM)

    x_bufs = gl.allocate_shared_memory(x_desc.dtype, [NUM_STAGES] + x_desc.block_type.shape, x_desc.layout)
    # NUM_STAGES and OUT_BUFFERS: codegen/operations/quantize.py's (gluon_apply_ring), or a sweep's.
    # OUT_BUFFERS = 1: a store must have read its buffer before the next block's values go in,
    # and the shared memory saved lets one more program reside on an SM (64-token blocks at D=128 with a ring of 2:
    # 3 instead of 2; 128-token blocks at D=128: 2 instead of 1).
    out_bufs = gl.allocate_shared_memory(out_desc.dtype, [OUT_BUFFERS] + out_desc.block_type.shape, out_desc.layout)
    ready = gl.allocate_shared_memory(gl.int64, [NUM_STAGES, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(NUM_STAGES):
        mbarrier.init(ready.index(i), count=1)
    fence_async_shared()  # the initialized barriers visible to the TMA unit before its first load

    # diag(signs) H, [K = HEAD_DIM, N = HEAD_DIM] row-major: the N-major B operand of x @ R, loaded once.
    h_smem = gl.allocate_shared_memory(x_desc.dtype, [HEAD_DIM, HEAD_DIM],
                                       gl.NVMMASharedLayout(swizzle_byte_width=128, element_bitwidth=16, rank=2))
    if rotate != 0:
        ld: gl.constexpr = gl.BlockedLayout([1, 8], [32 // (HEAD_DIM // 8), HEAD_DIM // 8], [4, 1], [1, 0])
        r = gl.arange(0, HEAD_DIM, layout=gl.SliceLayout(1, ld))
        c = gl.arange(0, HEAD_DIM, layout=gl.SliceLayout(0, ld))
        h_smem.store(gl.load(Rotation + r[:, None] * HEAD_DIM + c[None, :]))
        fence_async_shared()
        gl.thread_barrier()

    pid = gl.program_id(0)
    step = gl.num_programs(0)
    mine = gl.cdiv(num_items - pid, step)  # items pid, pid + step, ... (the grid is at most num_items)
    for i in gl.static_range(NUM_STAGES):
        if i < mine:
            _load_block(x_desc, x_bufs.index(i), ready.index(i), pid + i * step, num_blocks, heads, BLOCK_S)

    offs_s = gl.arange(0, BLOCK_S, layout=rows_layout)
    offs_d = gl.arange(0, HEAD_DIM, layout=cols_layout)
    for i in range(0, mine):
        item = pid + i * step
        s = i % NUM_STAGES
        mbarrier.wait(ready.index(s), (i // NUM_STAGES) & 1)
        x_tile = x_bufs.index(s).reshape([BLOCK_S, HEAD_DIM])
        if rotate != 0:
            acc = warpgroup_mma(x_tile, h_smem, gl.zeros([BLOCK_S, HEAD_DIM], gl.float32, acc_layout), use_acc=False,
                                is_async=True)
            acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc, ))
            y = acc * INV_SQRT_D
        else:
            y = x_tile.load(acc_layout).to(gl.float32)
        # Every warp has read slot s: it takes the block NUM_STAGES items ahead.
        gl.thread_barrier()
        if i + NUM_STAGES < mine:
            _load_block(x_desc, x_bufs.index(s), ready.index(s), item + NUM_STAGES * step, num_blocks, heads, BLOCK_S)

        bh, blk, b, h = _place(item, num_blocks, heads)
        if smooth != 0:
            mean = gl.load(Mean + bh.to(gl.int64) * HEAD_DIM + offs_d)
            y = gl.where((blk * BLOCK_S + offs_s < seqlen)[:, None], y - mean[None, :], 0.0)
        # The descale and the quantized values: the Triton apply's own function, on y in this kernel's layout.
        if PAIRED:
            # num_blocks counts 128-token blocks here; Descale keeps its 64-token entries.
            slot, slot2 = pair_slots(bh, blk, seqlen)
            q = quantize_block(y, slot, bh, Descale, per_block, group, OUT_INT8, slot2, True)
        else:
            q = quantize_block(y, item, bh, Descale, per_block, group, OUT_INT8)

        # The store that last used this output buffer (OUT_BUFFERS items ago) has read it; then every warp writes
        # its part.
        out = out_bufs.index(i % OUT_BUFFERS)
        tma.store_wait(pendings=OUT_BUFFERS - 1)
        gl.thread_barrier()
        out.reshape([BLOCK_S, HEAD_DIM]).store(q)
        fence_async_shared()
        gl.thread_barrier()
        tma.async_copy_shared_to_global(out_desc, [b, blk * BLOCK_S, h, 0], out)
    tma.store_wait(pendings=0)
    for i in gl.static_range(NUM_STAGES):
        mbarrier.invalidate(ready.index(i))
