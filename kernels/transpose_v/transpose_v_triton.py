"""V -> V^T for the FP8 attention kernels.

Hopper's FP8 wgmma reads both operands K-major. For O = P V the reduction runs over the sequence, so V
must be sequence-contiguous: V^T of shape [batch, heads_kv, HEAD_DIM, seqlen_pad]. This kernel copies
the caller's V (any strides) into that layout in the workspace. seqlen_pad rounds seqlen up (the runtime's
kVtSeqAlign = 32, include/fp8attn/fmha/device/transpose_v.h) so every row starts 16-byte aligned and holds
whole 32-key blocks; the padding is
written with zeros so that no stale or NaN byte can ever reach an MMA.

Elements are moved as raw bytes (uint8), so the kernel serves every one-byte input type. head_dim must be
contiguous in V and the other strides multiples of 16 elements (what the attention kernels need too), so
that the loads are 16 bytes wide.

KEY_PERMUTED: the keys of each 32-key block are stored in the order in which the Gluon attention kernel's
accumulator fragment holds them (kernels/fmha_fwd/fmha_fwd_gluon.py, KEY_PERMUTED): position
16h + 4t + 2j + e holds key 16h + 8j + 2t + e. The program gathers those rows of V (each row still a
contiguous head_dim load) and stores positions contiguously as before; seqlen_pad is a multiple of 32, and
positions whose key is past seqlen hold zeros.

Varlen (varlen != 0; packed sequences, V [total, heads_kv, HEAD_DIM] with stride_vb = 0): sequence b's keys
are cu_seqlens[b] .. cu_seqlens[b + 1] - 1, seqlen is the longest length (the grid's) and seqlen_pad the length
of a V^T row, [heads_kv, HEAD_DIM, seqlen_pad]. `varlen` is the columns' alignment (common/varlen.py: 16 for the
Triton attention kernel, 128 for the Gluon one): sequence b goes to the columns from varlen_vt_start, written with
zeros up to its length rounded up to the alignment, so that an attention key tile of a sequence reads its keys
and zeros, never another sequence's bytes. KEY_PERMUTED works the same way (each sequence's 32-key blocks start
on its first key; the Gluon alignment, a multiple of 32).
"""

import triton
import triton.language as tl

from common.varlen import varlen_range, varlen_vt_start


@triton.jit
def transpose_v_kernel(
    V, VT,
    seqlen, seqlen_pad, heads_kv,
    stride_vb, stride_vh, stride_vs,
    cu_seqlens, varlen, total,
    HEAD_DIM: tl.constexpr, BLOCK_S: tl.constexpr, KEY_PERMUTED: tl.constexpr,
):
    # One [BLOCK_S, HEAD_DIM] tile per program: 3.7 TB/s on the H200 at 64 or 128 rows. Looping over several
    # tiles per program with software pipelining measured 1.8 TB/s (docs/perf/NOTES.md).
    # One-dimensional grid, sequence blocks fastest (no grid-y limit on batch * heads_kv).
    num_s_blocks = tl.cdiv(seqlen_pad, BLOCK_S)
    if varlen != 0:  # the longest sequence's columns with their zero padding (the host's grid counts the same)
        num_s_blocks = tl.cdiv((seqlen + varlen - 1) // varlen * varlen, BLOCK_S)
    pid = tl.program_id(0)
    pid_s = pid % num_s_blocks
    bh = pid // num_s_blocks
    b = bh // heads_kv
    h = bh % heads_kv
    k_start = seqlen * 0
    length = seqlen
    store_limit = seqlen_pad
    dst_row = bh.to(tl.int64) * HEAD_DIM * seqlen_pad
    if varlen != 0:
        # The attention kernel's checks (it gives such a sequence NaN rows and reads nothing): offsets outside
        # [0, total], out of order, or longer than the grid's seqlen. Nothing is read or written for it here either.
        k_start, k_end, ok = varlen_range(cu_seqlens, b, total)
        bad = ~ok | (k_end - k_start > seqlen)
        k_start = tl.where(bad, 0, k_start)
        length = tl.where(bad, 0, k_end - k_start)
        # Zeros past the sequence up to the alignment (inside the gap before the next one's start). The alignment
        # is declared a multiple of 16 (codegen), so the limit and the row's start are too: a limit with no known
        # divisibility made every store a single byte (5x slower, measured on the H200; the build's SASS check
        # refuses it).
        store_limit = (length + varlen - 1) // varlen * varlen
        dst_row = h.to(tl.int64) * HEAD_DIM * seqlen_pad + varlen_vt_start(k_start, b, varlen)
    offs_s = pid_s * BLOCK_S + tl.arange(0, BLOCK_S)
    offs_d = tl.arange(0, HEAD_DIM)
    keys = offs_s
    if KEY_PERMUTED:
        tl.static_assert(BLOCK_S % 32 == 0, "whole 32-key blocks per program")
        r = offs_s % 32
        keys = offs_s - r + (r // 16) * 16 + ((r // 2) % 2) * 8 + ((r // 4) % 4) * 2 + r % 2
    # 64-bit offsets: strides are int64 parameters and seqlen * stride_vs passes 2^31 on long contexts.
    src = V + b.to(tl.int64) * stride_vb + k_start.to(tl.int64) * stride_vs + h.to(tl.int64) * stride_vh
    rows = keys.to(tl.int64)[:, None] * stride_vs
    tile = tl.load(src + rows + offs_d[None, :], mask=keys[:, None] < length, other=0)
    # VT[b, h, d, s] = V[b, s, h, d]; rows of seqlen_pad elements.
    dst = VT + dst_row
    tl.store(dst + offs_d.to(tl.int64)[:, None] * seqlen_pad + offs_s[None, :], tl.trans(tile),
             mask=offs_s[None, :] < store_limit)
