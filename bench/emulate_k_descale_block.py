"""Float64 emulation on the CPU (numpy, no GPU): the error of int8_qk's Q.K^T quantization with K's descale block of
64 tokens against 128, on accuracy_modes' inputs (gaussian, sink, outliers) and slice. int8_qk's transforms as the
mode applies them (K smoothed by its mean over the sequence, Q and K rotated by a random-sign Hadamard matrix), Q in
INT8 per 64 tokens of a head, K per 64 or per 128, round to nearest even, amax / 127; V and P exact, so the two
columns differ only in K's granularity. Error: relative L2 against float64 attention on the unquantized inputs.

    python3 bench/emulate_k_descale_block.py --lengths 1024,4096,16384

What one k descale per 128-key tile (the Gluon INT8 kernels' cheaper softmax) would cost in accuracy before the real
model's perplexity (scripts/real_model_check.sh) decides. A benchmark, not a test.
"""

import argparse
import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import accuracy_modes as am  # noqa: E402  (inputs, slice, float64 reference)


def random_sign_hadamard(d, rng):
    """An orthonormal [d, d] Sylvester Hadamard matrix with random signs on its rows (d a power of two)."""
    h = np.array([[1.0]])
    while h.shape[0] < d:
        h = np.block([[h, h], [h, -h]])
    return h * rng.choice([-1.0, 1.0], size=d)[:, None] / math.sqrt(d)


def int8_blocks(x, block):
    """x [S, H, D] float64 -> its INT8 values times their descales, one descale per `block` tokens of each head."""
    s, heads, d = x.shape
    n = -(-s // block)
    padded = np.zeros((n * block, heads, d))
    padded[:s] = x
    blocks = padded.reshape(n, block, heads, d)
    scale = np.abs(blocks).max(axis=(1, 3), keepdims=True) / 127.0
    scale[scale == 0] = 1.0
    return (np.clip(np.rint(blocks / scale), -127, 127) * scale).reshape(n * block, heads, d)[:s]


def relative_error(out, ref):
    num = sum(float(((out[h] - ref[h]) ** 2).sum()) for h in ref)
    den = sum(float((ref[h] ** 2).sum()) for h in ref)
    return math.sqrt(num / den)


def transformed_cases(lengths, seed):
    """For each accuracy_modes input kind and length: (kind, S, Q rotated, K smoothed and rotated, V, the float64
    reference slice on the unquantized inputs), int8_qk's exact transforms applied as the mode applies them."""
    rotation = random_sign_hadamard(am.HEAD_DIM, np.random.default_rng(seed))
    for kind in am.KINDS:
        for s in (int(x) for x in lengths.split(",") if x):
            q, k, v = (x[0].astype(np.float64) for x in am.make_inputs(kind, s))
            ref = am.reference_slice(q[None], k[None], v[None])
            yield kind, s, q @ rotation, (k - k.mean(axis=0, keepdims=True)) @ rotation, v, ref


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lengths", default="1024,4096,16384")
    ap.add_argument("--seed", type=int, default=7, help="the rotation's signs")
    args = ap.parse_args()
    print(f"{'input':<10} {'S':>6}  {'K per 64':>9}  {'K per 128':>9}  ratio")
    for kind, s, qr, kr, v, ref in transformed_cases(args.lengths, args.seed):
        errs = [relative_error(am.reference_slice(int8_blocks(qr, 64)[None], int8_blocks(kr, kb)[None], v[None]), ref)
                for kb in (64, 128)]
        print(f"{kind:<10} {s:>6}  {100 * errs[0]:8.3f}%  {100 * errs[1]:8.3f}%  {errs[1] / errs[0]:.3f}", flush=True)


if __name__ == "__main__":
    main()
