"""The Triton attention kernel (kernels/fmha_fwd/fmha_fwd_triton.py) on the CPU in Triton's interpreter
(tests/cpu/interpreter_host.py): the INT8 Q.K^T instances' configuration (int8 Q and K with per-block descales,
e4m3 V^T, BLOCK_DESCALE) against float64 attention over the same quantized values, causal and not, GQA, ragged
lengths. The key blocks' scales differ by up to 8x, so a descale read for the wrong block or row shows as an
error far above FP8's; every access stays inside the launch's buffers. tests/gpu/test_int8_qk.py runs the
compiled instances on the H200."""

import math
import unittest

from interpreter_host import HostTensor, decode_e4m3, encode_e4m3, from_bf16_bits, launch, to_bf16_bits

import numpy as np  # noqa: E402
import triton  # noqa: E402

from common.numerics import DESCALE_BLOCK_TOKENS as BLOCK, INT8_QMAX  # noqa: E402
from common.varlen import VT_ALIGN_GLUON, VT_ALIGN_TRITON  # noqa: E402
from fmha_fwd.fmha_fwd_triton import fmha_fwd_kernel  # noqa: E402
from transpose_v.transpose_v_triton import transpose_v_kernel  # noqa: E402


def quantize_int8_blocks(x):
    """x [B, S, H, D] float64 -> (int8 values, descale [B, H, blocks]), symmetric, one scale per 64 tokens."""
    b, s, h, d = x.shape
    nb = -(-s // BLOCK)
    padded = np.pad(x, ((0, 0), (0, nb * BLOCK - s), (0, 0), (0, 0))).reshape(b, nb, BLOCK, h, d)
    amax = np.abs(padded).max(axis=(2, 4)).transpose(0, 2, 1)  # [b, h, nb]
    descale = np.ascontiguousarray(np.where(amax > 0, amax / INT8_QMAX, 1.0), dtype=np.float32)
    scale = np.repeat(descale.transpose(0, 2, 1), BLOCK, axis=1)[:, :s, :, None].astype(np.float64)
    return np.clip(np.round(x / scale), -127, 127).astype(np.int8), descale


def attention(q, k, v, causal, scale, window=(-1, -1), softcap=0.0):
    """float64, [B, S, H, D] inputs, K/V heads repeated for GQA; (O, LSE [B, H, S_q]). Rows that see no key:
    O = 0, LSE = -inf (the kernel's convention)."""
    g = q.shape[2] // k.shape[2]
    k, v = np.repeat(k, g, axis=2), np.repeat(v, g, axis=2)
    s = np.einsum("bshd,bthd->bhst", q, k) * scale
    if softcap:
        s = softcap * np.tanh(s / softcap)
    sq, sk = s.shape[-2:]
    i, j, c = np.arange(sq)[:, None], np.arange(sk)[None, :], sk - sq
    keep = np.ones((sq, sk), bool)
    if causal:
        keep &= j <= i + c
    if window[1] >= 0:
        keep &= j <= i + c + window[1]
    if window[0] >= 0:
        keep &= j >= i + c - window[0]
    s = np.where(keep, s, -np.inf)
    m = s.max(-1, keepdims=True)
    p = np.exp(s - np.where(np.isfinite(m), m, 0))
    total = p.sum(-1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        lse = np.where(total[..., 0] > 0, np.log(total[..., 0]) + np.where(np.isfinite(m), m, 0)[..., 0], -np.inf)
        o = np.einsum("bhst,bthd->bshd", np.where(total > 0, p / total, 0.0), v)
    return o, lse


def launch_attention(q_t, k_t, vt_t, descales, strides, b, sq, sk, hq, hkv, d, causal, block_descale,
                     window=(-1, -1), softcap=0.0):
    """One fmha_fwd_kernel launch (BLOCK 128x128, V^T); returns (O float64 [b, sq, hq, d], LSE)."""
    o = np.zeros((b, sq, hq, d), np.uint16)
    lse = np.full((b, hq, sq), np.nan, np.float32)
    pad = vt_t.array.shape[-1]
    launch(fmha_fwd_kernel, triton.cdiv(sq, 128) * b * hq, Q=q_t, K=k_t, V=vt_t, O=HostTensor(o, "bfloat16"),
           LSE=HostTensor(lse, "float32"), **descales, **strides,
           stride_qb=sq * hq * d, stride_qh=d, stride_qs=hq * d, stride_kb=sk * hkv * d, stride_kh=d,
           stride_ks=hkv * d, stride_vb=hkv * d * pad, stride_vh=d * pad, stride_vs=pad,
           stride_ob=sq * hq * d, stride_oh=d, stride_os=hq * d, softmax_scale=1 / math.sqrt(d),
           seqlen_q=sq, seqlen_k=sk, heads_q=hq, group_size=hq // hkv, write_lse=1,
           window_left=window[0], window_right=window[1], softcap=float(softcap),
           cu_seqlens_q=HostTensor(np.zeros(2, np.int32), "int32"), cu_seqlens_k=HostTensor(np.zeros(2, np.int32), "int32"),
           varlen=0, total_q=0, total_k=0, HEAD_DIM=d, BLOCK_M=128,
           BLOCK_N=128, CAUSAL=causal, V_TRANSPOSED=True, WARP_SPECIALIZE=False, EVEN_N=False,
           BLOCK_DESCALE=block_descale, SOFTCAP=softcap > 0)
    return from_bf16_bits(o).astype(np.float64), lse


def vt_of(v_bytes):
    """e4m3 V [b, s, h, d] bytes -> V^T [b, h, d, s_pad] (zero padding) as the transpose writes it."""
    b, sk, hkv, d = v_bytes.shape
    pad = (sk + 31) // 32 * 32
    vt = np.zeros((b, hkv, d, pad), np.uint8)
    vt[..., :sk] = v_bytes.transpose(0, 2, 3, 1)
    return HostTensor(vt, "float8_e4m3fn")


class Int8QK(unittest.TestCase):
    def run_case(self, b, sq, sk, hq, hkv, d, causal, seed):
        rng = np.random.default_rng(seed)
        q = rng.standard_normal((b, sq, hq, d))
        k = rng.standard_normal((b, sk, hkv, d)) + 0.5
        k *= 2.0 ** (np.arange(sk) // BLOCK % 4)[None, :, None, None]  # block scales 1, 2, 4, 8, 1, ...
        v = rng.standard_normal((b, sk, hkv, d))
        q8, qd = quantize_int8_blocks(q)
        k8, kd = quantize_int8_blocks(k)
        vd = np.array([np.abs(v).max() / 448.0], np.float32)
        v_bytes = encode_e4m3(v / vd[0])
        nbq, nbk = qd.shape[2], kd.shape[2]
        descales = dict(q_descale=HostTensor(qd, "float32"), k_descale=HostTensor(kd, "float32"),
                        v_descale=HostTensor(vd, "float32"))
        strides = dict(
            # q: [b, hq, blocks] indexed by query head; k: [b, hkv, blocks]; v: per tensor
            q_descale_stride_b=hq * nbq, q_descale_stride_h=0, q_descale_stride_hq=nbq, q_descale_stride_blk=1,
            k_descale_stride_b=hkv * nbk, k_descale_stride_h=nbk, k_descale_stride_blk=1,
            v_descale_stride_b=0, v_descale_stride_h=0)
        scale = 1 / math.sqrt(d)
        got, lse = launch_attention(HostTensor(q8, "int8"), HostTensor(k8, "int8"), vt_of(v_bytes), descales, strides,
                                    b, sq, sk, hq, hkv, d, causal, True)
        # The reference sees exactly the kernel's operands: dequantized int8 Q, K and e4m3 V.
        qf = q8 * np.repeat(qd.transpose(0, 2, 1), BLOCK, axis=1)[:, :sq, :, None]
        kf = k8 * np.repeat(kd.transpose(0, 2, 1), BLOCK, axis=1)[:, :sk, :, None]
        vf = decode_e4m3(v_bytes) * vd[0]
        ref_o, ref_lse = attention(qf, kf, vf, causal, scale)
        err = np.linalg.norm(got - ref_o) / np.linalg.norm(ref_o)
        # P rounded to e4m3 per tile and a bf16 output: about 1-2% (FP8's own error; tests/gpu measure it).
        self.assertLess(err, 0.04, f"relative error {err:.4f}")
        self.assertLess(np.abs(lse - ref_lse).max(), 1e-3, "LSE")
        return err

    def test_full_gqa_ragged(self):
        self.run_case(b=2, sq=200, sk=333, hq=4, hkv=2, d=64, causal=False, seed=0)

    def test_causal_bottom_right(self):
        self.run_case(b=1, sq=150, sk=260, hq=2, hkv=1, d=64, causal=True, seed=1)

    def test_head_dim_128(self):
        self.run_case(b=1, sq=130, sk=130, hq=2, hkv=2, d=128, causal=True, seed=2)


class WindowAndSoftcap(unittest.TestCase):
    """e4m3 Q, K, V with per-tensor descales through the same kernel, with sliding windows (runtime bounds: tiles
    outside skipped, edges masked) and logit soft-capping (SOFTCAP)."""

    def run_case(self, sq, sk, causal, window=(-1, -1), softcap=0.0, seed=0, hq=2, hkv=1, d=64):
        rng = np.random.default_rng(seed)
        q = rng.standard_normal((1, sq, hq, d)) * 2
        k = rng.standard_normal((1, sk, hkv, d)) * 2
        v = rng.standard_normal((1, sk, hkv, d))
        qd, kd, vd = (np.array([np.abs(x).max() / 448.0], np.float32) for x in (q, k, v))
        q8, k8, v8 = encode_e4m3(q / qd[0]), encode_e4m3(k / kd[0]), encode_e4m3(v / vd[0])
        descales = dict(q_descale=HostTensor(qd, "float32"), k_descale=HostTensor(kd, "float32"),
                        v_descale=HostTensor(vd, "float32"))
        zero = dict(q_descale_stride_b=0, q_descale_stride_h=0, q_descale_stride_hq=0, q_descale_stride_blk=0,
                    k_descale_stride_b=0, k_descale_stride_h=0, k_descale_stride_blk=0, v_descale_stride_b=0,
                    v_descale_stride_h=0)
        got, lse = launch_attention(HostTensor(q8, "float8_e4m3fn"), HostTensor(k8, "float8_e4m3fn"), vt_of(v8),
                                    descales, zero, 1, sq, sk, hq, hkv, d, causal, False, window, softcap)
        ref_o, ref_lse = attention(decode_e4m3(q8) * qd[0], decode_e4m3(k8) * kd[0], decode_e4m3(v8) * vd[0], causal,
                                   1 / math.sqrt(d), window, softcap)
        err = np.linalg.norm(got - ref_o) / np.linalg.norm(ref_o)
        self.assertLess(err, 0.04, f"relative error {err:.4f}")
        finite = np.isfinite(ref_lse)
        self.assertTrue(np.array_equal(np.isfinite(lse), finite), "rows that see no key: LSE -inf")
        self.assertLess(np.abs(lse[finite] - ref_lse[finite]).max(), 2e-3, "LSE")
        return err

    def test_windows(self):
        # Narrow and wide, left only, both sides, with and without causal, S_q != S_k, edges inside and across tiles.
        for causal, window, sq, sk in ((True, (37, -1), 300, 300), (False, (100, 20), 260, 390),
                                       (True, (200, -1), 130, 700), (False, (-1, 0), 200, 200),
                                       (False, (0, 0), 150, 150), (True, (500, -1), 40, 800)):
            with self.subTest(causal=causal, window=window, sq=sq, sk=sk):
                self.run_case(sq, sk, causal, window)

    def test_windows_near_int32_limits(self):
        # Windows as wide as int32 allows: exactly unlimited (no wrap-around to "see nothing").
        for causal, window, sq, sk in ((False, (2**31 - 1, -1), 128, 64), (False, (-1, 2**31 - 1), 1, 200),
                                       (True, (2**31 - 1, 2**31 - 1), 100, 300)):
            with self.subTest(window=window):
                self.run_case(sq, sk, causal, window)

    def test_window_skips_what_it_must(self):
        """A narrow window equals plain attention over the keys it keeps: compared through the reference above;
        and the checker fails when the window is not applied (the unwindowed reference differs)."""
        rng = np.random.default_rng(9)
        q = rng.standard_normal((1, 300, 1, 64))
        k = rng.standard_normal((1, 300, 1, 64))
        v = rng.standard_normal((1, 300, 1, 64))
        a, _ = attention(q, k, v, True, 0.125, (37, -1))
        b, _ = attention(q, k, v, True, 0.125)
        self.assertGreater(np.linalg.norm(a - b) / np.linalg.norm(b), 0.1)

    def test_softcap(self):
        self.run_case(260, 260, True, softcap=5.0, seed=3)
        self.run_case(200, 333, False, (64, 64), softcap=2.0, seed=4)




# The kernels' varlen argument is the V^T column alignment per sequence (common/varlen.py): the Triton attention
# kernel's 16 in the attention cases below, both in the transpose's.
ALIGN = VT_ALIGN_TRITON


def roundup(x, m):
    return (int(x) + m - 1) // m * m


def varlen_vt_offsets(cu_k, align=ALIGN):
    """Where sequence b's keys start in the varlen V^T rows: roundup(cu_k[b], align) + align b (the kernels')."""
    return [roundup(c, align) + align * b for b, c in enumerate(cu_k[:-1])]


def varlen_vt_row(total, batch, align=ALIGN):
    """The V^T row length the runtime allocates (src/fmha/fmha_params.cpp varlen_vt_row)."""
    return roundup(total, align) + align * batch


def varlen_transpose_programs(max_len, batch, heads, align=ALIGN, block_s=64):
    """transpose_v_kernel's varlen grid: the longest sequence's columns with their zero padding, per (b, head)."""
    return triton.cdiv(roundup(max_len, align), block_s) * batch * heads


class Varlen(unittest.TestCase):
    """Packed sequences (cu_seqlens): each sequence against float64 attention on its own, e4m3 (V^T with every
    sequence's keys 16-column aligned, the rows between sequences poisoned with NaN bytes that must never be read)
    and bf16 (V as it is); causal (bottom-right per sequence) and not, GQA, lengths 0, 1, a block and more."""

    def run_case(self, lens_q, lens_k, causal, dtype, seed, hq=4, hkv=2, d=64):
        rng = np.random.default_rng(seed)
        cu_q = np.concatenate([[0], np.cumsum(lens_q)]).astype(np.int32)
        cu_k = np.concatenate([[0], np.cumsum(lens_k)]).astype(np.int32)
        tq, tk, batch = int(cu_q[-1]), int(cu_k[-1]), len(lens_q)
        q = rng.standard_normal((tq, hq, d)) * 2
        k = rng.standard_normal((tk, hkv, d)) * 2
        v = rng.standard_normal((tk, hkv, d))
        if dtype == "e4m3":
            qd, kd, vd = (np.array([np.abs(x).max() / 448.0], np.float32) for x in (q, k, v))
            q8, k8, v8 = encode_e4m3(q / qd[0]), encode_e4m3(k / kd[0]), encode_e4m3(v / vd[0])
            qf, kf, vf = decode_e4m3(q8) * qd[0], decode_e4m3(k8) * kd[0], decode_e4m3(v8) * vd[0]
            offs = varlen_vt_offsets(cu_k)
            total_pad = varlen_vt_row(tk, batch)
            vt = np.full((hkv, d, total_pad), 0x7F, np.uint8)  # NaN between sequences: never read
            for b in range(batch):
                vt[:, :, offs[b]:offs[b] + lens_k[b]] = v8[cu_k[b]:cu_k[b + 1]].transpose(1, 2, 0)
            qt, kt, vtt = (HostTensor(q8, "float8_e4m3fn"), HostTensor(k8, "float8_e4m3fn"),
                           HostTensor(vt, "float8_e4m3fn"))
            v_strides = dict(stride_vb=0, stride_vh=d * total_pad, stride_vs=total_pad)
        else:
            qd = kd = vd = np.ones(1, np.float32)
            qb, kb, vb = to_bf16_bits(q), to_bf16_bits(k), to_bf16_bits(v)
            qf, kf, vf = from_bf16_bits(qb), from_bf16_bits(kb), from_bf16_bits(vb)
            qt, kt, vtt = HostTensor(qb, "bfloat16"), HostTensor(kb, "bfloat16"), HostTensor(vb, "bfloat16")
            v_strides = dict(stride_vb=0, stride_vh=d, stride_vs=hkv * d)
        max_q, max_k = max(lens_q), max(lens_k)
        o = np.full((tq, hq, d), 0x7FC0, np.uint16)  # NaN: every row of every sequence must be written
        lse = np.full((batch, hq, max(max_q, 1)), np.nan, np.float32)
        zero = dict(q_descale_stride_b=0, q_descale_stride_h=0, q_descale_stride_hq=0, q_descale_stride_blk=0,
                    k_descale_stride_b=0, k_descale_stride_h=0, k_descale_stride_blk=0, v_descale_stride_b=0,
                    v_descale_stride_h=0)
        launch(fmha_fwd_kernel, max(triton.cdiv(max_q, 128), 1) * batch * hq, Q=qt, K=kt, V=vtt,
               O=HostTensor(o, "bfloat16"), LSE=HostTensor(lse, "float32"), q_descale=HostTensor(qd, "float32"),
               k_descale=HostTensor(kd, "float32"), v_descale=HostTensor(vd, "float32"), **zero,
               stride_qb=0, stride_qh=d, stride_qs=hq * d, stride_kb=0, stride_kh=d, stride_ks=hkv * d, **v_strides,
               stride_ob=0, stride_oh=d, stride_os=hq * d, softmax_scale=1 / math.sqrt(d),
               seqlen_q=max_q, seqlen_k=max_k, heads_q=hq, group_size=hq // hkv, write_lse=1,
               window_left=-1, window_right=-1, softcap=0.0,
               cu_seqlens_q=HostTensor(cu_q, "int32"), cu_seqlens_k=HostTensor(cu_k, "int32"), varlen=ALIGN,
               total_q=tq, total_k=tk,
               HEAD_DIM=d, BLOCK_M=128, BLOCK_N=128, CAUSAL=causal, V_TRANSPOSED=dtype == "e4m3",
               WARP_SPECIALIZE=False, EVEN_N=False, BLOCK_DESCALE=False, SOFTCAP=False)
        got = from_bf16_bits(o).astype(np.float64)
        self.assertFalse(np.isnan(got).any(), "a row left unwritten (or NaN from the gaps between sequences)")
        for b in range(batch):
            sq, sk = lens_q[b], lens_k[b]
            if sq == 0:
                continue
            ref_o, ref_lse = attention(qf[None, cu_q[b]:cu_q[b + 1]], kf[None, cu_k[b]:cu_k[b + 1]],
                                       vf[None, cu_k[b]:cu_k[b + 1]], causal, 1 / math.sqrt(d))
            part = got[None, cu_q[b]:cu_q[b + 1]]
            if np.linalg.norm(ref_o) == 0:
                self.assertTrue((part == 0).all(), f"sequence {b}: rows that see no key give 0")
            else:
                err = np.linalg.norm(part - ref_o) / np.linalg.norm(ref_o)
                self.assertLess(err, 0.04 if dtype == "e4m3" else 0.01, f"sequence {b}: relative error {err:.4f}")
            finite = np.isfinite(ref_lse[0])
            self.assertTrue(np.array_equal(np.isfinite(lse[b, :, :sq]), finite), f"sequence {b}: LSE -inf rows")
            self.assertLess(np.abs(lse[b, :, :sq][finite] - ref_lse[0][finite]).max(), 2e-3, f"sequence {b}: LSE")

    def test_e4m3_ragged(self):
        for causal in (False, True):
            with self.subTest(causal=causal):
                self.run_case([5, 130, 1, 64], [200, 130, 7, 3], causal, "e4m3", seed=1)

    def test_bf16_ragged_with_an_empty_sequence(self):
        for causal in (False, True):
            with self.subTest(causal=causal):
                self.run_case([17, 0, 140], [17, 9, 300], causal, "bf16", seed=2)

    def test_varlen_transpose_layout(self):
        """transpose_v_kernel with varlen: each sequence's V^T columns from roundup(cu_k[b], align) + align b, zeros
        up to its length rounded to the alignment, the gaps past that untouched; the Triton kernel's alignment (16)
        in key order, the Gluon kernel's (128: no key tile reaches the next sequence; 256 for its 256-key tiles) in
        key order and key-permuted (positions 16h + 4t + 2j + e of each 32-key block hold key 16h + 8j + 2t + e of the
        sequence); and the dense mode as before (zero padding to seqlen_pad)."""
        rng = np.random.default_rng(4)
        lens, hkv, d = [5, 130, 0, 33, 257], 2, 64
        cu = np.concatenate([[0], np.cumsum(lens)]).astype(np.int32)
        total, batch = int(cu[-1]), len(lens)
        v8 = rng.integers(0, 0x7E, (total, hkv, d), dtype=np.uint8)
        for align, permuted in ((VT_ALIGN_TRITON, False), (VT_ALIGN_GLUON, False), (VT_ALIGN_GLUON, True), (256, False),
                                (256, True)):
            total_pad = varlen_vt_row(total, batch, align)
            vt = np.full((hkv, d, total_pad), 0x7F, np.uint8)
            launch(transpose_v_kernel, varlen_transpose_programs(max(lens), batch, hkv, align),
                   V=HostTensor(v8, "uint8"), VT=HostTensor(vt, "uint8"), seqlen=max(lens), seqlen_pad=total_pad,
                   heads_kv=hkv, stride_vb=0, stride_vh=d, stride_vs=hkv * d, cu_seqlens=HostTensor(cu, "int32"),
                   varlen=align, total=total, HEAD_DIM=d, BLOCK_S=64, KEY_PERMUTED=permuted)
            want = np.full_like(vt, 0x7F)
            for b, off in enumerate(varlen_vt_offsets(cu, align)):
                want[:, :, off:off + roundup(lens[b], align)] = 0
                seq = v8[cu[b]:cu[b + 1]].transpose(1, 2, 0)  # [hkv, d, len]
                for pos in range(roundup(lens[b], 32)):
                    r = pos % 32
                    key = pos - r + (r // 16) * 16 + ((r // 2) % 2) * 8 + ((r // 4) % 4) * 2 + r % 2 if permuted \
                        else pos
                    if key < lens[b]:
                        want[:, :, off + pos] = seq[:, :, key]
            with self.subTest(align=align, permuted=permuted):
                self.assertTrue(np.array_equal(vt, want), "varlen V^T bytes (or a gap written)")
        dense = rng.integers(0, 0x7E, (2, 100, hkv, d), dtype=np.uint8)
        out = np.full((2, hkv, d, 128), 0x7F, np.uint8)
        launch(transpose_v_kernel, 2 * 2 * hkv, V=HostTensor(dense, "uint8"),
               VT=HostTensor(out, "uint8"), seqlen=100, seqlen_pad=128, heads_kv=hkv,
               stride_vb=100 * hkv * d, stride_vh=d, stride_vs=hkv * d, cu_seqlens=HostTensor(cu, "int32"),
               varlen=0, total=0, HEAD_DIM=d, BLOCK_S=64, KEY_PERMUTED=False)
        self.assertTrue(np.array_equal(out, vt_of(dense).array), "dense V^T (zero padding) unchanged")

    def test_bad_offsets_give_nan_rows_and_no_access_outside(self):
        """A sequence longer than the grid's max_seqlen_k, or whose key offsets leave k: its rows NaN (O, LSE), no
        load or store outside the buffers (the harness checks every access), the other sequence exact."""
        rng = np.random.default_rng(5)
        hq, hkv, d = 2, 1, 64
        lens_q, lens_k = [10, 20], [30, 40]
        for case in ("longer than max_seqlen_k", "offset past total_k"):
            cu_q = np.array([0, 10, 30], np.int32)
            cu_k = np.array([0, 30, 70], np.int32)
            max_k = 40
            if case == "longer than max_seqlen_k":
                max_k = 35
            else:
                cu_k[2] = 75
            qb = to_bf16_bits(rng.standard_normal((30, hq, d)))
            kb = to_bf16_bits(rng.standard_normal((70, hkv, d)))
            vb = to_bf16_bits(rng.standard_normal((70, hkv, d)))
            o = np.full((30, hq, d), 0x3F80, np.uint16)  # 1.0: rows a program must not touch keep it
            lse = np.zeros((2, hq, 20), np.float32)
            one = HostTensor(np.ones(1, np.float32), "float32")
            zero = dict(q_descale_stride_b=0, q_descale_stride_h=0, q_descale_stride_hq=0, q_descale_stride_blk=0,
                        k_descale_stride_b=0, k_descale_stride_h=0, k_descale_stride_blk=0, v_descale_stride_b=0,
                        v_descale_stride_h=0)
            launch(fmha_fwd_kernel, 1 * 2 * hq, Q=HostTensor(qb, "bfloat16"), K=HostTensor(kb, "bfloat16"),
                   V=HostTensor(vb, "bfloat16"), O=HostTensor(o, "bfloat16"), LSE=HostTensor(lse, "float32"),
                   q_descale=one, k_descale=one, v_descale=one, **zero, stride_qb=0, stride_qh=d, stride_qs=hq * d,
                   stride_kb=0, stride_kh=d, stride_ks=hkv * d, stride_vb=0, stride_vh=d, stride_vs=hkv * d,
                   stride_ob=0, stride_oh=d, stride_os=hq * d, softmax_scale=0.125, seqlen_q=20, seqlen_k=max_k,
                   heads_q=hq, group_size=hq // hkv, write_lse=1, window_left=-1, window_right=-1, softcap=0.0,
                   cu_seqlens_q=HostTensor(cu_q, "int32"), cu_seqlens_k=HostTensor(cu_k, "int32"), varlen=ALIGN,
                   total_q=30, total_k=70, HEAD_DIM=d, BLOCK_M=128, BLOCK_N=128, CAUSAL=False, V_TRANSPOSED=False,
                   WARP_SPECIALIZE=False, EVEN_N=False, BLOCK_DESCALE=False, SOFTCAP=False)
            got = from_bf16_bits(o).astype(np.float64)
            with self.subTest(case=case):
                self.assertTrue(np.isnan(got[10:30]).all() and np.isnan(lse[1, :, :20]).all(), "bad sequence: NaN")
                qf, kf, vf = from_bf16_bits(qb), from_bf16_bits(kb), from_bf16_bits(vb)
                ref, _ = attention(qf[None, :10], kf[None, :30], vf[None, :30], False, 0.125)
                self.assertLess(np.linalg.norm(got[None, :10] - ref) / np.linalg.norm(ref), 0.01, "good sequence")

    def test_varlen_transpose_skips_bad_offsets(self):
        """Offsets past total, negative, out of order or longer than seqlen: the transpose reads and writes nothing
        for that sequence (the harness checks every access) and the good ones are written as usual."""
        rng = np.random.default_rng(6)
        hkv, d = 1, 64
        v8 = rng.integers(0, 0x7E, (70, hkv, d), dtype=np.uint8)
        for cu_list, good in (([0, 30, 75], [0]), ([0, 30, 100000], [0]), ([-64, 30, 70], [1]),
                              ([32, 64, 0, 32], [0]), ([0, 30, 70], [0, 1])):
            cu = np.array(cu_list, np.int32)
            batch = len(cu) - 1
            total_pad = varlen_vt_row(70, batch)
            vt = np.full((hkv, d, total_pad), 0x7F, np.uint8)
            launch(transpose_v_kernel, varlen_transpose_programs(40, batch, hkv), V=HostTensor(v8, "uint8"),
                   VT=HostTensor(vt, "uint8"), seqlen=40, seqlen_pad=total_pad, heads_kv=hkv, stride_vb=0,
                   stride_vh=d, stride_vs=hkv * d, cu_seqlens=HostTensor(cu, "int32"), varlen=ALIGN, total=70,
                   HEAD_DIM=d, BLOCK_S=64, KEY_PERMUTED=False)
            offs = varlen_vt_offsets(np.maximum(cu, 0))
            with self.subTest(cu=cu_list):
                for b in good:
                    seg = vt[:, :, offs[b]:offs[b] + cu[b + 1] - cu[b]]
                    self.assertTrue(np.array_equal(seg, v8[cu[b]:cu[b + 1]].transpose(1, 2, 0)), f"sequence {b}")
                # (The source bytes are below 0x7E, so every written byte differs from the 0x7F fill.)
                self.assertEqual(int((vt != 0x7F).sum()),  # each good sequence: its length rounded up to 16
                                 sum(roundup(cu[b + 1] - cu[b], ALIGN) * hkv * d for b in good),
                                 "bytes written only for the good sequences")

    def test_fp8_with_an_empty_last_sequence(self):
        # q_start == total_q and k_start == total_k for the last sequence: nothing is read for it.
        self.run_case([20, 30, 0], [40, 50, 0], True, "e4m3", seed=7)

    def test_fp8_out_of_order_offsets(self):
        """cu_k = [32, 64, 0, 32]: sequences 0 and 2 are each valid alone, but their V^T columns would coincide
        (roundup(c, 16) + 16 b = 32). Sequence 2 sees its neighbour's larger offset and is NaN, as is sequence 1
        (64 > 0); sequence 0 is exact. The transpose and the attention kernel apply the same checks."""
        rng = np.random.default_rng(3)
        hq, hkv, d = 2, 1, 64
        cu_q, cu_k = np.array([0, 16, 16, 32], np.int32), np.array([32, 64, 0, 32], np.int32)
        q, k, v = (rng.standard_normal(s) for s in ((32, hq, d), (64, hkv, d), (64, hkv, d)))
        qd, kd, vd = (np.array([np.abs(x).max() / 448.0], np.float32) for x in (q, k, v))
        q8, k8, v8 = encode_e4m3(q / qd[0]), encode_e4m3(k / kd[0]), encode_e4m3(v / vd[0])
        total_pad = varlen_vt_row(64, 3)
        vt = np.full((hkv, d, total_pad), 0x7F, np.uint8)
        launch(transpose_v_kernel, varlen_transpose_programs(32, 3, hkv), V=HostTensor(v8, "uint8"), VT=HostTensor(vt, "uint8"), seqlen=32,
               seqlen_pad=total_pad, heads_kv=hkv, stride_vb=0, stride_vh=d, stride_vs=hkv * d,
               cu_seqlens=HostTensor(cu_k, "int32"), varlen=ALIGN, total=64, HEAD_DIM=d, BLOCK_S=64,
               KEY_PERMUTED=False)
        o = np.zeros((32, hq, d), np.uint16)
        lse = np.zeros((3, hq, 16), np.float32)
        zero = dict(q_descale_stride_b=0, q_descale_stride_h=0, q_descale_stride_hq=0, q_descale_stride_blk=0,
                    k_descale_stride_b=0, k_descale_stride_h=0, k_descale_stride_blk=0, v_descale_stride_b=0,
                    v_descale_stride_h=0)
        launch(fmha_fwd_kernel, 3 * hq, Q=HostTensor(q8, "float8_e4m3fn"), K=HostTensor(k8, "float8_e4m3fn"),
               V=HostTensor(vt, "float8_e4m3fn"), O=HostTensor(o, "bfloat16"), LSE=HostTensor(lse, "float32"),
               q_descale=HostTensor(qd, "float32"), k_descale=HostTensor(kd, "float32"),
               v_descale=HostTensor(vd, "float32"), **zero, stride_qb=0, stride_qh=d, stride_qs=hq * d, stride_kb=0,
               stride_kh=d, stride_ks=hkv * d, stride_vb=0, stride_vh=d * total_pad, stride_vs=total_pad,
               stride_ob=0, stride_oh=d, stride_os=hq * d, softmax_scale=1 / math.sqrt(d), seqlen_q=16,
               seqlen_k=32, heads_q=hq, group_size=hq // hkv, write_lse=1, window_left=-1, window_right=-1,
               softcap=0.0, cu_seqlens_q=HostTensor(cu_q, "int32"), cu_seqlens_k=HostTensor(cu_k, "int32"),
               varlen=ALIGN, total_q=32, total_k=64, HEAD_DIM=d, BLOCK_M=128, BLOCK_N=128, CAUSAL=False,
               V_TRANSPOSED=True, WARP_SPECIALIZE=False, EVEN_N=False, BLOCK_DESCALE=False, SOFTCAP=False)
        got = from_bf16_bits(o).astype(np.float64)
        self.assertTrue(np.isnan(got[16:32]).all(), "sequence 2 (out of order with sequence 1) must be NaN")
        qf, kf, vf = decode_e4m3(q8) * qd[0], decode_e4m3(k8) * kd[0], decode_e4m3(v8) * vd[0]
        ref, _ = attention(qf[None, 0:16], kf[None, 32:64], vf[None, 32:64], False, 1 / math.sqrt(d))
        self.assertLess(np.linalg.norm(got[None, 0:16] - ref) / np.linalg.norm(ref), 0.04, "sequence 0")

    def test_checker_sees_a_shifted_sequence(self):
        # The same data with sequence 1's offsets moved by one key must not pass: the reference is per sequence.
        with self.assertRaises(AssertionError):
            self.run_case_shifted()

    def run_case_shifted(self):
        lens_q, lens_k = [40, 40], [60, 60]
        global varlen_vt_offsets
        original = varlen_vt_offsets
        varlen_vt_offsets = lambda cu_k: [o + (1 if i == 1 else 0) for i, o in enumerate(original(cu_k))]  # noqa: E731
        try:
            self.run_case(lens_q, lens_k, False, "e4m3", seed=3)
        finally:
            varlen_vt_offsets = original


if __name__ == "__main__":
    unittest.main(verbosity=2)
