"""The Gluon quantize apply (kernels/quantize/quantize_apply_gluon.py) compiled for sm_90 on the CPU: the rotation
is one HGMMA chain a 64-row block (HEAD_DIM / 16 instructions, twice for block_pair's 128-token blocks, not
serialized by ptxas), nothing spills to local memory,
the output leaves through a TMA store, and the shared memory the kernel declares is its buffers (buffer_bytes,
which sizes its programs an SM: codegen/operations/quantize.py gluon_apply_programs_per_sm) plus under 256 bytes. Its numbers are checked on the GPU
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

import params as kernel_params  # noqa: E402
from aot_compile import sass_of, wgmma_serialized  # noqa: E402
from families import FAMILIES  # noqa: E402
from operations import quantize as quantize_op  # noqa: E402
from operations.quantize import (GLUON_APPLY_OUT_BUFFERS, GLUON_APPLY_STAGES, QuantizeConfig,  # noqa: E402
                                 gluon_apply_ring)
from quantize.quantize_apply_gluon import buffer_bytes, quantize_apply_gluon_kernel  # noqa: E402


def compile_apply(head_dim, int8, stages=GLUON_APPLY_STAGES, out_buffers=GLUON_APPLY_OUT_BUFFERS, block_s=64):
    """The library's instance (codegen's signature and constants), with a ring of `stages` blocks and
    `out_buffers` output blocks (the sweep's switches); block_s 128: the int8 block_pair apply."""
    from triton.backends.compiler import GPUTarget

    c = QuantizeConfig("apply", "bf16", "i8" if int8 else "e4m3", block_s, head_dim, 4, family="gluon")
    params, types, constexprs, warps, num_stages = quantize_op.compile_spec(c)
    constexprs = dict(constexprs, NUM_STAGES=stages, OUT_BUFFERS=out_buffers)
    signature, attrs = kernel_params.triton_signature(quantize_apply_gluon_kernel, params, types, constexprs)
    return FAMILIES["gluon"].compile(quantize_apply_gluon_kernel, signature, constexprs, attrs, warps, num_stages,
                                     GPUTarget("cuda", 90, 32))


class GluonApply(unittest.TestCase):
    def test_sass_and_shared_memory(self):
        # The last two: the block_pair applies (128-token blocks, two 64-row wgmma chains a block), with the ring
        # codegen gives them (gluon_apply_ring).
        for head_dim, int8, stages, outs, block_s in ((128, True, 3, 2, 64), (128, False, 4, 2, 64),
                                                      (64, True, 3, 2, 64), (64, False, 3, 2, 64),
                                                      (128, True, 2, 1, 64),
                                                      (128, True, *gluon_apply_ring(128), 128),
                                                      (64, True, *gluon_apply_ring(128), 128)):
            with self.subTest(head_dim=head_dim, int8=int8, stages=stages, out_buffers=outs, block_s=block_s):
                compiled = compile_apply(head_dim, int8, stages, outs, block_s)
                with tempfile.TemporaryDirectory() as tmp:
                    cubin = Path(tmp) / "k.cubin"
                    cubin.write_bytes(compiled.asm["cubin"])
                    sass = sass_of(cubin)
                self.assertEqual(len(re.findall(r"\bHGMMA\.64x%dx16\.F32\.BF16" % head_dim, sass)),
                                 block_s // 64 * head_dim // 16)
                self.assertEqual(wgmma_serialized(sass, compiled.asm["ptx"]), "")
                self.assertNotRegex(sass, r"\b(LDL|STL)\b")  # no local memory
                self.assertRegex(sass, r"\bUTMASTG\b")
                buffers = buffer_bytes(head_dim, stages, outs, block_s)
                extra = compiled.metadata.shared - buffers
                self.assertTrue(0 <= extra < 256, f"shared {compiled.metadata.shared}, buffers {buffers}")

    def test_the_shared_memory_check_can_fail(self):
        """buffer_bytes is what the check compares against: a ring one block deeper than compiled is caught."""
        compiled = compile_apply(64, True, 3, 2)
        extra = compiled.metadata.shared - buffer_bytes(64, 4, 2)
        self.assertFalse(0 <= extra < 256)


if __name__ == "__main__":
    unittest.main()
