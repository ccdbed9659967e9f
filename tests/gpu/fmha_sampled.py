"""Inputs and float64 checks for attention problems too large to dequantize whole (tests/gpu/test_fmha_large.py).

Operands are Gaussian, written chunk by chunk straight into the kernel's input type, so that no float32 or
float64 copy of a whole tensor ever exists. The check runs on sampled (batch, head) pairs and query rows: their
operands are gathered and dequantized to float64 on the GPU, and fmha_utils' accuracy rule (kernel error <= 2 x
the error of a same-precision emulation + ATOL, both against float64) and LSE check apply to the sample.

A Sample keeps only the gathered operands and outputs, so that a test can free the full tensors before it
checks (and a failed check keeps no large tensor alive through its traceback).
"""

import dataclasses
import gc
import sys

import fmha_utils as fu

torch = fu.torch

# x ~ N(0, 1) stored in e4m3 as x * 448/6 (clipped past 6 sigma) with this per-tensor descale.
E4M3_FILL_DESCALE = 6.0 / fu.E4M3_MAX
GiB = float(1 << 30)


def gaussian(shape, dtype, gen, chunk_elems=1 << 28):
    """(x, descale): a contiguous [B, S, H, D] tensor of N(0, 1) values in `dtype` ("e4m3" or "bf16") and its
    float32 [1] descale (None for bf16), generated in chunks of at most chunk_elems float32 temporaries."""
    out = torch.empty(shape, dtype=fu.TORCH_DTYPES[dtype], device=fu.DEVICE)
    flat = out.view(-1, shape[-1])
    rows_per_chunk = max(1, chunk_elems // shape[-1])
    for r0 in range(0, flat.shape[0], rows_per_chunk):
        r1 = min(flat.shape[0], r0 + rows_per_chunk)
        x = torch.randn((r1 - r0, shape[-1]), generator=gen, device=fu.DEVICE)
        if dtype == "e4m3":
            x.div_(E4M3_FILL_DESCALE).clamp_(-fu.E4M3_MAX, fu.E4M3_MAX)
        flat[r0:r1] = x.to(flat.dtype)
        del x
    if dtype != "e4m3":
        return out, None
    return out, torch.full((1,), E4M3_FILL_DESCALE, dtype=torch.float32, device=fu.DEVICE)


def count_nonfinite(x, chunk_elems=1 << 27):
    """Number of NaN or Inf elements of a contiguous tensor, in chunks (no tensor-sized temporary)."""
    flat = x.reshape(-1)
    return sum(int((~torch.isfinite(flat[i:i + chunk_elems])).sum()) for i in range(0, flat.numel(), chunk_elems))


def _rows_of(x, b, rows, h):
    """x[b, rows, h] ([R, D]) of a [B, S, H, D] tensor; one-byte types are indexed as bytes (float8 tensors do
    not support every indexing kernel)."""
    if x.element_size() == 1:
        return x.view(torch.uint8)[b, rows, h].view(x.dtype)
    return x[b, rows, h]


def _dequantized(x, descale):
    return x.double() if descale is None else x.double() * descale.double()


@dataclasses.dataclass
class Sample:
    """Gathered pieces of one run: P (batch, head) pairs side by side as P heads of a batch of one."""
    what: str
    dtype: str
    causal: bool
    scale: float
    block_n: int
    seqlen_q: int
    seqlen_k: int
    rows: "torch.Tensor"        # [R] query rows
    q: "torch.Tensor"           # [1, R, P, D] float64 (dequantized)
    k: "torch.Tensor"           # [1, S_k, P, D] float64, each pair's kv head
    v: "torch.Tensor"           # [1, S_k, P, D] float64
    o: "torch.Tensor"           # [1, R, P, D] the kernel's O
    lse: "torch.Tensor"         # [1, P, R] the kernel's LSE, or None
    o_nonfinite: int            # non-finite elements in the whole O
    lse_nonfinite: int          # NaN elements in the whole LSE (-inf is allowed on rows that see no key)


def gather(what, q, k, v, o, lse, descales, pairs, rows, causal, scale, block_n, dtype):
    """A Sample of one run. q, k, v, o: [B, S, H, D] (k, v with H_kv heads); lse [B, H_q, S_q] or None;
    descales: (q, k, v) per-tensor descales or Nones; pairs: [(batch, query head)]; rows: [R] long tensor."""
    group = q.shape[2] // k.shape[2]
    rows = rows.to(fu.DEVICE)
    qd, kd, vd = descales
    qs = torch.stack([_dequantized(_rows_of(q, b, rows, h), qd) for b, h in pairs], dim=1)[None]
    ks = torch.stack([_dequantized(k[b, :, h // group], kd) for b, h in pairs], dim=1)[None]
    vs = torch.stack([_dequantized(v[b, :, h // group], vd) for b, h in pairs], dim=1)[None]
    os_ = torch.stack([o[b, rows, h] for b, h in pairs], dim=1)[None]
    lses = None if lse is None else torch.stack([lse[b, h, rows] for b, h in pairs], dim=0)[None]
    return Sample(what, dtype, causal, scale, block_n, q.shape[1], k.shape[1], rows, qs, ks, vs, os_, lses,
                  count_nonfinite(o), 0 if lse is None else int(torch.isnan(lse).sum()))


def check(sample):
    """Every element of O finite and no LSE NaN; on the sample, the accuracy rule against float64 and the
    LSE against the float64 logsumexp. Returns (kernel error, emulation error)."""
    s = sample
    assert s.o_nonfinite == 0, f"{s.what}: {s.o_nonfinite} elements of O are not finite (unwritten or overflow)"
    assert s.lse_nonfinite == 0, f"{s.what}: {s.lse_nonfinite} elements of LSE are NaN (unwritten?)"
    ref_o, ref_lse = fu.reference(s.q, s.k, s.v, s.causal, s.scale, rows=s.rows, seqlen_q=s.seqlen_q)
    emu_o, _ = fu.emulate(s.q, s.k, s.v, s.causal, s.scale, s.block_n, fu.TORCH_DTYPES[s.dtype], rows=s.rows,
                          seqlen_q=s.seqlen_q)
    empty = fu.empty_rows(s.seqlen_q, s.seqlen_k, s.causal, s.rows)
    if empty.any():
        assert (s.o[:, empty] == 0).all(), f"{s.what}: sampled rows that see no key must have O = 0"
    err = fu.rel_err(s.o, ref_o)
    err_emu = fu.rel_err(emu_o, ref_o)
    assert err <= 2.0 * err_emu + fu.ATOL, (
        f"{s.what}: on the sampled rows, kernel error {err:.3e} > 2 x emulation error {err_emu:.3e} + {fu.ATOL:g}")
    if s.lse is not None:
        fu.check_lse(s.lse, ref_lse, s.dtype, empty, what=f"{s.what}: sampled rows: ")
    print(f"\n[{s.what}] sampled error vs float64: kernel {err:.3e}, emulation {err_emu:.3e}")
    return err, err_emu


# ---- Memory ---------------------------------------------------------------------------------------------------

def free_gpu_memory():
    """Returns every cached block to the driver, after dropping what a failed test may still hold: pytest keeps
    the last failure's traceback (sys.last_traceback, for post-mortem debugging), and its frames keep their
    tensors alive."""
    for name in ("last_type", "last_value", "last_traceback", "last_exc"):
        if hasattr(sys, name):
            setattr(sys, name, None)
    gc.collect()
    torch.cuda.synchronize()
    torch.cuda.empty_cache()


def require_free(nbytes, what):
    """Skips, with the numbers, when the GPU has less than nbytes free after freeing the cache."""
    import pytest
    free_gpu_memory()
    free, total = torch.cuda.mem_get_info()
    if free < nbytes:
        pytest.skip(f"{what} needs {nbytes / GiB:.1f} GiB of free GPU memory; {free / GiB:.1f} of "
                    f"{total / GiB:.1f} GiB are free")
