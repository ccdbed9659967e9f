"""INT8 Q.K^T with per-block descales (the "i8_e4m3 ... bdesc" instances) and the accuracy modes of
fp8attn.attention (quantization on the GPU, then attention), on the H200:

  * the compiled INT8 instances against float64 attention over the same dequantized operands;
  * every mode against float64 attention over the unquantized BF16 inputs, and the smoothing / INT8 modes
    more accurate than plain FP8 where e4m3 struggles (keys sharing a large offset);
  * opcheck of fp8attn::quantize, torch.compile(fullgraph=True) through a mode, clear errors.
tests/cpu/test_fmha_interpreter.py runs the same kernel in Triton's interpreter."""

import math

import pytest

import fmha_utils as fu

if fu.SKIP_REASON:
    pytest.skip(fu.SKIP_REASON, allow_module_level=True)

import torch  # noqa: E402

import fp8attn  # noqa: E402

BLOCK = fp8attn.quantize_op.BLOCK_TOKENS


def int8_compiled(head_dim, causal):
    return any(k["qk_type"] == "i8" and k["head_dim"] == head_dim and k["causal"] == causal
               for k in fp8attn.list_kernels())


def attention64(q, k, v, causal, scale=None):
    """float64 attention on [B, S, H, D] inputs (K/V heads repeated for GQA), bottom-right causal."""
    g = q.shape[2] // k.shape[2]
    qh, kh, vh = (t.double().transpose(1, 2) for t in (q, k, v))
    kh, vh = kh.repeat_interleave(g, 1), vh.repeat_interleave(g, 1)
    s = qh @ kh.transpose(-1, -2) * (scale or 1 / math.sqrt(q.shape[-1]))
    if causal:
        sq, sk = s.shape[-2:]
        s = s.masked_fill(~torch.ones(sq, sk, dtype=torch.bool, device=s.device).tril(sk - sq), float("-inf"))
    return (torch.softmax(s, -1) @ vh).transpose(1, 2)


def rel(x, ref):
    return ((x.double() - ref).norm() / ref.norm()).item()


def bf16_inputs(b, sq, sk, hq, hkv, d, seed, key_offset=0.0):
    gen = fu.generator(seed)
    q = torch.randn((b, sq, hq, d), generator=gen, device="cuda")
    k = torch.randn((b, sk, hkv, d), generator=gen, device="cuda") + key_offset
    v = torch.randn((b, sk, hkv, d), generator=gen, device="cuda")
    return tuple(t.to(torch.bfloat16) for t in (q, k, v))


def dequantize_blocks(x8, descale):
    """int8 [B, S, H, D] with [B, H, blocks] descales -> float64."""
    s = x8.shape[1]
    scale = descale.double().permute(0, 2, 1).repeat_interleave(BLOCK, dim=1)[:, :s, :, None]
    return x8.double() * scale


@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("causal", [False, True])
def test_int8_instance_against_its_operands(d, causal, seed):
    if not int8_compiled(d, causal):
        pytest.skip(f"no INT8 Q.K^T instance for D={d}, causal={causal} in this build")
    q, k, v = bf16_inputs(2, 700, 1000, 8, 2, d, seed)
    k = k * (2.0 ** (torch.arange(1000, device="cuda") // BLOCK % 4))[None, :, None, None].to(k.dtype)
    q8, qd = fp8attn.quantize(q, dtype="int8", granularity="block")
    k8, kd = fp8attn.quantize(k, dtype="int8", granularity="block", smooth=True)
    v8, vd = fp8attn.quantize(v)
    name = fp8attn.select_kernel(q8, k8, v8, q_descale=qd, k_descale=kd, v_descale=vd, causal=causal)
    assert "_i8_e4m3_" in name and (name.endswith("_bdesc") or name.endswith("_bdesc_gluon")), name
    o, lse = fp8attn.fmha_fwd(q8, k8, v8, q_descale=qd, k_descale=kd, v_descale=vd, causal=causal, return_lse=True)
    torch.cuda.synchronize()
    qf, kf, vf = dequantize_blocks(q8, qd), dequantize_blocks(k8, kd), v8.double() * vd.double()
    ref = attention64(qf, kf, vf, causal)
    err = rel(o, ref)
    assert err < 0.04, f"relative error {err:.4f} against float64 over the same operands"
    assert torch.isfinite(lse).all()


@pytest.mark.parametrize("causal", [False, True])
def test_modes_against_unquantized_attention(causal, seed):
    d = 64
    q, k, v = bf16_inputs(2, 1024, 1024, 9, 3, d, seed)  # SmolLM2's head layout: 9 query heads over 3
    ref = attention64(q, k, v, causal)
    errors = {}
    for mode in fp8attn.MODES:
        if mode == "int8_qk" and not int8_compiled(d, causal):
            continue
        errors[mode] = rel(fp8attn.attention(q, k, v, mode=mode, causal=causal), ref)
    torch.cuda.synchronize()
    assert errors["bf16"] < 0.01, errors
    assert all(e < 0.08 for e in errors.values()), errors


def test_smoothing_and_int8_beat_plain_fp8_on_offset_keys(seed):
    """Keys sharing a large offset (what trained models' keys do): e4m3 spends its precision on the offset."""
    d = 64
    if not int8_compiled(d, True):
        pytest.skip("no INT8 Q.K^T instance for D=64 in this build")
    q, k, v = bf16_inputs(1, 2048, 2048, 9, 3, d, seed, key_offset=6.0)
    q = q * 2  # sharper attention: score errors matter more
    ref = attention64(q, k, v, True)
    err = {m: rel(fp8attn.attention(q, k, v, mode=m, causal=True), ref) for m in ("fp8", "fp8_smooth_rotate", "int8_qk")}
    torch.cuda.synchronize()
    assert err["fp8_smooth_rotate"] < err["fp8"], err
    assert err["int8_qk"] < err["fp8"], err


def test_bhsd_layout_and_gqa_shapes(seed):
    q, k, v = bf16_inputs(1, 300, 300, 8, 2, 128, seed)
    o = fp8attn.attention(q, k, v, mode="fp8", causal=True)
    o_bhsd = fp8attn.attention(*(t.transpose(1, 2) for t in (q, k, v)), mode="fp8", causal=True, layout="bhsd")
    torch.cuda.synchronize()
    assert o_bhsd.shape == (1, 8, 300, 128)
    assert torch.equal(o_bhsd.transpose(1, 2), o)


def test_errors(seed):
    q, k, v = bf16_inputs(1, 128, 128, 2, 2, 64, seed)
    with pytest.raises(ValueError, match="mode="):
        fp8attn.attention(q, k, v, mode="fp4")
    with pytest.raises(ValueError, match="bfloat16 or float16"):
        fp8attn.attention(q.float(), k, v)
    q8, qd = fp8attn.quantize(q, dtype="int8", granularity="block")
    k8, kd = fp8attn.quantize(k, dtype="int8", granularity="block")
    with pytest.raises(ValueError, match="e4m3 v"):
        fp8attn.fmha_fwd(q8, k8, v, q_descale=qd, k_descale=kd, v_descale=torch.ones(1, device="cuda"))
    # Per-block descales on e4m3 inputs: no e4m3 instance applies them (not bdesc).
    qe, qde = fp8attn.quantize(q, granularity="block")
    ke, kde = fp8attn.quantize(k, granularity="block")
    ve, vde = fp8attn.quantize(v)
    with pytest.raises(ValueError, match="bdesc"):
        fp8attn.fmha_fwd(qe, ke, ve, q_descale=qde, k_descale=kde, v_descale=vde)
    with pytest.raises(ValueError, match="v_descale"):
        fp8attn.fmha_fwd(qe, ke, ve, q_descale=qde.amax().reshape(1), k_descale=kde.amax().reshape(1),
                         v_descale=torch.ones(1, 2, 2, device="cuda"))


def test_fused_checks_shapes(seed):
    from fp8attn.modes import attention_fused

    q, k, v = bf16_inputs(1, 128, 256, 4, 2, 64, seed)
    with pytest.raises(ValueError, match="v: shape"):
        attention_fused(q, k, v[:, :128], mode="fp8")


def test_quantize_opcheck_and_compile(seed):
    q, k, v = bf16_inputs(1, 200, 200, 4, 2, 128, seed)
    k_long = bf16_inputs(1, 1024, 1024, 4, 2, 128, seed)[1]
    from fp8attn.quantize_op import smooth_sample_stride_for
    assert smooth_sample_stride_for(1024) == 4
    for args in ((q, "e4m3", "tensor", 0, False, False, 0, "bshd", None),
                 (k, "int8", "block", 0, True, True, 3, "bshd", None),
                 (q, "e4m3", "head", 2, False, False, 0, "bshd", None),
                 (v, "e4m3", "tensor", 0, False, False, 0, "vt_kperm", None),
                 (v, "e4m3", "tensor", 0, False, False, 0, "bshd", torch.full((1,), 0.5, device="cuda")),
                 # The tenth argument, smooth_sample_stride: the library's rule (0) on a K of 16 blocks (stride
                 # 4), and an explicit stride.
                 (k_long, "int8", "block", 0, True, True, 3, "bshd", None, 0),
                 (k_long, "int8", "block_pair", 0, True, False, 0, "bshd", None, 3)):
        # test_schema compares e4m3 outputs with arithmetic torch lacks for float8 (see test_torch_ops.py).
        torch.library.opcheck(torch.ops.fp8attn.quantize.default, args,
                              test_utils=("test_autograd_registration", "test_faketensor", "test_aot_dispatch_dynamic"))

    def block(q, k, v):
        return fp8attn.attention(q, k, v, mode="fp8_smooth_rotate", causal=True).float().sum()

    compiled = torch.compile(block, fullgraph=True)
    got, want = compiled(q, k, v), block(q, k, v)
    torch.cuda.synchronize()
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-3)


@pytest.mark.parametrize("d", [64, 128])
def test_cpp_handle_gives_the_same_bits(d, seed):
    """fmha::device::FmhaFwdQuantized (one C++ call: V quantized straight into V^T) against fp8attn.attention
    (torch operators: quantize, V straight into the key-permuted V^T as well, then fmha_fwd): the same values
    and kernel."""
    from fp8attn.modes import attention_fused

    q, k, v = bf16_inputs(2, 777, 777, 8, 2, d, seed)
    for mode in fp8attn.MODES:
        if mode == "int8_qk" and not int8_compiled(d, True):
            continue
        want = fp8attn.attention(q, k, v, mode=mode, causal=True)
        got = attention_fused(q, k, v, mode=mode, causal=True)
        torch.cuda.synchronize()
        assert torch.equal(got, want), mode


@pytest.mark.parametrize("mode", ["fp8", "fp8_per_head", "fp8_smooth_rotate", "int8_qk", "bf16"])
def test_modes_with_zero_heads_and_non_finite_inputs(mode, seed):
    """An all-zero kv head (descale 1, zeros quantized exactly) gives that head's queries the mean of its
    values, finite; a NaN or Inf in one query row reaches only that row's outputs (and, through the shared
    per-tensor or per-head statistics, nothing else: the amax ignores non-finite values)."""
    d = 64
    if mode == "int8_qk" and not int8_compiled(d, True):
        pytest.skip("no INT8 Q.K^T instance for D=64 in this build")
    q, k, v = bf16_inputs(1, 256, 256, 4, 2, d, seed)
    k[:, :, 1] = 0  # kv head 1: every score 0 -> uniform attention over its values
    o = fp8attn.attention(q, k, v, mode=mode, causal=True)
    ref = attention64(q, k, v, True)
    torch.cuda.synchronize()
    assert torch.isfinite(o).all(), mode
    assert rel(o[:, :, 2:], ref[:, :, 2:]) < 0.08, mode  # the query heads of kv head 1
    q_bad = q.clone()
    q_bad[0, 100, 0, 3] = float("nan")
    q_bad[0, 101, 0, 4] = float("inf")
    o_bad = fp8attn.attention(q_bad, k, v, mode=mode, causal=True)
    torch.cuda.synchronize()
    finite_rows = torch.ones(256, dtype=torch.bool, device="cuda")
    finite_rows[100:102] = False
    assert torch.isfinite(o_bad[0, finite_rows]).all(), f"{mode}: a non-finite query leaked into other rows"
    assert rel(o_bad[0, finite_rows], ref[0, finite_rows]) < 0.08, mode


@pytest.mark.parametrize("causal", [False, True])
def test_every_int8_instance_forced(causal, seed):
    """Each compiled INT8 Q.K^T instance (Triton and Gluon), forced by name, against float64 over its operands;
    the Gluon ones read the key-permuted V^T."""
    names = [k["name"] for k in fp8attn.list_kernels() if k["qk_type"] == "i8" and k["causal"] == causal]
    if not names:
        pytest.skip("no INT8 Q.K^T instance in this build")
    for name in names:
        info = next(k for k in fp8attn.list_kernels() if k["name"] == name)
        d, paired = info["head_dim"], info["k_descale_paired"]  # kpair: k descales in pairs (block_pair)
        q, k, v = bf16_inputs(2, 1000, 1000, 8, 2, d, seed)
        q8, qd = fp8attn.quantize(q, dtype="int8", granularity="block")
        k8, kd = fp8attn.quantize(k, dtype="int8", granularity="block_pair" if paired else "block", smooth=True)
        kperm = "_vkperm" in name
        v8, vd = fp8attn.quantize(v, layout="vt_kperm" if kperm else "bshd")
        o = fp8attn.fmha_fwd(q8, k8, v8, q_descale=qd, k_descale=kd, v_descale=vd, causal=causal, kernel_name=name,
                             v_key_permuted=kperm, k_descale_paired=paired)
        torch.cuda.synchronize()
        vq = fp8attn.quantize(v)[0]  # the same values in the plain layout, for the reference
        ref = attention64(dequantize_blocks(q8, qd), dequantize_blocks(k8, kd), vq.double() * vd.double(), causal)
        err = rel(o, ref)
        assert err < 0.04, f"{name}: relative error {err:.4f}"


@pytest.mark.parametrize("causal", [False, True])
def test_kpair_twins_give_their_base_bits(causal, seed):
    """Each "kpair" instance (one k descale per 128-key tile) on K quantized with block_pair writes the bits of its
    base instance (the per-block path, which reads both entries of each pair) on the same operands, O and LSE, with
    odd lengths (a lone last entry, partial tiles); the library picks the twin when told the descales pair, and a
    twin forced without k_descale_paired is refused naming it."""
    twins = [k for k in fp8attn.list_kernels() if k["k_descale_paired"] and k["causal"] == causal]
    if not twins:
        pytest.skip("no kpair instance in this build")
    for twin in twins:
        name, d = twin["name"], twin["head_dim"]
        base = name.replace("_bdesc_kpair", "_bdesc")
        for sq, sk in ((1000, 1000), (333, 960), (100, 64)):
            q, k, v = bf16_inputs(2, sq, sk, 8, 2, d, seed)
            q8, qd = fp8attn.quantize(q, dtype="int8", granularity="block", rotate=True)
            k8, kd = fp8attn.quantize(k, dtype="int8", granularity="block_pair", smooth=True, rotate=True)
            v8, vd = fp8attn.quantize(v, layout="vt_kperm")
            args = dict(q_descale=qd, k_descale=kd, v_descale=vd, causal=causal, v_key_permuted=True,
                        return_lse=True)
            o_base, lse_base = fp8attn.fmha_fwd(q8, k8, v8, kernel_name=base, **args)
            o_twin, lse_twin = fp8attn.fmha_fwd(q8, k8, v8, kernel_name=name, k_descale_paired=True, **args)
            torch.cuda.synchronize()
            assert torch.equal(o_twin, o_base), f"{name} (S_q={sq}, S_k={sk}): O differs from {base}'s"
            assert torch.equal(lse_twin, lse_base), f"{name} (S_q={sq}, S_k={sk}): LSE differs from {base}'s"
        with pytest.raises(ValueError, match="k_descale_paired=false"):
            fp8attn.fmha_fwd(q8, k8, v8, q_descale=qd, k_descale=kd, v_descale=vd, causal=causal, kernel_name=name,
                             v_key_permuted=True)
    for d in sorted({t["head_dim"] for t in twins}):
        q, k, v = bf16_inputs(1, 4096, 4096, 8, 8, d, seed)
        q8, qd = fp8attn.quantize(q, dtype="int8", granularity="block")
        k8, kd = fp8attn.quantize(k, dtype="int8", granularity="block_pair")
        v8, vd = fp8attn.quantize(v, layout="vt_kperm")
        args = dict(q_descale=qd, k_descale=kd, v_descale=vd, causal=causal, v_key_permuted=True)
        unpaired = fp8attn.select_kernel(q8, k8, v8, **args)
        paired = fp8attn.select_kernel(q8, k8, v8, k_descale_paired=True, **args)
        twin_name = unpaired.replace("_bdesc", "_bdesc_kpair")
        assert paired == (twin_name if any(t["name"] == twin_name for t in twins) else unpaired), (unpaired, paired)


def test_int8_with_per_tensor_k_descales(seed):
    """The Gluon INT8 instances read the k descales of consecutive 64-key blocks at stride 1 (a compile-time
    constant): INT8 K with one descale per tensor runs on the Triton INT8 instances, correctly, and forcing a
    Gluon one is refused with the stride named."""
    d = 128
    gluon = [k["name"] for k in fp8attn.list_kernels()
             if k["qk_type"] == "i8" and k["head_dim"] == d and not k["causal"] and k["name"].endswith("_gluon")]
    triton = [k["name"] for k in fp8attn.list_kernels()
              if k["qk_type"] == "i8" and k["head_dim"] == d and not k["causal"] and k["name"].endswith("_bdesc")]
    if not gluon or not triton:
        pytest.skip("needs a Gluon and a Triton INT8 Q.K^T instance at D=128 in this build")
    q, k, v = bf16_inputs(2, 700, 1000, 8, 2, d, seed)
    q8, qd = fp8attn.quantize(q, dtype="int8", granularity="block")
    k8, kd = fp8attn.quantize(k, dtype="int8", granularity="tensor")
    v8, vd = fp8attn.quantize(v)
    name = fp8attn.select_kernel(q8, k8, v8, q_descale=qd, k_descale=kd, v_descale=vd)
    assert name in triton, name
    o = fp8attn.fmha_fwd(q8, k8, v8, q_descale=qd, k_descale=kd, v_descale=vd)
    torch.cuda.synchronize()
    ref = attention64(dequantize_blocks(q8, qd), k8.double() * kd.double(), v8.double() * vd.double(), False)
    assert rel(o, ref) < 0.04
    with pytest.raises(ValueError, match="k_descale.stride_block=0"):
        fp8attn.fmha_fwd(q8, k8, v8, q_descale=qd, k_descale=kd, v_descale=vd, kernel_name=gluon[0])
