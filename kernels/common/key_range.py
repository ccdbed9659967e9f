"""The keys one query block of an attention kernel sees, causal masks and sliding windows included: one
definition for the Triton and the Gluon attention kernels (a @triton.jit function called from a Gluon kernel is
compiled as Gluon; it uses scalar operations only)."""

import triton
import triton.language as tl


@triton.jit
def key_range(start_m, seqlen_q, seqlen_k, window_left, window_right, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
              CAUSAL: tl.constexpr, ALIGN: tl.constexpr = 0):
    """Bounds for the query block [start_m, start_m + BLOCK_M): row i sees keys i + lo_off <= j <= i + hi_off
    (and j < seqlen_k), FlashAttention's window convention bottom-right aligned (c = seqlen_k - seqlen_q; -1:
    unlimited side; causal caps the right side at c). Returns (lo_off, hi_off, n_start, lo_masked_end,
    full_end, n_end): keys [n_start, lo_masked_end) are masked (a window's left edge), [lo_masked_end, full_end)
    need no mask, [full_end, n_end) are masked (sequence end, causal diagonal, a window's right edge); keys
    outside [n_start, n_end) are never loaded. n_start, lo_masked_end and full_end are multiples of BLOCK_N
    (with ALIGN: n_start of ALIGN, the other two on the tiles' grid from it, or n_end).

    ALIGN (0: off; a divisor of BLOCK_N, e.g. 128 with 256-key tiles): the tiles start at n_start, the multiple of
    ALIGN at or below the block's lowest visible key, instead of the multiple of BLOCK_N there; lo_masked_end and
    full_end lie on that grid (n_start + k * BLOCK_N). Under a left window the first tile then wastes less than ALIGN
    keys instead of up to BLOCK_N - 1: with 128-row blocks, 256-key tiles and a 4k window every block visits 16.5
    tiles (the last half: the Gluon kernel's HALF_LAST) instead of 16.5 and 17 alternately."""
    causal_offset = seqlen_k - seqlen_q
    # Unlimited, exactly: every row of this block (i >= start_m) reaches j = seqlen_k with it, and the sums below
    # stay within seqlen_k + BLOCK_M + 1 (with hi_off = seqlen_k, i + hi_off passed 2^31 once seqlen_q + seqlen_k
    # did).
    hi_off = seqlen_k - start_m
    if CAUSAL:
        hi_off = causal_offset
    # Window sums in 64 bits (a window near 2^31 must not wrap), then clamped back into int32's range.
    if window_right >= 0:
        hi_off = tl.minimum(hi_off.to(tl.int64), causal_offset.to(tl.int64) + window_right).to(tl.int32)
    lo_off = -(start_m + BLOCK_M)  # no row of this block looks below j = 0 with it: unlimited, exactly
    if window_left >= 0:
        lo_off = tl.maximum(lo_off.to(tl.int64), causal_offset.to(tl.int64) - window_left).to(tl.int32)
    hi_off = tl.minimum(hi_off, seqlen_k)
    # Keys every row of the block sees lie below the first row's upper limit; keys past the last row's are
    # never loaded; keys below the first row's lower limit neither (a window's far side).
    if ALIGN:
        # The tile grid n_start + k * BLOCK_N: the first row's upper limit rounded down onto it (a tile below it
        # ends inside the sequence and below every row's upper limit), the last row's lower limit rounded up.
        n_end = tl.minimum(seqlen_k, tl.maximum(start_m + BLOCK_M + hi_off, 0))
        n_start = tl.maximum(start_m + lo_off, 0) // ALIGN * ALIGN
        n_full = n_start + tl.maximum(tl.minimum(start_m + hi_off + 1, seqlen_k) - n_start, 0) // BLOCK_N * BLOCK_N
        n_lo_full = n_start + (tl.maximum(start_m + BLOCK_M - 1 + lo_off - n_start, 0) + BLOCK_N - 1) // BLOCK_N * \
            BLOCK_N
    else:
        n_full = tl.minimum((seqlen_k // BLOCK_N) * BLOCK_N,
                            tl.maximum(tl.minimum(start_m + hi_off + 1, seqlen_k), 0) // BLOCK_N * BLOCK_N)
        n_end = tl.minimum(seqlen_k, tl.maximum(start_m + BLOCK_M + hi_off, 0))
        n_start = tl.maximum(start_m + lo_off, 0) // BLOCK_N * BLOCK_N
        # Tiles below the last row's lower limit are seen by some rows only: masked.
        n_lo_full = (tl.maximum(start_m + BLOCK_M - 1 + lo_off, 0) + BLOCK_N - 1) // BLOCK_N * BLOCK_N
    lo_masked_end = tl.minimum(tl.maximum(n_lo_full, n_start), n_end)
    full_end = tl.maximum(lo_masked_end, n_full)
    return lo_off, hi_off, n_start, lo_masked_end, full_end, n_end


@triton.jit
def keep_mask(cols, rows, lo_off, hi_off, seqlen_k):
    """The [rows, cols] mask of a masked tile: row i keeps key j when i + lo_off <= j <= i + hi_off and j < seqlen_k
    (key_range's lo_off / hi_off). One unsigned compare per score: j - lo_i < width_i with width_i the row's count
    of visible keys from lo_i (0 when none; a negative j - lo_i wraps to a large unsigned value). Written as two
    compares, ptxas kept two ISETP and two FSEL per score (the masked branch of the Gluon loop 160 -> 288
    instructions when the window's lower bound came in). No overflow: lo_i = i + lo_off lies in
    [-BLOCK_M, seqlen_k + BLOCK_M] (the upper end for padding rows past seqlen_q under a left window, whose width
    is then 0) and i + hi_off + 1 <= seqlen_k + BLOCK_M + 1 (key_range). The Gluon kernel's; the Triton
    kernel keeps the two compares (fmha_fwd_triton._mask_tile): with this form its D=64 instances spill under
    their 128-register cap (the per-row widths stay live)."""
    lo = rows + lo_off
    width = tl.maximum(tl.minimum(rows + hi_off + 1, seqlen_k) - lo, 0)
    return (cols[None, :] - lo[:, None]).to(tl.uint32) < width[:, None].to(tl.uint32)
