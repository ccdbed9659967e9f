"""The torch.library operators (fp8attn/ops.py): torch.ops.fp8attn.fmha_fwd and fmha_fwd_lse.

opcheck (schema, fake implementation, dispatch), torch.compile(fullgraph=True) through them, CUDA-graph capture,
the same bits as fp8attn.fmha_fwd, and a clear error on backward (inference only).
"""

import pytest

import fmha_utils as fu

if fu.SKIP_REASON:
    pytest.skip(fu.SKIP_REASON, allow_module_level=True)

import torch  # noqa: E402

import fp8attn  # noqa: E402
from fmha_utils import Problem  # noqa: E402

CASES = [("e4m3", False, "bshd"), ("e4m3", True, "bhsd"), ("bf16", True, "bshd")]


def case_id(c):
    return f"{c[0]}-{'causal' if c[1] else 'full'}-{c[2]}"


def operands(dtype, causal, layout, seed):
    p = Problem(batch=2, seqlen_q=200, seqlen_k=300, heads_q=4, heads_kv=2, causal=causal, dtype=dtype,
                layout=layout)
    inp = fu.make_inputs(p, seed)
    return inp, (inp.q, inp.k, inp.v, inp.q_descale, inp.k_descale, inp.v_descale, 0.0, causal, layout)


# opcheck's test_schema runs the operator under torch's SchemaCheckMode, which compares inputs with arithmetic
# that torch does not implement for float8 ("mul_cuda" not implemented for 'Float8_e4m3fn', torch 2.11). For
# e4m3 inputs the test below checks what test_schema would (no input is written) byte for byte instead.
ALL_OPCHECK_TESTS = ("test_schema", "test_autograd_registration", "test_faketensor", "test_aot_dispatch_dynamic")


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_opcheck(case, seed, monkeypatch):
    # The test allocator hands out views into guarded buffers (storage offset != 0); the fake implementation
    # describes what the library itself allocates, so compare against that.
    monkeypatch.setattr(fp8attn.fmha, "_allocate", fp8attn.fmha._default_allocate)
    _, args = operands(*case, seed)
    fp8 = case[0] == "e4m3"
    tests = tuple(t for t in ALL_OPCHECK_TESTS if not (fp8 and t == "test_schema"))
    before = [a.view(torch.uint8).clone() for a in args if isinstance(a, torch.Tensor)]
    for op in (torch.ops.fp8attn.fmha_fwd.default, torch.ops.fp8attn.fmha_fwd_lse.default):
        torch.library.opcheck(op, args, test_utils=tests)
        op(*args)
    after = [a.view(torch.uint8) for a in args if isinstance(a, torch.Tensor)]
    assert all(torch.equal(x, y) for x, y in zip(before, after)), "an input was written"


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_same_bits_as_the_python_api(case, seed):
    inp, args = operands(*case, seed)
    o = torch.ops.fp8attn.fmha_fwd(*args)
    o2, lse = torch.ops.fp8attn.fmha_fwd_lse(*args)
    ref_o, ref_lse = fp8attn.fmha_fwd(inp.q, inp.k, inp.v, causal=case[1], return_lse=True, **inp.kwargs())
    torch.cuda.synchronize()
    assert torch.equal(o2, ref_o) and torch.equal(lse, ref_lse)
    fu.check_accuracy(fu.to_bshd(o, inp.layout), inp, case[1], 128 ** -0.5,
                      fu.block_n_of(fp8attn.select_kernel(inp.q, inp.k, inp.v, causal=case[1], **inp.kwargs())),
                      what="torch.ops.fp8attn.fmha_fwd: ")


def test_v_key_permuted_same_bits_as_the_python_api(seed):
    # The operators' v_key_permuted (what fp8attn.attention passes with V quantized into the key-permuted V^T):
    # the same call as fp8attn.fmha_fwd on that V^T, the same bits, no transpose of its own.
    inp, args = operands("e4m3", True, "bshd", seed)
    vt = fp8attn.transpose_v(inp.v, key_permuted=True)
    o = torch.ops.fp8attn.fmha_fwd(inp.q, inp.k, vt, *args[3:], True)
    o2, lse = torch.ops.fp8attn.fmha_fwd_lse(inp.q, inp.k, vt, *args[3:], v_key_permuted=True)
    ref_o, ref_lse = fp8attn.fmha_fwd(inp.q, inp.k, vt, causal=True, return_lse=True, v_key_permuted=True,
                                      **inp.kwargs())
    torch.cuda.synchronize()
    assert torch.equal(o2, ref_o) and torch.equal(lse, ref_lse) and torch.equal(o, ref_o)
    # Passed as a plain V, the same V^T is another tensor (the keys in the kperm order): the flag is what makes it
    # right, so without it the output must differ (a check that the flag reaches the library).
    assert not torch.equal(torch.ops.fp8attn.fmha_fwd(inp.q, inp.k, vt, *args[3:]), ref_o)


def test_compile_fullgraph(seed):
    inp, args = operands("e4m3", True, "bshd", seed)

    def block(q, k, v, qd, kd, vd):
        o = torch.ops.fp8attn.fmha_fwd(q, k, v, qd, kd, vd, 0.0, True, "bshd")
        return o, o.float().sum(dim=-1)  # something around the op, so the graph is not the op alone

    compiled = torch.compile(block, fullgraph=True)
    got_o, got_sum = compiled(*args[:6])
    want_o, want_sum = block(*args[:6])
    torch.cuda.synchronize()
    assert torch.equal(got_o, want_o)
    # Inductor fuses the reduction and may sum in another order: equal up to float32 rounding.
    torch.testing.assert_close(got_sum, want_sum, rtol=1e-5, atol=1e-5)


def test_cuda_graph_capture(seed):
    inp, args = operands("e4m3", False, "bshd", seed)
    torch.ops.fp8attn.fmha_fwd(*args)  # warm: modules loaded outside the capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        captured = torch.ops.fp8attn.fmha_fwd(*args)
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(captured, torch.ops.fp8attn.fmha_fwd(*args))


def test_backward_raises(seed):
    inp, args = operands("bf16", False, "bshd", seed)
    q = inp.q.detach().clone().requires_grad_(True)
    o = torch.ops.fp8attn.fmha_fwd(q, *args[1:])
    with pytest.raises(RuntimeError, match="inference-only"):
        o.float().sum().backward()
