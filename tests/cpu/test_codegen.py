"""CPU tests of the generator: names round-trip, filters, manifest selection, and the compiled outputs of
the build (cubins present, metadata sane, QGMMA in FP8 SASS, parameter layout as the launcher packs it).

    FP8ATTN_BUILD_DIR=build python -m unittest tests/cpu/test_codegen.py
"""

import json
import os
import re
import sys
import unittest
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "codegen"))
sys.path.insert(0, str(ROOT / "kernels"))

import manifest  # noqa: E402
from kernel_filter import matches_filter  # noqa: E402
from kernel_name import FmhaConfig, TransposeConfig, name_of, parse_name  # noqa: E402


class KernelNames(unittest.TestCase):
    def test_every_instance_round_trips(self):
        for config in manifest.ALL:
            name = name_of(config)
            self.assertEqual(parse_name(name), config, name)
            self.assertEqual(name_of(parse_name(name)), name)

    def test_fields_are_spelled_out(self):
        c = FmhaConfig("e4m3", "e4m3", "f32", "bf16", 128, 64, 256, 8, 3, True, True, False)
        self.assertEqual(name_of(c), "fp8attn_sm90_fmha_fwd_e4m3_e4m3_f32_bf16_128x64x256_w8_s3_strided_causal_ws")
        t = TransposeConfig("u8", 64, 128, 4)
        self.assertEqual(name_of(t), "fp8attn_sm90_transpose_v_u8_64x128_w4")

    def test_bad_names_are_rejected_with_the_name(self):
        for bad in ["", "fp8attn_sm90_fmha_fwd", "cutlass3x_sm90_tensorop_gemm",
                    "fp8attn_sm90_fmha_fwd_e4m3_e4m3_f32_bf16_128x128x128_w8_s3_strided_sideways",
                    "fp8attn_sm90_fmha_fwd_e9m9_e4m3_f32_bf16_128x128x128_w8_s3_strided_full"]:
            with self.assertRaises(ValueError) as err:
                parse_name(bad)
            self.assertIn(repr(bad), str(err.exception))


class Filters(unittest.TestCase):
    def test_shared_cases(self):
        cases = 0
        for line in (ROOT / "tests" / "cpu" / "filter_cases.txt").read_text().splitlines():
            if not line or line.startswith("#"):
                continue
            filt, name, expected = line.split("|")
            self.assertEqual(matches_filter(name, filt), expected == "1", f"{filt!r} on {name}")
            cases += 1
        self.assertGreaterEqual(cases, 10)


class Manifest(unittest.TestCase):
    def test_default_set_is_small_and_complete(self):
        default = manifest.instances()
        fmha = [c for c in default if isinstance(c, FmhaConfig)]
        self.assertLessEqual(len(default), 20, "the default build must stay minutes on 2 cores")
        for dtype in ("e4m3", "bf16"):
            for d in manifest.HEAD_DIMS:
                for causal in (False, True):
                    self.assertTrue(any(c.qk_type == dtype and c.head_dim == d and c.causal == causal
                                        and not c.even_n for c in fmha), (dtype, d, causal))
        self.assertEqual(sorted(c.head_dim for c in default if isinstance(c, TransposeConfig)), [64, 128, 256])

    def test_filter_selects_from_the_full_set_and_keeps_transposes(self):
        chosen = manifest.instances("e4m3*x256_")
        names = [name_of(c) for c in chosen]
        self.assertTrue(all("x256_" in n for n in names), names)
        self.assertIn("fp8attn_sm90_transpose_v_u8_128x256_w4", names)
        self.assertGreater(len([n for n in names if "fmha" in n]), 2, "full set has more D=256 FP8 instances")
        bf16_only = [name_of(c) for c in manifest.instances("fwd_bf16")]
        self.assertFalse(any("transpose" in n for n in bf16_only), "BF16 needs no V transpose")

    def test_specialized_instances_come_first(self):
        # The C++ heuristic takes the first supporting instance, so evenn must precede the general one.
        names = [name_of(c) for c in manifest.DEFAULT]
        evenn = names.index("fp8attn_sm90_fmha_fwd_e4m3_e4m3_f32_bf16_128x128x128_w4_s2_strided_full_ws_evenn")
        general = names.index("fp8attn_sm90_fmha_fwd_e4m3_e4m3_f32_bf16_128x128x128_w8_s3_strided_full")
        self.assertLess(evenn, general)


@unittest.skipUnless(os.environ.get("FP8ATTN_BUILD_DIR"), "set FP8ATTN_BUILD_DIR to check a build's kernels")
class GeneratedKernels(unittest.TestCase):
    def setUp(self):
        # FP8ATTN_KERNEL_DIR: a build tree that reuses another tree's kernels (CI's sanitizer build) names them.
        self.dir = Path(os.environ.get("FP8ATTN_KERNEL_DIR") or Path(os.environ["FP8ATTN_BUILD_DIR"]) / "kernels")
        registry = (self.dir / "registry.cpp").read_text()
        self.names = re.findall(r"&kInstance_(\w+),", registry)
        self.assertTrue(self.names, "registry.cpp lists no instance")

    def test_metadata_and_sass(self):
        from aot_compile import sass_of
        from kernel_signature import kernel_signature

        for name in self.names:
            with self.subTest(name=name):
                config = parse_name(name)
                cubin = self.dir / f"{name}.cubin"
                self.assertGreater(cubin.stat().st_size, 1000)
                meta = json.loads((self.dir / f"{name}.json").read_text())
                self.assertEqual(meta["name"], name)
                self.assertEqual(meta["triton_version"], "3.6.0")
                self.assertEqual(meta["num_ctas"], 1)
                self.assertGreaterEqual(meta["num_warps"], config.warps)
                self.assertLessEqual(meta["shared"], 232448, "over the sm_90 shared memory limit")
                self.assertEqual(meta["param_types"], kernel_signature(config).param_types + ["u64", "u64"])
                sass = sass_of(cubin)
                if isinstance(config, FmhaConfig) and config.is_fp8:
                    self.assertGreater(len(re.findall(r"\bQGMMA\b", sass)), 0, "FP8 instance without QGMMA")
                if isinstance(config, FmhaConfig):
                    self.assertTrue(re.search(r"\b[QH]GMMA\b", sass), "attention without wgmma")
                self.assertIn(f'"{name}"', (self.dir / f"{name}.cpp").read_text())


if __name__ == "__main__":
    unittest.main()
