"""Packed sequences (varlen): one reading of the offsets and one V^T layout, shared by the attention kernels and the
V transpose, which must agree on both (src/fmha/fmha_params.cpp varlen_vt_row sizes the V^T row to match)."""

import triton
import triton.language as tl

# Every sequence's V^T columns start on a multiple of VT_ALIGN and hold zeros up to its length rounded up to
# VT_ALIGN: an attention key tile (at most 128 keys, starting on a multiple of its size) then never reaches
# another sequence's columns, and the key-permuted order (32-key blocks) lines up with each sequence's keys.
# fmha::detail::kVarlenVtAlign (src/fmha/fmha_internal.h) holds the same value (tests/cpu/test_codegen.py).
VT_ALIGN = tl.constexpr(128)


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
    """The first V^T column of sequence b: roundup(k_start, VT_ALIGN) + VT_ALIGN * b, so that every sequence starts
    aligned (its TMA base, its 32-key blocks) and its zero-padded columns, up to roundup(length, VT_ALIGN), do
    not overlap the next sequence's."""
    return (k_start + VT_ALIGN - 1) // VT_ALIGN * VT_ALIGN + VT_ALIGN * b
