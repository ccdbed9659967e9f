"""fmha_fwd captured in a CUDA graph replays bit-exact: the same bits as an eager call, on every replay, and on
new values copied into the captured input buffers (the graph must read the inputs, not a copy made at capture).

run() launches without validation, allocation or host-device synchronization (include/fp8attn/fmha/device/
fmha_fwd.h), so the whole call can be captured: for FP8 the V transpose into the workspace and the attention
kernel; for BF16 the descale-1.0 fill and the attention kernel. Modules load on the eager warm-up call, since
loading one is not capturable. The output, LSE and workspace come from the graph's private memory pool (the
test's guarded allocator poisons them inside the capture, so each replay refills them with NaN first and every
element must be written again).
"""

import pytest

import fmha_utils as fu

if fu.SKIP_REASON:
    pytest.skip(fu.SKIP_REASON, allow_module_level=True)

import torch  # noqa: E402

import fp8attn  # noqa: E402
from fmha_utils import Problem  # noqa: E402

# (dtype, causal, return_lse, seqlen_k): with and without LSE; seqlen_k = 512 without LSE and causal lets the
# heuristic take the warp-specialized even-N instance.
CASES = [
    ("e4m3", False, True, 500),
    ("e4m3", True, True, 500),
    ("bf16", False, True, 500),
    ("bf16", True, True, 500),
    ("e4m3", False, False, 512),
]


def case_id(c):
    dtype, causal, lse, sk = c
    return f"{dtype}_{'causal' if causal else 'full'}_{'lse' if lse else 'nolse'}_sk{sk}"


def copy_inputs_(dst, src):
    """Copies src's operands and descales into dst's buffers (the graph's inputs), in place."""
    for name in ("q", "k", "v", "q_descale", "k_descale", "v_descale"):
        d, s = getattr(dst, name), getattr(src, name)
        if d is not None:
            d.copy_(s)


def call(inp, causal, return_lse):
    result = fp8attn.fmha_fwd(inp.q, inp.k, inp.v, causal=causal, return_lse=return_lse, **inp.kwargs())
    return result if return_lse else (result, None)


def assert_same(got, want, what):
    o, lse = got
    o_ref, lse_ref = want
    assert torch.equal(o, o_ref), (
        f"{what}: O differs from the eager call in {int((o != o_ref).sum())} of {o.numel()} elements")
    if lse_ref is not None:
        assert torch.equal(lse, lse_ref), f"{what}: LSE differs from the eager call"


@pytest.mark.parametrize("allocator", ["guarded", "raw"])
@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_graph_replay_is_bit_exact(case, allocator, seed, monkeypatch):
    """allocator "raw": the workspace comes from the library's own path (torch's caching allocator, raw
    addresses) instead of the tests' guarded buffers, so that capture with the production allocator is covered."""
    if allocator == "raw":
        import fp8attn.fmha as fmha_module  # (not `import fp8attn.fmha`: that would make fp8attn a local name)
        monkeypatch.setattr(fmha_module, "_workspace_alloc", torch._C._cuda_cudaCachingAllocator_raw_alloc)
        monkeypatch.setattr(fmha_module, "_workspace_free", torch._C._cuda_cudaCachingAllocator_raw_delete)
    dtype, causal, return_lse, seqlen_k = case
    fu.require_compiled(dtype, 128, causal)
    p = Problem(batch=2, seqlen_q=300, seqlen_k=seqlen_k, heads_q=4, heads_kv=2, causal=causal, dtype=dtype)
    static = fu.make_inputs(p, seed)      # the buffers the graph reads
    other = fu.make_inputs(p, seed + 1)   # values copied into them later

    eager = call(static, causal, return_lse)
    eager_other = call(other, causal, return_lse)
    torch.cuda.synchronize()
    fu.check_accuracy(eager[0], static, causal, 128 ** -0.5,
                      fu.block_n_of(fp8attn.select_kernel(static.q, static.k, static.v, causal=causal,
                                                          return_lse=return_lse, **static.kwargs())),
                      what="eager call: ")

    # Warm-up on a side stream (torch's recipe for capture), then capture one call.
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(2):
            call(static, causal, return_lse)
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()

    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        captured = call(static, causal, return_lse)

    for replay in range(3):
        graph.replay()
        torch.cuda.synchronize()
        assert_same(captured, eager, f"replay {replay}")

    copy_inputs_(static, other)
    graph.replay()
    torch.cuda.synchronize()
    assert_same(captured, eager_other, "replay on new input values")
