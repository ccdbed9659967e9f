"""Speed regressions between two runs of bench/bench_vs_cudnn.py: every (config, fp8attn provider) whose TFLOP/s
fell by more than --threshold against the reference CSV (by default the committed docs/perf/bench_vs_cudnn.csv).

    python3 bench/compare_runs.py NEW.csv [--reference docs/perf/bench_vs_cudnn.csv] [--threshold 0.05]

Prints one line per fp8attn row present in both runs (old, new, ratio, kernel) and exits 1 when any row is slower
by more than the threshold, 0 otherwise. The cuDNN/FlashAttention rows of both runs are compared too, as a check
that the machine itself is not the difference (they are reported, never counted as regressions). Why this
exists: two regressions (a transpose's stores turned byte-wide, a register-count jump) cost up to 40% at some
points and went unseen for two sessions because nothing compared a run with the last one."""

import argparse
import csv
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_REFERENCE = os.path.join(HERE, "..", "docs", "perf", "bench_vs_cudnn.csv")


def read(path):
    """{(config, provider): (tflops, kernel)} for the rows that measured something."""
    with open(path, newline="") as f:
        return {(r["config"], r["provider"]): (float(r["tflops"]), r.get("kernel", ""))
                for r in csv.DictReader(f) if r.get("tflops")}


def compare(reference, new, threshold):
    """(lines, regressions): a printable line per common row; the fp8attn rows slower than 1 - threshold."""
    lines, regressions = [], []
    for key in sorted(set(reference) & set(new)):
        (old, _), (now, kernel) = reference[key], new[key]
        ratio = now / old if old > 0 else float("inf")
        mine = key[1].startswith("fp8attn")
        slow = mine and ratio < 1.0 - threshold
        lines.append(f"{key[0]:<28} {key[1]:<16} {old:8.1f} -> {now:8.1f}  {ratio:6.3f}"
                     f"{'  REGRESSION' if slow else ''}  {kernel if mine else '(reference library)'}")
        if slow:
            regressions.append(key)
    return lines, regressions


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("new", help="CSV of the new run")
    ap.add_argument("--reference", default=DEFAULT_REFERENCE, help="CSV of the run to compare against")
    ap.add_argument("--threshold", type=float, default=0.05, help="relative slowdown that counts (default 0.05)")
    args = ap.parse_args(argv)
    reference, new = read(args.reference), read(args.new)
    lines, regressions = compare(reference, new, args.threshold)
    print(f"# {len(lines)} rows in both runs; reference {os.path.relpath(args.reference)}")
    print("\n".join(lines))
    if not lines:
        print("no common rows: nothing compared")
        return 1
    print(f"# {len(regressions)} fp8attn rows slower by more than {args.threshold:.0%}")
    return 1 if regressions else 0


if __name__ == "__main__":
    sys.exit(main())
