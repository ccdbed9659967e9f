"""Varlen prefill on the H200 (fp8attn.fmha_fwd_varlen: packed sequences, cu_seqlens): every sequence against
float64 attention on its own, FP8 and BF16, causal (bottom-right per sequence) and not, GQA, per-sequence
descales, LSE, windows; the same bits as the dense call for one sequence; bad offsets give NaN rows; errors.
tests/cpu/test_fmha_interpreter.py runs the kernels in Triton's interpreter."""

import math

import pytest

import fmha_utils as fu

if fu.SKIP_REASON:
    pytest.skip(fu.SKIP_REASON, allow_module_level=True)

import torch  # noqa: E402

import fp8attn  # noqa: E402


def packed(lens, heads, d, gen, scale=1.0):
    return torch.randn((sum(lens), heads, d), generator=gen, device="cuda") * scale


def cu(lens):
    return torch.tensor([0] + list(torch.tensor(lens).cumsum(0).tolist()), dtype=torch.int32, device="cuda")


def reference(q, k, v, lens_q, lens_k, causal, scale, window=(-1, -1), lse=None):
    """float64 per sequence; q, k, v dequantized [total, heads, d]. lse: a [batch, heads, max_q] tensor to fill."""
    out = torch.zeros(q.shape, dtype=torch.float64, device="cuda")
    g = q.shape[1] // k.shape[1]
    oq = ok = 0
    for b, (sq, sk) in enumerate(zip(lens_q, lens_k)):
        qs, ks, vs = (t.double().transpose(0, 1) for t in (q[oq:oq + sq], k[ok:ok + sk], v[ok:ok + sk]))
        ks, vs = ks.repeat_interleave(g, 0), vs.repeat_interleave(g, 0)
        s = qs @ ks.transpose(-1, -2) * scale
        i = torch.arange(sq, device="cuda")[:, None] + (sk - sq)
        j = torch.arange(sk, device="cuda")[None, :]
        keep = torch.ones(sq, sk, dtype=torch.bool, device="cuda")
        if causal:
            keep &= j <= i
        if window[0] >= 0:
            keep &= j >= i - window[0]
        if window[1] >= 0:
            keep &= j <= i + window[1]
        s = s.masked_fill(~keep, float("-inf"))
        p = torch.softmax(s, -1).nan_to_num(0.0)
        out[oq:oq + sq] = (p @ vs).transpose(0, 1)
        if lse is not None:
            lse[b, :, :sq] = torch.logsumexp(s, -1)
        oq += sq
        ok += sk
    return out


def per_sequence_e4m3(x, lens, heads_kv):
    """e4m3 with one descale per (sequence, kv head): [batch, heads_kv] descales, the FlashAttention-3 convention
    indexed by sequence. Returns (bytes [total, heads, d], descale, dequantized float64)."""
    scale = torch.empty((len(lens), heads_kv), dtype=torch.float32, device="cuda")
    out = torch.empty(x.shape, dtype=torch.float8_e4m3fn, device="cuda")
    group = x.shape[1] // heads_kv
    o = 0
    for b, n in enumerate(lens):
        seg = x[o:o + n].float().reshape(n, heads_kv, group, x.shape[-1])  # -1 is ambiguous for n = 0
        amax = seg.abs().amax(dim=(0, 2, 3)) if n else torch.ones(heads_kv, device="cuda")
        scale[b] = torch.where(amax > 0, amax / 448.0, torch.ones_like(amax))
        out[o:o + n] = (seg / scale[b][None, :, None, None]).reshape(n, x.shape[1], x.shape[-1]).to(torch.float8_e4m3fn)
        o += n
    rep = torch.repeat_interleave(scale, torch.tensor(lens, device="cuda"), dim=0).repeat_interleave(group, 1)
    return out, scale, out.double() * rep.double()[:, :, None]


def instance_inputs(info, q, k, v, lens_q, lens_k, heads_kv):
    """The operands a forced instance reads: bf16 as given, or e4m3 with per-(sequence, kv head) descales.
    Returns (q, k, v, their float64 values, the descale keywords, the error tolerance)."""
    if info["qk_type"] == "bf16":
        q8, k8, v8 = (t.bfloat16() for t in (q, k, v))
        return q8, k8, v8, q8.double(), k8.double(), v8.double(), {}, 0.01
    (q8, qd, qf), (k8, kd, kf), (v8, vd, vf) = (per_sequence_e4m3(t, lens, heads_kv) for t, lens in
                                                ((q, lens_q), (k, lens_k), (v, lens_k)))
    return q8, k8, v8, qf, kf, vf, dict(q_descale=qd, k_descale=kd, v_descale=vd), 0.05


def triton_varlen_instance(dtype, head_dim, causal):
    """The first Triton instance that takes packed sequences for these fields (the path head_dim 256, soft-capping,
    a caller's sequence-contiguous V and tuning-table picks take), None if the build has none."""
    return next((kk["name"] for kk in fp8attn.list_kernels() if kk["family"] == "triton" and kk["varlen"]
                 and kk["qk_type"] == dtype and kk["head_dim"] == head_dim and kk["causal"] == causal
                 and kk["v_transposed"] == (dtype != "bf16") and not kk["softcap"] and not kk["block_descale"]), None)


@pytest.mark.parametrize("path", ["pick", "triton"])
@pytest.mark.parametrize("dtype", ["e4m3", "e4m3_per_sequence", "bf16"])
@pytest.mark.parametrize("causal", [False, True])
def test_against_float64_per_sequence(dtype, causal, path, seed):
    """path: the library's pick (the Gluon "_varlen" instance where compiled), or the Triton varlen path forced."""
    kernel_name = ""
    if path == "triton":
        kernel_name = triton_varlen_instance("bf16" if dtype == "bf16" else "e4m3", 128, causal)
        if kernel_name is None:
            pytest.skip("no Triton varlen instance in this build")
    gen = fu.generator(seed)
    lens_q, lens_k = [1, 300, 77, 1000, 0, 129, 0], [1, 300, 500, 1000, 40, 129, 0]  # the last one empty
    hq, hkv, d = 8, 2, 128
    q, k, v = packed(lens_q, hq, d, gen, 2.0), packed(lens_k, hkv, d, gen, 2.0), packed(lens_k, hkv, d, gen)
    kw = {}
    if dtype == "e4m3":
        (q8, qd), (k8, kd), (v8, vd) = (fp8attn.quantize(t[None]) for t in (q.bfloat16(), k.bfloat16(), v.bfloat16()))
        q8, k8, v8 = q8[0], k8[0], v8[0]
        kw = dict(q_descale=qd, k_descale=kd, v_descale=vd)
        qf, kf, vf = q8.double() * qd.double(), k8.double() * kd.double(), v8.double() * vd.double()
    elif dtype == "e4m3_per_sequence":
        (q8, qd, qf), (k8, kd, kf), (v8, vd, vf) = (per_sequence_e4m3(t, lens, hkv) for t, lens in
                                                    ((q, lens_q), (k, lens_k), (v, lens_k)))
        kw = dict(q_descale=qd, k_descale=kd, v_descale=vd)
    else:
        q8, k8, v8 = q.bfloat16(), k.bfloat16(), v.bfloat16()
        qf, kf, vf = q8.double(), k8.double(), v8.double()
    o, lse = fp8attn.fmha_fwd_varlen(q8, k8, v8, cu(lens_q), cu(lens_k), max(lens_q), max(lens_k), causal=causal,
                                     return_lse=True, kernel_name=kernel_name, **kw)
    torch.cuda.synchronize()
    ref_lse = torch.full(lse.shape, float("nan"), dtype=torch.float64, device="cuda")
    ref = reference(qf, kf, vf, lens_q, lens_k, causal, 1 / math.sqrt(d), lse=ref_lse)
    assert torch.isfinite(o).all()
    err = ((o.double() - ref).norm() / ref.norm()).item()
    assert err < (0.05 if dtype != "bf16" else 0.01), f"relative error {err:.4f}"
    assert lse.shape == (len(lens_q), hq, max(lens_q))
    for b, n in enumerate(lens_q):  # rows past a sequence's length are the caller's (untouched)
        got, want = lse[b, :, :n].double(), ref_lse[b, :, :n]
        assert torch.equal(torch.isinf(got), torch.isinf(want)), f"sequence {b}: rows that see no key"
        finite = torch.isfinite(want)
        assert (got[finite] - want[finite]).abs().max().item() < 0.05 if finite.any() else True, f"sequence {b} LSE"


# The Gluon instances that take packed sequences: the "_varlen" ones (e4m3 and bf16 up to head_dim 128).
GLUON_VARLEN = [kk["name"] for kk in fp8attn.list_kernels() if kk["family"] == "gluon" and kk["varlen"]]


@pytest.mark.parametrize("name", GLUON_VARLEN or ["(no gluon varlen instance in this build)"])
def test_gluon_instance_by_name(name, seed):
    """The Gluon kernel on packed sequences (each "_varlen" instance forced by name; the library picks them):
    ragged lengths that end inside a query block and a key tile, an empty one, per-sequence descales (e4m3),
    against float64 per sequence; the last sequence's V holds NaN and must reach no other sequence (e4m3: its key
    tiles are zero-padded in the V^T; bf16: each sequence's V is read through a descriptor of its own rows), nor
    may its rows be overwritten by a neighbour's last block (stored masked)."""
    if not GLUON_VARLEN:
        pytest.skip("no gluon varlen instance in this build")
    info = fp8attn.find_kernel(name)
    d, causal = info["head_dim"], info["causal"]
    gen = fu.generator(seed)
    lens_q, lens_k = [300, 1, 0, 200, 77], [300, 129, 5, 450, 77]
    hq, hkv = 4, 2
    q, k, v = packed(lens_q, hq, d, gen, 2.0), packed(lens_k, hkv, d, gen, 2.0), packed(lens_k, hkv, d, gen)
    q8, k8, v8, qf, kf, vf, kw, tolerance = instance_inputs(info, q, k, v, lens_q, lens_k, hkv)
    v8 = v8.clone()
    v8[-lens_k[-1]:, :, 0] = float("nan")  # the last sequence's V: NaN (e4m3fn has a NaN code)
    o, lse = fp8attn.fmha_fwd_varlen(q8, k8, v8, cu(lens_q), cu(lens_k), max(lens_q), max(lens_k), causal=causal,
                                     return_lse=True, kernel_name=name, **kw)
    torch.cuda.synchronize()
    ref_lse = torch.full(lse.shape, float("nan"), dtype=torch.float64, device="cuda")
    ref = reference(qf, kf, vf, lens_q, lens_k, causal, 1 / math.sqrt(d), lse=ref_lse)
    rows = sum(lens_q[:-1])  # every sequence but the NaN one
    assert torch.isfinite(o[:rows]).all(), "NaN reached another sequence (or a row was left unwritten)"
    err = ((o[:rows].double() - ref[:rows]).norm() / ref[:rows].norm()).item()
    assert err < tolerance, f"{name}: relative error {err:.4f}"
    assert torch.isnan(o[rows:, :, 0]).all(), "the NaN sequence's own rows"
    for b, n in enumerate(lens_q[:-1]):
        finite = torch.isfinite(ref_lse[b, :, :n])
        assert (lse[b, :, :n].double()[finite] - ref_lse[b, :, :n][finite]).abs().max().item() < 0.05 \
            if finite.any() else True, f"sequence {b} LSE"


def test_one_sequence_matches_the_dense_call(seed):
    gen = fu.generator(seed)
    q, k, v = (packed([700], h, 128, gen).bfloat16() for h in (4, 2, 2))
    # Both calls on one Triton instance, which takes either (a dense Gluon instance refuses packed sequences, a
    # Gluon "_varlen" one dense calls).
    name = triton_varlen_instance("bf16", 128, True)
    if name is None:
        pytest.skip("no Triton varlen instance in this build")
    dense = fp8attn.fmha_fwd(q[None], k[None], v[None], causal=True, kernel_name=name)[0]
    var = fp8attn.fmha_fwd_varlen(q, k, v, cu([700]), cu([700]), 700, 700, causal=True, kernel_name=name)
    torch.cuda.synchronize()
    assert torch.equal(var, dense)


# Sliding windows per sequence on every instance that takes packed sequences for them: each Gluon "_varlen" one and
# the Triton path (both dtypes, causal and not), forced by name.
WINDOW_NAMES = GLUON_VARLEN + [n for n in (triton_varlen_instance(t, 128, c) for t in ("bf16", "e4m3")
                                           for c in (False, True)) if n]


@pytest.mark.parametrize("name", WINDOW_NAMES or ["(no varlen instance in this build)"])
def test_window_per_sequence(name, seed):
    """A left window with causal, left and right windows without, per sequence (a window's tiles are skipped per
    sequence, not per batch), against float64."""
    if not WINDOW_NAMES:
        pytest.skip("no varlen instance in this build")
    info = fp8attn.find_kernel(name)
    d, causal = info["head_dim"], info["causal"]
    window = (64, -1) if causal else (100, 30)
    gen = fu.generator(seed)
    lens = [500, 33, 900]
    q, k, v = (packed(lens, h, d, gen) for h in (4, 2, 2))
    q8, k8, v8, qf, kf, vf, kw, tolerance = instance_inputs(info, q, k, v, lens, lens, 2)
    o = fp8attn.fmha_fwd_varlen(q8, k8, v8, cu(lens), cu(lens), 900, 900, causal=causal, window=window,
                                kernel_name=name, **kw)
    torch.cuda.synchronize()
    ref = reference(qf, kf, vf, lens, lens, causal, 1 / math.sqrt(d), window)
    assert ((o.double() - ref).norm() / ref.norm()).item() < tolerance, name


def test_bad_offsets_give_nan_rows_and_errors(seed):
    gen = fu.generator(seed)
    q, k, v = (packed([100, 100], 2, 128, gen).bfloat16() for _ in range(3))
    cu_q = cu([100, 100])
    cu_k = cu([100, 100])
    o = fp8attn.fmha_fwd_varlen(q, k, v, cu_q, cu_k, 100, 90)  # both sequences longer than max_seqlen_k
    torch.cuda.synchronize()
    assert torch.isnan(o).all()
    # FP8 (the V transpose applies the same checks): a key offset past total_k, and offsets out of order.
    (q8, qd), (k8, kd), (v8, vd) = (fp8attn.quantize(t[None]) for t in (q, k, v))
    kw = dict(q_descale=qd, k_descale=kd, v_descale=vd)
    past = torch.tensor([0, 100, 260], dtype=torch.int32, device="cuda")
    o = fp8attn.fmha_fwd_varlen(q8[0], k8[0], v8[0], cu_q, past, 100, 160, **kw)
    torch.cuda.synchronize()
    assert torch.isfinite(o[:100]).all() and torch.isnan(o[100:]).all()
    swapped = torch.tensor([100, 200, 0], dtype=torch.int32, device="cuda")
    o = fp8attn.fmha_fwd_varlen(q8[0], k8[0], v8[0], cu_q, swapped, 100, 100, **kw)
    torch.cuda.synchronize()
    assert torch.isfinite(o[:100]).all() and torch.isnan(o[100:]).all()
    with pytest.raises(ValueError, match="cu_seqlens_k"):
        fp8attn.fmha_fwd_varlen(q, k, v, cu_q, cu_k.long(), 100, 100)
    with pytest.raises(ValueError, match="cu_seqlens_k"):
        fp8attn.fmha_fwd_varlen(q, k, v, cu_q, cu_k[:2], 100, 100)
    with pytest.raises(ValueError, match="q: expected a 3-D"):
        fp8attn.fmha_fwd_varlen(q[None], k, v, cu_q, cu_k, 100, 100)
