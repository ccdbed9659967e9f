"""E4M3 quantization helpers producing the descales fmha_fwd takes (x ~= x_fp8.float() * descale).

Per tensor: one descale, amax(|x|) / 448. Per (batch, head): the FlashAttention-3 convention, where every
descale is indexed by (batch, kv head); for a query tensor with more heads than K/V (GQA), pass heads_kv so
that each group of heads_q / heads_kv query heads shares the descale of its kv head.
"""

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


def quantize_e4m3(x):
    """Per-tensor E4M3: returns (x_fp8, descale) with descale float32 of shape [1] on x's device."""
    if x.numel() == 0:
        return x.to(E4M3), torch.ones(1, dtype=torch.float32, device=x.device)
    descale = _descale_from_amax(x.detach().abs().amax())
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
