"""Where an accuracy mode's time goes (device only): every GPU kernel one call launches, with its duration from the
CUDA profiler (torch.profiler over CUPTI), for each mode through both Python paths: fp8attn.attention (quantize_for's
separate quantize calls, then fmha_fwd, which transposes a plain V) and fp8attn.modes.attention_fused (one C++ call,
V quantized straight into the layout P.V reads). What accuracy_modes.py --speed cannot split: how much of a mode's
end-to-end time is quantization, transposes and the attention kernel.

    PYTHONPATH=build/python python3 bench/mode_stage_times.py [--head-dim 64 --seqlen 8192 --batch 4 --heads 64]
"""

import argparse
import collections


def stage_times(fn, repeats):
    """{kernel name: mean microseconds per call} over `repeats` calls of fn (after one untimed call)."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(repeats):
            fn()
        torch.cuda.synchronize()
    totals = collections.defaultdict(float)
    for event in prof.events():
        if event.device_type == torch.autograd.DeviceType.CUDA:
            totals[event.name] += event.time_range.elapsed_us()
    return {name: us / repeats for name, us in totals.items()}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--head-dim", type=int, default=64)
    ap.add_argument("--seqlen", type=int, default=8192)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--heads", type=int, default=64)
    ap.add_argument("--causal", action="store_true")
    ap.add_argument("--modes", default="fp8,int8_qk")
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()

    import torch

    import fp8attn

    gen = torch.Generator(device="cuda").manual_seed(0)
    shape = (args.batch, args.seqlen, args.heads, args.head_dim)
    q, k, v = (torch.randn(shape, generator=gen, device="cuda").to(torch.bfloat16) for _ in range(3))
    paths = {"attention": lambda m: fp8attn.attention(q, k, v, mode=m, causal=args.causal),
             "attention_fused": lambda m: fp8attn.modes.attention_fused(q, k, v, mode=m, causal=args.causal)}
    print(f"B={args.batch} S={args.seqlen} H={args.heads} D={args.head_dim} causal={int(args.causal)}; "
          "microseconds per call", flush=True)
    for mode in args.modes.split(","):
        for path, call in paths.items():
            try:
                times = stage_times(lambda: call(mode), args.repeats)
            except Exception as e:  # noqa: BLE001  (a mode a path does not offer is a line, not the end)
                print(f"{mode} via {path}: {type(e).__name__}: {str(e)[:200]}", flush=True)
                continue
            print(f"{mode} via {path}: {sum(times.values()):.0f} us in {len(times)} kernels", flush=True)
            for name, us in sorted(times.items(), key=lambda kv: -kv[1]):
                print(f"  {us:9.1f}  {name[:110]}", flush=True)


if __name__ == "__main__":
    main()
