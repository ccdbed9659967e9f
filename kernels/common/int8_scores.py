"""INT8 Q.K^T's scores in float32: one definition for the Triton and the Gluon attention kernels (a @triton.jit
function called from a Gluon kernel is compiled as Gluon; these use scalar loads and elementwise operations only,
so the layouts are the caller's)."""

import triton
import triton.language as tl

from common import numerics

DESCALE_BLOCK = tl.constexpr(numerics.DESCALE_BLOCK_TOKENS)
INT_TO_FLOAT_BITS = tl.constexpr(numerics.INT_TO_FLOAT_BITS)
INT_TO_FLOAT_OFFSET = tl.constexpr(numerics.INT_TO_FLOAT_OFFSET)


@triton.jit
def key_block_descale_pair(kd_base, k_descale_stride_blk, start_n, seqlen_k):
    """The block descales of the two 64-key blocks a tile at start_n can span (a tile of BLOCK_N <= 128 keys,
    starting on a multiple of 64; the Gluon kernel's 256-key INT8 tiles read four with key_block_descale_at): two
    scalar loads. A block past seqlen_k gets 1.0 (its keys are masked)."""
    blk = start_n // DESCALE_BLOCK
    kd0 = tl.load(kd_base + blk.to(tl.int64) * k_descale_stride_blk)
    kd1 = tl.load(kd_base + (blk + 1).to(tl.int64) * k_descale_stride_blk,
                  mask=(blk + 1) * DESCALE_BLOCK < seqlen_k, other=1.0)
    return kd0, kd1


@triton.jit
def key_block_descale_at(kd_base, k_descale_stride_blk, blk, seqlen_k):
    """Block blk's descale, 1.0 for a block past seqlen_k (its keys are masked; the descales end there)."""
    return tl.load(kd_base + blk.to(tl.int64) * k_descale_stride_blk, mask=blk * DESCALE_BLOCK < seqlen_k, other=1.0)


@triton.jit
def key_block_descales(kd_base, k_descale_stride_blk, start_n, cols, seqlen_k):
    """Each key column's block descale for the tile at start_n; cols: the tile's column offsets 0 .. BLOCK_N - 1
    in the caller's layout: key_block_descale_pair's two and a select (a load per column cost a load per score
    column and thread)."""
    kd0, kd1 = key_block_descale_pair(kd_base, k_descale_stride_blk, start_n, seqlen_k)
    return tl.where(cols < DESCALE_BLOCK, kd0, kd1)


@triton.jit
def int8_scores(qk, kd, BLOCK_DESCALE: tl.constexpr):
    """int32 sums of int8 products (|x| < 2^22) to float32 by an integer add, not I2F (common/numerics.py:
    INT_TO_FLOAT_BITS; I2F issues on the pipe of MUFU.EX2, and one per score doubled that pipe's load), times each
    key column's descale kd with BLOCK_DESCALE. x * kd = (1.5 * 2^23 + x) * kd - 1.5 * 2^23 * kd: one FFMA per
    score; the column constant's rounding (at most 0.75 kd, i.e. 0.75 units of the integer product) is a per-key
    bias far below the int8 rounding of the scores themselves (about 0.5 * 127 * sqrt(D) units)."""
    qk = (qk + INT_TO_FLOAT_BITS).to(tl.float32, bitcast=True)
    if BLOCK_DESCALE:
        qk = qk * kd[None, :] - (kd * INT_TO_FLOAT_OFFSET)[None, :]
    else:
        qk = qk - INT_TO_FLOAT_OFFSET
    return qk
