"""Sizes past the 32-bit limits, checked on sampled rows against float64 computed on the GPU.

  * batch * heads_q > 65535 programs (B=2100, H_q=32, H_kv=8, S=33, D=64): every (batch, head) runs, checked
    on sampled pairs on both sides of the old grid-y limit;
  * a stride >= 2^31 elements in each of batch, head and sequence (Q, K, V and O views into larger buffers);
  * tensors past 2^31 elements (B=20, S=32768, H=32, D=128, causal, e4m3: 2.7G elements each), checked on
    sampled (batch, head, row) triples that include the last rows of the last batch;
  * a 1M-token context (B=1, H=32, D=128, S=2^20, causal, e4m3), checked on the first, middle and last rows of
    several heads.

Each test frees the GPU memory of the previous one first and skips, saying how much it needs, only when
torch.cuda.mem_get_info reports too little free memory (the largest needs about 42 GiB). Marked `large`:
`pytest -m "not large"` leaves them out. Expected time on the H200: about 1-2 minutes for the file, most of it
the 1M-token test (its causal attention is ~9 PFLOP, ~15 s, and the float64 reference and the emulation over
2^20 keys a few seconds each). Run with -s to see the sampled errors.
"""

import pytest

import fmha_utils as fu

if fu.SKIP_REASON:
    pytest.skip(fu.SKIP_REASON, allow_module_level=True)

import torch  # noqa: E402

import fmha_sampled as fs  # noqa: E402
import fp8attn  # noqa: E402
from fmha_utils import Problem  # noqa: E402

pytestmark = pytest.mark.large

DTYPES = ["e4m3", "bf16"]


def causal_id(c):
    return "causal" if c else "full"


@pytest.fixture(autouse=True)
def fresh_gpu_memory():
    """Each test starts and ends with the caching allocator emptied (the tests below need tens of GiB each)."""
    fs.free_gpu_memory()
    yield
    fs.free_gpu_memory()


def run_sampled(what, dtype, causal, batch, seqlen, heads_q, heads_kv, head_dim, pairs, rows, seed):
    """Gaussian inputs, fmha_fwd with LSE, then a Sample of (pairs x rows). Q, K and V are local to this
    function and freed when it returns; O, LSE and the workspace stay with conftest's guarded allocator (which
    checks their guard bytes) until the test ends."""
    gen = fu.generator(seed)
    q, qd = fs.gaussian((batch, seqlen, heads_q, head_dim), dtype, gen)
    k, kd = fs.gaussian((batch, seqlen, heads_kv, head_dim), dtype, gen)
    v, vd = fs.gaussian((batch, seqlen, heads_kv, head_dim), dtype, gen)
    kw = dict(q_descale=qd, k_descale=kd, v_descale=vd, causal=causal)
    name = fp8attn.select_kernel(q, k, v, return_lse=True, **kw)
    o, lse = fp8attn.fmha_fwd(q, k, v, return_lse=True, **kw)
    torch.cuda.synchronize()
    return fs.gather(f"{what} [{name}]", q, k, v, o, lse, (qd, kd, vd), pairs, rows, causal, head_dim ** -0.5,
                     fu.block_n_of(name), dtype)


def footprint(batch, seqlen, heads_q, heads_kv, head_dim, dtype):
    """Bytes a run_sampled call holds at its peak: Q, K, V, O (bf16, plus the test allocator's guard), LSE, the
    V^T workspace (FP8), a generator chunk (1 GiB of float32 and its cast), and 2 GiB of slack."""
    elem = 1 if dtype == "e4m3" else 2
    q = batch * seqlen * heads_q * head_dim
    kv = batch * seqlen * heads_kv * head_dim
    return (q * elem + 2 * kv * elem + 2 * q + 4 * batch * heads_q * seqlen + (kv if dtype == "e4m3" else 0)
            + (3 << 29) + (2 << 30))


# ---- batch * heads_q > 65535 ------------------------------------------------------------------------------------

@pytest.mark.parametrize("causal", [False, True], ids=causal_id)
@pytest.mark.parametrize("dtype", DTYPES)
def test_batch_times_heads_past_65535(dtype, causal, seed):
    batch, heads_q, heads_kv, seqlen, head_dim = 2100, 32, 8, 33, 64
    assert batch * heads_q > 65535
    fu.require_compiled(dtype, head_dim, causal)
    fs.require_free(footprint(batch, seqlen, heads_q, heads_kv, head_dim, dtype), "B*H=67200")
    # Program b * heads_q + h: 65535 is (2047, 31), 65536 is (2048, 0); the last is (2099, 31).
    pairs = [(0, 0), (0, 31), (1023, 5), (2047, 31), (2048, 0), (2048, 9), (2099, 30), (2099, 31)]
    rows = torch.arange(seqlen)
    sample = run_sampled(f"B={batch} Hq={heads_q} Hkv={heads_kv} S={seqlen} {dtype} {causal_id(causal)}", dtype,
                         causal, batch, seqlen, heads_q, heads_kv, head_dim, pairs, rows, seed)
    fs.free_gpu_memory()
    fs.check(sample)


# ---- Strides >= 2^31 elements ------------------------------------------------------------------------------------

BIG_STRIDE = (1 << 31) + 1024  # elements: past int32, a multiple of 16


def big_strides(shape, which):
    """Element strides of a [B, S, H, D] view with the `which` stride ("b", "s" or "h") equal to BIG_STRIDE and
    the others packed around it."""
    b, s, h, d = shape
    if which == "b":
        return (BIG_STRIDE, h * d, d, 1)
    if which == "h":
        return (h * BIG_STRIDE, d, BIG_STRIDE, 1)
    if which == "s":
        return (s * BIG_STRIDE, BIG_STRIDE, d, 1)
    raise ValueError(which)


def strided_copy(x, which, fill=None):
    """x copied into a view with big_strides (a buffer as large as the view's span), or an empty one filled
    with `fill`. One-byte types are copied as bytes."""
    strides = big_strides(tuple(x.shape), which)
    span = 1 + sum((n - 1) * st for n, st in zip(x.shape, strides))
    raw_dtype = torch.uint8 if x.element_size() == 1 else x.dtype
    buf = torch.empty(span, dtype=raw_dtype, device=fu.DEVICE)
    view = buf.as_strided(tuple(x.shape), strides)
    if fill is not None:
        view.fill_(fill)
    else:
        view.copy_(x.view(raw_dtype) if raw_dtype != x.dtype else x)
    return view.view(x.dtype) if raw_dtype != x.dtype else view


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("which", ["b", "h", "s"], ids=lambda w: f"stride_{w}")
def test_strides_past_int32(which, dtype, seed):
    """Q, K, V and O are views whose batch, head or sequence stride is 2^31 + 1024 elements (O through out=);
    checked whole against float64 (the views are small, the buffers around them are not)."""
    shapes = {"b": (2, 64, 2, 1), "h": (1, 64, 2, 2), "s": (1, 3, 2, 1)}  # batch, seqlen, heads_q, heads_kv
    batch, seqlen, heads_q, heads_kv = shapes[which]
    head_dim = 128
    elem = 1 if dtype == "e4m3" else 2
    spans = {"b": batch, "h": heads_q, "s": seqlen}[which] - 1  # each buffer spans this many big strides
    need = (3 * elem + 2) * spans * BIG_STRIDE + (2 << 30)  # Q, K, V and O (bf16) buffers, and slack
    fs.require_free(need, f"stride_{which} >= 2^31")
    for causal in (False, True):
        fu.require_compiled(dtype, head_dim, causal)
        p = Problem(batch=batch, seqlen_q=seqlen, seqlen_k=seqlen, heads_q=heads_q, heads_kv=heads_kv,
                    head_dim=head_dim, causal=causal, dtype=dtype)
        dense = fu.make_inputs(p, seed)
        q, k, v = (strided_copy(x, which) for x in (dense.q, dense.k, dense.v))
        out = strided_copy(torch.empty(dense.q.shape, dtype=fu.BF16, device=fu.DEVICE), which, fill=float("nan"))
        assert max(q.stride()) >= BIG_STRIDE and max(out.stride()) >= BIG_STRIDE
        inp = fu.Inputs(q, k, v, dense.q_descale, dense.k_descale, dense.v_descale, "bshd", dense.qf, dense.kf,
                        dense.vf)
        fu.run_and_check(inp, causal=causal, out=out, what=f"stride_{which}={BIG_STRIDE} {causal_id(causal)} ")
        del q, k, v, out, inp
        fs.free_gpu_memory()


# ---- Tensors past 2^31 elements ----------------------------------------------------------------------------------

def test_tensors_past_2pow31_elements(seed):
    batch, seqlen, heads, head_dim = 20, 32768, 32, 128
    numel = batch * seqlen * heads * head_dim
    assert numel > 1 << 31
    fu.require_compiled("e4m3", head_dim, True)
    fs.require_free(footprint(batch, seqlen, heads, heads, head_dim, "e4m3"), f"{numel} elements per tensor")
    pairs = [(0, 0), (0, 31), (9, 13), (19, 0), (19, 31)]
    # The last rows of (19, 31) are the last elements of Q and O, ~2.7G elements in.
    rows = torch.tensor([0, 1, 127, 128, 16383, 32640, 32766, 32767])
    sample = run_sampled(f"B={batch} S={seqlen} H={heads} e4m3 causal", "e4m3", True, batch, seqlen, heads, heads,
                         head_dim, pairs, rows, seed)
    fs.free_gpu_memory()
    fs.check(sample)


# ---- A 1M-token context ------------------------------------------------------------------------------------------

def test_one_million_tokens(seed):
    batch, seqlen, heads, head_dim = 1, 1 << 20, 32, 128
    fu.require_compiled("e4m3", head_dim, True)
    # + the gathered sample: K and V of 3 heads over 2^20 keys in float64 (6 GiB), twice while stacking.
    fs.require_free(footprint(batch, seqlen, heads, heads, head_dim, "e4m3") + (14 << 30), "S=2^20")
    pairs = [(0, 0), (0, 13), (0, 31)]
    half = seqlen // 2
    rows = torch.tensor([0, 1, 127, 128, 4095, half - 1, half, half + 77, seqlen - 129, seqlen - 128, seqlen - 2,
                         seqlen - 1])
    sample = run_sampled(f"S=2^20 H={heads} e4m3 causal", "e4m3", True, batch, seqlen, heads, heads, head_dim, pairs,
                         rows, seed)
    fs.free_gpu_memory()
    fs.check(sample)
