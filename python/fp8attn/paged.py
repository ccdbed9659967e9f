"""A paged FP8 KV cache for decode (docs/PAGED_CACHE.md): pages of e4m3 K and V, descales, and the two calls an
inference engine makes per step, append and decode.

    cache = fp8attn.paged.PagedKVCache(num_pages=4096, page_size=64, heads_kv=8, head_dim=128,
                                       k_descale=ks, v_descale=vs)          # [heads_kv] static descales
    fp8attn.paged.append(cache, k_new, v_new, block_table, positions)      # bf16 [B, T, H_kv, D]
    o = fp8attn.paged.decode(q, cache, block_table, seqlens, max_seqlen)   # q bf16 [B, q_len, H_q, D]

block_table: int32 [batch, max_pages], the pages of each sequence in order; seqlens: int32 [batch], the tokens in
the cache (the new queries' keys included); positions: int32 [batch], where the appended rows start. The device
data is not read on the host: an invalid table entry or a length beyond the table gives NaN rows, never a read
outside the cache. Both calls are capturable in a CUDA graph (engines replay decode steps).
"""

import contextlib

import torch

from . import _fp8attn_ext as _ext
from . import fmha as _fmha


class PagedKVCache:
    """The cache's tensors: k_pages e4m3 [num_pages, page_size, heads_kv, head_dim] (token-major, as vLLM's key
    cache), v_pages e4m3 [num_pages, heads_kv, head_dim, page_size] (V transposed inside each page: the FP8 P.V
    MMA needs the tokens innermost), both zeroed; k_descale, v_descale float32 [1, heads_kv] (static, given) or
    [num_pages, heads_kv] (per page, the caller's to fill)."""

    def __init__(self, num_pages, page_size, heads_kv, head_dim, k_descale=None, v_descale=None, per_page=False,
                 device="cuda"):
        shape = (num_pages, page_size, heads_kv, head_dim)
        self.k_pages = torch.zeros(shape, dtype=torch.float8_e4m3fn, device=device)
        self.v_pages = torch.zeros((num_pages, heads_kv, head_dim, page_size), dtype=torch.float8_e4m3fn,
                                   device=device)
        rows = num_pages if per_page else 1
        self.k_descale = self._descale(k_descale, rows, heads_kv, device)
        self.v_descale = self._descale(v_descale, rows, heads_kv, device)

    @staticmethod
    def _descale(value, rows, heads_kv, device):
        if value is None:
            return torch.ones((rows, heads_kv), dtype=torch.float32, device=device)
        t = torch.as_tensor(value, dtype=torch.float32, device=device)
        return t.reshape(1, heads_kv).expand(rows, heads_kv).contiguous() if t.numel() == heads_kv else t.contiguous()

    @property
    def page_size(self):
        return self.k_pages.shape[1]


def _device_and_stream(t):
    """(context manager making t's device current, t's device's raw stream)."""
    stream, current = _fmha._stream_and_device(t)
    return (contextlib.nullcontext() if current else torch.cuda.device(t.device)), stream


def append(cache, k, v, block_table, positions):
    """Writes bf16 k, v [batch, new_tokens, heads_kv, head_dim] at positions[b] + t into the cache (e4m3, each
    page's descale, saturating)."""
    guard, stream = _device_and_stream(k)
    with guard:
        _ext.paged_append(k, v, cache.k_pages, cache.v_pages, cache.k_descale, cache.v_descale, block_table,
                          positions, stream)


def decode(q, cache, block_table, seqlens, max_seqlen, *, softmax_scale=None, num_splits=0, out=None, kernel_name="",
           window_left=-1, softcap=0.0):
    """O [batch, q_len, heads_q, head_dim] bf16 for q bf16 [batch, q_len, heads_q, head_dim] over the cache: query
    token t of sequence b sees the keys before seqlens[b] - q_len + t + 1. max_seqlen: a host-side bound on
    seqlens (plans the split-KV; must fit the block table). num_splits: 0 automatic. kernel_name: force a
    compiled decode instance (fp8attn.list_operations()), e.g. to compare them; empty: the heuristic's pick.
    window_left >= 0: sliding window, token t (at position p = seqlens[b] - q_len + t) sees keys p - window_left
    .. p (-1: unlimited). softcap > 0: scores s become softcap * tanh(s / softcap)."""
    return decode_with_name(q, cache, block_table, seqlens, max_seqlen, softmax_scale=softmax_scale,
                            num_splits=num_splits, out=out, kernel_name=kernel_name, window_left=window_left,
                            softcap=softcap)[0]


def decode_with_name(q, cache, block_table, seqlens, max_seqlen, *, softmax_scale=None, num_splits=0, out=None,
                     kernel_name="", window_left=-1, softcap=0.0):
    """decode(), returning (O, the name of the decode instance that ran)."""
    if out is None:
        out = torch.empty(q.shape, dtype=torch.bfloat16, device=q.device)
    guard, stream = _device_and_stream(q)
    with guard:
        name = _ext.paged_decode(q, out, cache.k_pages, cache.v_pages, cache.k_descale, cache.v_descale, block_table,
                                 seqlens, int(max_seqlen), float(softmax_scale or 0.0), int(num_splits), stream,
                                 _fmha._workspace_alloc, _fmha._workspace_free, kernel_name, int(window_left),
                                 float(softcap))
    return out, name
