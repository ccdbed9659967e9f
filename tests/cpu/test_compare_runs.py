"""bench/compare_runs.py finds a slowed fp8attn row, ignores the reference libraries' rows and a row within the
threshold, and fails when the runs share no row (the checker proven by breaking its input)."""

import csv
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
import compare_runs  # noqa: E402

FIELDS = ["config", "provider", "tflops", "kernel"]


def write(path, rows):
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=FIELDS)
        w.writeheader()
        for config, provider, tflops in rows:
            w.writerow({"config": config, "provider": provider, "tflops": tflops, "kernel": "k"})


class CompareRuns(unittest.TestCase):
    def run_on(self, old_rows, new_rows, threshold="0.05"):
        with tempfile.TemporaryDirectory() as d:
            old, new = os.path.join(d, "old.csv"), os.path.join(d, "new.csv")
            write(old, old_rows)
            write(new, new_rows)
            return compare_runs.main([new, "--reference", old, "--threshold", threshold])

    def test_same_run_passes(self):
        rows = [("a", "fp8attn-fp8", "800.0"), ("a", "cudnn-fp8", "900.0")]
        self.assertEqual(self.run_on(rows, rows), 0)

    def test_slowed_fp8attn_row_fails(self):
        old = [("a", "fp8attn-fp8", "800.0"), ("b", "fp8attn-bf16", "400.0")]
        new = [("a", "fp8attn-fp8", "700.0"), ("b", "fp8attn-bf16", "400.0")]  # -12.5%
        self.assertEqual(self.run_on(old, new), 1)

    def test_within_threshold_and_reference_rows_pass(self):
        old = [("a", "fp8attn-fp8", "800.0"), ("a", "cudnn-fp8", "900.0"), ("c", "fp8attn-fp8", "", )]
        new = [("a", "fp8attn-fp8", "770.0"), ("a", "cudnn-fp8", "500.0"), ("c", "fp8attn-fp8", "100.0")]
        self.assertEqual(self.run_on(old, new), 0)  # -3.75%; cuDNN's drop is not ours; c unmeasured before

    def test_threshold_is_read(self):
        old, new = [("a", "fp8attn-fp8", "800.0")], [("a", "fp8attn-fp8", "770.0")]
        self.assertEqual(self.run_on(old, new, threshold="0.01"), 1)

    def test_no_common_rows_fails(self):
        self.assertEqual(self.run_on([("a", "fp8attn-fp8", "800.0")], [("b", "fp8attn-fp8", "800.0")]), 1)


if __name__ == "__main__":
    unittest.main()
