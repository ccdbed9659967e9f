"""V -> V^T through host TMA descriptors (the same operation as transpose_v_triton.py, moved by the copy engine).

The runtime encodes both descriptors on the host (cuTensorMapEncodeTiled) and passes them by value:
  v_desc   over V as [batch, seqlen, heads_kv, HEAD_DIM] with the caller's strides; rows past seqlen load as 0
  vt_desc  over V^T as [batch * heads_kv * HEAD_DIM, seqlen_pad]; stores past seqlen_pad are dropped
so the zero padding between seqlen and seqlen_pad is written by the same store. This variant is the first
kernel of the library to take host descriptors: it exercises the launcher's CUtensorMap parameters, which the
Gluon kernels need.
"""

import triton
import triton.language as tl


@triton.jit
def transpose_v_tma_kernel(
    v_desc, vt_desc,
    seqlen_pad, heads_kv,
    HEAD_DIM: tl.constexpr, BLOCK_S: tl.constexpr,
):
    # One [BLOCK_S, HEAD_DIM] tile per program; one-dimensional grid, sequence blocks fastest.
    num_s_blocks = tl.cdiv(seqlen_pad, BLOCK_S)
    pid = tl.program_id(0)
    pid_s = pid % num_s_blocks
    bh = pid // num_s_blocks
    b = bh // heads_kv
    h = bh % heads_kv
    tile = v_desc.load([b, pid_s * BLOCK_S, h, 0]).reshape(BLOCK_S, HEAD_DIM)
    # VT[b, h, d, s] = V[b, s, h, d].
    vt_desc.store([bh * HEAD_DIM, pid_s * BLOCK_S], tl.trans(tile))
