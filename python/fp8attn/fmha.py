"""fmha_fwd for torch tensors: a thin wrapper over the C++ library (fp8attn::fmha::device::FmhaFwd).

The wrapper allocates the output and the LSE with torch on the inputs' device and calls into C++ once per
call. The C++ side reads the tensors (pointers, shapes, strides, dtypes, devices) directly, checks what the
library's Arguments cannot express (ranks, shapes that must agree, dtypes, devices), validates the rest
(FmhaFwd::can_implement: head dims, GQA ratios, alignment, descales, forced kernel names), asks back for a
workspace only when one is needed (`_workspace_alloc`, torch's caching allocator) and launches on torch's
current stream. Errors are ValueError naming the argument. Host cost per call: see bench/bench_host_overhead.py.
"""

import torch

from . import _fp8attn_ext as _ext

# The C++ side recognizes dtypes by identity with these objects (order: fp8attn_py::TorchDtype).
_ext.register_dtypes(torch.float8_e4m3fn, torch.float8_e5m2, torch.bfloat16, torch.float16, torch.float32, torch.int8,
                     torch.int32)

_LAYOUTS = ("bshd", "bhsd")
_OUTPUT_DTYPE = torch.bfloat16

try:  # the raw cudaStream_t of the current stream, without building a torch.cuda.Stream object
    _raw_stream = torch._C._cuda_getCurrentRawStream
except AttributeError:  # pragma: no cover - older torch
    def _raw_stream(device_index):
        return torch.cuda.current_stream(device_index).cuda_stream


def _allocate(shape, dtype, device):
    """Every tensor fp8attn allocates (output, LSE) comes from here; tests replace it to poison them."""
    return torch.empty(shape, dtype=dtype, device=device)


def _allocate_output(q):
    """The BF16 output in q's shape and layout. empty_like costs about half of torch.empty(shape, dtype=,
    device=) in host time (measured: bench/host_call_breakdown.py); with a replaced _allocate (tests), that."""
    if _allocate is _default_allocate:
        return torch.empty_like(q, dtype=_OUTPUT_DTYPE)
    return _allocate(q.shape, _OUTPUT_DTYPE, q.device)


_default_allocate = _allocate

# The workspace is raw memory from torch's caching allocator (no tensor object: a tensor costs several
# microseconds of host time per call). Stream-ordered like a tensor's storage: freed right after the launch,
# the block is reused only by work queued after it on the same stream; CUDA-graph capture takes it from the
# graph's pool. Tests replace both functions to guard and poison the workspace.
try:
    _workspace_alloc = torch._C._cuda_cudaCachingAllocator_raw_alloc  # (nbytes, stream) -> address
    _workspace_free = torch._C._cuda_cudaCachingAllocator_raw_delete  # (address)
except AttributeError:  # pragma: no cover - a torch without the raw entry points
    def _workspace_alloc(nbytes, stream):
        return torch.cuda.caching_allocator_alloc(nbytes, stream=stream)

    _workspace_free = torch.cuda.caching_allocator_delete


def _stream_and_device(q):
    """(raw stream of q's device, whether q's device is the current one). The library launches in the current
    CUDA context, so another device's call needs a device guard."""
    index = q.get_device()
    if index < 0:
        return 0, True  # a CPU tensor: the C++ side raises ValueError naming it
    return _raw_stream(index), index == torch.cuda.current_device()


def _window(window):
    """(left, right) from None (unlimited) or a pair; -1 (or None) on a side: unlimited."""
    if window is None:
        return -1, -1
    try:
        left, right = window
    except (TypeError, ValueError):
        raise ValueError(f"window={window!r}: expected (left, right), -1 for an unlimited side") from None
    return (-1 if left is None else int(left)), (-1 if right is None else int(right))


def _call(fn, q, k, v, q_descale, k_descale, v_descale, softmax_scale, causal, return_lse, kernel_name, out, layout,
          v_key_permuted=False, window=None, softcap=0.0, k_descale_paired=False, **extra):
    if layout not in _LAYOUTS:
        raise ValueError(f"layout={layout!r}: expected 'bshd' ([batch, seqlen, heads, head_dim]) or 'bhsd'")
    if not isinstance(q, torch.Tensor):
        raise TypeError(f"q: expected a torch.Tensor, got {type(q).__name__}")
    if out is None:
        out = _allocate_output(q)
    lse = None
    if return_lse:
        if q.dim() != 4:
            raise ValueError(f"q: expected a 4-D {layout} tensor, got shape {tuple(q.shape)}")
        b, s, h = (q.shape[0], q.shape[1], q.shape[2]) if layout == "bshd" else (q.shape[0], q.shape[2], q.shape[1])
        lse = _allocate((b, h, s), torch.float32, q.device)
    result = fn(q, k, v, out, lse, q_descale, k_descale, v_descale, bool(causal),
                0.0 if softmax_scale is None else float(softmax_scale), "" if kernel_name is None else str(kernel_name),
                layout == "bhsd", bool(v_key_permuted), *_window(window), float(softcap or 0.0),
                bool(k_descale_paired), **extra)
    return result, out, lse


def fmha_fwd(q, k, v, *, q_descale=None, k_descale=None, v_descale=None, softmax_scale=None, causal=False,
             return_lse=False, kernel_name=None, out=None, layout="bshd", v_key_permuted=False, window=None,
             softcap=0.0, k_descale_paired=False):
    """Attention forward: O = softmax(Q K^T * softmax_scale) V, FP8 (e4m3) or BF16 inputs, BF16 output.

    q: [B, S_q, H_q, D] (layout "bshd") or [B, H_q, S_q, D] ("bhsd"); k, v: the same with S_k and H_kv,
    H_q a multiple of H_kv (GQA/MQA). Any strides with the last dimension contiguous (strides and data
    pointers 16-element / 16-byte aligned); an FP8 v may instead be sequence-contiguous (a transposed view
    of a [B, H_kv, D, S] tensor), which the kernels read in place. CUDA tensors of dtype
    torch.float8_e4m3fn or torch.bfloat16 (all three the same).
    q_descale, k_descale, v_descale: float32 CUDA tensors, shape [1] (per tensor) or [B, H_kv] (per batch and
    kv head, the FlashAttention-3 convention); required for FP8, optional (1.0) for BF16. The kernel sees
    q * q_descale etc.
    softmax_scale: default 1/sqrt(D). causal: bottom-right aligned when S_q != S_k; a query row that sees
    no key gets O = 0 and LSE = -inf; a row whose scores hold NaN gets NaN in O and LSE.
    kernel_name: force one compiled instance (see list_kernels()); default: the library's heuristic.
    out: optional BF16 output in q's layout and shape, written in place.
    v_key_permuted: v is the sequence-contiguous view transpose_v(v, key_permuted=True) returned (FP8 only): the
    call then runs no transpose of its own (for a V reused across calls).
    window: (left, right) sliding window, FlashAttention's convention: with c = S_k - S_q, query row i sees keys
    i + c - left <= j <= i + c + right; -1 (or None) leaves a side unlimited. Tiles outside are skipped.
    softcap: logit soft-capping (Gemma 2), scores s become softcap * tanh(s / softcap); 0 is off.
    k_descale_paired: INT8 with per-block k descales only: their entries 2i and 2i + 1 hold one value (one scale
    per 128 keys, as quantize(..., granularity="block_pair") writes them); the library then runs instances that
    read one k descale per 128-key tile (the same result, a cheaper softmax). Not checked: with unequal pairs
    those instances apply entry 2i to both blocks.

    Returns O (BF16, q's layout and shape), or (O, LSE) with return_lse, LSE float32 [B, H_q, S_q] (natural
    log). Launched asynchronously on torch.cuda.current_stream(). Raises ValueError naming the argument when
    the call is invalid or not supported by this build.
    """
    stream, current = _stream_and_device(q) if isinstance(q, torch.Tensor) else (0, True)
    if current:
        _, out, lse = _call(_ext.fmha_fwd, q, k, v, q_descale, k_descale, v_descale, softmax_scale, causal,
                            return_lse, kernel_name, out, layout, v_key_permuted, window, softcap,
                            k_descale_paired, stream=stream, allocate=_workspace_alloc, release=_workspace_free)
    else:
        with torch.cuda.device(q.device):
            _, out, lse = _call(_ext.fmha_fwd, q, k, v, q_descale, k_descale, v_descale, softmax_scale, causal,
                                return_lse, kernel_name, out, layout, v_key_permuted, window, softcap,
                                k_descale_paired, stream=stream, allocate=_workspace_alloc,
                                release=_workspace_free)
    return (out, lse) if return_lse else out


def _varlen_args(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, q_descale, k_descale, v_descale,
                 softmax_scale, causal, return_lse, kernel_name, out, window, softcap):
    """fmha_fwd_varlen's and select_kernel_varlen's checks and extension arguments: (out, lse, args), out and lse
    allocated where not given."""
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor) or t.dim() != 3:
            raise ValueError(f"{name}: expected a 3-D [total, heads, head_dim] tensor, got "
                             f"{tuple(t.shape) if isinstance(t, torch.Tensor) else type(t).__name__}")
    if out is None:
        out = _allocate_output(q)
    if not isinstance(out, torch.Tensor) or out.dim() != 3:
        raise ValueError("out: expected a 3-D [total_q, heads_q, head_dim] tensor")
    lse = None
    if return_lse:
        lse = _allocate((cu_seqlens_q.shape[0] - 1, q.shape[1], int(max_seqlen_q)), torch.float32, q.device)
    args = (q[None], k[None], v[None], out[None], lse, q_descale, k_descale, v_descale, bool(causal),
            0.0 if softmax_scale is None else float(softmax_scale), "" if kernel_name is None else str(kernel_name),
            False, False, *_window(window), float(softcap or 0.0), False, cu_seqlens_q, cu_seqlens_k,
            int(max_seqlen_q), int(max_seqlen_k))
    return out, lse, args


def fmha_fwd_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, *, q_descale=None,
                    k_descale=None, v_descale=None, softmax_scale=None, causal=False, return_lse=False,
                    kernel_name=None, out=None, window=None, softcap=0.0):
    """Attention over packed sequences (FlashAttention's varlen convention).

    q: [total_q, H_q, D], k and v: [total_k, H_kv, D]; sequence b's query rows are cu_seqlens_q[b] ..
    cu_seqlens_q[b + 1] - 1 and its keys cu_seqlens_k[b] .. cu_seqlens_k[b + 1] - 1 (int32 CUDA tensors of
    batch + 1 offsets). max_seqlen_q / max_seqlen_k: host-side bounds on the lengths (the grid). Causal and windows
    apply per sequence, bottom-right aligned. Descales: [1] or [batch, H_kv] (per sequence and kv head). A
    sequence whose offsets are not monotonic, leave the tensors or exceed the bounds gets NaN rows (up to
    max_seqlen_q of them; rows no sequence covers are not written).
    Returns O [total_q, H_q, D] (BF16), or (O, LSE) with return_lse, LSE float32 [batch, H_q, max_seqlen_q] (rows
    past a sequence's length untouched). The library picks a Gluon "_varlen" instance (FP8 and BF16, D = 64 and 128),
    else a Triton one."""
    out, lse, args = _varlen_args(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, q_descale,
                                  k_descale, v_descale, softmax_scale, causal, return_lse, kernel_name, out, window,
                                  softcap)
    stream, current = _stream_and_device(q)
    if current:
        _ext.fmha_fwd_varlen(*args, stream=stream, allocate=_workspace_alloc, release=_workspace_free)
    else:
        with torch.cuda.device(q.device):
            _ext.fmha_fwd_varlen(*args, stream=stream, allocate=_workspace_alloc, release=_workspace_free)
    return (out, lse) if return_lse else out


def select_kernel_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, *, q_descale=None,
                         k_descale=None, v_descale=None, softmax_scale=None, causal=False, return_lse=False,
                         kernel_name=None, out=None, window=None, softcap=0.0):
    """Name of the compiled instance fmha_fwd_varlen would run for these arguments (same signature, nothing
    runs)."""
    _, _, args = _varlen_args(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, q_descale, k_descale,
                              v_descale, softmax_scale, causal, return_lse, kernel_name, out, window, softcap)
    # The tuning table is per GPU model: select in q's device's context, as fmha_fwd_varlen runs.
    _, current = _stream_and_device(q)
    if current:
        return _ext.select_kernel_varlen(*args)
    with torch.cuda.device(q.device):
        return _ext.select_kernel_varlen(*args)


def select_kernel(q, k, v, *, q_descale=None, k_descale=None, v_descale=None, softmax_scale=None, causal=False,
                  return_lse=False, kernel_name=None, out=None, layout="bshd", v_key_permuted=False, window=None,
                  softcap=0.0, k_descale_paired=False):
    """Name of the compiled instance fmha_fwd would run for these arguments (same signature, nothing runs)."""
    name, _, _ = _call(_ext.select_kernel, q, k, v, q_descale, k_descale, v_descale, softmax_scale, causal,
                       return_lse, kernel_name, out, layout, v_key_permuted, window, softcap, k_descale_paired)
    return name


def workspace_size(q, k, v, *, q_descale=None, k_descale=None, v_descale=None, softmax_scale=None, causal=False,
                   return_lse=False, kernel_name=None, out=None, layout="bshd", v_key_permuted=False, window=None,
                   softcap=0.0, k_descale_paired=False):
    """Bytes of device workspace fmha_fwd allocates for these arguments (V^T staging, descriptors)."""
    size, _, _ = _call(_ext.workspace_size, q, k, v, q_descale, k_descale, v_descale, softmax_scale, causal,
                       return_lse, kernel_name, out, layout, v_key_permuted, window, softcap, k_descale_paired)
    return size


def transpose_v(v, *, key_permuted=False, layout="bshd"):
    """V^T of an FP8 V, for fmha_fwd calls that reuse it (a KV cache, several query chunks against one context).

    v: [B, S, H, D] ("bshd") or [B, H, S, D] ("bhsd"), float8_e4m3fn (or e5m2), head_dim contiguous. Returns a
    sequence-contiguous view of a new V^T tensor [B, H, D, S_pad] (S_pad = S rounded up to 32, zero padding) in
    v's layout and shape: pass it as fmha_fwd's v. With key_permuted=True the keys of each 32-key block are
    stored in the order the Gluon kernels' P fragment uses, and fmha_fwd(..., v_key_permuted=True) then runs
    without a transpose of its own (key_permuted=False: the plain order any FP8 instance reads, a caller's
    sequence-contiguous V)."""
    if layout not in _LAYOUTS:
        raise ValueError(f"layout={layout!r}: expected 'bshd' or 'bhsd'")
    if not isinstance(v, torch.Tensor) or v.dim() != 4:
        raise ValueError(f"v: expected a 4-D {layout} tensor")
    b, s, h, d = v.shape if layout == "bshd" else (v.shape[0], v.shape[2], v.shape[1], v.shape[3])
    align = _ext.VT_SEQ_ALIGN
    vt = torch.empty((b, h, d, (s + align - 1) // align * align), dtype=v.dtype, device=v.device)
    stream, current = _stream_and_device(v)
    if current:
        _ext.transpose_v(v, vt, bool(key_permuted), layout == "bhsd", stream)
    else:
        with torch.cuda.device(v.device):
            _ext.transpose_v(v, vt, bool(key_permuted), layout == "bhsd", stream)
    view = vt[..., :s]  # [B, H, D, S]
    return view.permute(0, 3, 1, 2) if layout == "bshd" else view.permute(0, 1, 3, 2)
