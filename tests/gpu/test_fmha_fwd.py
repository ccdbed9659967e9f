"""fmha_fwd against float64: every compiled instance, odd lengths, GQA, layouts, strides, descales, head dims.

Each check (fmha_utils.run_and_check): outputs poisoned with NaN and every element written; O = 0 and
LSE = -inf exactly on rows that see no key; kernel error <= 2 x the error of a same-precision emulation +
1e-3 (both vs float64 on the dequantized inputs); LSE against the float64 logsumexp.
"""

import dataclasses

import pytest

import fmha_utils as fu

if fu.SKIP_REASON:
    pytest.skip(fu.SKIP_REASON, allow_module_level=True)

import torch  # noqa: E402

import fp8attn  # noqa: E402
from fmha_utils import Problem  # noqa: E402

KERNELS = fp8attn.list_kernels()
LENGTHS = [1, 17, 113, 127, 1000, 4097]
HEAD_DIMS = [64, 128, 256]
DTYPES = ["e4m3", "bf16"]


def causal_id(c):
    return "causal" if c else "full"


# ---- The registry ----------------------------------------------------------------------------------------

def test_registry_names_spell_their_fields():
    assert KERNELS, "the build holds no attention instance"
    assert fp8attn.triton_version() == "3.6.0"
    names = [k["name"] for k in KERNELS]
    assert len(set(names)) == len(names), "duplicate kernel names"
    for k in KERNELS:
        name = k["name"]
        assert name.startswith("fp8attn_sm90_fmha_fwd_"), name
        assert f"_{k['qk_type']}_{k['v_type']}_{k['acc_type']}_{k['out_type']}_" in name, name
        assert f"_{k['block_m']}x{k['block_n']}x{k['head_dim']}_" in name, name
        assert f"_w{k['warps']}_s{k['stages']}_" in name, name
        assert ("_causal" in name) == k["causal"], name
        assert not (k["even_n"] and k["causal"]), f"{name}: an even_n instance is never causal"
        assert fp8attn.find_kernel(name) == k
    assert fp8attn.find_kernel("fp8attn_sm90_fmha_fwd_no_such_instance") is None


# ---- Every compiled instance, forced by name --------------------------------------------------------------

def instance_problems(kernel):
    """Problems the instance's fields allow, in both layouts and both descale modes."""
    common = dict(batch=2, heads_q=4, heads_kv=2, head_dim=kernel["head_dim"], causal=kernel["causal"],
                  dtype=kernel["qk_type"])
    bn = kernel["block_n"]
    if kernel["even_n"]:
        lengths = [(200, 3 * bn), (2 * bn, 2 * bn)]
    else:
        lengths = [(197, 1000), (333, 197)]  # with causal, the second leaves the first 136 rows empty
    return [Problem(seqlen_q=sq, seqlen_k=sk, layout=layout, descale=descale, **common)
            for (sq, sk), layout, descale in zip(lengths, ("bshd", "bhsd"), ("tensor", "head"))]


@pytest.mark.parametrize("kernel", KERNELS, ids=[k["name"] for k in KERNELS])
def test_instance(kernel, seed):
    if kernel["qk_type"] not in DTYPES:
        pytest.skip(f"no input generator for {kernel['qk_type']}")
    if kernel["family"] == "gluon" and kernel["varlen"]:
        pytest.skip("varlen instance (packed sequences only): checked in test_varlen")
    if kernel.get("softcap"):
        # A soft-capping instance refuses softcap=0, which every problem here has; test_window_softcap runs each
        # of them (one per dtype and head dim) against float64 with a cap.
        pytest.skip("soft-capping instance: checked in test_window_softcap")
    for i, p in enumerate(instance_problems(kernel)):
        fu.check_problem(p, seed + i, kernel_name=kernel["name"])


# The Gluon vnat instances transpose each V tile when the next one's load is issued; a query block without key tiles
# (causal with seqlen_q > seqlen_k) must not leave the previous block's last transpose waiting, which hung a program
# walking more blocks than the grid has programs (8 x 8 heads x 8 blocks here, three of them above the diagonal).
VNAT_CAUSAL = [k for k in KERNELS if k["family"] == "gluon" and k["qk_type"] == "e4m3" and not k["v_transposed"]
               and k["causal"] and not k["varlen"]]


@pytest.mark.parametrize("kernel", VNAT_CAUSAL or [None], ids=[k["name"] for k in VNAT_CAUSAL] or ["none"])
def test_vnat_blocks_without_keys(kernel, seed):
    if kernel is None:
        pytest.skip("no Gluon vnat causal instance in this build")
    p = Problem(batch=8, seqlen_q=1000, seqlen_k=600, heads_q=8, heads_kv=8, head_dim=kernel["head_dim"],
                causal=True, dtype="e4m3")
    fu.check_problem(p, seed, kernel_name=kernel["name"])


# ---- The heuristic's pick over shapes ------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("causal", [False, True], ids=causal_id)
@pytest.mark.parametrize("seqlen_k", LENGTHS, ids=lambda s: f"sk{s}")
@pytest.mark.parametrize("seqlen_q", LENGTHS, ids=lambda s: f"sq{s}")
def test_odd_lengths(seqlen_q, seqlen_k, causal, dtype, seed):
    fu.require_compiled(dtype, 128, causal)
    p = Problem(seqlen_q=seqlen_q, seqlen_k=seqlen_k, heads_q=2, heads_kv=1, head_dim=128, causal=causal,
                dtype=dtype)
    fu.check_problem(p, seed)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("causal", [False, True], ids=causal_id)
@pytest.mark.parametrize("head_dim", HEAD_DIMS, ids=lambda d: f"d{d}")
@pytest.mark.parametrize("seqlens", [(128, 128), (255, 511), (700, 300)], ids=lambda s: f"sq{s[0]}_sk{s[1]}")
def test_head_dims(seqlens, head_dim, causal, dtype, seed):
    fu.require_compiled(dtype, head_dim, causal)
    p = Problem(batch=2, seqlen_q=seqlens[0], seqlen_k=seqlens[1], heads_q=2, heads_kv=2, head_dim=head_dim,
                causal=causal, dtype=dtype)
    fu.check_problem(p, seed)


GQA = [(4, 4), (4, 2), (8, 2), (16, 2), (8, 1), (12, 1)]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("causal", [False, True], ids=causal_id)
@pytest.mark.parametrize("heads", GQA, ids=lambda h: f"hq{h[0]}_hkv{h[1]}" + ("_mqa" if h[1] == 1 else ""))
def test_gqa(heads, causal, dtype, seed):
    fu.require_compiled(dtype, 128, causal)
    p = Problem(batch=2, seqlen_q=300, seqlen_k=300, heads_q=heads[0], heads_kv=heads[1], causal=causal,
                dtype=dtype, descale="head" if dtype == "e4m3" else "tensor")
    fu.check_problem(p, seed)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("causal", [False, True], ids=causal_id)
@pytest.mark.parametrize("layout", ["bshd", "bhsd"])
def test_layouts(layout, causal, dtype, seed):
    fu.require_compiled(dtype, 128, causal)
    p = Problem(batch=2, seqlen_q=257, seqlen_k=385, heads_q=4, heads_kv=2, causal=causal, dtype=dtype,
                layout=layout)
    fu.check_problem(p, seed)


@pytest.mark.parametrize("causal", [False, True], ids=causal_id)
@pytest.mark.parametrize("descale", ["tensor", "head", "head_b1", "mixed"])
def test_descales(descale, causal, seed):
    """Per tensor [1], per (batch, kv head) [B, H_kv], per kv head broadcast over the batch [1, H_kv], and
    q per tensor with k, v per head; inputs have a different magnitude per (batch, kv head)."""
    fu.require_compiled("e4m3", 128, causal)
    p = Problem(batch=3, seqlen_q=200, seqlen_k=520, heads_q=8, heads_kv=2, causal=causal, descale=descale)
    inp = fu.make_inputs(p, seed, head_spread=True)
    fu.run_and_check(inp, causal=causal, what=f"{p} ")


@pytest.mark.parametrize("softmax_scale", [0.02, 0.3])
@pytest.mark.parametrize("dtype", DTYPES)
def test_softmax_scale(dtype, softmax_scale, seed):
    fu.require_compiled(dtype, 128, False)
    p = Problem(seqlen_q=150, seqlen_k=650, heads_q=4, heads_kv=2, dtype=dtype, softmax_scale=softmax_scale)
    fu.check_problem(p, seed)


# ---- Strided operands ----------------------------------------------------------------------------------------

def _packed_qkv_inputs(dtype, layout, batch, seqlen, heads_q, heads_kv, head_dim, seed):
    """q, k, v as head slices of one packed QKV tensor ([B, S, Hq + 2 Hkv, D] or [B, Hq + 2 Hkv, S, D]):
    non-contiguous, strides shared by the three, one per-tensor descale for all of them."""
    gen = fu.generator(seed)
    heads = heads_q + 2 * heads_kv
    x = fu.randn((batch, seqlen, heads, head_dim), gen)
    if dtype == "e4m3":
        x8, d = fp8attn.quantize_e4m3(x)
    else:
        x8, d = x.to(fu.BF16), None
    packed = fu.from_bshd(x8, layout)
    head_axis = 2 if layout == "bshd" else 1
    q, k, v = packed.split([heads_q, heads_kv, heads_kv], dim=head_axis)
    assert not q.is_contiguous()
    return fu.Inputs(q, k, v, d, d, d, layout, fu.dequantize(q, d, heads_kv, layout),
                     fu.dequantize(k, d, heads_kv, layout), fu.dequantize(v, d, heads_kv, layout))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("causal", [False, True], ids=causal_id)
@pytest.mark.parametrize("layout", ["bshd", "bhsd"])
def test_packed_qkv(layout, causal, dtype, seed):
    fu.require_compiled(dtype, 128, causal)
    inp = _packed_qkv_inputs(dtype, layout, 2, 333, 4, 2, 128, seed)
    fu.run_and_check(inp, causal=causal, what=f"packed {layout} ")


def _poison_(t):
    if t.dtype == fu.E4M3:
        t.view(torch.uint8).fill_(0x7F)  # e4m3fn NaN
    else:
        t.fill_(float("nan"))
    return t


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("causal", [False, True], ids=causal_id)
def test_cache_slices_with_nan_tails(causal, dtype, seed):
    """K/V are the first S_k slots of a larger cache whose unused slots hold NaN, Q the first S_q rows of a
    NaN-padded buffer, and rows are padded (head stride > D, NaN in the gaps): nothing outside the operands
    may leak into O."""
    fu.require_compiled(dtype, 128, causal)
    b, sq, sk, hq, hkv, d = 2, 250, 1000, 4, 2, 128
    p = Problem(batch=b, seqlen_q=sq, seqlen_k=sk, heads_q=hq, heads_kv=hkv, causal=causal, dtype=dtype)
    dense = fu.make_inputs(p, seed)
    tdtype = fu.TORCH_DTYPES[dtype]

    def embed(x, s_max, h_pad):
        # [B, s_max, H, D + h_pad] buffer, poisoned, holding x in [:, :S, :, :D].
        buf = _poison_(torch.empty((x.shape[0], s_max, x.shape[2], d + h_pad), dtype=tdtype, device=fu.DEVICE))
        view = buf[:, : x.shape[1], :, :d]
        view.copy_(x)
        return view

    q = embed(dense.q, sq + 64, 16)
    k = embed(dense.k, 2048, 0)
    v = embed(dense.v, 2048, 32)
    inp = fu.Inputs(q, k, v, dense.q_descale, dense.k_descale, dense.v_descale, "bshd", dense.qf, dense.kf,
                    dense.vf)
    fu.run_and_check(inp, causal=causal, what="cache slices ")


@pytest.mark.parametrize("causal", [False, True], ids=causal_id)
def test_fp8_v_sequence_contiguous(causal, seed):
    """FP8 V given already transposed (a view of a [B, H_kv, D, S_pad] tensor, stride_s = 1): the library
    reads it in place instead of transposing it into the workspace."""
    fu.require_compiled("e4m3", 128, causal)
    p = Problem(batch=2, seqlen_q=200, seqlen_k=333, heads_q=4, heads_kv=2, causal=causal)
    dense = fu.make_inputs(p, seed)
    s_pad = 352  # a multiple of 16 elements
    vt = _poison_(torch.empty((2, 2, 128, s_pad), dtype=fu.E4M3, device=fu.DEVICE))
    vt[..., :333].copy_(dense.v.permute(0, 2, 3, 1))
    v = vt[..., :333].permute(0, 3, 1, 2)  # [B, S, H, D] with strides (H*D*S_pad, 1, D*S_pad, S_pad)
    assert v.stride(1) == 1
    inp = dataclasses.replace(dense, v=v)
    fu.run_and_check(inp, causal=causal, what="sequence-contiguous v ")


@pytest.mark.parametrize("layout", ["bshd", "bhsd"])
def test_out_argument(layout, seed):
    """out= is written in place (a strided slice of a poisoned buffer) and returned; nothing around it changes."""
    fu.require_compiled("e4m3", 128, False)
    p = Problem(batch=2, seqlen_q=190, seqlen_k=300, heads_q=4, heads_kv=2, layout=layout)
    inp = fu.make_inputs(p, seed)
    shape = inp.q.shape
    big = torch.full((shape[0], shape[1] + 8, shape[2] + 2, shape[3]), float("nan"), dtype=fu.BF16,
                     device=fu.DEVICE)
    out = big[:, 4:4 + shape[1], 1:1 + shape[2]]
    fu.run_and_check(inp, out=out, what="out= ")
    inside = torch.zeros_like(big, dtype=torch.bool)
    inside[:, 4:4 + shape[1], 1:1 + shape[2]] = True
    assert torch.isnan(big[~inside]).all(), "fmha_fwd wrote outside out="


# ---- Call conventions ------------------------------------------------------------------------------------------

def test_return_lse_false_returns_a_tensor(seed):
    fu.require_compiled("e4m3", 128, False)
    inp = fu.make_inputs(Problem(seqlen_q=64, seqlen_k=64), seed)
    o = fp8attn.fmha_fwd(inp.q, inp.k, inp.v, **inp.kwargs())
    assert isinstance(o, torch.Tensor) and o.shape == inp.q.shape


def test_deterministic(seed):
    fu.require_compiled("e4m3", 128, True)
    inp = fu.make_inputs(Problem(batch=2, seqlen_q=500, seqlen_k=900, heads_q=4, heads_kv=2, causal=True), seed)
    a = fp8attn.fmha_fwd(inp.q, inp.k, inp.v, causal=True, **inp.kwargs())
    b = fp8attn.fmha_fwd(inp.q, inp.k, inp.v, causal=True, **inp.kwargs())
    assert torch.equal(a, b), "two runs on the same inputs differ"


def test_side_stream(seed):
    """Launched on torch's current stream: a side stream's work is ordered with it."""
    fu.require_compiled("e4m3", 128, False)
    p = Problem(batch=2, seqlen_q=300, seqlen_k=700, heads_q=4, heads_kv=2)
    inp = fu.make_inputs(p, seed)
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        o = fp8attn.fmha_fwd(inp.q, inp.k, inp.v, **inp.kwargs())
        o_copy = o.clone()  # ordered after the kernel on the same stream
    stream.synchronize()
    ref = fp8attn.fmha_fwd(inp.q, inp.k, inp.v, **inp.kwargs())
    torch.cuda.synchronize()
    assert torch.equal(o_copy, ref)


def test_select_kernel_is_listed(seed):
    for dtype in DTYPES:
        for causal in (False, True):
            if not fu.compiled(dtype, 128, causal):
                continue
            inp = fu.make_inputs(Problem(seqlen_q=100, seqlen_k=100, dtype=dtype), seed)
            name = fp8attn.select_kernel(inp.q, inp.k, inp.v, causal=causal, **inp.kwargs())
            k = fp8attn.find_kernel(name)
            assert k is not None and k["qk_type"] == dtype and k["head_dim"] == 128
            assert k["causal"] == causal
            assert fp8attn.workspace_size(inp.q, inp.k, inp.v, causal=causal, **inp.kwargs()) >= 0
