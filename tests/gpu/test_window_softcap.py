"""Sliding windows and logit soft-capping on the H200 (fmha_fwd(window=..., softcap=...)): FP8 and BF16 against
float64 over the same (quantized) inputs, causal and not, S_q != S_k. (Whether the skipped tiles show in time is
bench/bench_decode.py --window's question, not a test's.) tests/cpu/test_fmha_interpreter.py checks the same
kernel's masks on the CPU."""

import math

import pytest

import fmha_utils as fu

if fu.SKIP_REASON:
    pytest.skip(fu.SKIP_REASON, allow_module_level=True)

import torch  # noqa: E402

import fp8attn  # noqa: E402


def reference(q, k, v, causal, window, softcap):
    """float64 [B, S, H, D] (GQA repeated); rows that see no key give 0."""
    g = q.shape[2] // k.shape[2]
    qh, kh, vh = (t.double().transpose(1, 2) for t in (q, k, v))
    kh, vh = kh.repeat_interleave(g, 1), vh.repeat_interleave(g, 1)
    s = qh @ kh.transpose(-1, -2) / math.sqrt(q.shape[-1])
    if softcap:
        s = softcap * torch.tanh(s / softcap)
    sq, sk = s.shape[-2:]
    i = torch.arange(sq, device=s.device)[:, None]
    j = torch.arange(sk, device=s.device)[None, :]
    c = sk - sq
    keep = torch.ones(sq, sk, dtype=torch.bool, device=s.device)
    if causal:
        keep &= j <= i + c
    if window[1] >= 0:
        keep &= j <= i + c + window[1]
    if window[0] >= 0:
        keep &= j >= i + c - window[0]
    p = torch.softmax(s.masked_fill(~keep, float("-inf")), -1).nan_to_num(0.0)
    return (p @ vh).transpose(1, 2)


@pytest.mark.parametrize("dtype", ["e4m3", "bf16"])
@pytest.mark.parametrize("causal,window,sq,sk", [(True, (255, -1), 1000, 1000), (False, (100, 30), 700, 900),
                                                  (True, (2048, -1), 300, 4096)])
def test_window(dtype, causal, window, sq, sk, seed):
    p = fu.Problem(batch=2, seqlen_q=sq, seqlen_k=sk, heads_q=8, heads_kv=2, causal=causal, dtype=dtype)
    inp = fu.make_inputs(p, seed)
    o = fp8attn.fmha_fwd(inp.q, inp.k, inp.v, causal=causal, window=window, **inp.kwargs())
    torch.cuda.synchronize()
    ref = reference(inp.qf, inp.kf, inp.vf, causal, window, 0.0)
    err = ((o.double() - ref).norm() / ref.norm()).item()
    assert err < (0.05 if dtype == "e4m3" else 0.01), f"relative error {err:.4f}"


def window_instances():
    """Every compiled e4m3/bf16 instance with a window path: all but evenn, soft-capping and INT8 ones, and the
    Gluon "_varlen" ones (packed sequences only: test_varlen runs windows on them)."""
    return [k for k in fp8attn.list_kernels() if k["qk_type"] in ("e4m3", "bf16") and not k["even_n"]
            and not k["softcap"] and not k["block_descale"] and not (k["family"] == "gluon" and k["varlen"])]


@pytest.mark.parametrize("causal,window,sq,sk", [(True, (255, -1), 1000, 1000), (False, (100, 30), 700, 900),
                                                  (True, (130, 0), 520, 520)])
def test_window_on_every_instance(causal, window, sq, sk, seed):
    """Each instance forced by name (Triton and Gluon, vkperm included: the call writes the V^T it reads): the
    left-edge, unmasked and right-edge tile ranges of both kernels against float64."""
    failures = []
    for k in window_instances():
        if k["causal"] != causal:
            continue
        p = fu.Problem(batch=2, seqlen_q=sq, seqlen_k=sk, heads_q=8, heads_kv=2, head_dim=k["head_dim"],
                       causal=causal, dtype=k["qk_type"])
        inp = fu.make_inputs(p, seed)
        o = fp8attn.fmha_fwd(inp.q, inp.k, inp.v, causal=causal, window=window, kernel_name=k["name"],
                             **inp.kwargs())
        torch.cuda.synchronize()
        ref = reference(inp.qf, inp.kf, inp.vf, causal, window, 0.0)
        err = ((o.double() - ref).norm() / ref.norm()).item()
        if not err < (0.05 if k["qk_type"] == "e4m3" else 0.01):
            failures.append(f"{k['name']}: relative error {err:.4f}")
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("dtype,d", [("e4m3", 256), ("bf16", 256), ("e4m3", 128), ("bf16", 128)])
def test_softcap(dtype, d, seed):
    if not any(k.get("softcap") and k["head_dim"] == d and k["qk_type"] == dtype for k in fp8attn.list_kernels()):
        pytest.skip(f"no softcap instance for {dtype} D={d}")
    p = fu.Problem(batch=1, seqlen_q=777, seqlen_k=777, heads_q=4, heads_kv=2, causal=True, dtype=dtype, head_dim=d)
    inp = fu.make_inputs(p, seed)
    o = fp8attn.fmha_fwd(inp.q, inp.k, inp.v, causal=True, softcap=3.0, window=(512, -1), **inp.kwargs())
    name = fp8attn.select_kernel(inp.q, inp.k, inp.v, causal=True, softcap=3.0, **inp.kwargs())
    torch.cuda.synchronize()
    assert name.endswith("_softcap"), name
    ref = reference(inp.qf, inp.kf, inp.vf, True, (512, -1), 3.0)
    err = ((o.double() - ref).norm() / ref.norm()).item()
    assert err < (0.05 if dtype == "e4m3" else 0.01), f"relative error {err:.4f}"
