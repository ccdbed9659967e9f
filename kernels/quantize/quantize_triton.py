"""Quantization of BF16/FP16 Q, K or V into the operands of the FP8 (and INT8 Q.K^T) attention kernels.

The input is [batch, seqlen, heads, head_dim] (head_dim contiguous, any other strides). A stats or apply program
owns one block of BLOCK_S tokens of one (batch, head), a reduce program one group, the rotation stage is one
program; the four kernels below are the stages of a quantization, which the runtime (src/quant/quantize.cpp)
launches in the order the options need:

    rotation (one program) diag(signs) H in the input's type, once per call (ROTATE at head dims <= 128)
    stats  (per block)   column sums of x (for K smoothing), or amax(|y - mean|) (for per-head/per-tensor scales)
    reduce (per group)   those partials -> mean[b, h, :] of y (the sums' mean, rotated) or descale = amax / QMAX
    apply  (per block)   y = rotate(x) - mean, descale (given, reduced, or this block's amax / QMAX),
                         q = saturate(y / descale) in e4m3 or int8, stored [b, s, h, d] or V^T [b, h, d, s_pad]

where y = x H / sqrt(head_dim) with H = diag(signs) times the Sylvester Hadamard matrix (ROTATE; exact: Q H and
K H give the same scores) and mean is y's mean over the sequence of that (batch, head) (SMOOTH, K only: every
score of a query row moves by the same amount, softmax does not change).

Why a rotation stage: building the [D, D] matrix of +-1 from the seed costs ~11 integer instructions per entry,
about 1400 per thread at D=128 (more than quantizing the thread's values); every program of stats and apply did
it. Built once into the workspace, it is read by every program from L2 (8-32 KiB, the same bytes for all).

Exactness of the rotation: x (bf16 or fp16) and the +-1 entries of H are exact in the MMA's input format and the
products accumulate in float32, so y differs from the float64 rotation only by float32 accumulation and one
multiply by 1/sqrt(head_dim); the mean is subtracted after the rotation for the same reason.

Non-finite inputs: amax is taken over finite values only, so one Inf or NaN cannot zero a whole block; +-Inf
then saturates to the largest finite value and NaN stays NaN (e4m3) or becomes 0 (int8, which has no NaN).
"""

import triton
import triton.language as tl
from triton.runtime.jit import constexpr_function

from common.numerics import (DESCALE_BLOCK_TOKENS, E4M3_MAX, HASH_INDEX_MUL, HASH_MIX_MUL, HASH_SEED_MUL,
                             INT8_QMAX, ROTATION_TABLE_MAX_HEAD_DIM)

_E4M3_MAX = tl.constexpr(E4M3_MAX)
_INT8_MAX = tl.constexpr(INT8_QMAX)
_SEED_MUL = tl.constexpr(HASH_SEED_MUL)
_INDEX_MUL = tl.constexpr(HASH_INDEX_MUL)
_MIX_MUL = tl.constexpr(HASH_MIX_MUL)
_DESCALE_BLOCK = tl.constexpr(DESCALE_BLOCK_TOKENS)
# Adding then subtracting 1.5 * 2^23 rounds a float32 of magnitude < 2^22 to the nearest integer, ties to even.
_ROUND_MAGIC = tl.constexpr(12582912.0)
# Head dims whose rotation reads the matrix the rotation stage wrote (at 256 it would be 128 KiB of shared memory
# for the MMA; that head dim multiplies by the factors H_16 (x) H_16 instead). The same constant sizes the stage
# (codegen/operations/quantize.py) and decides which calls launch it (src/quant/quantize.cpp).
ROTATION_TABLE_MAX_DIM = tl.constexpr(ROTATION_TABLE_MAX_HEAD_DIM)


@constexpr_function
def inv_sqrt(n):
    """1 / sqrt(n) as a compile-time constant (the float32 nearest to it once it reaches the kernel)."""
    return 1.0 / float(n) ** 0.5


@triton.jit
def _sylvester(N: tl.constexpr):
    """[N, N] Sylvester Hadamard matrix (N <= 256): entry (i, j) is (-1)^popcount(i & j)."""
    i = tl.arange(0, N)
    return _sylvester_entries(i[:, None], i[None, :])


@triton.jit
def _sylvester_entries(i, j):
    """(-1)^popcount(i & j) for i, j < 256 (broadcast): Sylvester's H_n is the top-left block of H_2n."""
    bits = i & j  # < 256: the parity of 8 bits by folding
    bits = bits ^ (bits >> 4)
    bits = bits ^ (bits >> 2)
    bits = bits ^ (bits >> 1)
    return 1.0 - 2.0 * (bits & 1).to(tl.float32)


@triton.jit
def _hadamard_signs(seed, HEAD_DIM: tl.constexpr):
    """[HEAD_DIM] of +-1: common/numerics.py's hadamard_sign(seed, i)."""
    return _signs_of(seed, tl.arange(0, HEAD_DIM))


@triton.jit
def _signs_of(seed, i):
    """+-1 for each row index in i: common/numerics.py's hadamard_sign(seed, i)."""
    # uint32 arithmetic throughout (the constants made uint32 too: as Python ints they would widen to 64 bits).
    i = i.to(tl.uint32)
    seed_mul = tl.full([], _SEED_MUL, tl.uint32)
    index_mul = tl.full([], _INDEX_MUL, tl.uint32)
    mix_mul = tl.full([], _MIX_MUL, tl.uint32)
    # tl.cast, not seed.to: Triton's JIT specializes an int argument equal to 1 as a constant, which has no .to
    # (bench/sweep_quantize.py with seed 1 failed to compile that way; the ahead-of-time signature never does).
    h = tl.cast(seed, tl.uint32) * seed_mul + i * index_mul
    h = h ^ (h >> 15)
    h = h * mix_mul
    h = h ^ (h >> 12)
    return 1.0 - 2.0 * (h & 1).to(tl.float32)


@triton.jit
def _rotate(x, seed, Rotation, HEAD_DIM: tl.constexpr, BLOCK_S: tl.constexpr):
    """x diag(signs) H, unnormalized, in float32 (x: the bf16/fp16 input; Rotation: diag(signs) H [HEAD_DIM,
    HEAD_DIM] in x's type, written by quantize_rotation_kernel, for HEAD_DIM <= ROTATION_TABLE_MAX_DIM)."""
    if HEAD_DIM <= ROTATION_TABLE_MAX_DIM:
        # +-1 is exact in bf16 and fp16, so H in x's own type makes every product of the MMA exact and its
        # float32 sums the only rounding, as a tf32 product of the float32 values would, at twice tf32's rate and
        # with half its shared memory for H (the rotation made the apply pass compute-bound).
        i = tl.arange(0, HEAD_DIM)
        h = tl.load(Rotation + i[:, None] * HEAD_DIM + i[None, :])
        y = tl.dot(x, h, out_dtype=tl.float32)
    else:
        # D=256 would need 128 KiB for H: use H_256 = H_16 (x) H_16 (Sylvester's entry (-1)^popcount(i & j)
        # factors over the two 4-bit halves of i and j). The signs go on x first; the first product reads
        # exact inputs (tf32), the second float32 partial sums (tf32x3: about float32's precision).
        tl.static_assert(HEAD_DIM == 256, "the quantize kernel rotates head dims up to 256")
        x = x.to(tl.float32) * _hadamard_signs(seed, HEAD_DIM)[None, :]
        h16 = _sylvester(16)
        t = tl.dot(tl.reshape(x, [BLOCK_S * 16, 16]), h16, input_precision="tf32")  # rows (s, hi), cols lo'
        t = tl.reshape(tl.permute(tl.reshape(t, [BLOCK_S, 16, 16]), (0, 2, 1)), [BLOCK_S * 16, 16])
        t = tl.dot(t, h16, input_precision="tf32x3")  # rows (s, lo'), cols hi'
        y = tl.reshape(tl.permute(tl.reshape(t, [BLOCK_S, 16, 16]), (0, 2, 1)), [BLOCK_S, HEAD_DIM])
    return y


@triton.jit
def _butterfly(x, WIDTH: tl.constexpr, H: tl.constexpr):
    """One stage of _fwht: (x[i], x[i + H]) -> (x[i] + x[i + H], x[i] - x[i + H]) for every i with bit H clear,
    each element's pair found by viewing x as [WIDTH / 2H, 2, H]; nothing where H >= WIDTH."""
    if H < WIDTH:
        pairs = tl.permute(tl.reshape(x, [WIDTH // (2 * H), 2, H]), (0, 2, 1))  # [blocks, H, 2]
        a, b = tl.split(pairs)
        x = tl.reshape(tl.permute(tl.join(a + b, a - b), (0, 2, 1)), [WIDTH])
    return x


@triton.jit
def _fwht(v, WIDTH: tl.constexpr):
    """v H_WIDTH (Sylvester's order, unnormalized) for v [WIDTH], WIDTH a power of two up to 512: the fast
    Walsh-Hadamard transform, log2(WIDTH) butterfly stages, WIDTH * log2(WIDTH) additions where the dense product
    spends WIDTH^2 multiply-adds and Sylvester's entries."""
    tl.static_assert(WIDTH <= 512, "_fwht: up to 512 points (nine stages below)")
    x = v
    for stage in tl.static_range(9):  # unrolled; the stages at or past WIDTH do nothing
        x = _butterfly(x, WIDTH, 1 << stage)
    return x


@triton.jit
def _rotate_vector(v, seed, width, WIDTH: tl.constexpr):
    """v diag(signs) H / sqrt(width) for one vector v [WIDTH] (zero past width, width <= WIDTH a power of two)
    through _fwht: the first width entries of the WIDTH-point transform are the width-point one (H_width is
    H_WIDTH's top-left block)."""
    return _fwht(v * _hadamard_signs(seed, WIDTH), WIDTH) / tl.sqrt_rn(width.to(tl.float32))


@triton.jit
def _load_block(X, b, h, s0, seqlen, stride_xb, stride_xh, stride_xs, KEY_PERMUTED: tl.constexpr,
                HEAD_DIM: tl.constexpr, BLOCK_S: tl.constexpr):
    """x of one block's tokens as stored (rows past seqlen 0), the row mask and the block's positions. With
    KEY_PERMUTED, row r of the block holds token s0 + perm(r) (V^T in the Gluon kernel's key order)."""
    offs = s0 + tl.arange(0, BLOCK_S)
    tokens = offs
    if KEY_PERMUTED:
        r = offs % 32
        tokens = offs - r + (r // 16) * 16 + ((r // 2) % 2) * 8 + ((r // 4) % 4) * 2 + r % 2
    offs_d = tl.arange(0, HEAD_DIM)
    rows = tokens < seqlen
    base = X + b.to(tl.int64) * stride_xb + h.to(tl.int64) * stride_xh
    x = tl.load(base + tokens.to(tl.int64)[:, None] * stride_xs + offs_d[None, :], mask=rows[:, None], other=0.0)
    return x, rows, offs


@triton.jit
def _transform(x, rows, b, h, Mean, Rotation, heads, seed, rotate, smooth, HEAD_DIM: tl.constexpr,
               BLOCK_S: tl.constexpr, INV_SQRT_D: tl.constexpr):
    """y of a loaded block: rotated (rotate), its head's mean subtracted (smooth; rows past seqlen stay 0)."""
    if rotate != 0:
        y = _rotate(x, seed, Rotation, HEAD_DIM, BLOCK_S) * INV_SQRT_D
    else:
        y = x.to(tl.float32)
    if smooth != 0:
        offs_d = tl.arange(0, HEAD_DIM)
        mean = tl.load(Mean + (b * heads + h).to(tl.int64) * HEAD_DIM + offs_d)
        y = tl.where(rows[:, None], y - mean[None, :], 0.0)
    return y


@triton.jit
def _load_transformed(X, b, h, s0, seqlen, stride_xb, stride_xh, stride_xs, Mean, Rotation, heads, seed, rotate,
                      smooth,
                      KEY_PERMUTED: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_S: tl.constexpr,
                      INV_SQRT_D: tl.constexpr):
    """y for the tokens of one block (rows past seqlen are 0, also after smoothing), the row mask and the block's
    positions (_load_block, _transform)."""
    x, rows, offs = _load_block(X, b, h, s0, seqlen, stride_xb, stride_xh, stride_xs, KEY_PERMUTED, HEAD_DIM,
                                BLOCK_S)
    y = _transform(x, rows, b, h, Mean, Rotation, heads, seed, rotate, smooth, HEAD_DIM, BLOCK_S, INV_SQRT_D)
    return y, rows, offs


@triton.jit
def _program(num_blocks, heads, HEADS_FASTEST: tl.constexpr):
    """(slot, token block, batch * heads + head, batch, head) of this program of the one-dimensional grid. slot =
    (batch * heads + head) * num_blocks + block: where the block's partials and descale go, whatever the order.
    HEADS_FASTEST = False: consecutive programs take consecutive token blocks of one head; True: the heads of one
    token block (programs running side by side then read whole rows [b, s0:s0 + BLOCK_S, :, :], contiguous in the
    usual [b, s, h, d] layout, instead of one head's 2 * HEAD_DIM bytes of each row, heads * 2 * HEAD_DIM apart)."""
    return _item(tl.program_id(0), num_blocks, heads, HEADS_FASTEST)


@triton.jit
def _item(pid, num_blocks, heads, HEADS_FASTEST: tl.constexpr):
    """_program's split of one work item's index (a program's, or a persistent program's pid, pid + programs,
    ...)."""
    if HEADS_FASTEST:
        h = pid % heads
        rest = pid // heads
        blk = rest % num_blocks
        b = rest // num_blocks
        bh = b * heads + h
        slot = bh * num_blocks + blk
    else:
        slot = pid
        bh = pid // num_blocks
        blk = pid % num_blocks
        b = bh // heads
        h = bh % heads
    return slot, blk, bh, b, h


@triton.jit
def _finite_amax(y):
    """The largest finite |y| of the block. The plain maximum first (one FMNMX an element: max.f32 passes over
    NaN, and |y| is an operand modifier); only a block holding +-Inf (or, where the maximum propagates NaN, as
    in Triton's interpreter, NaN) takes the second pass that leaves the non-finite values out (two more
    instructions an element, which every block used to pay)."""
    amax = tl.max(tl.max(tl.abs(y), axis=1), axis=0)
    if not (amax < float("inf")):
        amax = tl.max(tl.max(tl.where(tl.abs(y) < float("inf"), tl.abs(y), 0.0), axis=1), axis=0)
    return amax


@triton.jit
def quantize_rotation_kernel(Rotation, width, seed, WIDTH: tl.constexpr, ROWS: tl.constexpr = 16):
    """One program: Rotation[i, j] = sign(i) * (-1)^popcount(i & j) for i, j < width (a power of two <= WIDTH),
    row-major with row stride width, in Rotation's type (+-1 is exact in bf16 and fp16). Sylvester's H_width is
    the top-left block of H_WIDTH and the signs depend on the row index alone, so one instance serves every
    head dim up to WIDTH. ROWS rows at a time (the whole [128, 128] at once spilled)."""
    cols = tl.arange(0, WIDTH)
    for r0 in tl.range(0, width, ROWS):
        rows = r0 + tl.arange(0, ROWS)
        h = _signs_of(seed, rows)[:, None] * _sylvester_entries(rows[:, None], cols[None, :])
        inside = (rows[:, None] < width) & (cols[None, :] < width)
        tl.store(Rotation + rows[:, None] * width + cols[None, :], h.to(Rotation.dtype.element_ty), mask=inside)


@triton.jit
def quantize_stats_kernel(
    X, Mean, Rotation, PartialSum, PartialAmax,
    seqlen, heads, num_blocks, seed, rotate, smooth, what, sample_stride,
    stride_xb, stride_xh, stride_xs,
    HEAD_DIM: tl.constexpr, BLOCK_S: tl.constexpr, HEADS_FASTEST: tl.constexpr = False,
):
    """what == 0: PartialSum[b, h, blk, :] = column sums of x over token block blk * sample_stride (not rotated:
    the rotation is linear, so the reduce stage rotates the mean instead of this pass rotating every token).
    sample_stride > 1 samples every sample_stride-th block for the smoothing mean (num_blocks: the sampled ones).
    what == 1: PartialAmax[b, h, blk] = the block's finite amax of y (rotated, smoothed when smooth); every block
    (sample_stride 1). HEADS_FASTEST: the programs' order (_program)."""
    slot, blk, bh, b, h = _program(num_blocks, heads, HEADS_FASTEST)
    y, rows, offs = _load_transformed(X, b, h, blk * sample_stride * BLOCK_S, seqlen, stride_xb, stride_xh, stride_xs,
                                      Mean, Rotation, heads, seed, (what != 0) & (rotate != 0),
                                      (what != 0) & (smooth != 0), False,
                                      HEAD_DIM, BLOCK_S, inv_sqrt(HEAD_DIM))
    if what == 0:
        offs_d = tl.arange(0, HEAD_DIM)
        tl.store(PartialSum + slot.to(tl.int64) * HEAD_DIM + offs_d, tl.sum(y, axis=0))
    else:
        tl.store(PartialAmax + slot, _finite_amax(y))


@triton.jit
def quantize_reduce_kernel(
    Partial, Out, count, width, divisor, qmax, seed, rotate,
    WIDTH: tl.constexpr, CHUNK: tl.constexpr,
):
    """Program g reduces Partial[g, 0:count, 0:width] (float32, contiguous) over its middle axis.
    divisor > 0: Out[g, :] = sum / divisor (the mean of a head's x), rotated as the apply stage rotates x when
    rotate (width a power of two: a head dim), so Out holds the mean of y. divisor == 0: width is 1 and
    Out[g] = max / qmax, or 1 where the max is 0 (an all-zero group: any descale reproduces it)."""
    g = tl.program_id(0)
    base = Partial + g.to(tl.int64) * count * width
    offs_w = tl.arange(0, WIDTH)
    if divisor > 0:
        total = tl.zeros([WIDTH], dtype=tl.float32)
        row = base  # advanced as a pointer: count * width may pass 2^31
        for _ in tl.range(0, count):
            total += tl.load(row + offs_w, mask=offs_w < width, other=0.0)
            row += width
        mean = total / divisor
        if rotate != 0:
            # The fast transform: a dense product with Sylvester's entries made this reduction the int8_qk recipe's
            # third-costliest kernel at B=64 S=512 (2048 heads: ~60 us of 1301, H100, docs/perf/NOTES.md).
            mean = _rotate_vector(tl.where(offs_w < width, mean, 0.0), seed, width, WIDTH)
        tl.store(Out + g.to(tl.int64) * width + offs_w, mean, mask=offs_w < width)
    else:
        offs_c = tl.arange(0, CHUNK)
        running = tl.zeros([CHUNK], dtype=tl.float32)
        for i in tl.range(0, count, CHUNK):
            running = tl.maximum(running, tl.load(base + i + offs_c, mask=i + offs_c < count, other=0.0))
        amax = tl.max(running, axis=0)
        tl.store(Out + g, tl.where(amax > 0.0, amax / qmax, 1.0))


@triton.jit
def quantize_block(y, slot, bh, Descale, per_block, group, OUT_INT8: tl.constexpr, slot2=-1,
                   PAIRED: tl.constexpr = False):
    """One block of y quantized: its descale (per_block: this block's finite amax / QMAX, written to Descale[slot],
    and with PAIRED to Descale[slot2] too where slot2 >= 0; else read at Descale[bh // group]) and the e4m3 or int8
    values. Elementwise work, reductions and scalar loads and stores only, so the Gluon apply
    (quantize_apply_gluon.py) calls it too on y in its own layout: both applies compute the same bytes with the
    same operations."""
    if OUT_INT8:
        qmax = _INT8_MAX
    else:
        qmax = _E4M3_MAX
    if per_block != 0:
        amax = _finite_amax(y)
        descale = tl.where(amax > 0.0, amax / qmax, 1.0)
        tl.store(Descale + slot, descale)
        if PAIRED:
            if slot2 >= 0:
                tl.store(Descale + slot2, descale)
    else:
        descale = tl.load(Descale + bh // group)
    # One reciprocal a block (correctly rounded) and a multiply an element (y / descale was div.full.f32: a
    # multiply and its range scaling, three instructions an element); a descale below 2^-128, whose reciprocal
    # overflows, keeps the division.
    inv = tl.math.div_rn(1.0, descale)
    if inv < float("inf"):
        z = y * inv
    else:
        z = y / descale
    if OUT_INT8:
        # NaN -> 0 (int8 has no NaN), saturate, then round to the nearest integer, ties to even, by adding 1.5 * 2^23:
        # the sum's bits are 0x4B400000 + the integer (|z| <= 127), whose low byte is the int8 itself, so a
        # truncating cast takes it (no subtraction back, no float-to-int conversion: F2I runs at a quarter of the
        # FMA rate; the same int8 bits as rounding, subtracting and converting, checked over every tie and NaN/Inf).
        z = tl.minimum(tl.maximum(tl.where(z == z, z, 0.0), -qmax), qmax)
        q = (z + _ROUND_MAGIC).to(tl.int32, bitcast=True).to(tl.int8)
    else:
        # The conversion saturates: cvt.rn.satfinite.e4m3x2.f32 takes |z| > 448 (+-Inf included) to +-448 and
        # keeps NaN (the explicit clamp and NaN test before it were four instructions an element).
        q = z.to(tl.float8e4nv)
    return q


@triton.jit
def pair_slots(bh, blk, seqlen):
    """block_pair: where 128-token block blk of (batch, head) bh writes its descale in Descale [batch, heads,
    cdiv(seqlen, 64)]: both of its 64-token entries, (slot, slot + 1), the second -1 where the sequence ends
    inside the block's first half. Both applies (this file's PAIRED path and quantize_apply_gluon.py) call it."""
    entries = tl.cdiv(seqlen, _DESCALE_BLOCK)
    slot = bh * entries + 2 * blk
    return slot, tl.where(2 * blk + 1 < entries, slot + 1, -1)


@triton.jit
def _quantize_store(y, offs, slot, bh, b, h, Out, Descale, seqlen, per_block, group, seqlen_pad, vt, stride_ob,
                    stride_oh, stride_os, HEAD_DIM: tl.constexpr, OUT_INT8: tl.constexpr, blk=0,
                    PAIRED: tl.constexpr = False):
    """The apply's second half for one block of y: quantize_block, then the store. PAIRED (128-token blocks, [b, s,
    h, d] output): the block's descale goes to both of its 64-token entries of Descale [batch, heads,
    cdiv(seqlen, 64)] (the second only where it exists), the layout the kpair attention instances read."""
    slot2 = -1
    if PAIRED:
        slot, slot2 = pair_slots(bh, blk, seqlen)
    q = quantize_block(y, slot, bh, Descale, per_block, group, OUT_INT8, slot2, PAIRED)
    offs_d = tl.arange(0, HEAD_DIM)
    if vt != 0:
        dst = Out + bh.to(tl.int64) * HEAD_DIM * seqlen_pad
        tl.store(dst + offs_d.to(tl.int64)[:, None] * seqlen_pad + offs[None, :], tl.trans(q),
                 mask=offs[None, :] < seqlen_pad)
    else:
        dst = Out + b.to(tl.int64) * stride_ob + h.to(tl.int64) * stride_oh
        tl.store(dst + offs.to(tl.int64)[:, None] * stride_os + offs_d[None, :], q, mask=offs[:, None] < seqlen)


@triton.jit
def quantize_apply_kernel(
    X, Out, Descale, Mean, Rotation,
    seqlen, heads, num_blocks, seed, rotate, smooth, per_block, group, seqlen_pad, vt, num_items,
    stride_xb, stride_xh, stride_xs, stride_ob, stride_oh, stride_os,
    HEAD_DIM: tl.constexpr, BLOCK_S: tl.constexpr, OUT_INT8: tl.constexpr, KEY_PERMUTED: tl.constexpr,
    HEADS_FASTEST: tl.constexpr = False, PERSISTENT: tl.constexpr = False, PAIRED: tl.constexpr = False,
):
    """per_block != 0: this block's descale (finite amax / QMAX, 1 if 0) is computed and written to
    Descale[b, h, blk]; else Descale[(b * heads + h) // group] is read (per tensor: group = batch * heads).
    vt == 0: Out[b, s, h, :] with the given strides; vt != 0: Out is V^T [b, h, HEAD_DIM, seqlen_pad], packed,
    positions in [seqlen, seqlen_pad) written with zeros (KEY_PERMUTED: the Gluon kernel's key order).
    HEADS_FASTEST: the programs' order (_program). num_items: batch * heads * num_blocks, the blocks to quantize.
    PERSISTENT: fewer programs than blocks, each taking blocks pid, pid + programs, ... and loading the next
    block's input into registers before it rotates and stores the current one (a one-block program waits for its
    whole load before its MMA and for the MMA before its stores; with its next load in flight a program keeps
    HBM busy through those phases)."""
    if PERSISTENT:
        step = tl.num_programs(0)
        it = tl.program_id(0)
        slot, blk, bh, b, h = _item(tl.minimum(it, num_items - 1), num_blocks, heads, HEADS_FASTEST)
        x, rows, offs = _load_block(X, b, h, blk * BLOCK_S, tl.where(it < num_items, seqlen, 0), stride_xb, stride_xh,
                                    stride_xs, KEY_PERMUTED, HEAD_DIM, BLOCK_S)
        while it < num_items:
            nxt = it + step
            # The next block's load, issued before this block's work; past the last block, every row masked off
            # (seqlen 0): no bytes move.
            slot_n, blk_n, bh_n, b_n, h_n = _item(tl.minimum(nxt, num_items - 1), num_blocks, heads, HEADS_FASTEST)
            x_n, rows_n, offs_n = _load_block(X, b_n, h_n, blk_n * BLOCK_S, tl.where(nxt < num_items, seqlen, 0),
                                              stride_xb, stride_xh, stride_xs, KEY_PERMUTED, HEAD_DIM, BLOCK_S)
            y = _transform(x, rows, b, h, Mean, Rotation, heads, seed, rotate, smooth, HEAD_DIM, BLOCK_S,
                           inv_sqrt(HEAD_DIM))
            _quantize_store(y, offs, slot, bh, b, h, Out, Descale, seqlen, per_block, group, seqlen_pad, vt,
                            stride_ob, stride_oh, stride_os, HEAD_DIM, OUT_INT8, blk, PAIRED)
            it = nxt
            slot, blk, bh, b, h = slot_n, blk_n, bh_n, b_n, h_n
            x, rows, offs = x_n, rows_n, offs_n
    else:
        slot, blk, bh, b, h = _program(num_blocks, heads, HEADS_FASTEST)
        y, rows, offs = _load_transformed(X, b, h, blk * BLOCK_S, seqlen, stride_xb, stride_xh, stride_xs, Mean,
                                          Rotation, heads, seed, rotate, smooth, KEY_PERMUTED, HEAD_DIM, BLOCK_S,
                                          inv_sqrt(HEAD_DIM))
        _quantize_store(y, offs, slot, bh, b, h, Out, Descale, seqlen, per_block, group, seqlen_pad, vt, stride_ob,
                        stride_oh, stride_os, HEAD_DIM, OUT_INT8, blk, PAIRED)
