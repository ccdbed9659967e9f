"""Tile-configuration sweep of kernels/fmha_fwd/fmha_fwd_triton.py through the Triton JIT (device only).

Used to choose the manifest's default instances: every configuration is checked against a float64
reference on a slice of the problem before its time counts, because a fast configuration that returns
NaN (seen with warp_specialize and 3 stages) must never win.

    python3 bench/sweep_fmha_configs.py [--seqlen 8192] [--head-dim 128]
"""

import argparse
import itertools
import math
import os
import sys

import torch
import triton

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "kernels"))
from fmha_fwd.fmha_fwd_triton import fmha_fwd_kernel  # noqa: E402

E4M3 = torch.float8_e4m3fn


def quantize(x):
    scale = x.abs().amax().float() / 448.0
    return (x / scale).to(E4M3), scale.reshape(1)


KERNEL = fmha_fwd_kernel


def launch(q, k, vt, o, descales, causal, cfg, scale):
    b, s_q, h, d = q.shape
    s_k = k.shape[1]
    h_kv = k.shape[2]
    qd, kd, vd = descales
    grid = (triton.cdiv(s_q, cfg["BLOCK_M"]) * b * h,)  # one-dimensional, query blocks fastest (as the runtime)
    KERNEL[grid](
        q, k, vt, o, o,  # LSE unused (write_lse=0)
        qd, kd, vd, 0, 0, 0, 0, 0, 0, scale,
        s_q, s_k, h, h // h_kv, 0,
        q.stride(0), q.stride(2), q.stride(1),
        k.stride(0), k.stride(2), k.stride(1),
        vt.stride(0), vt.stride(1), vt.stride(2),
        o.stride(0), o.stride(2), o.stride(1),
        HEAD_DIM=d, BLOCK_M=cfg["BLOCK_M"], BLOCK_N=cfg["BLOCK_N"], CAUSAL=causal, V_TRANSPOSED=True,
        WARP_SPECIALIZE=cfg["ws"], EVEN_N=cfg["even_n"], num_warps=cfg["warps"], num_stages=cfg["stages"])


def reference_slice(q, k, v, causal, heads):
    """float64 attention of batch 0, the given heads, on the dequantized inputs."""
    qs = q[0, :, heads].double().transpose(0, 1)
    ks = k[0, :, heads].double().transpose(0, 1)
    vs = v[0, :, heads].double().transpose(0, 1)
    s = qs @ ks.transpose(1, 2) / math.sqrt(q.shape[-1])
    if causal:
        sq, sk = s.shape[-2:]
        mask = torch.ones(sq, sk, dtype=torch.bool, device=s.device).tril(sk - sq)
        s = s.masked_fill(~mask, float("-inf"))
    return (torch.softmax(s, -1) @ vs).transpose(0, 1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seqlen", type=int, default=8192)
    ap.add_argument("--head-dim", type=int, default=128)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seqlen-k", type=int, default=0, help="default: --seqlen")
    ap.add_argument("--configs", default="", help="BN,warps,stages,ws;... (default: the full grid)")
    ap.add_argument("--causal", default="0,1")
    ap.add_argument("--unhinted-lengths", action="store_true",
                    help="compile seqlen_q/seqlen_k without the JIT's divisibility hint, as the AOT build does")
    args = ap.parse_args()
    torch.manual_seed(0)
    global KERNEL
    if args.unhinted_lengths:
        KERNEL = triton.jit(fmha_fwd_kernel.fn, do_not_specialize=["seqlen_q", "seqlen_k"])
    # Device-side TMA descriptors live in a per-program global scratch buffer.
    triton.set_allocator(lambda size, align, stream: torch.empty(size, dtype=torch.int8, device="cuda"))
    d, s = args.head_dim, args.seqlen
    h = 4096 // d
    b = args.batch
    s_k = args.seqlen_k or s
    xq = torch.randn(b, s, h, d, device="cuda")
    xk, xv = (torch.randn(b, s_k, h, d, device="cuda") for _ in range(2))
    (q, qd), (k, kd), (v, vd) = quantize(xq), quantize(xk), quantize(xv)
    vt = torch.zeros(b, h, d, (s_k + 15) // 16 * 16, device="cuda", dtype=E4M3)
    vt[..., :s_k] = v.permute(0, 2, 3, 1)
    o = torch.empty(b, s, h, d, device="cuda", dtype=torch.bfloat16)
    heads = [0, h // 2]
    deq = [q.float() * qd, k.float() * kd, v.float() * vd]
    grid = itertools.product([64, 128], [4, 8], [2, 3], [False, True])
    if args.configs:
        grid = [tuple(int(x) for x in c.split(",")) for c in args.configs.split(";")]
    # Warp-specialized configurations are compiled without a masked path (EVEN_N), as in the manifest.
    configs = [dict(BLOCK_M=128, BLOCK_N=bn, warps=w, stages=st, ws=bool(ws), even_n=bool(ws))
               for bn, w, st, ws in grid]
    print(f"# seqlen_q={s} seqlen_k={s_k} head_dim={d} batch={b} heads={h}")
    print(f"{'causal':>6} {'BN':>4} {'w':>2} {'st':>2} {'ws':>3} {'rel_err':>9} {'TFLOP/s':>8}")
    for causal in [bool(int(c)) for c in args.causal.split(",")]:
        if causal:  # warp-specialized (evenn) configurations are non-causal only
            configs_now = [c for c in configs if not c["ws"]]
        else:
            configs_now = [c for c in configs if not c["ws"] or s_k % c["BLOCK_N"] == 0]
        ref = reference_slice(*deq, causal, heads)
        flops = 4 * b * h * s * s_k * d / (2 if causal and s == s_k else 1)
        for cfg in configs_now:
            try:
                o.fill_(float("nan"))
                launch(q, k, vt, o, (qd, kd, vd), causal, cfg, 1 / math.sqrt(d))
                torch.cuda.synchronize()
                out = o[0, :, heads].double()
                err = ((out - ref).norm() / ref.norm()).item()
                if not math.isfinite(err) or torch.isnan(o).any():
                    err = float("nan")
                ms = triton.testing.do_bench(lambda: launch(q, k, vt, o, (qd, kd, vd), causal, cfg, 1 / math.sqrt(d)),
                                             warmup=50, rep=300, return_mode="median")
                tf = flops / ms * 1e-9
            except Exception as e:  # a configuration that does not compile is a row, not a crash
                err, tf = float("nan"), 0.0
                print(f"# {cfg}: {type(e).__name__}: {str(e)[:200]}")
            print(f"{int(causal):>6} {cfg['BLOCK_N']:>4} {cfg['warps']:>2} {cfg['stages']:>2} {int(cfg['ws']):>3} "
                  f"{err:>9.2e} {tf:>8.1f}", flush=True)


if __name__ == "__main__":
    main()
