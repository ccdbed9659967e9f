"""Probe of SUM_ON_TC's row-sum MMA in isolation (device only): P [64, 128] in e4m3 as the A operand of a wgmma
with a [SUM_N, 128] "ones" operand from shared memory, against the float64 row sums of the same e4m3 values.

In the attention kernel (kernels/fmha_fwd/fmha_fwd_gluon.py, switch SUM_ON_TC) these sums came out wrong on the H200
at every width (docs/perf/NOTES.md, 2026-12-02), while the PTX looks right: the same A registers as the P.V product,
a K-major 128-byte-swizzled descriptor like V^T's (stride byte offset 1024), the commit groups in order. This runs
the one MMA with nothing around it, in the variants that could differ:

    ones      row    the attention kernel's operand: row 0 ones, the other rows zeros, written from registers
              all    every row ones (each column of the product is then the row sum)
              tma    row 0 ones copied from global memory by TMA (no generic-proxy store at all)
    parent    o      P's A layout taken from the P.V product's accumulator layout (what the kernel does)
              sum    from the row-sum product's own accumulator layout

    python3 bench/probe_sum_on_tc.py      prints one line per (SUM_N, ones, parent) and exits 1 if any is wrong

Whichever variant is right and the kernel's is not says where the fault is: the operand's bytes (row vs tma), P's
layout (parent), or nothing here (all right: then the kernel's surroundings, e.g. the warp specialization).
"""

import os
import sys

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (fence_async_shared, mbarrier, tma, warpgroup_mma,
                                                               warpgroup_mma_wait)
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "kernels"))
from fmha_fwd.gluon_softmax import _store_e4m3_ones  # noqa: E402  (the attention kernel's own store)

M, K = 64, 128  # one warpgroup's rows, one 128-key tile
WG_M, TILE_K = gl.constexpr(M), gl.constexpr(K)  # the same, for the kernel
ONES_MODES = {"row": 0, "all": 1, "tma": 2}


@gluon.jit
def probe_kernel(p_ptr, ls_ptr, ones_desc, SUM_N: gl.constexpr, ONES: gl.constexpr, PARENT_SUM: gl.constexpr):
    o_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                       instr_shape=[16, TILE_K, 32])
    sum_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                         instr_shape=[16, SUM_N, 32])
    if PARENT_SUM:
        p_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=sum_layout, k_width=4)
    else:
        p_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=o_layout, k_width=4)
    rows = gl.arange(0, WG_M, layout=gl.SliceLayout(1, o_layout))
    cols = gl.arange(0, TILE_K, layout=gl.SliceLayout(0, o_layout))
    p = gl.load(p_ptr + rows[:, None] * TILE_K + cols[None, :])
    p8 = gl.convert_layout(p.to(gl.float8e4nv), p_layout)

    ones_smem = gl.allocate_shared_memory(gl.float8e4nv, [SUM_N, TILE_K],
                                          gl.NVMMASharedLayout(swizzle_byte_width=128, element_bitwidth=8, rank=2))
    if ONES == 2:
        bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
        mbarrier.init(bar, count=1)
        mbarrier.expect(bar, ones_desc.block_type.nbytes)
        tma.async_copy_global_to_shared(ones_desc, [0, 0], bar, ones_smem)
        mbarrier.wait(bar, 0)
    else:
        # The attention kernel's store (fmha_fwd_gluon_kernel, SUM_ON_TC), every row for "all".
        _store_e4m3_ones(ones_smem, ONES == 1)
        fence_async_shared()
        gl.thread_barrier()

    ls = warpgroup_mma(p8, ones_smem.permute((1, 0)), gl.zeros([WG_M, SUM_N], gl.float32, sum_layout), use_acc=False,
                       is_async=True)
    ls = warpgroup_mma_wait(num_outstanding=0, deps=(ls, ))
    r_out = gl.arange(0, WG_M, layout=gl.SliceLayout(1, sum_layout))
    c_out = gl.arange(0, SUM_N, layout=gl.SliceLayout(0, sum_layout))
    gl.store(ls_ptr + r_out[:, None] * SUM_N + c_out[None, :], ls)


def run(sum_n, ones, parent_sum, p):
    import torch

    ls = torch.full((M, sum_n), float("nan"), device="cuda")
    host_ones = torch.zeros(sum_n, K, device="cuda")
    host_ones[0] = 1.0
    host_ones = host_ones.to(torch.float8_e4m3fn)
    desc = TensorDescriptor.from_tensor(host_ones, [sum_n, K], gl.NVMMASharedLayout(swizzle_byte_width=128,
                                                                                     element_bitwidth=8, rank=2))
    probe_kernel[(1, )](p, ls, desc, SUM_N=sum_n, ONES=ONES_MODES[ones], PARENT_SUM=parent_sum, num_warps=4)
    torch.cuda.synchronize()
    return ls


def main():
    import torch  # here, so that the kernel compiles without torch (a CPU check)

    torch.manual_seed(0)
    p = (torch.rand(M, K, device="cuda") * 256).contiguous()
    want = p.to(torch.float8_e4m3fn).double().sum(1)
    wrong = 0
    for sum_n in (16, 64):
        for ones in ONES_MODES:
            for parent_sum in (0, 1):
                try:
                    ls = run(sum_n, ones, parent_sum, p).double()
                except Exception as e:  # a variant that does not compile is a line, not the end of the probe
                    print(f"SUM_N={sum_n:3d} ones={ones:4s} parent={'sum' if parent_sum else 'o':3s}: "
                          f"{type(e).__name__}: {str(e)[:200]}")
                    wrong += 1
                    continue
                got = ls[:, 0]
                err = ((got - want).abs() / want).max().item()
                # The other columns: 0 where only row 0 is ones, the row sum again where every row is.
                others = ls[:, 1:]
                other_want = want[:, None].expand_as(others) if ones == "all" else torch.zeros_like(others)
                other_err = ((others - other_want).abs().max() / want.max()).item()
                # Hopper's FP8 MMA adds its products in a narrower format than float32 (about 13 bits of
                # mantissa, truncated): a sum of 128 values comes out ~1e-4 low. 1e-3 passes that and nothing
                # like a wrong operand (whose errors are of order 1).
                ok = err < 1e-3 and other_err < 1e-3
                wrong += not ok
                print(f"SUM_N={sum_n:3d} ones={ones:4s} parent={'sum' if parent_sum else 'o':3s}: column 0 max rel. "
                      f"error {err:.2e}, other columns {other_err:.2e}, got/want row 5 "
                      f"{got[5].item():.1f}/{want[5].item():.1f}  {'ok' if ok else 'WRONG'}", flush=True)
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
