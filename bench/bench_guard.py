"""The quality guard's cost when it does not trigger (issue 7: <= 3% of the guarded mode's end-to-end time).

A model's layer loop without the model: L layers, each with its own BF16 q, k, v (B, H, S, D), called once per
step in order, for enough steps that every layer is checked several times (the guard recomputes `rows` query
rows in BF16 every `every` calls of a key). Timed per step with CUDA events; plain and guarded samples alternate
(ABAB..., medians compared), so that drift of the machine over the run (clocks, the host's load: short calls are
host-bound) lands on both alike. Timing plain once and then guarded gave -15% "overhead" at S=512 on the H200.

    plain     fp8attn.modes.attention(mode="fp8") per layer
    guarded   the same call through fp8attn.guard.QualityGuard (what the transformers integration's
              "fp8_guarded" mode runs), the BF16 reference through mode="bf16"

    PYTHONPATH=build/python python3 bench/bench_guard.py [--layers 24 --seqlen 2048 --every 64,8] [--csv out.csv]

Prints the overhead per configuration; a benchmark, never a test. The guard must not have fallen back during
the run (the inputs are ordinary Gaussian data): the script says so if it did.
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import bench_vs_cudnn as bvc  # noqa: E402  (time_cuda_interleaved, write_rows)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--layers", type=int, default=24)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--seqlen", default="512,2048", help="comma-separated sequence lengths")
    ap.add_argument("--head-dim", type=int, default=128)
    ap.add_argument("--every", default="64,8", help="the guard's check interval(s), comma-separated")
    ap.add_argument("--rows", type=int, default=64)
    ap.add_argument("--warmup", type=int, default=128, help="steps before timing (fills the guard's state)")
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--target-ms", type=float, default=300.0, help="length of one timed sample (many checks)")
    ap.add_argument("--csv")
    args = ap.parse_args(argv)

    import torch

    from fp8attn.guard import QualityGuard
    from fp8attn.modes import attention

    rows_out, fell_back = [], False
    print(f"{'seqlen':>7} {'every':>6} {'plain ms/step':>14} {'guarded ms/step':>16} {'overhead':>9} {'checks':>7}")
    for seqlen in (int(s) for s in args.seqlen.split(",")):
        gen = torch.Generator(device="cuda").manual_seed(seqlen)
        shape = (args.batch, args.heads, seqlen, args.head_dim)
        layers = [tuple(torch.randn(shape, generator=gen, device="cuda").to(torch.bfloat16) for _ in range(3))
                  for _ in range(args.layers)]

        def fp8(q, k, v):
            return attention(q, k, v, mode="fp8", causal=True, layout="bhsd")

        def bf16(q, k, v):
            return attention(q, k, v, mode="bf16", causal=True, layout="bhsd")

        def plain():
            for q, k, v in layers:
                fp8(q, k, v)

        for every in (int(e) for e in args.every.split(",")):
            guard = QualityGuard(every=every, rows=args.rows)

            def guarded():
                for i, (q, k, v) in enumerate(layers):
                    guard.attention(i, q, k, v, fp8, bf16)

            plain_ms, guarded_ms = bvc.time_cuda_interleaved([plain, guarded], args)  # ms per step
            report = guard.report()
            checks = sum(r["checks"] for r in report.values())
            if any(r["fallback"] for r in report.values()):
                fell_back = True
                print(f"the guard fell back on ordinary inputs (seqlen {seqlen}, every {every}): {report}")
            overhead = guarded_ms / plain_ms - 1.0
            print(f"{seqlen:7d} {every:6d} {plain_ms:14.3f} {guarded_ms:16.3f} {overhead:9.2%} {checks:7d}")
            rows_out.append({"seqlen": seqlen, "every": every, "rows": args.rows, "layers": args.layers,
                             "plain_ms_per_step": f"{plain_ms:.4f}", "guarded_ms_per_step": f"{guarded_ms:.4f}",
                             "overhead": f"{overhead:.4f}", "checks": checks})
    if args.csv:
        bvc.write_rows(args.csv, rows_out)
        print(f"wrote {args.csv}")
    return 1 if fell_back else 0


if __name__ == "__main__":
    sys.exit(main())
