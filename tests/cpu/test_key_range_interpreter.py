"""kernels/common/key_range.py, the key bounds both attention kernels (Triton and Gluon) take a query block's
tiles from, run in Triton's interpreter over random problems and checked against FlashAttention's definition of
what row i sees (with c = seqlen_k - seqlen_q: j <= i + c if causal, i + c - left <= j <= i + c + right for a
window, j < seqlen_k):
  * the keys a row keeps (masked tiles apply the row's bounds, unmasked tiles keep every key) are exactly its
    visible keys, for every row of the block below seqlen_q;
  * unmasked tiles lie inside [0, seqlen_k) (no key past the sequence is kept unmasked);
  * n_start is a multiple of BLOCK_N (of ALIGN with it, and the masked / unmasked bounds on the tiles' grid) and the
    tile count is the same however it is computed (the producer's range() and the consumers' cdiv() in the Gluon
    kernel must agree); ALIGN=128 gives a 4k window's blocks 16.5 256-key tiles each;
  * near 2^31 tokens nothing wraps (the unlimited bound was once seqlen_k, and i + seqlen_k wrapped);
  * keep_mask, the one-compare mask of a masked tile, keeps exactly the keys of the two-sided definition (rows that
    see no key of the tile, or none at all, included)."""

import unittest

import interpreter_host  # noqa: F401  (sets TRITON_INTERPRET before triton is imported)
from interpreter_host import HostTensor, launch

import numpy as np  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

from common.key_range import keep_mask, key_range  # noqa: E402


@triton.jit
def key_range_cases(StartM, SeqQ, SeqK, Left, Right, Out, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                    CAUSAL: tl.constexpr, ALIGN: tl.constexpr):
    i = tl.program_id(0)
    bounds = key_range(tl.load(StartM + i), tl.load(SeqQ + i), tl.load(SeqK + i), tl.load(Left + i),
                       tl.load(Right + i), BLOCK_M, BLOCK_N, CAUSAL, ALIGN)
    for k in tl.static_range(6):
        tl.store(Out + i * 6 + k, bounds[k])


@triton.jit
def keep_mask_cases(StartN, Row0, LoOff, HiOff, SeqK, Out, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    i = tl.program_id(0)
    rows = tl.load(Row0 + i) + tl.arange(0, BLOCK_M)
    cols = tl.load(StartN + i) + tl.arange(0, BLOCK_N)
    keep = keep_mask(cols, rows, tl.load(LoOff + i), tl.load(HiOff + i), tl.load(SeqK + i))
    offs = i * BLOCK_M * BLOCK_N + tl.arange(0, BLOCK_M)[:, None] * BLOCK_N + tl.arange(0, BLOCK_N)[None, :]
    tl.store(Out + offs, keep.to(tl.int32))


def run(cases, block_m, block_n, causal, align=0):
    """cases: int arrays (start_m, seqlen_q, seqlen_k, left, right); returns [n, 6] int64 bounds."""
    n = len(cases[0])
    out = np.zeros((n, 6), np.int32)
    tensors = [HostTensor(np.ascontiguousarray(a, np.int32), "int32") for a in cases]
    launch(key_range_cases, n, StartM=tensors[0], SeqQ=tensors[1], SeqK=tensors[2], Left=tensors[3],
           Right=tensors[4], Out=HostTensor(out, "int32"), BLOCK_M=block_m, BLOCK_N=block_n, CAUSAL=causal,
           ALIGN=align)
    return out.astype(np.int64)


def visible(i, sq, sk, left, right, causal):
    j = np.arange(sk)
    c = sk - sq
    keep = np.ones(sk, bool)
    if causal:
        keep &= j <= i + c
    if right >= 0:
        keep &= j <= i + c + right
    if left >= 0:
        keep &= j >= i + c - left
    return keep


class KeyRange(unittest.TestCase):
    def test_random_problems_against_the_definition(self):
        rng = np.random.default_rng(11)
        # 256: the dense FP8 instances' wide tile (wider than the 128-row block); align: tiles on a grid from a
        # multiple of it (key_range's ALIGN), not of the tile.
        for block_n, align in ((64, 0), (128, 0), (256, 0), (256, 128), (256, 64), (128, 64)):
            shifted_unmasked = 0  # ALIGN cases whose grid is off BLOCK_N's and that have unmasked tiles on it
            for causal in (False, True):
                n = 300
                if align:
                    # Sequences longer than the windows, so that the window's left edge falls inside them and the
                    # shifted grid carries unmasked tiles (with the short ones below it seldom does).
                    sq, sk = rng.integers(512, 2048, n), rng.integers(512, 2048, n)
                    left = np.where(rng.random(n) < 0.1, -1, rng.integers(0, 700, n))
                else:
                    sq, sk = rng.integers(1, 450, n), rng.integers(1, 450, n)
                    left = np.where(rng.random(n) < 0.3, -1, rng.integers(0, 600, n))
                right = np.where(rng.random(n) < 0.5, -1, rng.integers(0, 300, n))
                start_m = np.array([rng.integers(0, (q + 127) // 128) * 128 for q in sq])
                got = run((start_m, sq, sk, left, right), 128, block_n, causal, align)
                for t in range(n):
                    lo, hi, ns, lme, fe, ne = got[t]
                    case = (int(start_m[t]), int(sq[t]), int(sk[t]), int(left[t]), int(right[t]), block_n, causal,
                            align)
                    with self.subTest(case=case, bounds=tuple(got[t])):
                        self.assertEqual(ns % (align or block_n), 0)
                        shifted_unmasked += int(ns % block_n != 0 and lme < fe)
                        self.assertEqual((lme - ns) % block_n if lme < ne else 0, 0, "lo_masked_end off the grid")
                        self.assertEqual((fe - ns) % block_n if fe < ne else 0, 0, "full_end off the grid")
                        self.assertEqual(len(range(ns, ne, block_n)), max(0, -(-(ne - ns) // block_n)))
                        for i in range(case[0], min(case[0] + 128, case[1])):
                            kept = np.zeros(case[2], bool)
                            for tile in range(ns, ne, block_n):
                                j = np.arange(tile, tile + block_n)
                                if lme <= tile < fe:  # unmasked: every key kept, all inside the sequence
                                    self.assertLess(tile + block_n - 1, case[2], "unmasked tile past seqlen_k")
                                    kept[j] = True
                                else:
                                    j = j[(j < min(i + hi + 1, case[2])) & (j >= i + lo)]
                                    kept[j] = True
                            np.testing.assert_array_equal(kept, visible(i, *case[1:5], causal), f"row {i}")
            if align:
                self.assertGreater(shifted_unmasked, 20, f"too few shifted cases with unmasked tiles, {block_n}/{align}")

    def test_aligned_window_tiles(self):
        """What ALIGN is for (issue 9's 4k window at S=32768, causal, 128-row blocks, 256-key tiles): counted in
        256-key tiles, a last tile whose upper half no row sees counting half (the Gluon kernel's HALF_LAST), every
        block past the first 4k visits 16.5 tiles with ALIGN=128, and 16.5 or 17 alternately without."""
        s, left = 32768, 4095
        start_m = np.arange(4096, s, 128)
        n = len(start_m)
        for align, want in ((0, {16.5, 17.0}), (128, {16.5})):
            got = run((start_m, [s] * n, [s] * n, [left] * n, [-1] * n), 128, 256, True, align)
            tiles = set()
            for lo, hi, ns, lme, fe, ne in got:
                whole = -(-(ne - ns) // 256)
                tiles.add(whole - 0.5 * (ne - (ns + (whole - 1) * 256) <= 128))
            with self.subTest(align=align):
                self.assertEqual(tiles, want)
            # And a few of these blocks row by row against the definition (the random cases' check, at 32k).
            for t in (0, 1, 100, n - 1):
                lo, hi, ns, lme, fe, ne = got[t]
                for i in range(int(start_m[t]), int(start_m[t]) + 128, 9):
                    kept = np.zeros(s, bool)
                    for tile in range(ns, ne, 256):
                        j = np.arange(tile, tile + 256)
                        if lme <= tile < fe:
                            kept[j] = True
                        else:
                            kept[j[(j < min(i + hi + 1, s)) & (j >= i + lo)]] = True
                    np.testing.assert_array_equal(kept, visible(i, s, s, left, -1, True), f"align {align} row {i}")

    def test_keep_mask_is_the_two_sided_bound(self):
        rng = np.random.default_rng(5)
        bm, bn, n = 16, 32, 400
        seqlen_k = rng.integers(1, 300, n)
        row0 = rng.integers(0, 300, n)
        start_n = rng.integers(0, 10, n) * bn
        # Offsets as key_range makes them: lower bounds down to -(start_m + BLOCK_M) (unlimited), upper bounds up
        # to seqlen_k - start_m (unlimited), windows anywhere between; some rows end up with no key at all.
        lo_off = np.where(rng.random(n) < 0.3, -(row0 + bm), rng.integers(-300, 100, n))
        hi_off = np.where(rng.random(n) < 0.3, seqlen_k - row0, lo_off + rng.integers(-20, 200, n))
        out = np.zeros((n, bm, bn), np.int32)
        tensors = [HostTensor(np.ascontiguousarray(a, np.int32), "int32") for a in (start_n, row0, lo_off, hi_off,
                                                                                      seqlen_k)]
        launch(keep_mask_cases, n, StartN=tensors[0], Row0=tensors[1], LoOff=tensors[2], HiOff=tensors[3],
               SeqK=tensors[4], Out=HostTensor(out, "int32"), BLOCK_M=bm, BLOCK_N=bn)
        for t in range(n):
            i = row0[t] + np.arange(bm)[:, None]
            j = start_n[t] + np.arange(bn)[None, :]
            want = (j >= i + lo_off[t]) & (j <= i + hi_off[t]) & (j < seqlen_k[t])
            with self.subTest(case=(start_n[t], row0[t], lo_off[t], hi_off[t], seqlen_k[t])):
                np.testing.assert_array_equal(out[t].astype(bool), want)

    def test_no_wrap_near_2_pow_31(self):
        big = 2**31 - 300
        start_m = (big - 100) // 128 * 128  # the last query block
        for causal in (False, True):
            lo, hi, ns, lme, fe, ne = run(([start_m], [big], [big], [-1], [-1]), 128, 128, causal)[0]
            with self.subTest(causal=causal):
                # Full: every key; causal: the keys up to the block's last row (start_m + 127).
                self.assertEqual(ne, min(big, start_m + 128) if causal else big, "n_end: the bound sums wrapped")
                self.assertEqual(ns, 0)
                self.assertEqual(fe, start_m if causal else big // 128 * 128, "unmasked tiles")
        # ALIGN with a left window there: tiles from the multiple of 128 below the first row's lowest key.
        left = 4095
        lo, hi, ns, lme, fe, ne = run(([start_m], [big], [big], [left], [-1]), 128, 256, True, 128)[0]
        self.assertEqual((ns, ne), ((start_m - left) // 128 * 128, min(big, start_m + 128)), "aligned bounds wrapped")
        self.assertEqual((fe - ns) % 256, 0)
        self.assertTrue(ns <= lme <= fe <= ne)


if __name__ == "__main__":
    unittest.main()
