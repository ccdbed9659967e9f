"""Bandwidth of kernels/transpose_v/transpose_v_triton.py configurations through the Triton JIT (device only; a benchmark).

Bytes counted: V read once and V^T written once. The attention op pays this on every call whose V is
head_dim-contiguous, so it must run near the copy bandwidth (~4.3 TB/s on the H200).

    python3 bench/bench_transpose_v.py
"""

import os
import sys

import torch
import triton

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "kernels"))
from transpose_v.transpose_v_triton import transpose_v_kernel  # noqa: E402


def main():
    b, s, h, d = 4, 8192, 32, 128
    v = torch.randint(0, 255, (b, s, h, d), dtype=torch.uint8, device="cuda")
    s_pad = (s + 15) // 16 * 16
    vt = torch.empty(b, h, d, s_pad, dtype=torch.uint8, device="cuda")
    ref = v.permute(0, 2, 3, 1)
    print(f"{'seqlen':>8} {'BS':>4} {'warps':>5} {'us':>8} {'TB/s':>6} ok")
    # The AOT build does not hint seqlen (any length); the JIT would, for 8192.
    unhinted = triton.jit(transpose_v_kernel.fn, do_not_specialize=["seqlen"])
    for kernel, bs, warps in [(transpose_v_kernel, 64, 4), (transpose_v_kernel, 128, 4), (unhinted, 64, 4),
                              (unhinted, 128, 4), (unhinted, 128, 8), (unhinted, 256, 8)]:
        grid = (triton.cdiv(s_pad, bs) * b * h,)  # one-dimensional, sequence blocks fastest (as the runtime)

        def run():
            kernel[grid](v, vt, s, s_pad, h, v.stride(0), v.stride(2), v.stride(1), HEAD_DIM=d,
                         BLOCK_S=bs, num_warps=warps)

        vt.fill_(7)
        run()
        ok = torch.equal(vt[..., :s], ref)
        ms = triton.testing.do_bench(run, warmup=25, rep=200, return_mode="median")
        print(f"{'unhinted' if kernel is unhinted else 'hinted':>8} {bs:>4} {warps:>5} {ms * 1e3:>8.1f} {2 * v.numel() / ms * 1e-9:>6.2f} {ok}", flush=True)


if __name__ == "__main__":
    main()
