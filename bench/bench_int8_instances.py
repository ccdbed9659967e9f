"""Every compiled INT8 Q.K^T attention instance, forced by name, timed on the standard suite's points of its head
dim (device only; the profiler has no int8 input generator). What the tuning table's i8 rows are decided from.

    PYTHONPATH=build/python python3 bench/bench_int8_instances.py [--configs d64] [--csv out.csv]

Operands as the int8_qk mode makes them (INT8 Q and K with a descale per 64 tokens, K smoothed, e4m3 V), V
handed over in the layout each instance reads (the key-permuted V^T for the Gluon ones), so that the column is
the attention kernel alone. The instances of one point are timed interleaved (bench_vs_cudnn.time_cuda_interleaved:
drift of the clocks lands on all alike), and each output is checked against the first instance's before its
time counts. The library's own pick (no name) is the last column.
"""

import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import bench_vs_cudnn as bvc  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--configs", default="", help="comma-separated substrings of the suite's config names to keep")
    ap.add_argument("--csv", default="")
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--repeats", type=int, default=9)
    ap.add_argument("--target-ms", type=float, default=20.0)
    args = ap.parse_args()

    import torch

    import fp8attn

    kernels = [k for k in fp8attn.list_kernels() if k["qk_type"] == "i8"]
    rows = []
    for cfg in bvc.standard_suite():
        if args.configs and not any(w in cfg.name for w in args.configs.split(",")):
            continue
        names = [k["name"] for k in kernels if k["head_dim"] == cfg.head_dim and k["causal"] == cfg.causal]
        if not names:
            continue
        gen = torch.Generator(device="cuda").manual_seed(0)
        q = torch.randn(cfg.batch, cfg.seqlen, cfg.heads_q, cfg.head_dim, generator=gen, device="cuda")
        k, v = (torch.randn(cfg.batch, cfg.seqlen, cfg.heads_kv, cfg.head_dim, generator=gen, device="cuda")
                for _ in range(2))
        q8, qd = fp8attn.quantize(q.bfloat16(), dtype="int8", granularity="block")
        k8, kd = fp8attn.quantize(k.bfloat16(), dtype="int8", granularity="block", smooth=True)
        v_plain, vd = fp8attn.quantize(v.bfloat16())
        v_kperm, _ = fp8attn.quantize(v.bfloat16(), layout="vt_kperm")

        def call(name):
            kperm = name is None or "_vkperm" in name  # the library pick gets V^T too: the kernel alone
            return lambda: fp8attn.fmha_fwd(q8, k8, v_kperm if kperm else v_plain, q_descale=qd, k_descale=kd,
                                            v_descale=vd, causal=cfg.causal, kernel_name=name, v_key_permuted=kperm)

        first, runnable = None, []
        for name in [*names, None]:
            o = call(name)().float()
            first = o if first is None else first
            err = ((o - first).norm() / first.norm()).item()
            if err > 5e-2:  # two FP8 kernels differ by far less; a wrong one by order 1
                print(f"# {cfg.name} {name}: output differs from {names[0]}'s by {err:.2e}; not timed", flush=True)
                continue
            runnable.append(name)
        ms = bvc.time_cuda_interleaved([call(n) for n in runnable], args)
        for name, t in zip(runnable, ms):
            tf = cfg.flops / (t * 1e-3) / 1e12
            rows.append(dict(config=cfg.name, kernel=name or "library pick", ms=t, tflops=tf))
            print(f"{cfg.name:<22} {tf:8.1f}  {name or 'library pick'}", flush=True)
        del q, k, v, q8, k8, v_plain, v_kperm
        torch.cuda.empty_cache()
    if args.csv and rows:
        bvc.write_rows(args.csv, rows)


if __name__ == "__main__":
    main()
