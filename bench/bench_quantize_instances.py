"""Every compiled quantize apply instance forced by name beside the library's pick (fp8attn.quantize(...,
kernel_name=NAME)), timed interleaved on the same input (candidates come from a build of the manifest's extra set;
the default set has only the pick), on the recipes the accuracy modes run: int8 per 64-token
block with rotation (Q of int8_qk) and with smoothing too, the same K per 128 tokens (block_pair: int8_qk's K, the
Gluon and the Triton 128-token applies), e4m3 per tensor (fp8's Q and K), e4m3 V^T in the key-permuted order (every
FP8 mode's V). Each forced output is checked byte for byte against the pick's first.

    PYTHONPATH=build/python python3 bench/bench_quantize_instances.py [--csv out.csv]

A benchmark, never a test: it prints a table (us per call, the statistics and reduce launches included) and
writes what --csv names.
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import bench_vs_cudnn as bvc  # noqa: E402  (time_cuda_interleaved, write_rows)

SHAPES = [(16, 2048, 32, 128), (4, 8192, 64, 64)]  # (batch, seqlen, heads, head_dim): mode_stage_times.py's points
RECIPES = {
    "int8_q": dict(dtype="int8", granularity="block", rotate=True, seed=1),
    "int8_k": dict(dtype="int8", granularity="block", rotate=True, smooth=True, seed=1),
    # int8_qk's K: 128-token descales, the smoothing mean from every n-th block (the library's rule)
    "int8_k_pair": dict(dtype="int8", granularity="block_pair", rotate=True, smooth=True, seed=1,
                        smooth_sample_stride=0),
    "e4m3_qk": dict(dtype="e4m3", granularity="tensor"),
    "e4m3_v": dict(dtype="e4m3", granularity="tensor", layout="vt_kperm"),
}


def apply_instances(fp8attn, d, recipe):
    tag = "i8" if recipe["dtype"] == "int8" else "e4m3"
    kperm = recipe.get("layout") == "vt_kperm"
    tokens = 128 if recipe.get("granularity") == "block_pair" else 64  # the applies' block: 64 tokens, 128 for pairs
    return sorted(o["name"] for o in fp8attn.list_operations()
                  if isinstance(o, dict) and o["name"].startswith(f"fp8attn_sm90_quantize_apply_bf16_{tag}_")
                  and f"_{tokens}x{d}_" in o["name"] and ("_kperm" in o["name"]) == kperm)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--csv", default="")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=9)
    ap.add_argument("--target-ms", type=float, default=10.0)
    args = ap.parse_args()

    import torch

    import fp8attn

    rows = []
    for b, s, h, d in SHAPES:
        x = (torch.randn((b, s, h, d), device="cuda") * 2).to(torch.bfloat16)
        for recipe_name, recipe in RECIPES.items():
            want = fp8attn.quantize(x, **recipe)
            names = apply_instances(fp8attn, d, recipe)
            for name in names:
                got = fp8attn.quantize(x, kernel_name=name, **recipe)
                same = torch.equal(got[0].view(torch.uint8), want[0].view(torch.uint8)) and torch.equal(got[1], want[1])
                if not same:
                    print(f"MISMATCH {name} on {recipe_name}", flush=True)
            calls = [lambda: fp8attn.quantize(x, **recipe)] + [
                (lambda n=n: fp8attn.quantize(x, kernel_name=n, **recipe)) for n in names]
            times = bvc.time_cuda_interleaved(calls, args)
            line = f"B={b} S={s} H={h} D={d} {recipe_name:<8} pick {times[0] * 1e3:8.1f} us"
            for n, t in zip(names, times[1:]):
                short = n.replace("fp8attn_sm90_quantize_apply_bf16_", "")
                line += f" | {short} {t * 1e3:.1f}"
                rows.append({"shape": f"{b}x{s}x{h}x{d}", "recipe": recipe_name, "instance": n, "us": t * 1e3,
                             "pick_us": times[0] * 1e3})
            print(line, flush=True)
    if args.csv:
        bvc.write_rows(args.csv, rows)


if __name__ == "__main__":
    main()
