"""Every compiled INT8 Q.K^T attention instance, forced by name, timed on the standard suite's points of its head
dim (device only; the profiler has no int8 input generator). What the tuning table's i8 rows are decided from.

    PYTHONPATH=build/python python3 bench/bench_int8_instances.py [--configs d64] [--end-to-end] [--csv out.csv]

Operands as the int8_qk mode makes them (fp8attn.modes.quantize_for: INT8 Q with a descale per 64 tokens, K per 64
or (block_pair, where compiled) per 128 tokens,
rotated, K smoothed; e4m3 V), V handed over in the layout each instance reads (the key-permuted V^T for the Gluon
ones), so that the column is the attention kernel alone. --end-to-end times the quantization inside each call too
(what int8_qk costs a caller with that instance; the TFLOP/s then count the quantization's time too) and adds the
fp8 and int8_qk modes through fp8attn.attention as two more rows, interleaved with the rest: issue 7's ratio,
int8_qk / fp8, for each instance on one machine. Those two rows are timed without the output check (fp8's output
is not an INT8 instance's; the GPU tests check both modes). The instances of one point are timed interleaved
(bench_vs_cudnn.time_cuda_interleaved: drift of the clocks lands on all alike), and each instance's output is
checked against the first instance's before its time counts. The library's own pick (no name) is the last row.

--modes-only (with --end-to-end): the two mode rows alone, each preceded in the cycle by the other.
--settle-ms N: before each timed sample its own call runs untimed for about N ms (bench_vs_cudnn's settle_ms), so
that each row is timed at the clock its own power draw settles to. Without it a row's first milliseconds run at the
clock its predecessor in the cycle left: on the power-limited H100 and H200 a row after a cooler one (a slow
instance) reads high and a row after a hotter one reads low (2026-12-06: the library pick and the int8_qk mode, the
same calls, read 801 and 762 TFLOP/s at D=128 S=8192 causal GQA, after the Triton instance and after the fp8 mode).
Issue 7's ratio compares two modes a model runs one at a time: --modes-only --settle-ms 100 times exactly that.
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
    ap.add_argument("--end-to-end", action="store_true",
                    help="quantization inside each timed call, and the fp8 / int8_qk modes' own calls beside")
    ap.add_argument("--modes-only", action="store_true", help="with --end-to-end: only the fp8 and int8_qk mode rows")
    ap.add_argument("--settle-ms", type=float, default=0.0,
                    help="untimed calls of its own for about this long before each timed sample")
    ap.add_argument("--csv", default="")
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--repeats", type=int, default=9)
    ap.add_argument("--target-ms", type=float, default=20.0)
    args = ap.parse_args()
    if args.modes_only and not args.end_to_end:
        ap.error("--modes-only times the two modes' end-to-end rows: it needs --end-to-end")

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
        q, k, v = q.bfloat16(), k.bfloat16(), v.bfloat16()
        # Quantized once for the kernel-alone timing; --end-to-end quantizes inside every call instead.
        operands = {} if args.end_to_end else {layout: fp8attn.modes.quantize_for("int8_qk", q, k, v, v_layout=layout)
                                               for layout in ("bshd", "vt_kperm")}

        def call(name):
            kperm = name is None or "_vkperm" in name  # the library pick gets V^T too: the kernel alone
            layout = "vt_kperm" if kperm else "bshd"

            def run(q8, k8, v8, qd, kd, vd):
                # The mode's K descales pair where it quantizes K per 128 tokens: every instance reads them (the
                # kpair ones once a tile), and the library's pick is then a kpair twin.
                return fp8attn.fmha_fwd(q8, k8, v8, q_descale=qd, k_descale=kd, v_descale=vd, causal=cfg.causal,
                                        kernel_name=name, v_key_permuted=kperm,
                                        k_descale_paired=fp8attn.modes.k_descale_paired("int8_qk", k))
            if args.end_to_end:
                return lambda: run(*fp8attn.modes.quantize_for("int8_qk", q, k, v, v_layout=layout))
            return lambda: run(*operands[layout])

        first, o, runnable = None, None, []
        for name in [] if args.modes_only else [*names, None]:
            o = call(name)().float()
            first = o if first is None else first
            err = ((o - first).norm() / first.norm()).item()
            if err > 5e-2:  # two FP8 kernels differ by far less; a wrong one by order 1
                print(f"# {cfg.name} {name}: output differs from {names[0]}'s by {err:.2e}; not timed", flush=True)
                continue
            runnable.append(name)
        labels = [name or "library pick" for name in runnable]
        calls = [call(n) for n in runnable]
        if args.end_to_end:
            for mode in ("fp8", "int8_qk"):
                labels.append(f"{mode} mode (fp8attn.attention)")
                calls.append(lambda mode=mode: fp8attn.attention(q, k, v, mode=mode, causal=cfg.causal))
        ms = bvc.time_cuda_interleaved(calls, args, settle_ms=args.settle_ms)
        for label, t in zip(labels, ms):
            tf = cfg.flops / (t * 1e-3) / 1e12
            rows.append(dict(config=cfg.name, kernel=label, ms=t, tflops=tf, end_to_end=int(args.end_to_end),
                             settle_ms=args.settle_ms))
            print(f"{cfg.name:<22} {tf:8.1f}  {label}", flush=True)
        if args.end_to_end:
            print(f"{cfg.name:<22} int8_qk / fp8 = {ms[-2] / ms[-1]:.3f}", flush=True)
        del q, k, v, operands, first, o
        torch.cuda.empty_cache()
    if args.csv and rows:
        bvc.write_rows(args.csv, rows)


if __name__ == "__main__":
    main()
