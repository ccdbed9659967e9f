"""The exact Q/K transforms before quantization (fp8attn.quant: K smoothing, random-sign Hadamard rotation):
they leave attention unchanged in exact arithmetic, and they reduce fp8attn's FP8 error on inputs with the
features that hurt e4m3 (a shared key offset, outlier channels)."""

import math

import pytest

import fmha_utils as fu

if fu.SKIP_REASON:
    pytest.skip(fu.SKIP_REASON, allow_module_level=True)

import torch  # noqa: E402

import fp8attn  # noqa: E402
from fp8attn.quant import hadamard, smooth_keys, transform_qk  # noqa: E402


def attention64(q, k, v, causal):
    """float64 attention on [B, S, H, D] inputs (K/V heads repeated for GQA)."""
    g = q.shape[2] // k.shape[2]
    qh, kh, vh = (t.double().transpose(1, 2) for t in (q, k, v))
    kh, vh = kh.repeat_interleave(g, 1), vh.repeat_interleave(g, 1)
    s = qh @ kh.transpose(-1, -2) / math.sqrt(q.shape[-1])
    if causal:
        sq, sk = s.shape[-2:]
        s = s.masked_fill(~torch.ones(sq, sk, dtype=torch.bool, device=s.device).tril(sk - sq), float("-inf"))
    return (torch.softmax(s, -1) @ vh).transpose(1, 2)


@pytest.mark.parametrize("d", [64, 128, 256])
def test_hadamard_is_orthonormal(d):
    h = hadamard(d, seed=3, dtype=torch.float64)
    assert torch.allclose(h @ h.T, torch.eye(d, dtype=torch.float64), atol=1e-12)
    assert not torch.equal(h, hadamard(d, seed=4, dtype=torch.float64)), "the seed must change the signs"
    with pytest.raises(ValueError, match="power of two"):
        hadamard(96)


@pytest.mark.parametrize("causal", [False, True])
def test_transforms_leave_attention_unchanged(causal):
    torch.manual_seed(0)
    q = torch.randn(2, 100, 4, 64, dtype=torch.float64)
    k = torch.randn(2, 130, 2, 64, dtype=torch.float64) + 3.0  # a shared offset smoothing removes
    v = torch.randn(2, 130, 2, 64, dtype=torch.float64)
    want = attention64(q, k, v, causal)
    qt, kt = transform_qk(q, k, layout="bshd")
    got = attention64(qt, kt, v, causal)
    assert torch.allclose(got, want, atol=1e-9), (got - want).abs().max()
    # Smoothing really removes the mean (the check would pass trivially if it did nothing).
    assert smooth_keys(k).mean(dim=1).abs().max() < 1e-9


def test_transforms_reduce_fp8_error_with_outliers_and_offset():
    """Keys with a large shared offset and a few outlier channels (what trained models show): per-tensor e4m3
    loses most of Q.K^T; smoothing + rotation must recover a clear part of it through the real kernel."""
    torch.manual_seed(1)
    b, s, h, d = 1, 1024, 4, 128
    q = torch.randn(b, s, h, d, device="cuda")
    k = torch.randn(b, s, h, d, device="cuda") * 0.5 + 4.0
    q[..., :4] *= 20.0  # outlier channels
    k[..., :4] *= 20.0
    v = torch.randn(b, s, h, d, device="cuda")
    want = attention64(q, k, v, True)

    def fp8_error(qx, kx):
        (q8, qd), (k8, kd), (v8, vd) = (fp8attn.quantize_e4m3(t) for t in (qx, kx, v))
        o = fp8attn.fmha_fwd(q8, k8, v8, q_descale=qd, k_descale=kd, v_descale=vd, causal=True)
        return ((o.double() - want).norm() / want.norm()).item()

    plain = fp8_error(q, k)
    transformed = fp8_error(*transform_qk(q, k))
    assert transformed < 0.7 * plain, f"error {transformed:.4f} with the transforms vs {plain:.4f} without"
