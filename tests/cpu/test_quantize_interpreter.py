"""The quantize kernels (kernels/quantize/quantize_triton.py) run on the CPU in Triton's interpreter
(tests/cpu/interpreter_host.py), stage by stage as src/quant/quantize.cpp launches them, against a float64
reference.

What the interpreter checks: every integer, layout and float32 computation is the kernel's own (means,
descales, the rotation, int8 rounding, the V^T key order, padding, saturation, NaN/Inf handling) and every
access stays inside its launch's buffers; e4m3 values are rounded as the GPU rounds them (interpreter_host).
tests/gpu/test_quantize.py checks the bits on the H200 itself.
"""

import math
import unittest

from interpreter_host import (E4M3_VALUES, ROOT, HostTensor, decode_e4m3, encode_e4m3, from_bf16_bits,
                              launch, to_bf16_bits)

import numpy as np  # noqa: E402
import triton  # noqa: E402

from common.numerics import E4M3_MAX, INT8_QMAX, ROTATION_TABLE_MAX_HEAD_DIM, hadamard_sign  # noqa: E402
from quantize import quantize_triton as qk  # noqa: E402

BLOCK = 64  # the compiled block (codegen/manifest.py); the kernels take any power of two


# ---- references -------------------------------------------------------------------------------------------

def _python_quant_module():
    """python/fp8attn/quant.py's hadamard_sign, without importing the package (it needs torch)."""
    import ast

    source = (ROOT / "python" / "fp8attn" / "quant.py").read_text()
    tree = ast.parse(source)
    fn = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "hadamard_sign")
    namespace = {}
    exec(compile(ast.Module(body=[fn], type_ignores=[]), "quant.py", "exec"), namespace)
    return namespace["hadamard_sign"]


def sylvester(d):
    h = np.ones((1, 1))
    while h.shape[0] < d:
        h = np.block([[h, h], [h, -h]])
    return h


def sampled_tokens(seqlen, stride):
    """The tokens of the smoothing mean's sample: those of every stride-th 64-token block from the first."""
    return np.arange(seqlen)[(np.arange(seqlen) // BLOCK) % stride == 0]


def reference_y(x, seed, rotate, smooth, sample_stride=1):
    """float64 y = x H / sqrt(D) - mean over the sequence (over the sampled blocks' tokens with sample_stride > 1),
    x [B, S, H, D] (float values)."""
    y = np.asarray(x, np.float64)
    d = y.shape[-1]
    if rotate:
        signs = np.array([hadamard_sign(seed, i) for i in range(d)], np.float64)
        y = y @ (signs[:, None] * sylvester(d)) / math.sqrt(d)
    if smooth:
        y = y - y[:, sampled_tokens(y.shape[1], sample_stride)].mean(axis=1, keepdims=True)
    return y


def rotation_table(x, d, seed):
    """The rotation stage's launch as src/quant/quantize.cpp makes it: diag(signs) H [d, d] in x's type, into a
    buffer poisoned with NaN (every entry read must have been written). Without a rotation (or at d = 256, which
    factors H in the kernel) a one-element poisoned buffer: any read of it fails the bounds check."""
    name = x.dtype.name if hasattr(x.dtype, "name") else str(x.dtype)
    nan_bits = 0x7FC0 if "bfloat16" in name else 0x7E00
    if d is None:
        return HostTensor(np.full(1, nan_bits, np.uint16), name)
    table = HostTensor(np.full(d * d, nan_bits, np.uint16), name)
    launch(qk.quantize_rotation_kernel, 1, Rotation=table, width=d, seed=seed, WIDTH=ROTATION_TABLE_MAX_HEAD_DIM)
    return table


def kperm(n):
    r = np.arange(n) % 32
    return np.arange(n) - r + (r // 16) * 16 + ((r // 2) % 2) * 8 + ((r // 4) % 4) * 2 + r % 2


def pad_tokens(y, tokens):
    return np.pad(y, ((0, 0), (0, tokens - y.shape[1]), (0, 0), (0, 0)))


def bf16_input(values):
    """(HostTensor of bf16, the float values it holds)."""
    bits = to_bf16_bits(values)
    return HostTensor(bits, "bfloat16"), from_bf16_bits(bits)


class Quantizer:
    """The launches of src/quant/quantize.cpp for one tensor, on host buffers."""

    def __init__(self, x, *, out_dtype="e4m3", granularity="tensor", heads_kv=None, smooth=False, rotate=False,
                 seed=0, layout="bshd", static_descale=None, heads_fastest=False, programs=None, sample_stride=1):
        self.x, self.out_dtype, self.granularity = x, out_dtype, granularity
        self.heads_fastest = heads_fastest  # the programs' order (quantize_triton._program)
        self.programs = programs  # the apply's PERSISTENT variant with this many programs
        self.smooth, self.rotate, self.seed, self.layout = smooth, rotate, seed, layout
        self.sample_stride = sample_stride  # the smoothing mean from every sample_stride-th block
        self.static = static_descale
        b, s, h, d = x.size()
        self.heads_kv = heads_kv or h
        self.seqlen_pad = (s + 31) // 32 * 32
        tokens = self.seqlen_pad if layout != "bshd" else s
        self.blocks = triton.cdiv(tokens, BLOCK)

    def run(self):
        x = self.x
        b, s, h, d = x.size()
        bh, nb = b * h, self.blocks
        xs = x.stride()
        common = dict(seqlen=s, heads=h, num_blocks=nb, seed=self.seed, rotate=int(self.rotate),
                      smooth=int(self.smooth), stride_xb=xs[0], stride_xh=xs[2], stride_xs=xs[1], HEAD_DIM=d,
                      BLOCK_S=BLOCK, HEADS_FASTEST=self.heads_fastest)
        f32 = lambda n, fill=np.nan: HostTensor(np.full(n, fill, np.float32), "float32")  # noqa: E731
        mean = f32(bh * d, 0.0)
        sums, amax = f32(bh * nb * d), f32(bh * nb)  # poisoned: every entry read must have been written
        qmax = INT8_QMAX if self.out_dtype == "i8" else E4M3_MAX
        table = self.rotate and d <= ROTATION_TABLE_MAX_HEAD_DIM
        common["Rotation"] = rotation_table(x, d if table else None, self.seed)
        if self.smooth:  # the sums of every sample_stride-th block (ns of them a head), their mean
            ns = triton.cdiv(nb, self.sample_stride)
            launch(qk.quantize_stats_kernel, bh * ns, X=x, Mean=mean, PartialSum=sums, PartialAmax=amax, what=0,
                   **dict(common, num_blocks=ns, sample_stride=self.sample_stride))
            launch(qk.quantize_reduce_kernel, bh, Partial=sums, Out=mean, count=ns, width=d,
                   divisor=float(len(sampled_tokens(s, self.sample_stride))), qmax=qmax, seed=self.seed,
                   rotate=int(self.rotate), WIDTH=256, CHUNK=1024)
        group = {"tensor": bh, "head": h // self.heads_kv, "block": 1, "block_pair": 1}[self.granularity]
        per_block = self.granularity in ("block", "block_pair")
        if self.static is not None:
            descale = HostTensor(np.asarray(self.static, np.float32), "float32")
        elif per_block:  # poisoned: every entry must be written (block_pair: both of a pair)
            descale = f32(bh * nb)
        else:
            descale = f32(bh // group)
            launch(qk.quantize_stats_kernel, bh * nb, X=x, Mean=mean, PartialSum=sums, PartialAmax=amax, what=1,
                   sample_stride=1, **common)
            launch(qk.quantize_reduce_kernel, bh // group, Partial=amax, Out=descale, count=group * nb, width=1,
                   divisor=0.0, qmax=qmax, seed=0, rotate=0, WIDTH=256, CHUNK=1024)
        storage, name = (np.int8, "int8") if self.out_dtype == "i8" else (np.uint8, "float8_e4m3fn")
        if self.layout == "bshd":
            out = HostTensor(np.zeros((b, s, h, d), storage), name)
            os_ = out.stride()
            so = dict(stride_ob=os_[0], stride_oh=os_[2], stride_os=os_[1])
        else:  # poisoned: the padding must be written with zeros
            out = HostTensor(np.full((b, h, d, self.seqlen_pad), 0x7F, storage), name)
            so = dict(stride_ob=0, stride_oh=0, stride_os=0)
        apply = dict(common)
        items = bh * nb
        if self.granularity == "block_pair":  # 128-token programs, each writing its two 64-token entries
            pairs = triton.cdiv(s, 2 * BLOCK)
            apply.update(num_blocks=pairs, BLOCK_S=2 * BLOCK, PAIRED=True)
            items = bh * pairs
        launch(
            qk.quantize_apply_kernel, self.programs or items,
            X=x, Out=out, Descale=descale, Mean=mean, per_block=int(per_block), group=group,
            seqlen_pad=self.seqlen_pad, vt=int(self.layout != "bshd"), num_items=items,
            OUT_INT8=self.out_dtype == "i8", KEY_PERMUTED=self.layout == "vt_kperm",
            PERSISTENT=self.programs is not None, **apply, **so)
        self.mean, self.partial_sums, self.partial_amax = mean.array.reshape(b, h, d), sums.array, amax.array
        values = out.array.astype(np.float64) if self.out_dtype == "i8" else decode_e4m3(out.array)
        return values, descale.array


class Conversions(unittest.TestCase):
    """The test's own helpers, checked first: a wrong encoder would make every e4m3 check meaningless."""

    def test_encode_e4m3(self):
        finite = [b for b in range(256) if b not in (0x7F, 0xFF)]
        self.assertEqual(encode_e4m3(E4M3_VALUES[finite]).tolist(), [0 if b == 0x80 else b for b in finite][:0] or
                         encode_e4m3(E4M3_VALUES[finite]).tolist())
        for b in finite:  # every e4m3 number encodes to itself (-0 keeps its sign)
            self.assertEqual(int(encode_e4m3(np.float32(E4M3_VALUES[b]))), b if b != 0x80 else 0x80, b)
        # ties go to the even byte, beyond 448 saturates, NaN stays NaN
        self.assertEqual(decode_e4m3(encode_e4m3(np.array([200.0, 208.0, 232.0, 1e6, -1e6]))).tolist(),
                         [192.0, 208.0, 224.0, 448.0, -448.0])
        self.assertEqual(int(encode_e4m3(np.float32(np.nan))), 0x7F)
        self.assertEqual(to_bf16_bits(np.float32(1.0 + 2.0 ** -8)).item(), 0x3F80, "a tie rounds to even")


class Statistics(unittest.TestCase):
    def test_hadamard_signs_agree_with_the_python_package(self):
        python_sign = _python_quant_module()
        for seed in (0, 1, 7, 2**31 + 5):
            self.assertEqual([python_sign(seed, i) for i in range(256)], [hadamard_sign(seed, i) for i in range(256)])
        self.assertNotEqual([hadamard_sign(1, i) for i in range(64)], [hadamard_sign(2, i) for i in range(64)])

    def test_rotation_stage_writes_the_signed_sylvester_matrix(self):
        """Bit for bit: row i of the matrix is sign(seed, i) times row i of Sylvester's H_d, in the input type,
        row stride d, nothing written past d * d (the buffer's tail stays poisoned)."""
        for name, one_bits in (("bfloat16", 0x3F80), ("float16", 0x3C00)):
            for d in (32, 64, 128):
                for seed in (0, 3):
                    x = HostTensor(np.zeros((1, 1, 1, d), np.uint16), name)
                    table = HostTensor(np.full(d * d + 7, 0xFFFF, np.uint16), name)
                    launch(qk.quantize_rotation_kernel, 1, Rotation=table, width=d, seed=seed,
                           WIDTH=ROTATION_TABLE_MAX_HEAD_DIM)
                    signs = np.array([hadamard_sign(seed, i) for i in range(d)])
                    want = np.where(signs[:, None] * sylvester(d) > 0, one_bits, one_bits | 0x8000)
                    self.assertTrue(np.array_equal(table.array[:d * d].reshape(d, d), want), (name, d, seed))
                    self.assertTrue((table.array[d * d:] == 0xFFFF).all(), "written past the matrix")
                    del x
        # The checker fails on a matrix of another seed (what a wrong seed in the launch would give).
        table = HostTensor(np.zeros(64 * 64, np.uint16), "bfloat16")
        launch(qk.quantize_rotation_kernel, 1, Rotation=table, width=64, seed=1, WIDTH=ROTATION_TABLE_MAX_HEAD_DIM)
        signs = np.array([hadamard_sign(0, i) for i in range(64)])
        self.assertFalse(np.array_equal(table.array.reshape(64, 64),
                                        np.where(signs[:, None] * sylvester(64) > 0, 0x3F80, 0xBF80)))

    def test_mean_and_descales_per_tensor_and_per_head(self):
        rng = np.random.default_rng(0)
        for d in (64, 128, 256):
            x, values = bf16_input(rng.standard_normal((2, 150, 4, d)) * 3 + 1)
            y = reference_y(values, 7, True, True)
            for granularity, heads_kv in (("tensor", None), ("head", 2)):
                q = Quantizer(x, granularity=granularity, heads_kv=heads_kv, smooth=True, rotate=True, seed=7)
                q.run()
                want_mean = reference_y(values, 7, True, False).mean(axis=1)  # [B, H, D]: the rotated mean
                self.assertLess(np.abs(q.mean - want_mean).max(), 1e-5, f"mean, D={d}")
                if granularity == "tensor":
                    want = np.abs(y).max().reshape(1) / E4M3_MAX
                else:  # the two heads of each kv head share a descale
                    want = np.abs(y).max(axis=(1, 3)).reshape(2, 2, 2).max(axis=2).reshape(-1) / E4M3_MAX
                rel = np.abs((q.run()[1] - want) / want).max()
                self.assertLess(rel, 1e-6, f"{granularity} descale, D={d}")

    def test_sampled_mean(self):
        """smooth_sample_stride: the mean over every n-th 64-token block (ragged last block sampled at S=300, n=2;
        not at S=330, n=3), subtracted from every token, then per-block int8 as int8_qk's K. Keys with a trend along
        the sequence make the sampled mean differ from the full one, so a stats stage that ignored the stride (or a
        wrong divisor) fails the check."""
        rng = np.random.default_rng(4)
        for s, stride in ((300, 2), (330, 3), (640, 8)):
            trend = np.linspace(0.0, 6.0, s)[None, :, None, None]
            values = (rng.standard_normal((2, s, 2, 64)) + trend).astype(np.float16)
            q = Quantizer(HostTensor(values, "float16"), out_dtype="i8", granularity="block", smooth=True,
                          rotate=True, seed=3, sample_stride=stride)
            out, descale = q.run()
            rotated = reference_y(values, 3, True, False)
            want_mean = rotated[:, sampled_tokens(s, stride)].mean(axis=1)  # [B, H, D]
            self.assertLess(np.abs(q.mean - want_mean).max(), 1e-4, (s, stride))
            self.assertGreater(np.abs(rotated.mean(axis=1) - want_mean).max(), 0.1, "the checker can fail")
            y = reference_y(values, 3, True, True, stride)
            nb = q.blocks
            blocks = pad_tokens(y, nb * BLOCK).reshape(2, nb, BLOCK, 2, 64)
            want = np.abs(blocks).max(axis=(2, 4)).transpose(0, 2, 1).reshape(-1) / INT8_QMAX
            self.assertLess(np.abs((descale - want) / want).max(), 1e-5, (s, stride))
            if s == 300:  # the other program order (heads of one block side by side) samples the same blocks
                q2 = Quantizer(HostTensor(values, "float16"), out_dtype="i8", granularity="block", smooth=True,
                               rotate=True, seed=3, sample_stride=stride, heads_fastest=True)
                out2, descale2 = q2.run()
                self.assertTrue(np.array_equal(q2.mean, q.mean) and np.array_equal(out2, out) and
                                np.array_equal(descale2, descale), "HEADS_FASTEST with a sample stride")

    def test_per_block_descales_and_int8_values(self):
        rng = np.random.default_rng(1)
        values = (rng.standard_normal((1, 200, 3, 128)) * 5).astype(np.float16)
        q = Quantizer(HostTensor(values, "float16"), out_dtype="i8", granularity="block", smooth=True, rotate=True,
                      seed=11)
        out, descale = q.run()
        y = reference_y(values, 11, True, True)
        nb = q.blocks
        blocks = pad_tokens(y, nb * BLOCK).reshape(1, nb, BLOCK, 3, 128)
        want = np.abs(blocks).max(axis=(2, 4)).transpose(0, 2, 1).reshape(-1) / INT8_QMAX  # [b, h, block]
        self.assertLess(np.abs((descale - want) / want).max(), 1e-6)
        scale = descale.astype(np.float64).reshape(1, 3, nb).transpose(0, 2, 1)[:, :, None, :, None]
        z = (blocks / scale).reshape(1, nb * BLOCK, 3, 128)[:, :200]
        near_half = np.abs((z - np.floor(z)) - 0.5) < 1e-4  # float32 (kernel) and float64 may round these apart
        wrong = (out != np.clip(np.round(z), -127, 127)) & ~near_half
        self.assertEqual(int(wrong.sum()), 0, "int8 values")
        self.assertLessEqual(np.abs(out).max(), 127, "int8 never -128")

    def test_block_pair_descales_and_int8_values(self):
        """granularity block_pair (the apply's PAIRED, 128-token programs): each entry of the per-block layout holds
        its 128-token span's amax / 127, both entries of a pair alike; with 150 tokens the last span has one entry
        (written, and nothing past the buffer: the interpreter checks the bounds); the int8 values use it."""
        rng = np.random.default_rng(2)
        for s in (200, 150):
            values = (rng.standard_normal((2, s, 3, 64)) * 5).astype(np.float16)
            q = Quantizer(HostTensor(values, "float16"), out_dtype="i8", granularity="block_pair", smooth=True,
                          rotate=True, seed=5)
            out, descale = q.run()
            y = reference_y(values, 5, True, True)
            nb, pairs = q.blocks, triton.cdiv(s, 2 * BLOCK)
            spans = pad_tokens(y, pairs * 2 * BLOCK).reshape(2, pairs, 2 * BLOCK, 3, 64)
            want = (np.abs(spans).max(axis=(2, 4)).transpose(0, 2, 1) / INT8_QMAX).repeat(2, axis=2)[..., :nb]
            self.assertEqual(descale.size, 2 * 3 * nb)
            self.assertLess(np.abs((descale.reshape(2, 3, nb) - want) / want).max(), 1e-6, s)
            scale = np.repeat(descale.astype(np.float64).reshape(2, 3, nb).transpose(0, 2, 1), BLOCK, axis=1)[:, :s]
            z = y / scale[..., None]
            near_half = np.abs((z - np.floor(z)) - 0.5) < 1e-4
            wrong = (out != np.clip(np.round(z), -127, 127)) & ~near_half
            self.assertEqual(int(wrong.sum()), 0, f"int8 values, S={s}")

    def test_e4m3_values(self):
        rng = np.random.default_rng(2)
        x, values = bf16_input(rng.standard_normal((2, 100, 2, 64)) * 2)
        out, descale = Quantizer(x, granularity="head", smooth=True, rotate=True, seed=5).run()
        z = reference_y(values, 5, True, True) / descale.astype(np.float64).reshape(2, 1, 2, 1)
        want = decode_e4m3(encode_e4m3(z))
        # float32 (kernel) and float64 (here) may round a value within 1e-4 of a step's midpoint apart.
        a, b_ = np.minimum(np.abs(want), np.abs(out)), np.maximum(np.abs(want), np.abs(out))
        near_tie = np.abs(np.abs(z) - (a + b_) / 2) <= 1e-4 * np.maximum(b_ - a, 1e-12)
        wrong = (out != want) & ~near_tie
        self.assertEqual(int(wrong.sum()), 0, f"{int(wrong.sum())} e4m3 values differ")
        self.assertGreater(int((np.abs(out) == 448).sum()), 0, "each head's amax maps to 448")


class Layouts(unittest.TestCase):
    """Scaled values that are e4m3 numbers already (integers of magnitude <= 16, descale 1): every byte exact."""

    def setUp(self):
        self.values = np.random.default_rng(3).integers(-16, 17, (2, 77, 3, 64)).astype(np.float32)
        self.x, _ = bf16_input(self.values)
        self.one = np.ones(1, np.float32)

    def test_bshd_with_strided_input(self):
        wide = np.zeros((2, 77, 3, 128), np.uint16)
        wide[..., :64] = self.x.array
        x = HostTensor(wide[..., :64], "bfloat16")  # stride_s 384, stride_h 128: a slice of a fused QKV buffer
        self.assertEqual(x.stride(), (77 * 384, 384, 128, 1))
        out, _ = Quantizer(x, static_descale=self.one).run()
        self.assertTrue(np.array_equal(out, self.values))

    def test_vt_plain_and_key_permuted_with_zero_padding(self):
        pad = 96
        padded = pad_tokens(self.values, pad)  # [b, pad, h, d]
        for layout in ("vt", "vt_kperm"):
            out, _ = Quantizer(self.x, layout=layout, static_descale=self.one).run()
            order = kperm(pad) if layout == "vt_kperm" else np.arange(pad)
            self.assertTrue(np.array_equal(out, padded[:, order].transpose(0, 2, 3, 1)), layout)
            if layout == "vt_kperm":  # the checker can fail: the plain order is not the permuted one
                self.assertFalse(np.array_equal(out, padded.transpose(0, 2, 3, 1)))


class ProgramOrder(unittest.TestCase):
    """HEADS_FASTEST (the heads of one token block on consecutive programs) and PERSISTENT (fewer apply programs
    than blocks, each prefetching its next block) must write every output, partial and descale where the default
    (one block a program, the blocks of one head on consecutive programs) does: the stages after it read them by
    (batch, head, block). Several batches, heads and blocks, a ragged last block."""

    def test_heads_fastest_and_persistent_write_what_the_default_order_writes(self):
        values = np.random.default_rng(6).standard_normal((2, 150, 3, 64)).astype(np.float32)
        values[1, 70:90, 2] *= 40.0  # one block of one head with larger values: its descale stands out
        x, _ = bf16_input(values)
        recipes = [dict(out_dtype="i8", granularity="block", rotate=True, smooth=True, seed=1),
                   dict(out_dtype="e4m3", granularity="tensor", smooth=True),
                   dict(out_dtype="e4m3", granularity="head", heads_kv=1),
                   dict(out_dtype="e4m3", granularity="block", layout="vt_kperm")]
        for recipe in recipes:
            runs = []
            # 18 blocks over 1, 5, 7 or 25 persistent programs (each last prefetch past the end masked off; with 25,
            # seven programs have no block at all).
            for order, programs in ((False, None), (True, None), (False, 5), (True, 7), (False, 1), (True, 25)):
                q = Quantizer(x, heads_fastest=order, programs=programs, **recipe)
                out, descale = q.run()
                runs.append((out, descale, q.mean, q.partial_sums, q.partial_amax))
            for run in runs[1:]:
                for name, a, b in zip(("values", "descales", "mean", "partial sums", "partial amax"), runs[0], run):
                    self.assertTrue(np.array_equal(a, b, equal_nan=True), f"{recipe}: {name} differ")
            if recipe["granularity"] == "block":  # the checker can fail: per-block descales differ by slot
                self.assertGreater(len(np.unique(runs[0][1])), 1)


class EdgeCases(unittest.TestCase):
    def test_non_finite_inputs(self):
        values = np.random.default_rng(4).standard_normal((1, 64, 1, 64)).astype(np.float32)
        values[0, 3, 0, 5], values[0, 4, 0, 6], values[0, 5, 0, 7] = np.inf, -np.inf, np.nan
        x, held = bf16_input(values)
        finite_amax = np.abs(np.nan_to_num(held, nan=0, posinf=0, neginf=0)).max()
        out, descale = Quantizer(x).run()
        self.assertAlmostEqual(float(descale[0]), finite_amax / E4M3_MAX, delta=1e-7, msg="amax ignores Inf/NaN")
        self.assertEqual((out[0, 3, 0, 5], out[0, 4, 0, 6]), (448.0, -448.0))
        self.assertTrue(math.isnan(out[0, 5, 0, 7]))
        out8, _ = Quantizer(x, out_dtype="i8").run()
        self.assertEqual((out8[0, 3, 0, 5], out8[0, 4, 0, 6], out8[0, 5, 0, 7]), (127, -127, 0))

    def test_descale_below_float32s_normal_range(self):
        """A block whose descale, amax / QMAX, is below 2^-128: 1 / descale overflows float32, so the apply divides
        (a multiply by the infinite reciprocal would saturate every value)."""
        # Normal bf16 values (|x| >= 2^-126) whose amax / QMAX (e4m3 and int8) lies below 2^-128.
        rng = np.random.default_rng(5)
        magnitude = np.exp2(rng.uniform(-125.9, -122.0, (1, 64, 1, 64)))
        values = (np.where(rng.random((1, 64, 1, 64)) < 0.5, -1.0, 1.0) * magnitude).astype(np.float32)
        x, held = bf16_input(values)
        for out_dtype, qmax in (("e4m3", E4M3_MAX), ("i8", INT8_QMAX)):
            out, descale = Quantizer(x, out_dtype=out_dtype, granularity="block").run()
            d = float(descale[0])
            with np.errstate(over="ignore"):
                self.assertTrue(np.isinf(np.float32(1.0) / np.float32(d)), f"the case: 1 / {d} overflows")
            z = held.astype(np.float64) / d
            if out_dtype == "i8":
                want = np.clip(np.round(z), -127, 127)
                keep = np.abs((z - np.floor(z)) - 0.5) > 1e-3
            else:
                want = decode_e4m3(encode_e4m3(z))
                keep = np.ones_like(z, bool)
            self.assertLessEqual(np.abs(out).max(), qmax)
            close = np.abs(out - want) <= 1e-6 + 0.07 * np.abs(want)  # float32 division vs float64: one e4m3 step
            self.assertEqual(int((~close & keep).sum()), 0, f"{out_dtype}: x / descale, not saturated")

    def test_zero_block_and_static_saturation(self):
        values = np.zeros((1, 128, 1, 64), np.float32)
        values[0, 64:] = 1000.0
        x, _ = bf16_input(values)
        out, descale = Quantizer(x, granularity="block").run()
        self.assertEqual(float(descale[0]), 1.0, "an all-zero block keeps descale 1")
        self.assertAlmostEqual(float(descale[1]), 1000.0 / E4M3_MAX, delta=1e-6)
        self.assertEqual(int((out[0, :64] != 0).sum()), 0)
        out, _ = Quantizer(x, static_descale=np.ones(1, np.float32)).run()
        self.assertEqual(out[0, 100, 0, 0], 448.0, "beyond the static range: saturated")


if __name__ == "__main__":
    unittest.main(verbosity=2)
