"""E4M3 quantization helpers producing the descales fmha_fwd takes (x ~= x_fp8.float() * descale).

Per tensor: one descale, amax(|x|) / 448, a caller-given (static) one, or DelayedScaling's from earlier
calls. Per (batch, head): the FlashAttention-3 convention, where every
descale is indexed by (batch, kv head); for a query tensor with more heads than K/V (GQA), pass heads_kv so
that each group of heads_q / heads_kv query heads shares the descale of its kv head.
"""

import functools
import math

import torch

E4M3 = torch.float8_e4m3fn
E4M3_MAX = 448.0


def _descale_from_amax(amax):
    # An all-zero slice keeps descale 1 (any value would do) instead of dividing by zero.
    amax = amax.float()
    return torch.where(amax > 0, amax / E4M3_MAX, torch.ones_like(amax))


def _to_e4m3(x, descale):
    # Clamp first: float -> e4m3fn is not saturating in torch, and x / descale may round just past 448.
    return (x.float() / descale).clamp_(-E4M3_MAX, E4M3_MAX).to(E4M3)


def quantize_e4m3(x, descale=None):
    """Per-tensor E4M3: returns (x_fp8, descale) with descale float32 of shape [1] on x's device.

    descale: a caller-given (static, calibrated) descale, a float or a one-element tensor; by default
    amax(|x|) / 448 of this tensor. Values beyond 448 * descale saturate to +-448 (never Inf); NaN stays NaN.
    A float descale must be finite and > 0 (ValueError); a tensor one is not read back to check it (that would
    wait for the GPU on every call of a serving loop): validate it once, where it is calibrated."""
    if descale is not None:
        if not isinstance(descale, torch.Tensor):
            if not (math.isfinite(float(descale)) and float(descale) > 0):
                raise ValueError(f"descale={descale}: must be finite and > 0")
        descale = torch.as_tensor(descale, dtype=torch.float32, device=x.device).reshape(1)
        return _to_e4m3(x.detach(), descale), descale
    if x.numel() == 0:
        return x.to(E4M3), torch.ones(1, dtype=torch.float32, device=x.device)
    descale = _descale_from_amax(x.detach().abs().amax())
    return _to_e4m3(x.detach(), descale), descale.reshape(1)


class DelayedScaling:
    """Per-tensor E4M3 descales for serving from the amax of earlier calls ("delayed scaling"): each call
    quantizes with max(amax of the last `history` calls) * margin / 448, then records its own amax. The history
    stays on the GPU (no host synchronization); the first call, with no history, uses its own amax. Values
    beyond the range saturate to +-448 (never Inf); a non-finite amax (an Inf or NaN input) is recorded as 0 so
    that it cannot poison later calls.

        scaling = DelayedScaling(history=16)       # one per tensor role and layer
        k8, kd = scaling.quantize(k)
    """

    def __init__(self, history=16, margin=1.0):
        if history < 1:
            raise ValueError(f"history={history}: must be >= 1")
        if not margin > 0:
            raise ValueError(f"margin={margin}: must be > 0")
        self.history = int(history)
        self.margin = float(margin)
        self.amax = None  # float32 [history] on the tensors' device, after the first call
        self.calls = 0

    def quantize(self, x):
        now = x.detach().abs().amax().float() if x.numel() else torch.zeros((), device=x.device)
        now = torch.where(torch.isfinite(now), now, torch.zeros_like(now))
        if self.amax is None:
            self.amax = torch.zeros(self.history, dtype=torch.float32, device=x.device)
            self.amax[0] = now
            descale = _descale_from_amax(now * self.margin)
        else:
            descale = _descale_from_amax(self.amax.amax() * self.margin)
            self.amax[self.calls % self.history] = now
        self.calls += 1
        return _to_e4m3(x.detach(), descale), descale.reshape(1)


def quantize_e4m3_per_head(x, heads_kv=None, layout="bshd"):
    """Per (batch, head) E4M3: returns (x_fp8, descale) with descale float32 [B, H_kv], contiguous.

    x: [B, S, H, D] ("bshd") or [B, H, S, D] ("bhsd"). heads_kv: the number of kv heads when x is a query
    tensor with H = heads_q > heads_kv; query heads h and h' share a descale when h // (H / heads_kv) ==
    h' // (H / heads_kv), as the kernels index it. Default: H (K, V, or MHA queries).
    """
    if layout not in ("bshd", "bhsd"):
        raise ValueError(f"layout={layout!r}: expected 'bshd' or 'bhsd'")
    if x.dim() != 4:
        raise ValueError(f"x: expected a 4-D {layout} tensor, got shape {tuple(x.shape)}")
    xb = x.detach() if layout == "bshd" else x.detach().transpose(1, 2)  # [B, S, H, D]
    batch, _, heads, head_dim = xb.shape
    heads_kv = heads if heads_kv is None else int(heads_kv)
    if heads_kv <= 0 or heads % heads_kv != 0:
        raise ValueError(f"heads_kv={heads_kv}: must divide the tensor's {heads} heads")
    group = heads // heads_kv
    if xb.numel() == 0:
        descale = torch.ones(batch, heads_kv, dtype=torch.float32, device=x.device)
    else:
        # amax over (seqlen, head_dim) and over the query heads of each kv head's group.
        amax = xb.abs().amax(dim=(1, 3)).reshape(batch, heads_kv, group).amax(dim=2)
        descale = _descale_from_amax(amax)
    per_head = descale.repeat_interleave(group, dim=1)  # [B, H]
    x_fp8 = _to_e4m3(xb, per_head[:, None, :, None])
    if layout == "bhsd":
        x_fp8 = x_fp8.transpose(1, 2).contiguous()
    return x_fp8, descale.contiguous()


# ---- Exact transforms of Q and K before quantization ------------------------------------------------------
# Both leave the attention output unchanged in exact arithmetic and make Q and K easier to round to e4m3
# (measured on SmolLM2-135M by emulation: per-tensor e4m3 Q, K costs +2.5% perplexity, +0.7% after both).

@functools.lru_cache(maxsize=64)
def hadamard(head_dim, seed=0, device=None, dtype=torch.float32):
    """A random-sign Hadamard rotation [D, D] (D a power of two): diag(signs) times the Sylvester Hadamard
    matrix, divided by sqrt(D), so H H^T = I and (Q H)(K H)^T = Q K^T. Spreads each head's outlier
    channels over all D, which is what e4m3's per-tensor scale cannot handle. `seed` fixes the signs
    (hadamard_sign, as fp8attn.quantize(..., rotate=True, seed=) computes them on the GPU). Cached
    per (head_dim, seed, device, dtype): every layer and call reuses one matrix (do not modify it)."""
    if head_dim <= 0 or head_dim & (head_dim - 1):
        raise ValueError(f"head_dim={head_dim}: the Hadamard rotation needs a power of two")
    h = torch.ones(1, 1, dtype=torch.float64)
    while h.shape[0] < head_dim:
        h = torch.cat([torch.cat([h, h], 1), torch.cat([h, -h], 1)], 0)
    signs = torch.tensor([hadamard_sign(seed, i) for i in range(head_dim)], dtype=torch.float64)
    return (signs[:, None] * h / head_dim ** 0.5).to(device=device, dtype=dtype)


def hadamard_sign(seed, i):
    """+1 or -1 from bit 0 of a 32-bit hash of (seed, i): the signs the library's quantize kernel computes
    (the same function as kernels/common/numerics.py's, which tests compare with this one)."""
    mask = 0xFFFFFFFF
    h = ((seed & mask) * 0x9E3779B1 + i * 0x85EBCA77) & mask
    h ^= h >> 15
    h = (h * 0x2C1B3C6D) & mask
    h ^= h >> 12
    return 1 - 2 * (h & 1)


def smooth_keys(k, layout="bshd"):
    """K minus each (batch, head)'s mean key over the sequence. Every score of a query row moves by the same
    q . mean, so softmax (over any subset of the keys, causal or not) does not change; K loses the shared
    offset that otherwise takes most of e4m3's range."""
    seq_dim = 1 if layout == "bshd" else 2
    wide = torch.promote_types(k.dtype, torch.float32)  # the mean in at least float32
    return k - k.to(wide).mean(dim=seq_dim, keepdim=True).to(k.dtype)


def transform_qk(q, k, layout="bshd", smooth=True, rotate=True, seed=0):
    """(q, k) with the exact transforms applied (smoothing of K, then the same Hadamard rotation of Q and K),
    in float32 (float64 inputs stay float64) for the quantizer that follows."""
    wide = torch.promote_types(q.dtype, torch.float32)
    qw, kw = q.to(wide), k.to(wide)
    if smooth:
        kw = smooth_keys(kw, layout)
    if rotate:
        h = hadamard(q.shape[-1], seed, q.device, wide)
        qw, kw = qw @ h, kw @ h
    return qw, kw
