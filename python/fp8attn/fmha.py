"""fmha_fwd for torch tensors: a thin wrapper over the C++ library (fp8attn::fmha::device::FmhaFwd).

The wrapper maps torch dtypes to the library's type names, allocates the output, the LSE and the workspace
with torch on the inputs' device, and launches on torch's current stream. Every other check (shapes, head
dims, GQA ratios, alignment, descales, forced kernel names) is the C++ side's, which raises ValueError naming
the argument.

Tensors cross into C++ through DLPack: FP8 tensors as uint8 views (DLPack producers disagree on FP8 type
codes), the rest as they are, together with a type string. BHSD operands are passed as their [B, S, H, D]
transposed views, so the C++ side sees one logical layout with arbitrary strides.
"""

import contextlib

import torch

from . import _fp8attn_ext as _ext

# torch dtype -> the library's type name (fp8attn::parse_data_type). Whether a type is compiled in this
# build is for the library to say.
_INPUT_TYPES = {
    torch.float8_e4m3fn: "e4m3",
    torch.float8_e5m2: "e5m2",
    torch.bfloat16: "bf16",
    torch.float16: "f16",
}
_OUTPUT_TYPES = {torch.bfloat16: "bf16", torch.float16: "f16"}
_LAYOUTS = ("bshd", "bhsd")


def _allocate(shape, dtype, device):
    """Every buffer fp8attn allocates (output, LSE, workspace) comes from here; tests replace it to poison them."""
    return torch.empty(shape, dtype=dtype, device=device)


def _dlpack_view(t):
    """A view every DLPack consumer can read: one-byte floats as uint8, everything else unchanged."""
    t = t.detach()
    if t.dtype.is_floating_point and t.element_size() == 1:
        return t.view(torch.uint8)
    return t


def _check_tensor(name, t, optional=False):
    if t is None and optional:
        return
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name}: expected a torch.Tensor, got {type(t).__name__}")


def _prepare(q, k, v, q_descale, k_descale, v_descale, softmax_scale, causal, return_lse, kernel_name, out,
             layout):
    """Returns (ext positional args, ext keyword args, out in the caller's layout, lse or None)."""
    if layout not in _LAYOUTS:
        raise ValueError(f"layout={layout!r}: expected 'bshd' ([batch, seqlen, heads, head_dim]) or 'bhsd'")
    for name, t in (("q", q), ("k", k), ("v", v)):
        _check_tensor(name, t)
        if t.dim() != 4:
            raise ValueError(f"{name}: expected a 4-D {layout} tensor, got shape {tuple(t.shape)}")
    for name, t in (("q_descale", q_descale), ("k_descale", k_descale), ("v_descale", v_descale), ("out", out)):
        _check_tensor(name, t, optional=True)

    input_type = _INPUT_TYPES.get(q.dtype)
    if input_type is None:
        raise ValueError(f"q: dtype {q.dtype} is not supported; expected torch.float8_e4m3fn or torch.bfloat16")
    for name, t in (("k", k), ("v", v)):
        if t.dtype != q.dtype:
            raise ValueError(f"{name}: dtype {t.dtype} differs from q's {q.dtype}; q, k and v share one type")
    if out is not None:
        if out.dim() != 4:
            raise ValueError(f"out: expected a 4-D {layout} tensor shaped like q, got shape {tuple(out.shape)}")
        output_type = _OUTPUT_TYPES.get(out.dtype)
        if output_type is None:
            raise ValueError(f"out: dtype {out.dtype} is not supported; expected torch.bfloat16")
    else:
        output_type = "bf16"
        out = _allocate(q.shape, torch.bfloat16, q.device)

    def bshd(t):
        return t if layout == "bshd" or t is None else t.transpose(1, 2)

    batch, seqlen_q, heads_q = bshd(q).shape[:3]
    lse = _allocate((batch, heads_q, seqlen_q), torch.float32, q.device) if return_lse else None

    def dl(t):
        return None if t is None else _dlpack_view(t)

    args = (dl(bshd(q)), dl(bshd(k)), dl(bshd(v)), dl(bshd(out)), dl(lse), dl(q_descale), dl(k_descale),
            dl(v_descale))
    kwargs = dict(
        input_type=input_type,
        output_type=output_type,
        causal=bool(causal),
        softmax_scale=0.0 if softmax_scale is None else float(softmax_scale),
        kernel_name="" if kernel_name is None else str(kernel_name),
    )
    return args, kwargs, out, lse


def _device_guard(device):
    # The library launches in the current CUDA context: make it the inputs' device's.
    return torch.cuda.device(device) if device.type == "cuda" else contextlib.nullcontext()


def fmha_fwd(q, k, v, *, q_descale=None, k_descale=None, v_descale=None, softmax_scale=None, causal=False,
             return_lse=False, kernel_name=None, out=None, layout="bshd"):
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
    no key gets O = 0 and LSE = -inf.
    kernel_name: force one compiled instance (see list_kernels()); default: the library's heuristic.
    out: optional BF16 output in q's layout and shape, written in place.

    Returns O (BF16, q's layout and shape), or (O, LSE) with return_lse, LSE float32 [B, H_q, S_q] (natural
    log). Launched asynchronously on torch.cuda.current_stream(). Raises ValueError naming the argument when
    the call is invalid or not supported by this build.
    """
    args, kwargs, out, lse = _prepare(q, k, v, q_descale, k_descale, v_descale, softmax_scale, causal,
                                      return_lse, kernel_name, out, layout)
    with _device_guard(q.device):
        workspace_bytes = _ext.workspace_size(*args, **kwargs)  # validates everything first
        workspace = _allocate((workspace_bytes,), torch.uint8, q.device) if workspace_bytes > 0 else None
        stream = torch.cuda.current_stream(q.device).cuda_stream if q.device.type == "cuda" else 0
        _ext.fmha_fwd(*args, **kwargs, workspace=workspace, stream=stream)
    # The caching allocator orders the workspace's reuse after this stream's work: freeing it here is safe.
    return (out, lse) if return_lse else out


def select_kernel(q, k, v, *, q_descale=None, k_descale=None, v_descale=None, softmax_scale=None, causal=False,
                  return_lse=False, kernel_name=None, out=None, layout="bshd"):
    """Name of the compiled instance fmha_fwd would run for these arguments (same signature, nothing runs)."""
    args, kwargs, _, _ = _prepare(q, k, v, q_descale, k_descale, v_descale, softmax_scale, causal, return_lse,
                                  kernel_name, out, layout)
    with _device_guard(q.device):
        return _ext.select_kernel(*args, **kwargs)


def workspace_size(q, k, v, *, q_descale=None, k_descale=None, v_descale=None, softmax_scale=None, causal=False,
                   return_lse=False, kernel_name=None, out=None, layout="bshd"):
    """Bytes of device workspace fmha_fwd allocates for these arguments (V^T staging, descriptors)."""
    args, kwargs, _, _ = _prepare(q, k, v, q_descale, k_descale, v_descale, softmax_scale, causal, return_lse,
                                  kernel_name, out, layout)
    with _device_guard(q.device):
        return _ext.workspace_size(*args, **kwargs)


def list_kernels():
    """Every attention instance compiled into this build: dicts with name, qk_type, head_dim, block_n, causal,
    even_n, ... (fp8attn::library::FmhaDescription), in manifest order."""
    return _ext.list_kernels()


def find_kernel(name):
    """The fields of the compiled instance with this exact name, or None."""
    return _ext.find_kernel(name)


def triton_version():
    """Triton version the cubins of this build were compiled with."""
    return _ext.triton_version()
