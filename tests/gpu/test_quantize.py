"""fp8attn.quantize on the GPU (C++ quant::device::Quantize): e4m3 / int8 values and descales against a float64
reference for every granularity and transform, V written as V^T for the attention kernels (the same bits as
the transposing call), the transforms leaving attention unchanged, non-finite inputs, static descales, errors,
and CUDA-graph capture. tests/cpu/test_quantize_interpreter.py runs the same kernels in Triton's interpreter."""

import math

import pytest

import fmha_utils as fu

if fu.SKIP_REASON:
    pytest.skip(fu.SKIP_REASON, allow_module_level=True)

import torch  # noqa: E402

import fp8attn  # noqa: E402
from fp8attn.quant import hadamard  # noqa: E402

E4M3_MAX, INT8_MAX, BLOCK = 448.0, 127.0, fp8attn.quantize_op.BLOCK_TOKENS


def reference_y(x, seed, rotate, smooth, sample_stride=1):
    """float64 y = x H - mean over the sequence (H the normalized random-sign Hadamard matrix), x [B, S, H, D]; the
    mean over the tokens of every sample_stride-th 64-token block (quantize's smooth_sample_stride)."""
    y = x.double()
    if rotate:
        y = y @ hadamard(x.shape[-1], seed, x.device, torch.float64)
    if smooth:
        sampled = (torch.arange(x.shape[1], device=x.device) // BLOCK) % sample_stride == 0
        y = y - y[:, sampled].mean(dim=1, keepdim=True)
    return y


def e4m3_step(z):
    return torch.exp2(torch.floor(torch.log2(z.abs().clamp(min=2.0 ** -6))) - 3)


def near_midpoint(z, a, b, slack=0.0):
    """Where z lies within 1e-4 of a step (or within slack) of the midpoint of a and b: float32 (kernel) and
    float64 (here) may round such values to different neighbours."""
    lo, hi = torch.minimum(a.abs(), b.abs()), torch.maximum(a.abs(), b.abs())
    return (z.abs() - (lo + hi) / 2).abs() <= torch.maximum(1e-4 * (hi - lo).clamp(min=1e-12),
                                                             torch.as_tensor(slack, dtype=z.dtype, device=z.device))


def transform_slack(x, seed, rotate, smooth):
    """The float32 error the kernel's transforms may leave in y (same units as x): the rotation sums head_dim
    terms of size |x_j| / sqrt(head_dim) in float32 (MMA accumulation), smoothing subtracts a float32 mean. A
    bound of 2^-19 of the terms' magnitudes (8 float32 units of roundoff at head_dim 256, typically far less)."""
    if not (rotate or smooth):
        return 0.0
    xd = x.double()
    terms = xd.abs().sum(-1, keepdim=True) / math.sqrt(x.shape[-1]) if rotate else xd.abs()
    if smooth:
        terms = terms + reference_y(x, seed, rotate, False).mean(dim=1, keepdim=True).abs()
    return terms * 2.0 ** -19


def x_of(shape, seed, dtype=torch.bfloat16, offset=1.0):
    gen = fu.generator(seed)
    return (torch.randn(shape, generator=gen, device="cuda") * 3 + offset).to(dtype)


@pytest.mark.parametrize("d", [64, 128, 256])
@pytest.mark.parametrize("granularity", ["tensor", "head", "block"])
@pytest.mark.parametrize("smooth,rotate", [(False, False), (True, True)])
def test_e4m3_values_and_descales(d, granularity, smooth, rotate, seed):
    b, s, h, hkv = 2, 1000, 4, 2
    x = x_of((b, s, h, d), seed)
    q, descale = fp8attn.quantize(x, granularity=granularity, heads_kv=hkv, smooth=smooth, rotate=rotate, seed=9)
    torch.cuda.synchronize()
    y = reference_y(x, 9, rotate, smooth)
    if granularity == "tensor":
        want = y.abs().amax().reshape(1) / E4M3_MAX
        scale = want.reshape(1, 1, 1, 1)
    elif granularity == "head":
        want = y.abs().amax(dim=(1, 3)).reshape(b, hkv, h // hkv).amax(dim=2) / E4M3_MAX
        scale = want.repeat_interleave(h // hkv, dim=1)[:, None, :, None]
    else:
        nb = -(-s // BLOCK)
        blocks = torch.nn.functional.pad(y, (0, 0, 0, 0, 0, nb * BLOCK - s)).reshape(b, nb, BLOCK, h, d)
        want = blocks.abs().amax(dim=(2, 4)).permute(0, 2, 1)  # [b, h, blocks]
        scale = want.permute(0, 2, 1).repeat_interleave(BLOCK, dim=1)[:, :s, :, None] / E4M3_MAX
        want = want / E4M3_MAX
    assert descale.shape == want.shape and descale.dtype == torch.float32
    assert ((descale.double() - want) / want).abs().max().item() < 1e-6
    z = y / scale
    ref = z.clamp(-E4M3_MAX, E4M3_MAX).float().to(torch.float8_e4m3fn).double()
    got = q.double()
    wrong = (got != ref) & ~near_midpoint(z, got, ref, transform_slack(x, 9, rotate, smooth) / scale)
    assert int(wrong.sum()) == 0, f"{int(wrong.sum())} of {got.numel()} e4m3 values differ"


@pytest.mark.parametrize("d", [64, 128])
def test_int8_per_block(d, seed):
    x = x_of((1, 700, 3, d), seed, dtype=torch.float16) if any(
        k["name"].startswith("fp8attn_sm90_quantize_apply_f16_i8") for k in fp8attn.list_kernels()) \
        else x_of((1, 700, 3, d), seed)
    q, descale = fp8attn.quantize(x, dtype="int8", granularity="block", smooth=True, rotate=True, seed=1)
    torch.cuda.synchronize()
    y = reference_y(x, 1, True, True)
    nb = descale.shape[-1]
    scale = descale.double().permute(0, 2, 1).repeat_interleave(BLOCK, dim=1)[:, :700, :, None]
    z = y / scale
    near_half = ((z - z.floor()) - 0.5).abs() < 1e-4
    wrong = (q.double() != z.round().clamp(-127, 127)) & ~near_half
    assert q.dtype == torch.int8 and nb == -(-700 // BLOCK)
    assert int(wrong.sum()) == 0 and int(q.abs().max()) <= 127


@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("s,stride", [(2048, 0), (1000, 0), (1000, 3), (330, 8)])
@pytest.mark.parametrize("granularity", ["block", "block_pair"])
def test_sampled_smoothing_mean(d, s, stride, granularity, seed):
    """smooth_sample_stride (int8_qk's K takes 0, the library's rule): the mean over every n-th 64-token block,
    subtracted from every token, then the int8 values and descales against float64. Keys with a trend along the
    sequence make the sampled mean differ from the full one, so a kernel that ignored the stride or divided by the
    wrong count fails (checked: the full-mean reference disagrees with the output)."""
    if granularity == "block_pair" and not apply_instances(d, "int8", False, block_tokens=2 * BLOCK):
        pytest.skip("no 128-token int8 apply in this build")
    b, h = 2, 3
    trend = torch.linspace(0.0, 8.0, s, device="cuda")[None, :, None, None]
    x = (x_of((b, s, h, d), seed, dtype=torch.float32, offset=0.0) + trend).to(torch.bfloat16)
    n = stride or fp8attn.quantize_op.smooth_sample_stride_for(s)
    assert n == (stride or max(1, min(8, -(-s // BLOCK) // 4)))
    q, descale = fp8attn.quantize(x, dtype="int8", granularity=granularity, smooth=True, rotate=True, seed=1,
                                  smooth_sample_stride=stride)
    torch.cuda.synchronize()
    span = 2 * BLOCK if granularity == "block_pair" else BLOCK
    spans = -(-s // span)

    def mismatches(y):
        padded = torch.nn.functional.pad(y, (0, 0, 0, 0, 0, spans * span - s)).reshape(b, spans, span, h, d)
        want = (padded.abs().amax(dim=(2, 4)).permute(0, 2, 1) / INT8_MAX).repeat_interleave(span // BLOCK, dim=2)
        want = want[..., :descale.shape[-1]]
        scale = descale.double().permute(0, 2, 1).repeat_interleave(BLOCK, dim=1)[:, :s, :, None]
        z = y / scale
        near_half = ((z - z.floor()) - 0.5).abs() < 1e-4
        wrong = (q.double() != z.round().clamp(-127, 127)) & ~near_half
        return ((descale.double() - want) / want).abs().max().item(), int(wrong.sum())

    descale_error, wrong = mismatches(reference_y(x, 1, True, True, n))
    assert descale_error < 1e-5 and wrong == 0, (descale_error, wrong)
    if n > 1:  # the checker can fail: the full mean's values are not the ones written
        assert mismatches(reference_y(x, 1, True, True, 1))[1] > 0
    with pytest.raises(ValueError, match="smooth_sample_stride=-1"):
        fp8attn.quantize(x, dtype="int8", granularity=granularity, smooth=True, smooth_sample_stride=-1)
    with pytest.raises(ValueError, match="smooth_sample_stride=2 samples the smoothing mean"):
        fp8attn.quantize(x, dtype="int8", granularity=granularity, smooth_sample_stride=2)


@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("s", [960, 1000])
def test_int8_block_pair(d, s, seed):
    """granularity="block_pair" (int8 K for the kpair attention instances): one descale per 128 tokens, the
    transformed values' amax over the span / 127, written to both of its 64-token entries (the last entry alone
    where the sequence ends inside a span's first half: S=960), and the values rounded with it."""
    if not apply_instances(d, "int8", False, block_tokens=2 * BLOCK):
        pytest.skip("no 128-token int8 apply in this build")
    b, h = 2, 3
    x = x_of((b, s, h, d), seed)
    q, descale = fp8attn.quantize(x, dtype="int8", granularity="block_pair", smooth=True, rotate=True, seed=1)
    torch.cuda.synchronize()
    y = reference_y(x, 1, True, True)
    nb, spans = -(-s // BLOCK), -(-s // (2 * BLOCK))
    assert descale.shape == (b, h, nb) and descale.dtype == torch.float32
    padded = torch.nn.functional.pad(y, (0, 0, 0, 0, 0, spans * 2 * BLOCK - s)).reshape(b, spans, 2 * BLOCK, h, d)
    want = (padded.abs().amax(dim=(2, 4)).permute(0, 2, 1) / INT8_MAX).repeat_interleave(2, dim=2)[..., :nb]
    assert ((descale.double() - want) / want).abs().max().item() < 1e-6
    scale = descale.double().permute(0, 2, 1).repeat_interleave(BLOCK, dim=1)[:, :s, :, None]
    z = y / scale
    near_half = ((z - z.floor()) - 0.5).abs() < 1e-4
    wrong = (q.double() != z.round().clamp(-127, 127)) & ~near_half
    assert q.dtype == torch.int8 and int(wrong.sum()) == 0
    # The 64-token apply cannot write pairs, nor the pairs' apply single blocks: refused, the block sizes named.
    single = apply_instances(d, "int8", False, gluon=False)[0]
    with pytest.raises(ValueError, match="granularity=block_pair blocks of 128"):
        fp8attn.quantize(x, dtype="int8", granularity="block_pair", kernel_name=single)
    with pytest.raises(ValueError, match="granularity=block_pair"):
        fp8attn.quantize(x, granularity="block_pair", layout="vt_kperm")


@pytest.mark.parametrize("causal", [False, True])
def test_fused_pipeline_matches_attention_and_needs_no_transpose(causal, seed):
    """q, k, v in BF16 -> fp8attn.quantize (K smoothed, Q and K rotated, V written as key-permuted V^T) ->
    fmha_fwd(v_key_permuted=True): the same output bits as the same quantized values through the transposing
    call, and within FP8 accuracy of float64 attention on the unquantized inputs."""
    b, s, hq, hkv, d = 2, 1500, 8, 2, 128
    q, k, v = (x_of((b, s, h, d), seed + i, offset=off) for i, (h, off) in enumerate(((hq, 0.0), (hkv, 2.0), (hkv, 0.0))))
    q8, qd = fp8attn.quantize(q, rotate=True, seed=5)
    k8, kd = fp8attn.quantize(k, smooth=True, rotate=True, seed=5)
    v8, vd = fp8attn.quantize(v)
    vt, vtd = fp8attn.quantize(v, layout="vt_kperm")
    torch.cuda.synchronize()
    assert torch.equal(vd, vtd)
    assert vt.shape == v.shape and vt.stride(1) == 1
    kw = dict(q_descale=qd, k_descale=kd, v_descale=vd, causal=causal)
    want = fp8attn.fmha_fwd(q8, k8, v8, **kw)
    if not any(kk.get("v_key_permuted") and kk["head_dim"] == d and kk["causal"] == causal
               for kk in fp8attn.list_kernels()):
        pytest.skip("this build has no vkperm instance for D=128")
    assert "_vkperm" in fp8attn.select_kernel(q8, k8, vt, v_key_permuted=True, **kw)
    got = fp8attn.fmha_fwd(q8, k8, vt, v_key_permuted=True, **kw)
    torch.cuda.synchronize()
    assert torch.equal(got, want)
    # Rotation and smoothing are exact: the output approximates attention on the original q, k, v.
    g = hq // hkv
    qh, kh, vh = q.double().transpose(1, 2), k.double().transpose(1, 2), v.double().transpose(1, 2)
    sc = qh @ kh.repeat_interleave(g, 1).transpose(-1, -2) / math.sqrt(d)
    if causal:
        sc = sc.masked_fill(~torch.ones(s, s, dtype=torch.bool, device="cuda").tril(), float("-inf"))
    ref = (torch.softmax(sc, -1) @ vh.repeat_interleave(g, 1)).transpose(1, 2)
    err = ((got.double() - ref).norm() / ref.norm()).item()
    # These inputs (std 3, keys offset by 2) give sharp softmax rows, where FP8 error is large whichever the
    # recipe (0.12-0.13 measured on the H200). The transforms must not make it worse than plain per-tensor FP8
    # on the same inputs; a wrong rotation or smoothing gives errors near 1.
    q8p, qdp = fp8attn.quantize(q)
    k8p, kdp = fp8attn.quantize(k)
    plain = fp8attn.fmha_fwd(q8p, k8p, v8, q_descale=qdp, k_descale=kdp, v_descale=vd, causal=causal)
    err_plain = ((plain.double() - ref).norm() / ref.norm()).item()
    assert err < 1.1 * err_plain + 0.01 and err < 0.3, \
        f"relative error {err:.4f} vs float64 on the unquantized inputs (plain FP8: {err_plain:.4f})"


def test_non_finite_inputs_and_static_descale(seed):
    x = x_of((1, 128, 2, 64), seed)
    x[0, 3, 0, 5], x[0, 4, 1, 6], x[0, 5, 0, 7] = float("inf"), float("-inf"), float("nan")
    finite = torch.nan_to_num(x.float(), nan=0.0, posinf=0.0, neginf=0.0)
    q, descale = fp8attn.quantize(x)
    torch.cuda.synchronize()
    assert abs(descale.item() - finite.abs().max().item() / E4M3_MAX) < 1e-7, "the amax ignores Inf/NaN"
    assert q[0, 3, 0, 5].float().item() == 448.0 and q[0, 4, 1, 6].float().item() == -448.0
    assert math.isnan(q[0, 5, 0, 7].float().item())
    q8, _ = fp8attn.quantize(x, dtype="int8")
    assert (q8[0, 3, 0, 5].item(), q8[0, 4, 1, 6].item(), q8[0, 5, 0, 7].item()) == (127, -127, 0)
    static = torch.full((1,), 0.5, device="cuda")
    qs, ds = fp8attn.quantize(x, descale=static)
    torch.cuda.synchronize()
    assert ds is static
    z = (x.float() / 0.5).clamp(-448, 448)
    keep = torch.isfinite(x)
    assert torch.equal(qs.float()[keep], z.to(torch.float8_e4m3fn).float()[keep]), "static: x / descale, saturated"


def apply_instances(d, dtype, kperm, gluon=True, block_tokens=BLOCK):
    """The compiled bf16 apply instances of a recipe at head dim d (blocks of block_tokens: 2 * BLOCK for
    "block_pair"); gluon=False leaves out the Gluon apply (it writes [b, s, h, d] only)."""
    tag = "i8" if dtype == "int8" else "e4m3"
    return sorted(o["name"] for o in fp8attn.list_operations()
                  if isinstance(o, dict) and o["name"].startswith(f"fp8attn_sm90_quantize_apply_bf16_{tag}_")
                  and f"_{block_tokens}x{d}_" in o["name"] and ("_kperm" in o["name"]) == kperm
                  and (gluon or not o["name"].endswith("_gluon")))


@pytest.mark.parametrize("d", [64, 128])
def test_every_apply_instance_same_bits(d, seed):
    """fp8attn.quantize(kernel_name=): every compiled apply instance of a recipe forced by name writes the same
    bytes and descales as the library's pick (int8 per block rotated and smoothed, e4m3 per block, per tensor, V^T in
    both key orders; an odd number of blocks, a partial last block, Inf and NaN inputs), and a name that is not
    compiled is refused. The default set has the Triton apply of every recipe and, for the [b, s, h, d] recipes at
    head dims 64 and 128, the Gluon apply (kernels/quantize/quantize_apply_gluon.py, the pick for rotated ones),
    each compared here against the other, and the two 128-token applies of block_pair likewise; a build with
    candidate apply instances (a manifest's extra set) compares each against the pick. The Gluon apply forced onto a
    V^T layout is refused with the layout named."""
    x = x_of((2, 1000, 3, d), seed)
    x[1, 900, 2, 3], x[0, 70, 1, 0] = float("inf"), float("nan")
    recipes = [dict(dtype="int8", granularity="block", smooth=True, rotate=True, seed=7),
               dict(dtype="e4m3", granularity="block"), dict(dtype="e4m3", granularity="tensor", rotate=True),
               dict(dtype="e4m3", granularity="tensor", layout="vt"),
               dict(dtype="e4m3", granularity="block", layout="vt_kperm")]
    for recipe in recipes:
        vt = recipe.get("layout", "bshd") != "bshd"
        names = apply_instances(d, recipe["dtype"], recipe.get("layout") == "vt_kperm", gluon=not vt)
        want, want_d = fp8attn.quantize(x, **recipe)
        if recipe.get("layout") == "vt":  # (on vt_kperm every plain-order instance is refused by its order)
            for name in [n for n in apply_instances(d, recipe["dtype"], False) if n.endswith("_gluon")]:
                with pytest.raises(ValueError, match="cannot take layout=vt "):
                    fp8attn.quantize(x, kernel_name=name, **recipe)
        for name in names:
            got, got_d = fp8attn.quantize(x, kernel_name=name, **recipe)
            torch.cuda.synchronize()
            assert torch.equal(got.view(torch.uint8), want.view(torch.uint8)), f"{name}, {recipe}: bytes differ"
            assert torch.equal(got_d, want_d), f"{name}, {recipe}: descales differ"
    # block_pair (int8_qk's K): every 128-token apply (the Gluon one, the pick, and the Triton one) alike.
    pair = dict(dtype="int8", granularity="block_pair", smooth=True, rotate=True, seed=7)
    want, want_d = fp8attn.quantize(x, **pair)
    for name in apply_instances(d, "int8", False, block_tokens=2 * BLOCK):
        got, got_d = fp8attn.quantize(x, kernel_name=name, **pair)
        torch.cuda.synchronize()
        assert torch.equal(got.view(torch.uint8), want.view(torch.uint8)), f"{name}, block_pair: bytes differ"
        assert torch.equal(got_d, want_d), f"{name}, block_pair: descales differ"
    # A [b, s, h, d] view of a [b, h, s, d] tensor (heads apart by a whole sequence): the strides the TMA
    # descriptors of the Gluon apply take from the view.
    xt = x_of((2, 3, 1000, d), seed).transpose(1, 2)
    for recipe, block_tokens in ((recipes[0], BLOCK), (pair, 2 * BLOCK)):
        want, want_d = fp8attn.quantize(xt, **recipe)
        for name in apply_instances(d, recipe["dtype"], False, block_tokens=block_tokens):
            got, got_d = fp8attn.quantize(xt, kernel_name=name, **recipe)
            assert torch.equal(got.view(torch.uint8), want.view(torch.uint8)) and torch.equal(got_d, want_d), name
    with pytest.raises(ValueError, match="kernel_name=nope"):
        fp8attn.quantize(x, kernel_name="nope")


@pytest.mark.parametrize("s", [64, 100, 129, 960, 1000])
def test_block_pair_applies_agree(s, seed):
    """Every 128-token apply (block_pair: the Gluon one, the pick for int8_qk's K, and the Triton one) writes the same
    bytes and descales at lengths where a block is taller than the sequence (64, 100), where the last block has one
    token (129), where its second 64-token entry does not exist (960) and where it does (1000); Inf and NaN inside."""
    for d in (64, 128):
        names = apply_instances(d, "int8", False, block_tokens=2 * BLOCK)
        if len(names) < 2:
            pytest.skip("fewer than two 128-token int8 applies in this build")
        x = x_of((2, s, 3, d), seed)
        x[1, s - 1, 2, 3], x[0, s // 2, 1, 0] = float("inf"), float("nan")
        pair = dict(dtype="int8", granularity="block_pair", smooth=True, rotate=True, seed=7)
        want, want_d = fp8attn.quantize(x, **pair)
        assert want_d.shape == (2, 3, -(-s // BLOCK))
        for name in names:
            got, got_d = fp8attn.quantize(x, kernel_name=name, **pair)
            torch.cuda.synchronize()
            assert torch.equal(got.view(torch.uint8), want.view(torch.uint8)), f"{name}, S={s}: bytes differ"
            assert torch.equal(got_d, want_d), f"{name}, S={s}: descales differ"


def test_errors(seed):
    x = x_of((1, 64, 2, 64), seed)
    with pytest.raises(ValueError, match="x: dtype torch.float8_e4m3fn"):
        fp8attn.quantize(x.to(torch.float8_e4m3fn))
    with pytest.raises(ValueError, match="must be a CUDA tensor"):
        fp8attn.quantize(x.cpu())
    with pytest.raises(ValueError, match="output_type must be e4m3"):
        fp8attn.quantize(x, dtype="int8", layout="vt")
    with pytest.raises(ValueError, match="head_dim=96"):
        fp8attn.quantize(x_of((1, 64, 2, 96), seed))
    with pytest.raises(ValueError, match="granularity=block"):
        fp8attn.quantize(x, granularity="block", descale=torch.ones(1, device="cuda"))
    with pytest.raises(ValueError, match="heads_kv=3"):
        fp8attn.quantize(x, heads_kv=3)
    with pytest.raises(ValueError, match="static_descale: must hold 2 contiguous"):
        fp8attn.quantize(x, granularity="head", descale=torch.ones(1, device="cuda"))
    empty, d0 = fp8attn.quantize(x[:, :0])
    assert empty.shape == (1, 0, 2, 64) and d0.shape == (1,)


def test_cuda_graph_replay(seed):
    x = x_of((2, 500, 4, 128), seed)
    q0, d0 = fp8attn.quantize(x, granularity="head", smooth=True, rotate=True)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        q1, d1 = fp8attn.quantize(x, granularity="head", smooth=True, rotate=True)
    x.mul_(2)
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(d1, d0 * 2), "replayed on the new values"
    assert torch.equal(q1.view(torch.uint8), q0.view(torch.uint8)), "x * 2 with descale * 2: the same bytes"
