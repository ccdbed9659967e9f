"""Float64 emulation on the CPU (numpy, no GPU): the error of int8_qk's Q.K^T quantization with Q's descale per 64
tokens (today's kernels: one q descale a consumer warpgroup), per 16 (a warp's rows) and per token (one a row), K
per 128 tokens (block_pair) in all three, on accuracy_modes' inputs (gaussian, sink, outliers) and slice. The
transforms as int8_qk applies them (bench/emulate_k_descale_block.py: K smoothed, Q and K rotated, round to nearest
even, amax / 127); V and P exact, so the columns differ only in Q's granularity. Error: relative L2 against float64
attention on the unquantized inputs.

    python3 bench/emulate_q_descale_block.py --lengths 1024,4096,16384

What a finer q descale could recover before any kernel carries it: in the Gluon INT8 softmax a per-row q descale
would be a per-row factor of the scale it already applies a tile, not another instruction a score. A benchmark,
not a test.
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import accuracy_modes as am  # noqa: E402  (inputs, slice, float64 reference)
from emulate_k_descale_block import int8_blocks, relative_error, transformed_cases  # noqa: E402

Q_BLOCKS = (64, 16, 1)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lengths", default="1024,4096,16384")
    ap.add_argument("--seed", type=int, default=7, help="the rotation's signs")
    args = ap.parse_args()
    print(f"{'input':<10} {'S':>6}  " + "  ".join(f"{'Q per ' + str(b):>9}" for b in Q_BLOCKS) + "  per token / per 64")
    for kind, s, qr, kr, v, ref in transformed_cases(args.lengths, args.seed):
        kq = int8_blocks(kr, 128)
        errs = [relative_error(am.reference_slice(int8_blocks(qr, qb)[None], kq[None], v[None]), ref)
                for qb in Q_BLOCKS]
        print(f"{kind:<10} {s:>6}  " + "  ".join(f"{100 * x:8.3f}%" for x in errs) + f"  {errs[-1] / errs[0]:.3f}",
              flush=True)


if __name__ == "__main__":
    main()
