"""One kernel of interest, launched a few times, for Nsight Compute (device_check's `ncu` step): the counters that
say what bounds a kernel (tensor / exponential / issue / memory), which a timing cannot.

    prefill   the FP8 attention call of the suite's D=128 S=8192 causal point (B=4, H=32), V^T given in the
              key-permuted order, so only the attention kernel runs (the library's pick, Gluon today)
    decode    paged FP8 decode, bench_decode.py's (32, 32k) case (GQA 32/8, D=128, pages of 64)

    ncu --clock-control none --kernel-name regex:"fmha_fwd|paged_decode" --launch-skip 3 --launch-count 1 \\
        python3 bench/ncu_targets.py prefill

--clock-control none: Nsight Compute would otherwise lock the clocks to base for the measurement; the GPU's
settings are left as they are. Launches: 5 of the kernel (warm-up, then the profiled one).
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

LAUNCHES = 5


def prefill():
    import torch

    import fp8attn

    b, s, h, d = 4, 8192, 32, 128
    gen = torch.Generator(device="cuda").manual_seed(0)
    q, k, v = (torch.randn((b, s, h, d), generator=gen, device="cuda").to(torch.float8_e4m3fn) for _ in range(3))
    vt = fp8attn.transpose_v(v, key_permuted=True)
    one = torch.ones(1, device="cuda")
    print("kernel:", fp8attn.select_kernel(q, k, vt, q_descale=one, k_descale=one, v_descale=one, causal=True,
                                           v_key_permuted=True))
    for _ in range(LAUNCHES):
        fp8attn.fmha_fwd(q, k, vt, q_descale=one, k_descale=one, v_descale=one, causal=True, v_key_permuted=True)
    torch.cuda.synchronize()


def decode():
    import torch

    import bench_decode
    from fp8attn.paged import decode_with_name

    case = next(c for c in bench_decode.CASES if c[0] == "b32_s32k")
    q, cache, table, seqlens, out = bench_decode.make_case(case)
    for _ in range(LAUNCHES):
        _, name = decode_with_name(q, cache, table, seqlens, case[2], out=out)
    print("kernel:", name)
    torch.cuda.synchronize()


if __name__ == "__main__":
    targets = {"prefill": prefill, "decode": decode}
    if len(sys.argv) != 2 or sys.argv[1] not in targets:
        sys.exit(f"usage: ncu_targets.py {{{','.join(targets)}}}")
    targets[sys.argv[1]]()
