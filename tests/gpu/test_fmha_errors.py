"""Bad input to fmha_fwd: a ValueError whose message names the argument, never a crash, a hang or a write out
of bounds (the guarded allocations of conftest.py check the last). After every test, a valid call must
still run correctly, so a bad call cannot leave the CUDA context broken.

Degenerate but valid shapes have defined results: seqlen_q = 0 gives empty outputs, seqlen_k = 0 gives
O = 0 and LSE = -inf.
"""

import re

import pytest

import fmha_utils as fu

if fu.SKIP_REASON:
    pytest.skip(fu.SKIP_REASON, allow_module_level=True)

import torch  # noqa: E402

import fp8attn  # noqa: E402
from fmha_utils import Problem  # noqa: E402


def small(seed, dtype="e4m3", **kw):
    fields = dict(batch=1, seqlen_q=64, seqlen_k=96, heads_q=2, heads_kv=2, head_dim=128, dtype=dtype)
    fields.update(kw)
    return fu.make_inputs(Problem(**fields), seed)


def call(inp, **kw):
    args = inp.kwargs()
    args.update(kw)
    q, k, v = args.pop("q", inp.q), args.pop("k", inp.k), args.pop("v", inp.v)
    return fp8attn.fmha_fwd(q, k, v, **args)


def raises_naming(fn, *patterns):
    """fn() raises ValueError and its message matches one of the regular expressions."""
    with pytest.raises(ValueError) as info:
        fn()
    torch.cuda.synchronize()
    msg = str(info.value)
    assert any(re.search(p, msg) for p in patterns), f"the message does not name the argument {patterns}: {msg!r}"
    return msg


def word(name):
    return rf"\b{re.escape(name)}\b"


@pytest.fixture(autouse=True)
def still_works_afterwards(seed):
    yield
    torch.cuda.synchronize()  # an asynchronous fault of the bad call surfaces here
    if not fu.compiled("e4m3", 128, False):
        return
    inp = small(seed + 1)
    o = call(inp)
    torch.cuda.synchronize()
    fu.check_accuracy(fu.to_bshd(o, inp.layout), inp, False, 128 ** -0.5,
                      fu.block_n_of(fp8attn.select_kernel(inp.q, inp.k, inp.v, **inp.kwargs())),
                      what="valid call after the bad one: ")


# ---- Types and shapes -------------------------------------------------------------------------------------

def test_q_float32(seed):
    inp = small(seed)
    x = inp.qf.float()
    raises_naming(lambda: fp8attn.fmha_fwd(x, inp.kf.float(), inp.vf.float()), word("q"))


def test_k_dtype_differs(seed):
    inp = small(seed)
    raises_naming(lambda: call(inp, k=inp.kf.to(torch.bfloat16)), word("k"))


def test_v_dtype_differs(seed):
    inp = small(seed, dtype="bf16")
    raises_naming(lambda: call(inp, v=inp.v.half()), word("v"))


def test_v_seqlen_differs_from_k(seed):
    inp = small(seed)
    raises_naming(lambda: call(inp, v=inp.v[:, :-1]), word("v"))


def test_v_heads_differ_from_k(seed):
    inp = small(seed, heads_q=4, heads_kv=2)
    raises_naming(lambda: call(inp, v=inp.v[:, :, :1]), word("v"))


def test_batch_differs(seed):
    inp = small(seed, batch=2)
    raises_naming(lambda: call(inp, k=inp.k[:1], v=inp.v[:1]), word("k"), "batch")


def test_head_dim_differs(seed):
    inp = small(seed)
    other = small(seed, head_dim=64)
    raises_naming(lambda: call(inp, k=other.k, v=other.v, k_descale=other.k_descale, v_descale=other.v_descale),
                  word("k"), "head_dim")


@pytest.mark.parametrize("dtype", ["e4m3", "bf16"])
def test_head_dim_96(dtype, seed):
    inp = small(seed, dtype=dtype, head_dim=96)
    raises_naming(lambda: call(inp), "head_dim")


def test_heads_q_not_a_multiple_of_heads_kv(seed):
    inp = small(seed, heads_q=6, heads_kv=4)
    raises_naming(lambda: call(inp), "heads_q", "heads_kv")


def test_rank(seed):
    inp = small(seed)
    raises_naming(lambda: call(inp, q=inp.q[0]), word("q"))


def test_cpu_tensor(seed):
    inp = small(seed)
    raises_naming(lambda: call(inp, q=inp.q.cpu()), word("q"))
    raises_naming(lambda: call(inp, v=inp.v.cpu()), word("v"))


def test_bad_layout(seed):
    inp = small(seed)
    raises_naming(lambda: call(inp, layout="sbhd"), "layout")


def test_out_wrong_shape(seed):
    inp = small(seed)
    out = torch.empty((1, 63, 2, 128), dtype=torch.bfloat16, device=fu.DEVICE)
    raises_naming(lambda: call(inp, out=out), word("out"))


def test_out_wrong_dtype(seed):
    inp = small(seed)
    out = torch.empty(inp.q.shape, dtype=torch.float32, device=fu.DEVICE)
    raises_naming(lambda: call(inp, out=out), word("out"))


# ---- Descales ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("which", ["q_descale", "k_descale", "v_descale"])
def test_missing_descale_for_e4m3(which, seed):
    inp = small(seed)
    raises_naming(lambda: call(inp, **{which: None}), word(which))


def test_descale_wrong_dtype(seed):
    inp = small(seed)
    raises_naming(lambda: call(inp, k_descale=inp.k_descale.half()), word("k_descale"))


def test_descale_wrong_shape(seed):
    inp = small(seed)
    raises_naming(lambda: call(inp, v_descale=inp.v_descale.expand(3).contiguous()), word("v_descale"))
    # [batch, heads, blocks] is a per-block descale: 64 query rows are one block of 64, not two.
    raises_naming(lambda: call(inp, q_descale=torch.ones((1, 2, 2), device=fu.DEVICE)), word("q_descale"))
    raises_naming(lambda: call(inp, v_descale=torch.ones((1, 2, 2), device=fu.DEVICE)), word("v_descale"))
    raises_naming(lambda: call(inp, k_descale=torch.ones((1, 3), device=fu.DEVICE)), word("k_descale"))


def test_descale_on_cpu(seed):
    inp = small(seed)
    raises_naming(lambda: call(inp, q_descale=inp.q_descale.cpu()), word("q_descale"))


# ---- Alignment and strides ----------------------------------------------------------------------------------

def shifted(x):
    """The same values one element past an aligned address (a view at storage offset 1)."""
    buf = torch.empty(x.numel() + 1, dtype=x.dtype, device=x.device)
    view = buf[1:].view(x.shape)
    view.copy_(x)
    return view


@pytest.mark.parametrize("dtype", ["e4m3", "bf16"])
@pytest.mark.parametrize("which", ["q", "k"])
def test_misaligned_pointer(which, dtype, seed):
    fu.require_compiled(dtype, 128, False)
    inp = small(seed, dtype=dtype)
    raises_naming(lambda: call(inp, **{which: shifted(getattr(inp, which))}), word(which))


@pytest.mark.parametrize("dtype", ["e4m3", "bf16"])
def test_misaligned_v(dtype, seed):
    """V may be staged through the library's transpose (which reads any address): then the call must
    succeed with the right result; otherwise it must be a ValueError naming v."""
    fu.require_compiled(dtype, 128, False)
    inp = small(seed, dtype=dtype)
    v = shifted(inp.v)
    try:
        o = call(inp, v=v)
    except ValueError as e:
        assert re.search(word("v"), str(e)), f"the message does not name v: {e}"
        return
    torch.cuda.synchronize()
    name = fp8attn.select_kernel(inp.q, inp.k, inp.v, **inp.kwargs())
    fu.check_accuracy(fu.to_bshd(o, inp.layout), inp, False, 128 ** -0.5, fu.block_n_of(name),
                      what="misaligned v accepted: ")


def test_misaligned_row_stride(seed):
    """q's sequence stride is 8 bytes off a multiple of 16 (TMA needs 16-byte strides)."""
    inp = small(seed)
    b, s, h, d = inp.q.shape
    buf = torch.zeros((b, s, h * d + 8), dtype=inp.q.dtype, device=fu.DEVICE)
    q = buf[:, :, : h * d].view(b, s, h, d)
    q.copy_(inp.q)
    raises_naming(lambda: call(inp, q=q), word("q"), "stride")


def test_head_dim_not_contiguous(seed):
    inp = small(seed)
    b, s, h, d = inp.q.shape
    buf = torch.zeros((b, s, h, 2 * d), dtype=inp.q.dtype, device=fu.DEVICE)
    q = buf[..., ::2]
    q.copy_(inp.q)
    raises_naming(lambda: call(inp, q=q), word("q"), "stride_d", "head_dim")


# ---- Degenerate shapes (defined results, no error) -------------------------------------------------------

@pytest.mark.parametrize("layout", ["bshd", "bhsd"])
@pytest.mark.parametrize("dtype", ["e4m3", "bf16"])
def test_zero_seqlen_q(dtype, layout, seed):
    fu.require_compiled(dtype, 128, False)
    inp = small(seed, dtype=dtype, seqlen_q=0, layout=layout)
    o, lse = call(inp, return_lse=True)
    torch.cuda.synchronize()
    assert o.shape == inp.q.shape and o.numel() == 0
    assert lse.shape == (1, 2, 0)


@pytest.mark.parametrize("causal", [False, True], ids=lambda c: "causal" if c else "full")
@pytest.mark.parametrize("dtype", ["e4m3", "bf16"])
def test_zero_seqlen_k(dtype, causal, seed):
    fu.require_compiled(dtype, 128, causal)
    inp = small(seed, dtype=dtype, seqlen_k=0)
    o, lse = call(inp, causal=causal, return_lse=True)  # O and LSE come NaN-poisoned from the allocator
    torch.cuda.synchronize()
    assert o.shape == inp.q.shape
    assert (o == 0).all(), "seqlen_k = 0: O must be all zeros"
    assert (lse == float("-inf")).all(), "seqlen_k = 0: LSE must be all -inf"


# ---- Forced kernel names ------------------------------------------------------------------------------------

def test_unknown_kernel_name(seed):
    inp = small(seed)
    raises_naming(lambda: call(inp, kernel_name="fp8attn_sm90_fmha_fwd_no_such_instance"), "kernel_name")


def _forced_mismatch(seed, pick, problem, patterns):
    kernels = [k for k in fp8attn.list_kernels() if pick(k)]
    if not kernels:
        pytest.skip("no instance of that kind in this build")
    inp = small(seed, **problem)
    raises_naming(lambda: call(inp, kernel_name=kernels[0]["name"], causal=problem.get("causal", False)),
                  "kernel_name", *patterns)


def test_forced_kernel_wrong_head_dim(seed):
    _forced_mismatch(seed, lambda k: k["head_dim"] != 128 and k["qk_type"] == "e4m3", dict(head_dim=128),
                     ["head_dim"])


def test_forced_kernel_wrong_dtype(seed):
    _forced_mismatch(seed, lambda k: k["qk_type"] == "bf16" and k["head_dim"] == 128 and not k["causal"],
                     dict(dtype="e4m3"), ["input_type", "e4m3"])


def test_forced_causal_kernel_on_full_problem(seed):
    _forced_mismatch(seed, lambda k: k["causal"] and k["head_dim"] == 128 and k["qk_type"] == "e4m3", {},
                     ["causal"])


def test_forced_full_kernel_on_causal_problem(seed):
    _forced_mismatch(seed, lambda k: not k["causal"] and k["head_dim"] == 128 and k["qk_type"] == "e4m3",
                     dict(causal=True), ["causal"])


def test_forced_even_n_kernel_on_ragged_seqlen_k(seed):
    kernels = [k for k in fp8attn.list_kernels() if k["even_n"] and k["head_dim"] == 128]
    if not kernels:
        pytest.skip("no even_n instance with head_dim 128 in this build")
    k = kernels[0]
    inp = small(seed, dtype=k["qk_type"], seqlen_k=k["block_n"] + 1)
    raises_naming(lambda: call(inp, kernel_name=k["name"]), "kernel_name", "seqlen_k", "even")


def test_bf16_v_not_head_dim_contiguous(seed):
    """Only FP8 V may come sequence-contiguous (the layout FP8 wgmma reads); BF16 V must not."""
    fu.require_compiled("bf16", 128, False)
    inp = small(seed, dtype="bf16")
    b, s, h, d = inp.v.shape
    vt = torch.zeros((b, h, d, 112), dtype=inp.v.dtype, device=fu.DEVICE)
    vt[..., :s].copy_(inp.v.permute(0, 2, 3, 1))
    raises_naming(lambda: call(inp, v=vt[..., :s].permute(0, 3, 1, 2)), word("v"))
