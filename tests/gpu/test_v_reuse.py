"""A V^T made once and reused (fp8attn.transpose_v, fmha_fwd(v_key_permuted=True)): the same bits as the call
that transposes V itself, no transpose launched, and clear errors for the combinations that cannot work."""

import pytest

import fmha_utils as fu

if fu.SKIP_REASON:
    pytest.skip(fu.SKIP_REASON, allow_module_level=True)

import torch  # noqa: E402

import fp8attn  # noqa: E402


@pytest.mark.parametrize("layout", ["bshd", "bhsd"])
@pytest.mark.parametrize("seqlen", [1000, 4096])
@pytest.mark.parametrize("causal", [False, True])
def test_key_permuted_v_gives_the_same_bits(layout, seqlen, causal, seed):
    p = fu.Problem(batch=2, seqlen_q=seqlen, seqlen_k=seqlen, heads_q=8, heads_kv=2, causal=causal, dtype="e4m3",
                   layout=layout)
    inp = fu.make_inputs(p, seed)
    kw = dict(causal=causal, **inp.kwargs())  # kwargs() holds the layout
    want = fp8attn.fmha_fwd(inp.q, inp.k, inp.v, **kw)
    if not any(k.get("v_key_permuted") and k["head_dim"] == 128 and k["causal"] == causal
               for k in fp8attn.list_kernels()):
        pytest.skip("this build has no vkperm instance for D=128")
    vt = fp8attn.transpose_v(inp.v, key_permuted=True, layout=layout)
    name = fp8attn.select_kernel(inp.q, inp.k, vt, v_key_permuted=True, **kw)
    assert "_vkperm" in name, name
    if "_vnat" not in fp8attn.select_kernel(inp.q, inp.k, inp.v, **kw):
        # (A vnat instance, the tuning table's pick for some short rows, transposes V in the kernel: no V^T in its
        # workspace either; it computes the same bits as the vkperm instance of its tile.)
        assert fp8attn.workspace_size(inp.q, inp.k, vt, v_key_permuted=True, **kw) < fp8attn.workspace_size(
            inp.q, inp.k, inp.v, **kw), "no V^T in the workspace"
    got = fp8attn.fmha_fwd(inp.q, inp.k, vt, v_key_permuted=True, **kw)
    torch.cuda.synchronize()
    assert torch.equal(got, want)


def test_plain_v_transpose_reads_as_a_callers_sequence_contiguous_v(seed):
    p = fu.Problem(batch=1, seqlen_q=777, seqlen_k=777, heads_q=4, heads_kv=4, causal=True, dtype="e4m3")
    inp = fu.make_inputs(p, seed)
    vt = fp8attn.transpose_v(inp.v)
    assert vt.shape == inp.v.shape and vt.stride(1) == 1
    o = fp8attn.fmha_fwd(inp.q, inp.k, vt, causal=True, **inp.kwargs())
    fu.check_accuracy(o, inp, True, 128 ** -0.5,
                      fu.block_n_of(fp8attn.select_kernel(inp.q, inp.k, vt, causal=True, **inp.kwargs())),
                      what="plain V^T: ")


def test_errors(seed):
    p = fu.Problem(batch=1, seqlen_q=256, seqlen_k=256, heads_q=4, heads_kv=4, causal=False, dtype="e4m3")
    inp = fu.make_inputs(p, seed)
    with pytest.raises(ValueError, match="v_key_permuted=true needs v sequence-contiguous"):
        fp8attn.fmha_fwd(inp.q, inp.k, inp.v, v_key_permuted=True, **inp.kwargs())
    with pytest.raises(ValueError, match="dtype"):
        fp8attn.transpose_v(inp.v.to(torch.bfloat16))
    plain = fp8attn.transpose_v(inp.v, key_permuted=False)
    plain_gluon = "fp8attn_sm90_fmha_fwd_e4m3_e4m3_f32_bf16_128x128x128_w4_s2_strided_full_gluon"
    if any(k["name"] == plain_gluon for k in fp8attn.list_kernels()):
        # v_key_permuted=True asks for an instance that reads the permuted order: a plain one is refused.
        with pytest.raises(ValueError, match="not vkperm"):
            fp8attn.fmha_fwd(inp.q, inp.k, plain, v_key_permuted=True,
                             kernel_name=plain_gluon, **inp.kwargs())
