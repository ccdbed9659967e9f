"""Packed sequences (varlen): one reading of the offsets and one V^T layout, shared by the attention kernels and the
V transpose, which must agree on both (src/fmha/fmha_params.cpp varlen_vt_row sizes the V^T row to match)."""

import triton
import triton.language as tl

# The kernels' `varlen` argument: 0 for dense calls, else the V^T column alignment of every sequence (its columns
# start on a multiple of it and hold zeros up to its length rounded up to it). The Triton attention kernel clips
# each sequence with descriptors of its own and needs only 16-byte TMA bases: VT_ALIGN_TRITON. The Gluon kernel
# reads the V^T through one descriptor, so a key tile (starting on a multiple of its size) must never reach the next
# sequence's columns, and the key-permuted order's 32-key blocks must start on a sequence's first key:
# VT_ALIGN_GLUON, or the key tile where it is wider (256: fmha_fwd_gluon._vt_align, fmha::detail::varlen_vt_align).
# fmha::detail::kVarlenVtAlignTriton / kVarlenVtAlignGluon (src/fmha/fmha_internal.h) hold the same values
# (tests/cpu/test_codegen.py).
VT_ALIGN_TRITON = 16
VT_ALIGN_GLUON = 128


@triton.jit
def varlen_offsets(cu_seqlens, b):
    """The offsets varlen_check needs for sequence b: (its neighbour's start, its start, its end), loaded. Split
    from the check so that a persistent kernel can load the next work item's offsets a whole item ahead."""
    start = tl.load(cu_seqlens + b)
    end = tl.load(cu_seqlens + b + 1)
    return tl.load(cu_seqlens + tl.maximum(b - 1, 0)), start, end


@triton.jit
def varlen_check(prev, start, end, total):
    """Whether a sequence's [start, end) is usable: inside [0, total], not reversed, and not before its neighbour's
    start `prev` (with every sequence checking its neighbour, offsets out of order cannot make two sequences share
    rows or V^T columns)."""
    return (start >= 0) & (end >= start) & (end <= total) & (prev <= start)


@triton.jit
def varlen_range(cu_seqlens, b, total):
    """Sequence b's [start, end) from int32 offsets, and whether it is usable (varlen_check)."""
    prev, start, end = varlen_offsets(cu_seqlens, b)
    return start, end, varlen_check(prev, start, end, total)


@triton.jit
def varlen_vt_start(k_start, b, align):
    """The first V^T column of sequence b: roundup(k_start, align) + align * b (align: the kernels' varlen
    argument), so that every sequence starts aligned and its zero-padded columns, up to roundup(length, align),
    do not overlap the next sequence's."""
    return (k_start + align - 1) // align * align + align * b
