"""The Gluon quantize apply (kernels/quantize/quantize_apply_gluon.py) compiled for sm_90 on the CPU: the rotation
is one HGMMA chain a block (HEAD_DIM / 16 instructions, not serialized by ptxas), nothing spills to local memory,
the output leaves through a TMA store, and the shared memory the kernel declares is its buffers (buffer_bytes,
which sizes its programs an SM in bench/sweep_quantize.py) plus under 256 bytes. Its numbers are checked on the GPU
against the Triton apply, byte for byte (bench/sweep_quantize.py).

    python3 tests/cpu/test_quantize_gluon_compile.py -v
"""

import re
import sys
import tempfile
import unittest
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "codegen"))
sys.path.insert(0, str(ROOT / "kernels"))

from aot_compile import sass_of, wgmma_serialized  # noqa: E402
from operations.fmha_fwd import gluon_tensordesc  # noqa: E402
from quantize.quantize_apply_gluon import buffer_bytes, quantize_apply_gluon_kernel  # noqa: E402

INTS = ["seqlen", "heads", "num_blocks", "rotate", "smooth", "per_block", "group", "num_items"]


def compile_apply(head_dim, int8, stages=3):
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.experimental.gluon._runtime import GluonASTSource

    sig = {"x_desc": gluon_tensordesc("bf16", [1, 64, 1, head_dim], 128),
           "out_desc": gluon_tensordesc("i8" if int8 else "fp8e4nv", [1, 64, 1, head_dim], min(128, head_dim)),
           "Descale": "*fp32", "Mean": "*fp32", "Rotation": "*bf16", **{n: "i32" for n in INTS}}
    consts = {"HEAD_DIM": head_dim, "BLOCK_S": 64, "OUT_INT8": int8, "NUM_STAGES": stages}
    sig.update({k: "constexpr" for k in consts})
    src = GluonASTSource(fn=quantize_apply_gluon_kernel, signature=sig, constexprs=consts, attrs={})
    return triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": 4, "num_stages": 1})


class GluonApply(unittest.TestCase):
    def test_sass_and_shared_memory(self):
        for head_dim, int8, stages in ((128, True, 3), (128, False, 4), (64, True, 3), (64, False, 3)):
            with self.subTest(head_dim=head_dim, int8=int8, stages=stages):
                compiled = compile_apply(head_dim, int8, stages)
                with tempfile.TemporaryDirectory() as tmp:
                    cubin = Path(tmp) / "k.cubin"
                    cubin.write_bytes(compiled.asm["cubin"])
                    sass = sass_of(cubin)
                self.assertEqual(len(re.findall(r"\bHGMMA\.64x%dx16\.F32\.BF16" % head_dim, sass)), head_dim // 16)
                self.assertEqual(wgmma_serialized(sass, compiled.asm["ptx"]), "")
                self.assertNotRegex(sass, r"\b(LDL|STL)\b")  # no local memory
                self.assertRegex(sass, r"\bUTMASTG\b")
                extra = compiled.metadata.shared - buffer_bytes(head_dim, stages)
                self.assertTrue(0 <= extra < 256, f"shared {compiled.metadata.shared}, buffers "
                                                  f"{buffer_bytes(head_dim, stages)}")

    def test_the_shared_memory_check_can_fail(self):
        """buffer_bytes is what the check compares against: a ring one block deeper than compiled is caught."""
        compiled = compile_apply(64, True, 3)
        extra = compiled.metadata.shared - buffer_bytes(64, 4)
        self.assertFalse(0 <= extra < 256)


if __name__ == "__main__":
    unittest.main()
