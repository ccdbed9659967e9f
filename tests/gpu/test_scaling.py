"""Static (caller-given) and delayed (amax history) E4M3 scaling: saturation instead of Inf, the history's
semantics, and non-finite inputs not poisoning later calls."""

import pytest

import fmha_utils as fu

if fu.SKIP_REASON:
    pytest.skip(fu.SKIP_REASON, allow_module_level=True)

import torch  # noqa: E402

import fp8attn  # noqa: E402
from fp8attn.quant import DelayedScaling  # noqa: E402


def test_static_descale_saturates():
    x = torch.tensor([1.0, -1.0, 1000.0, -1e30, float("inf")], device="cuda")
    x8, d = fp8attn.quantize_e4m3(x, descale=0.5)
    assert float(d) == 0.5
    y = x8.float()
    assert torch.equal(y, torch.tensor([2.0, -2.0, 448.0, -448.0, 448.0], device="cuda")), y
    with pytest.raises(ValueError, match="descale"):
        fp8attn.quantize_e4m3(x, descale=0.0)
    with pytest.raises(ValueError, match="descale"):
        fp8attn.quantize_e4m3(x, descale=float("nan"))


def test_delayed_uses_the_earlier_calls_amax():
    s = DelayedScaling(history=2)
    _, d1 = s.quantize(torch.full((8,), 448.0, device="cuda"))  # first call: its own amax
    assert float(d1) == 1.0
    x8, d2 = s.quantize(torch.full((8,), 896.0, device="cuda"))  # uses call 1's amax: 896 saturates
    assert float(d2) == 1.0 and float(x8.float().max()) == 448.0
    _, d3 = s.quantize(torch.full((8,), 44.8, device="cuda"))  # max(448, 896) / 448
    assert float(d3) == 2.0
    _, d4 = s.quantize(torch.full((8,), 44.8, device="cuda"))  # history of 2: 896 and 44.8
    assert float(d4) == 2.0
    _, d5 = s.quantize(torch.full((8,), 44.8, device="cuda"))  # 896 has left the window
    assert abs(float(d5) - 0.1) < 1e-7


def test_delayed_ignores_non_finite_amax():
    s = DelayedScaling(history=4)
    s.quantize(torch.full((8,), 448.0, device="cuda"))
    bad = torch.tensor([1.0, float("inf"), float("nan")], device="cuda")
    x8, d = s.quantize(bad)
    assert float(d) == 1.0 and torch.isfinite(x8.float()[:2]).all()
    _, d_next = s.quantize(torch.ones(8, device="cuda"))
    assert float(d_next) == 1.0, "the Inf/NaN call must not poison the history"
