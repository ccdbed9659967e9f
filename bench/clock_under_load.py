"""SM clock and board power while an attention kernel runs back to back (device only): whether the H200 holds its
clock under this load or is held back by its power limit, which per-instruction cycle estimates assume away.

Under Nsight Compute's replay (one launch on an idle GPU) the D=128 S=8192 attention kernels read 11-12% faster than
back to back in the benchmark (docs/perf/NOTES.md, 2026-12-03). This runs each provider for --seconds, samples
`nvidia-smi` (SM clock, power draw, power limit) every 50 ms meanwhile, and prints the median clock and power and the
provider's TFLOP/s over the same window:

    PYTHONPATH=build/python python3 bench/clock_under_load.py [--seconds 3] [--csv out.csv] [--points A,B]

Providers: fp8attn FP8 (V^T given, key-permuted: the attention kernel alone), the fp8 and int8_qk modes' attention
kernels alone on each mode's own operands (mode-fp8, mode-int8_qk: issue 7's pair), fp8attn BF16, PyTorch SDPA BF16
(the cuDNN backend when torch picks it; at a GQA point, enable_gqa, torch may pick another), and cuDNN FP8 through
JAX (bench_vs_cudnn.py's worker in its own process, timed there; the clock and power are the medians of the samples
taken while the card drew at least half its power limit, which leaves out JAX's start-up and compilation), at the
standard suite's points named by --points (default D=128 S=8192, B=4, H=32, full and causal). Whether cuDNN FP8 also
runs at the power limit says what a faster FP8 kernel must save: energy per tile, not only cycles.

    PYTHONPATH=build/python python3 bench/clock_under_load.py --points d128_s512_full,d256_s8192_causal

--window adds issue 9's sliding-window pair (fp8attn FP8 only, before the points; --points "" for the pair alone):
whether the 4k-window call and the full causal call at S=32k run at the same clock and power, i.e. whether their
time ratio is a ratio of cycles (H200, 2026-12-04: 1740 and 1755 MHz, 690 and 689 W: it is).
"""

import argparse
import csv
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_vs_cudnn as bvc  # noqa: E402  (the suite's points, the JAX worker)
from bench_decode import WINDOW_LEFT, WINDOW_SHAPE, causal_pairs, window_fp8_inputs  # noqa: E402  (issue 9's pair)

QUERY = "clocks.sm,clocks.max.sm,power.draw,power.limit"


class Sampler:
    """nvidia-smi sampling every 50 ms in a child process, between start() and stop()."""

    def start(self):
        self.proc = subprocess.Popen(["nvidia-smi", f"--query-gpu={QUERY}", "--format=csv,noheader,nounits",
                                      "-lms", "50"], stdout=subprocess.PIPE, text=True)

    def stop(self):
        self.proc.terminate()
        out, _ = self.proc.communicate(timeout=10)
        rows = []
        for line in out.splitlines():
            try:
                rows.append([float(v) for v in line.split(",")])
            except ValueError:  # a header or a partial line at the end
                continue
        return rows


def run_for(fn, seconds):
    """Calls fn back to back for about `seconds`; returns (calls, elapsed seconds), timed on the GPU."""
    import torch

    fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    calls, t0 = 0, time.time()
    start.record()
    while time.time() - t0 < seconds:
        for _ in range(10):
            fn()
        calls += 10
        torch.cuda.synchronize()  # keeps the host from queueing far ahead of the window
    end.record()
    torch.cuda.synchronize()
    return calls, start.elapsed_time(end) / 1e3


def providers(cfg):
    """The torch-side providers of one suite point (a bench_vs_cudnn.Config): {name: a call}."""
    import torch
    import torch.nn.functional as F

    import fp8attn

    b, s, h, hkv, d, causal = cfg.batch, cfg.seqlen, cfg.heads_q, cfg.heads_kv, cfg.head_dim, cfg.causal
    gen = torch.Generator(device="cuda").manual_seed(0)
    q = torch.randn((b, s, h, d), generator=gen, device="cuda")
    k, v = (torch.randn((b, s, hkv, d), generator=gen, device="cuda") for _ in range(2))
    q8, k8, v8 = (x.to(torch.float8_e4m3fn) for x in (q, k, v))
    vt = fp8attn.transpose_v(v8, key_permuted=True)
    one = torch.ones(1, device="cuda")
    qb, kb, vb = (x.to(torch.bfloat16) for x in (q, k, v))
    qt, kt, vtb = (x.transpose(1, 2) for x in (qb, kb, vb))
    # Each accuracy mode's attention kernel alone on that mode's own operands (fp8attn.modes.quantize_for: scaled
    # to the type's range, rotated, smoothed; V^T key-permuted), quantized once: whether int8_qk's kernel and the
    # fp8 mode's run at the same clock and power (issue 7), i.e. whether their time ratio is one of cycles or of
    # energy per tile. The plain fp8attn-fp8 row's operands are the Gaussians cast to e4m3 (values near 1).
    mode_ops = {mode: fp8attn.modes.quantize_for(mode, qb, kb, vb, v_layout="vt_kperm") for mode in ("fp8", "int8_qk")}

    def mode_call(mode):
        q_, k_, v_, qd, kd, vd = mode_ops[mode]
        return lambda: fp8attn.fmha_fwd(q_, k_, v_, q_descale=qd, k_descale=kd, v_descale=vd, causal=causal,
                                        v_key_permuted=True, k_descale_paired=fp8attn.modes.k_descale_paired(mode, kb))
    return {
        "fp8attn-fp8": lambda: fp8attn.fmha_fwd(q8, k8, vt, q_descale=one, k_descale=one, v_descale=one,
                                                causal=causal, v_key_permuted=True),
        "mode-fp8": mode_call("fp8"),
        "mode-int8_qk": mode_call("int8_qk"),
        "fp8attn-bf16": lambda: fp8attn.fmha_fwd(qb, kb, vb, causal=causal),
        "sdpa-bf16": lambda: F.scaled_dot_product_attention(qt, kt, vtb, is_causal=causal, enable_gqa=hkv != h),
    }


def window_pair():
    """Issue 9's sliding-window pair (bench_decode.py's window_fp8_inputs, V^T given): {name: (a call, its FLOPs)}.
    Whether the window call runs at another clock or power than the full causal one under sustained load says
    whether their time ratio is a cycle ratio."""
    import fp8attn

    q, k, vt, kw = window_fp8_inputs()
    b, s, h, d = WINDOW_SHAPE
    return {"window4k-full-causal": (lambda: fp8attn.fmha_fwd(q, k, vt, **kw), 4 * b * h * d * causal_pairs(s)),
            "window4k-window": (lambda: fp8attn.fmha_fwd(q, k, vt, window=(WINDOW_LEFT, -1), **kw),
                                4 * b * h * d * causal_pairs(s, WINDOW_LEFT))}


def cudnn_fp8(cfg, seconds):
    """cuDNN FP8 back to back for about `seconds` in bench_vs_cudnn.py's JAX worker (run_cudnn_fp8) on suite point
    cfg; returns a row like main's, or one with a failure."""
    import types

    # The worker times `repeats` samples of target_ms each (its call count per sample from a warm-up; the suite's
    # cap of 200 calls lifted, which at S=512, 0.43 ms a call, cut the run to ~0.5 s, short of the power limit:
    # H200, 2026-12-04): about `seconds` of calls.
    repeats = 5
    run = types.SimpleNamespace(warmup=20, repeats=repeats, target_ms=seconds * 1e3 / repeats, no_error=True,
                                jax_timeout=600, max_iters=1_000_000)
    sampler = Sampler()
    sampler.start()
    results, env = bvc.run_cudnn_fp8([cfg], run)
    samples = sampler.stop()
    result = results.get(cfg.name, {})
    if "ms" not in result:
        return dict(point=cfg.name, provider="cudnn-fp8",
                    failure=(result.get("failure") or env.get("failure") or "no result")[-300:])
    busy = [r for r in samples if r[2] >= 0.5 * r[3]] or samples
    return load_row(cfg.name, "cudnn-fp8", cfg.flops / (result["ms"] * 1e-3) * 1e-12, busy)


def load_row(point, provider, tflops, samples):
    """A provider's row: its TFLOP/s and the median SM clock and power of `samples` (nvidia-smi rows)."""
    return dict(point=point, provider=provider, tflops=tflops,
                sm_clock_mhz=statistics.median(r[0] for r in samples), max_sm_clock_mhz=samples[0][1],
                power_w=statistics.median(r[2] for r in samples), power_limit_w=samples[0][3], samples=len(samples))


def sustained_row(point, provider, fn, flops, seconds):
    """fn back to back for about `seconds` with nvidia-smi sampling: its row (load_row, plus ms a call), or a failure
    row if fn raises. The clock and power are the middle samples': the first and last 10% hold the ramp and the
    tail."""
    sampler = Sampler()
    sampler.start()
    time.sleep(0.2)
    try:
        calls, elapsed = run_for(fn, seconds)
    except Exception as e:  # a provider that refuses or fails is a row, not the end of the run
        sampler.stop()
        return dict(point=point, provider=provider, failure=f"{type(e).__name__}: {str(e)[:200]}")
    samples = sampler.stop()
    mid = samples[len(samples) // 10: len(samples) - len(samples) // 10] or samples
    return dict(load_row(point, provider, flops * calls / elapsed * 1e-12, mid), ms=elapsed / calls * 1e3)


def print_row(row):
    if "failure" in row:
        print(f"{row['point']:>18} {row['provider']:>13}: failed: {row['failure']}", flush=True)
        return
    print(f"{row['point']:>18} {row['provider']:>13}: {row['tflops']:7.1f} TFLOP/s, SM clock "
          f"{row['sm_clock_mhz']:6.0f} MHz (max {row['max_sm_clock_mhz']:.0f}), power {row['power_w']:5.0f} W (limit "
          f"{row['power_limit_w']:.0f}), {row['samples']} samples", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--csv", default="")
    ap.add_argument("--no-cudnn-fp8", action="store_true", help="leave out cuDNN FP8 (JAX)")
    ap.add_argument("--points", default="d128_s8192_full,d128_s8192_causal",
                    help="comma-separated names of the standard suite's points (bench_vs_cudnn.py --list-configs)")
    ap.add_argument("--providers", default="",
                    help="comma-separated provider names to keep (fp8attn-fp8, mode-fp8, mode-int8_qk, fp8attn-bf16, "
                         "sdpa-bf16); all by default")
    ap.add_argument("--window", action="store_true",
                    help="also issue 9's window pair (window_pair): fp8attn FP8 only, ms per call beside the clock")
    args = ap.parse_args()
    suite = {cfg.name: cfg for cfg in bvc.standard_suite()}
    names = [n for n in args.points.split(",") if n]
    unknown = [n for n in names if n not in suite]
    if unknown:
        print(f"--points: {unknown[0]} is not a point of the standard suite ({', '.join(suite)})", file=sys.stderr)
        return 2
    keep = [n for n in args.providers.split(",") if n]
    rows = []

    def add(row):
        """Prints a row and rewrites the CSV with every row so far (a later failure or timeout keeps them)."""
        rows.append(row)
        print_row(row)
        if args.csv:
            with open(args.csv, "w", newline="") as f:
                w = csv.DictWriter(f, fieldnames=sorted({k for r in rows for k in r}))
                w.writeheader()
                w.writerows(rows)

    if args.window:
        for name, (fn, flops) in window_pair().items():
            row = sustained_row("window4k_s32k", name, fn, flops, args.seconds)
            add(row)
            if "ms" in row:
                print(f"    {name}: {row['ms']:.3f} ms a call", flush=True)
            time.sleep(2)
    for cfg in (suite[n] for n in names):
        if not args.no_cudnn_fp8:
            add(cudnn_fp8(cfg, args.seconds))
            time.sleep(2)
        try:
            fns = providers(cfg)
        except Exception as e:  # e.g. out of memory: the point's row says so, the next point runs
            add(dict(point=cfg.name, provider="inputs", failure=f"{type(e).__name__}: {str(e)[:200]}"))
            continue
        for name, fn in fns.items():
            if keep and name not in keep:
                continue
            add(sustained_row(cfg.name, name, fn, cfg.flops, args.seconds))
            time.sleep(2)  # let the card cool a little between providers, as the benchmark does not
    return 0


if __name__ == "__main__":
    sys.exit(main())
