"""References, emulations and input generators for the GPU tests of fp8attn.fmha_fwd, kept in one place.

Accuracy rule (docs/CONVENTIONS.md, "Testing"; FlashAttention's): on inputs already rounded to the kernel's input
type, the kernel's error against a float64 reference must not exceed twice the error of an emulation that
rounds where the kernel rounds, plus a small atol. Errors are ||O - ref|| / ||ref|| over the whole output.

The emulation follows kernels/fmha_fwd/fmha_fwd_triton.py, with its constants from kernels/common/numerics.py:
per KV tile of block_n columns, P = exp(S - rowmax(S_tile)) * 2^8 rounded to the input type (e4m3 or bf16)
against the tile's own row maximum (floored at 2^-64 of the running maximum), each tile's P V in a fresh
float32 accumulator added to O in a per-row frame, O = acc / l rounded to bf16 (l sums the unrounded P, as the
kernel does). Keep it in step with the kernel.
"""

import dataclasses
import math
import os
import sys

# The kernels' numerical constants come from kernels/common/numerics.py, the module the Triton kernels read,
# so that the emulation cannot drift from what the kernel computes.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "kernels"))
from common.numerics import E4M3_MAX, LN2, LOG2E, NEG_BIG, P_EXPONENT_BIAS, REF_FLOOR  # noqa: E402


def _probe():
    """Why the GPU tests cannot run here, or None."""
    try:
        import torch
    except Exception as e:  # noqa: BLE001 - any import failure means "cannot run"
        return f"torch is not importable ({e})"
    if not torch.cuda.is_available():
        return "no CUDA device (these tests run on the H200 only)"
    major, minor = torch.cuda.get_device_capability()
    if (major, minor) != (9, 0):
        return f"needs an sm_90 (Hopper) GPU, found sm_{major}{minor}"
    try:
        import fp8attn  # noqa: F401
    except Exception as e:  # noqa: BLE001
        return (f"fp8attn is not importable ({e}); build with `cmake -B build -G Ninja -DFP8ATTN_BUILD_PYTHON=ON && "
                f"cmake --build build` and run with PYTHONPATH=build/python")
    return None


SKIP_REASON = _probe()

try:
    import torch

    E4M3 = torch.float8_e4m3fn
    BF16 = torch.bfloat16
    TORCH_DTYPES = {"e4m3": E4M3, "bf16": BF16}
except ImportError:  # only SKIP_REASON is used then
    torch = None

# The device every generator allocates on.
DEVICE = "cuda"
# Additive slack of the accuracy rule, in relative error.
ATOL = 1e-3
# LSE (natural log) tolerance: |lse - ref| <= LSE_ATOL + LSE_RTOL * |ref|.
LSE_ATOL = {"e4m3": 2e-2, "bf16": 5e-3}
LSE_RTOL = 1e-3
# The kernel constants the emulation mirrors (LOG2E, LN2, NEG_BIG, P_EXPONENT_BIAS, REF_FLOOR, E4M3_MAX) are
# imported from kernels/common/numerics.py at the top of this module.


def vt_seqlen_pad(seqlen):
    """Row length of a sequence-contiguous (V^T) operand: seqlen rounded up to the runtime's V^T row alignment
    (fp8attn::fmha::kVtSeqAlign, exported by the module)."""
    import fp8attn

    align = fp8attn._fp8attn_ext.VT_SEQ_ALIGN
    return (seqlen + align - 1) // align * align


# ---- Problems and inputs -------------------------------------------------------------------------------

@dataclasses.dataclass
class Problem:
    batch: int = 1
    seqlen_q: int = 128
    seqlen_k: int = 128
    heads_q: int = 2
    heads_kv: int = 2
    head_dim: int = 128
    causal: bool = False
    dtype: str = "e4m3"          # "e4m3" or "bf16" (Q, K and V)
    layout: str = "bshd"         # "bshd" or "bhsd"
    descale: str = "tensor"      # e4m3 only: "tensor", "head" ([B, H_kv]), "head_b1" ([1, H_kv]), "mixed"
    softmax_scale: float = None  # None: 1/sqrt(head_dim)

    @property
    def scale(self):
        return 1.0 / math.sqrt(self.head_dim) if self.softmax_scale is None else self.softmax_scale


@dataclasses.dataclass
class Inputs:
    """Kernel operands (in `layout`) and what they hold, dequantized to float64 [B, S, H, D]."""
    q: "torch.Tensor"
    k: "torch.Tensor"
    v: "torch.Tensor"
    q_descale: "torch.Tensor"
    k_descale: "torch.Tensor"
    v_descale: "torch.Tensor"
    layout: str
    qf: "torch.Tensor"
    kf: "torch.Tensor"
    vf: "torch.Tensor"

    @property
    def dtype(self):
        return "e4m3" if self.q.dtype == E4M3 else "bf16"

    def kwargs(self):
        """Keyword arguments of fp8attn.fmha_fwd for these operands."""
        return dict(q_descale=self.q_descale, k_descale=self.k_descale, v_descale=self.v_descale,
                    layout=self.layout)


def seed_for(nodeid):
    """A fixed seed per test, different across tests (derived from the test's id)."""
    import zlib
    return zlib.crc32(nodeid.encode()) & 0x7FFFFFFF


def generator(seed):
    return torch.Generator(device=DEVICE).manual_seed(seed)


def randn(shape, gen, dtype=None):
    return torch.randn(shape, generator=gen, device=DEVICE, dtype=dtype or torch.float32)


def to_bshd(x, layout):
    """[B, S, H, D] view of a tensor stored in `layout`."""
    return x if layout == "bshd" else x.transpose(1, 2)


def from_bshd(x, layout):
    """A [B, S, H, D] tensor in `layout`, contiguous."""
    return x.contiguous() if layout == "bshd" else x.transpose(1, 2).contiguous()


def expand_descale(descale, batch, heads, heads_kv):
    """A [1] or [B|1, H_kv|1] descale as float64 [B, H] for a tensor with `heads` heads."""
    d = descale.double()
    if d.numel() == 1:
        return d.reshape(1, 1).expand(batch, heads)
    d = d.expand(batch, heads_kv)
    return d.repeat_interleave(heads // heads_kv, dim=1)


def dequantize(x, descale, heads_kv, layout):
    """float64 [B, S, H, D] values the kernel sees: x * descale (broadcast per (batch, kv head))."""
    xb = to_bshd(x, layout).double()
    if descale is None:
        return xb
    batch, _, heads, _ = xb.shape
    return xb * expand_descale(descale, batch, heads, heads_kv)[:, None, :, None]


def quantize_with(x, descale, heads_kv):
    """E4M3 of a [B, S, H, D] float tensor with a given [1] or [B|1, H_kv|1] descale."""
    batch, _, heads, _ = x.shape
    d = expand_descale(descale, batch, heads, heads_kv).float()[:, None, :, None]
    return (x.float() / d).clamp(-E4M3_MAX, E4M3_MAX).to(E4M3)


def quantize(x, mode, heads_kv):
    """(x_e4m3, descale) of a [B, S, H, D] float tensor; mode "tensor", "head" or "head_b1"."""
    import fp8attn
    if mode == "tensor":
        return fp8attn.quantize_e4m3(x)
    _, descale = fp8attn.quantize_e4m3_per_head(x, heads_kv=heads_kv)
    if mode == "head_b1":  # one descale per kv head, shared by the whole batch: shape [1, H_kv]
        descale = descale.amax(dim=0, keepdim=True)
    elif mode != "head":
        raise ValueError(mode)
    return quantize_with(x, descale, heads_kv), descale


def make_inputs_from(q, k, v, dtype, heads_kv, layout="bshd", descale="tensor"):
    """Inputs from float [B, S, H, D] tensors: rounded to `dtype` (quantized for e4m3), stored in `layout`."""
    if dtype == "bf16":
        q8, k8, v8 = (x.to(BF16) for x in (q, k, v))
        qd = kd = vd = None
    else:
        q_mode = "tensor" if descale == "mixed" else descale
        kv_mode = "head" if descale == "mixed" else descale
        q8, qd = quantize(q, q_mode, heads_kv)
        k8, kd = quantize(k, kv_mode, heads_kv)
        v8, vd = quantize(v, kv_mode, heads_kv)
    q8, k8, v8 = (from_bshd(x, layout) for x in (q8, k8, v8))
    return Inputs(q8, k8, v8, qd, kd, vd, layout,
                  dequantize(q8, qd, heads_kv, layout), dequantize(k8, kd, heads_kv, layout),
                  dequantize(v8, vd, heads_kv, layout))


def make_inputs(p, seed, *, head_spread=None):
    """Gaussian inputs for problem p. With per-head descales, each (batch, kv head) gets its own magnitude
    (2^-3 .. 2^3 unless head_spread says otherwise) so that per-head scaling matters."""
    gen = generator(seed)
    q = randn((p.batch, p.seqlen_q, p.heads_q, p.head_dim), gen)
    k = randn((p.batch, p.seqlen_k, p.heads_kv, p.head_dim), gen)
    v = randn((p.batch, p.seqlen_k, p.heads_kv, p.head_dim), gen)
    spread = head_spread if head_spread is not None else (p.dtype == "e4m3" and p.descale != "tensor")
    if spread:
        group = p.heads_q // p.heads_kv if p.heads_kv and p.heads_q % p.heads_kv == 0 else 1
        for x, heads_per_kv in ((q, group), (k, 1), (v, 1)):
            mag = torch.exp2(torch.randint(-3, 4, (p.batch, p.heads_kv), generator=gen, device=DEVICE).float())
            x *= mag.repeat_interleave(heads_per_kv, dim=1)[:, None, :, None]
    return make_inputs_from(q, k, v, p.dtype, p.heads_kv, p.layout, p.descale)


# ---- References ----------------------------------------------------------------------------------------

def _scores(q, k, rows, causal, scale, seqlen_q):
    """float S = scale * q k^T with the causal mask (bottom-right aligned); q [B, H, R, D], k [B, H, Sk, D]."""
    s = torch.matmul(q, k.transpose(-1, -2)) * scale
    if causal:
        seqlen_k = k.shape[-2]
        cols = torch.arange(seqlen_k, device=q.device)
        keep = cols[None, :] <= rows[:, None] + (seqlen_k - seqlen_q)
        s = s.masked_fill(~keep, float("-inf"))
    return s


def _heads_first(q, k, v):
    """[B, S, H, D] -> [B, H, S, D], K and V repeated to the query heads (GQA)."""
    group = q.shape[2] // k.shape[2]
    qh = q.permute(0, 2, 1, 3)
    kh = k.permute(0, 2, 1, 3).repeat_interleave(group, dim=1)
    vh = v.permute(0, 2, 1, 3).repeat_interleave(group, dim=1)
    return qh, kh, vh


def _rows(seqlen_q, rows, device):
    return torch.arange(seqlen_q, device=device) if rows is None else rows.to(device)


def _query_rows(qf, rows, seqlen_q):
    """(q rows [B, R, H, D], row indices [R], seqlen_q). With seqlen_q given, qf holds only the rows `rows` of
    a sequence of seqlen_q queries (for problems too large to dequantize whole); otherwise all of them."""
    if seqlen_q is None:
        rows = _rows(qf.shape[1], rows, qf.device)
        return qf[:, rows], rows, qf.shape[1]
    assert rows is not None and len(rows) == qf.shape[1], "with seqlen_q, qf holds exactly the rows `rows`"
    return qf, rows.to(qf.device), seqlen_q


def reference(qf, kf, vf, causal, scale, rows=None, max_elems=1 << 27, seqlen_q=None):
    """float64 attention on [B, S, H, D] inputs. rows: query rows to compute (default all); with seqlen_q,
    qf holds only those rows (see _query_rows). Returns O [B, R, H, D] and LSE [B, H, R] (natural log; -inf
    and O = 0 for rows that see no key)."""
    qf, rows, seqlen_q = _query_rows(qf, rows, seqlen_q)
    batch, _, heads, head_dim = qf.shape
    seqlen_k = kf.shape[1]
    o = torch.zeros((batch, len(rows), heads, head_dim), dtype=torch.float64, device=qf.device)
    lse = torch.full((batch, heads, len(rows)), float("-inf"), dtype=torch.float64, device=qf.device)
    if seqlen_k == 0 or len(rows) == 0:
        return o, lse
    qh, kh, vh = _heads_first(qf.double(), kf.double(), vf.double())
    # One (batch, head chunk) at a time keeps the float64 score matrix under max_elems elements.
    chunk = max(1, max_elems // max(1, len(rows) * seqlen_k))
    for b in range(batch):
        for h0 in range(0, heads, chunk):
            h1 = min(heads, h0 + chunk)
            s = _scores(qh[b, h0:h1], kh[b, h0:h1], rows, causal, scale, seqlen_q)
            m = s.amax(dim=-1, keepdim=True)
            has_key = torch.isfinite(m)
            p = torch.exp(s - torch.where(has_key, m, 0.0))
            l = p.sum(dim=-1, keepdim=True)
            ob = torch.where(has_key, torch.matmul(p, vh[b, h0:h1]) / torch.where(has_key, l, 1.0), 0.0)
            o[b, :, h0:h1] = ob.permute(1, 0, 2)
            lse[b, h0:h1] = torch.where(has_key, m + torch.log(l), float("-inf")).squeeze(-1)
    return o, lse


def emulate(qf, kf, vf, causal, scale, block_n, p_dtype, rows=None, out_dtype=None, seqlen_q=None):
    """float32 emulation of the attention kernel's arithmetic (exp2 domain, per-row frame; see the module
    docstring). rows and seqlen_q as in reference(). Returns O as float64 (after rounding to out_dtype, bf16
    by default) [B, R, H, D] and the natural-log LSE [B, H, R]."""
    out_dtype = out_dtype or BF16
    qf, rows, seqlen_q = _query_rows(qf, rows, seqlen_q)
    batch, _, heads, head_dim = qf.shape
    seqlen_k = kf.shape[1]
    qh, kh, vh = _heads_first(qf.float(), kf.float(), vf.float())
    qk_scale = scale * LOG2E
    shape = (batch, heads, len(rows))
    m = torch.full(shape, NEG_BIG, dtype=torch.float32, device=qf.device)  # running maximum (log2 domain)
    f = torch.full(shape, NEG_BIG, dtype=torch.float32, device=qf.device)  # frame: true sums = acc, l * 2^f
    l = torch.zeros(shape, dtype=torch.float32, device=qf.device)
    acc = torch.zeros(shape + (head_dim,), dtype=torch.float32, device=qf.device)
    for start in range(0, seqlen_k, block_n):
        end = min(seqlen_k, start + block_n)
        t = torch.matmul(qh, kh[:, :, start:end].transpose(-1, -2)) * qk_scale
        if causal:
            cols = torch.arange(start, end, device=qf.device)
            keep = cols[None, :] <= rows[:, None] + (seqlen_k - seqlen_q)
            t = t.masked_fill(~keep, float("-inf"))
        m_tile = t.amax(dim=-1)  # -inf where the row sees no key of this tile
        m_new = torch.maximum(m, m_tile)
        ref = torch.maximum(m_tile, m_new - REF_FLOOR)  # this tile's own maximum, floored
        p = torch.exp2(t - (ref - P_EXPONENT_BIAS)[..., None])
        frame = ref - P_EXPONENT_BIAS
        rescale = torch.exp2(f - frame)
        l = l * rescale + p.sum(dim=-1)  # the unrounded P, as the kernel sums it
        pv = torch.matmul(p.to(p_dtype).float(), vh[:, :, start:end])  # a fresh float32 accumulator per tile
        acc = acc * rescale[..., None] + pv
        m, f = m_new, frame
    has_key = l > 0
    safe_l = torch.where(has_key, l, 1.0)
    o = torch.where(has_key[..., None], acc / safe_l[..., None], 0.0)
    lse = torch.where(has_key, (f + torch.log2(safe_l)) * LN2, float("-inf"))
    return o.to(out_dtype).double().permute(0, 2, 1, 3), lse.double()


# ---- Checks --------------------------------------------------------------------------------------------

def rel_err(x, ref):
    """||x - ref|| / ||ref|| in float64 over all elements (||x|| when ref is all zeros)."""
    x = x.double()
    ref = ref.double()
    den = torch.linalg.vector_norm(ref).item()
    num = torch.linalg.vector_norm(x - ref).item()
    return num / den if den > 0 else num


def empty_rows(seqlen_q, seqlen_k, causal, rows=None):
    """Bool [R]: query rows that see no key (all of them when seqlen_k == 0; causal rows i < S_q - S_k)."""
    rows = _rows(seqlen_q, rows, DEVICE)
    if seqlen_k == 0:
        return torch.ones(len(rows), dtype=torch.bool, device=DEVICE)
    if causal:
        return rows < (seqlen_q - seqlen_k)
    return torch.zeros(len(rows), dtype=torch.bool, device=DEVICE)


def check_written(o, lse, empty):
    """o [B, S, H, D] and lse [B, H, S] after a run into NaN-poisoned buffers: every element written,
    finite except LSE = -inf exactly on the rows that see no key, where O must be exactly 0."""
    bad = ~torch.isfinite(o)
    assert not bad.any(), f"O: {int(bad.sum())} of {o.numel()} elements not finite (unwritten or overflow)"
    if empty.any():
        zero = o[:, empty] == 0
        assert zero.all(), f"O: rows that see no key must be 0; {int((~zero).sum())} elements are not"
    if lse is not None:
        assert not torch.isnan(lse).any(), f"LSE: {int(torch.isnan(lse).sum())} NaN elements (unwritten?)"
        e = lse[:, :, empty]
        assert (e == float("-inf")).all(), "LSE: rows that see no key must be -inf"
        f = lse[:, :, ~empty]
        assert torch.isfinite(f).all(), f"LSE: {int((~torch.isfinite(f)).sum())} non-finite on rows with keys"


def check_lse(lse, ref_lse, dtype, empty, what=""):
    keep = ~empty
    if not keep.any():
        return 0.0
    diff = (lse[:, :, keep].double() - ref_lse[:, :, keep]).abs()
    tol = LSE_ATOL[dtype] + LSE_RTOL * ref_lse[:, :, keep].abs()
    worst = (diff - tol).max().item()
    assert worst <= 0, f"{what}LSE differs from the float64 logsumexp by up to {diff.max().item():.3e}"
    return diff.max().item()


def check_accuracy(o_bshd, inp, causal, scale, block_n, what="", rows=None, ref_o=None):
    """The accuracy rule on O; returns (kernel error, emulation error). ref_o: a precomputed reference."""
    if ref_o is None:
        ref_o, _ = reference(inp.qf, inp.kf, inp.vf, causal, scale, rows=rows)
    emu_o, _ = emulate(inp.qf, inp.kf, inp.vf, causal, scale, block_n, TORCH_DTYPES[inp.dtype], rows=rows)
    o = o_bshd if rows is None else o_bshd[:, rows]
    err = rel_err(o, ref_o)
    err_emu = rel_err(emu_o, ref_o)
    assert err <= 2.0 * err_emu + ATOL, (
        f"{what}kernel error {err:.3e} > 2 x emulation error {err_emu:.3e} + {ATOL:g} (vs float64)")
    return err, err_emu


def block_n_of(name):
    import fp8attn
    kernel = fp8attn.find_kernel(name)
    assert kernel is not None, f"select_kernel returned {name!r}, which list_kernels() does not hold"
    return kernel["block_n"]


def run_and_check(inp, causal=False, softmax_scale=None, kernel_name=None, out=None, what=""):
    """fmha_fwd on `inp` with return_lse, then every check: written, exact zeros/-inf on empty rows,
    accuracy rule against float64 and the emulation, LSE against logsumexp. Returns a dict: the kernel's name,
    the errors, and the outputs o (in inp's layout) and lse (None when the instance writes no LSE)."""
    import fp8attn
    kw = inp.kwargs()
    # A forced instance that cannot write LSE (warp-specialized) is checked on O alone.
    want_lse = kernel_name is None or fp8attn.find_kernel(kernel_name)["writes_lse"]
    result = fp8attn.fmha_fwd(inp.q, inp.k, inp.v, softmax_scale=softmax_scale, causal=causal,
                              return_lse=want_lse, kernel_name=kernel_name, out=out, **kw)
    o, lse = result if want_lse else (result, None)
    torch.cuda.synchronize()
    assert o.shape == inp.q.shape and o.dtype == BF16, f"O: shape {tuple(o.shape)} {o.dtype}"
    if out is not None:
        assert o is out, "fmha_fwd(out=...) must return out itself"
    name = kernel_name or fp8attn.select_kernel(inp.q, inp.k, inp.v, causal=causal, return_lse=want_lse, **kw)
    block_n = block_n_of(name)

    batch, seqlen_q, heads_q, head_dim = inp.qf.shape
    seqlen_k = inp.kf.shape[1]
    assert lse is None or (lse.shape == (batch, heads_q, seqlen_q) and lse.dtype == torch.float32)
    o_bshd = to_bshd(o, inp.layout)
    empty = empty_rows(seqlen_q, seqlen_k, causal)
    check_written(o_bshd, lse, empty)

    scale = 1.0 / math.sqrt(head_dim) if softmax_scale is None else softmax_scale
    what = f"{what}[{name}] "
    ref_o, ref_lse = reference(inp.qf, inp.kf, inp.vf, causal, scale)
    err, err_emu = check_accuracy(o_bshd, inp, causal, scale, block_n, what, ref_o=ref_o)
    lse_err = check_lse(lse, ref_lse, inp.dtype, empty, what) if lse is not None else None
    return dict(kernel=name, err=err, err_emu=err_emu, lse_err=lse_err, o=o, lse=lse)


def check_problem(p, seed, kernel_name=None):
    """make_inputs + run_and_check for one Problem."""
    inp = make_inputs(p, seed)
    return run_and_check(inp, causal=p.causal, softmax_scale=p.softmax_scale, kernel_name=kernel_name,
                         what=f"{p} ")


def compiled(dtype=None, head_dim=None, causal=None):
    """Compiled instances matching the given fields."""
    import fp8attn
    return [k for k in fp8attn.list_kernels()
            if (dtype is None or k["qk_type"] == dtype)
            and (head_dim is None or k["head_dim"] == head_dim)
            and (causal is None or k["causal"] == causal)]


def require_compiled(dtype, head_dim=None, causal=None):
    """Skip (with the reason) when this build compiled no instance for the configuration."""
    import pytest
    if not compiled(dtype, head_dim, causal):
        pytest.skip(f"no {dtype} instance with head_dim={head_dim} causal={causal} in this build")
