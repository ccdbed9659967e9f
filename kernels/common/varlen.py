"""Packed sequences (varlen): one reading of the offsets and one V^T layout, shared by the attention kernel and the
V transpose, which must agree on both (src/fmha/fmha_params.cpp varlen_vt_row sizes the V^T row to match)."""

import triton
import triton.language as tl


@triton.jit
def varlen_range(cu_seqlens, b, total):
    """Sequence b's [start, end) from int32 offsets, and whether it is usable: inside [0, total], not reversed, and
    not before its neighbour's start (with every sequence checking its neighbour, offsets out of order cannot make
    two sequences share rows or V^T columns)."""
    start = tl.load(cu_seqlens + b)
    end = tl.load(cu_seqlens + b + 1)
    ok = (start >= 0) & (end >= start) & (end <= total) & (tl.load(cu_seqlens + tl.maximum(b - 1, 0)) <= start)
    return start, end, ok


@triton.jit
def varlen_vt_start(k_start, b):
    """The first V^T column of sequence b: roundup16(k_start) + 16 b, so that every sequence starts 16-byte aligned
    (its TMA base) without overlapping the previous one."""
    return (k_start + 15) // 16 * 16 + 16 * b
