"""fp8attn as a Hugging Face transformers attention backend.

    import fp8attn.integrations.transformers as fp8attn_hf
    fp8attn_hf.register()                                   # name "fp8attn", mode "fp8"
    model = AutoModelForCausalLM.from_pretrained(path, attn_implementation="fp8attn", dtype=torch.bfloat16)
    # or, on a loaded model: model.set_attn_implementation("fp8attn")

transformers calls the registered function once per attention layer with q as (B, H_q, S_q, D) and k, v as
(B, H_kv, S_k, D) after RoPE and the KV cache (K/V heads not repeated), and expects (out (B, S_q, H_q, D),
None). The function runs fp8attn when it can give the right answer and torch's SDPA otherwise:

  fp8attn   no attention mask, or a mask transformers left out because it is plain causal: prefill, decode steps
            (S_q < S_k: causal bottom-right aligned, as a KV cache needs) and GQA/MQA as they come; q/k/v are
            read in place in the (B, H, S, D) layout and quantized on the GPU (fp8attn.modes, whose table
            gives what each mode costs in perplexity). Modes:
              "fp8"           q, k, v quantized to e4m3 with one descale each (amax / 448) on every call;
              "fp8_per_head"  one descale per (batch, kv head) (the FlashAttention-3 convention);
              "fp8_smooth_rotate"  K smoothed (its mean key removed) and Q, K rotated by one random-sign
                              Hadamard matrix before the per-tensor quantization: both exact in real
                              arithmetic, both fused into the quantization kernel;
              "int8_qk"       Q and K in int8, one descale per 64 tokens of Q and per 128 of K (fp8attn.modes
                              k_descale_paired), K smoothed, Q and K rotated as
                              in fp8_smooth_rotate; V e4m3 (the INT8 instances: head_dim 64 and 128);
              "fp8_guarded"   "fp8" under a QualityGuard (fp8attn.guard) per layer: a sampled comparison with
                              BF16 every 64 calls switches a layer whose FP8 error exceeds 15% to BF16 for good
                              (guard_report() says which, and when);
              "bf16"          fp8attn's BF16 kernel (inputs cast to bf16).
  SDPA      an attention-mask tensor (padding, packed sequences, any custom mask), dropout in training, logit
            soft-capping, sliding windows, a non-causal layer, keyword arguments it does not implement
            (cu_seq_lens_*, attention sinks, ...), or a head dim / dtype this build has no instance for. Each
            reason is warned about once per process (warnings.warn), and counted in
            fallback_counts() so that a test or a benchmark can tell what ran.

The mask pitfall: transformers builds masks per attention implementation and, for a name not registered with
AttentionMaskInterface, passes no mask at all, even with padding. register() therefore registers SDPA's mask
function under the same name: with padding, the function then gets a boolean (B, 1, S_q, S_k) mask (and
falls back); without padding, None (causal is its own job).

The output is the model's dtype (fp8attn writes BF16; FP16 models get a cast). Inference only: fp8attn has no
backward (torch.ops.fp8attn raises on it).
"""

import warnings
from collections import Counter

import torch

from .. import ops  # noqa: F401  (registers torch.ops.fp8attn.*)
from ..guard import QualityGuard
from ..modes import attention

MODES = ("fp8", "fp8_per_head", "fp8_smooth_rotate", "int8_qk", "fp8_guarded", "bf16")
DEFAULT_NAME = "fp8attn"

# The default for a model: fp8_smooth_rotate, the fastest mode that keeps a real model within the project's 1%
# (SmolLM2-135M on the H200: +0.77% / +0.79% perplexity at windows of 2048 / 8192, against +2.39% / +3.16% for
# plain fp8, at 0.84x of plain fp8's speed at S=8k, quantization included; docs/ACCURACY.md).
DEFAULT_MODE = "fp8_smooth_rotate"
_mode = DEFAULT_MODE
_fallbacks = Counter()
_warned = set()
_guard = QualityGuard(threshold=0.15, every=64, rows=64)


def reset_guard(threshold=0.15, every=64, rows=64):
    """A fresh guard for the fp8_guarded mode (forgets every layer's state and fallback)."""
    global _guard
    _guard = QualityGuard(threshold=threshold, every=every, rows=rows)


def guard_report():
    """fp8_guarded mode: {(layer index, id of the attention module): {"calls", "checks", "last_error", "fallback",
    "triggered_at_call"}}."""
    return _guard.report()


def fallback_counts():
    """{reason: calls} of the calls that ran SDPA instead of fp8attn since the last reset_fallback_counts()."""
    return dict(_fallbacks)


def reset_fallback_counts():
    _fallbacks.clear()


def set_mode(mode):
    """Accuracy mode of the registered function for the calls that follow (one of MODES)."""
    global _mode
    if mode not in MODES:
        raise ValueError(f"mode={mode!r}: expected one of {MODES}")
    _mode = mode


def register(name=DEFAULT_NAME, mode=DEFAULT_MODE):
    """Registers attention_forward as `name` with transformers' AttentionInterface, and SDPA's mask function
    under the same name with AttentionMaskInterface (see the module docstring). Returns the name."""
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

    set_mode(mode)
    AttentionInterface.register(name, attention_forward)
    AttentionMaskInterface.register(name, sdpa_mask)
    return name


def _fall_back(reason):
    _fallbacks[reason] += 1
    if reason not in _warned:
        _warned.add(reason)
        warnings.warn(f"fp8attn: {reason}; this and similar calls run torch SDPA instead", stacklevel=3)


# Keyword arguments transformers passes along that do not change what attention computes here.
_HARMLESS_KWARGS = {"position_ids", "cache_position", "past_key_values", "past_key_value", "use_cache",
                    "output_attentions", "layer_idx", "target_dtype"}


def _unsupported(module, query, key, value, attention_mask, dropout, softcap, sliding_window, causal, kwargs):
    """Why fp8attn cannot run this call exactly, or None."""
    if attention_mask is not None:
        return "an attention mask tensor was given (padding or a custom mask)"
    # Packed sequences (cu_seq_lens_*), attention sinks (s_aux), and anything else a model may add change the
    # computation in ways this function does not implement.
    unknown = sorted(k for k, v in kwargs.items() if v is not None and k not in _HARMLESS_KWARGS)
    if unknown:
        return f"arguments fp8attn does not implement: {', '.join(unknown)}"
    if dropout and module is not None and getattr(module, "training", False):
        return "attention dropout in training"
    if softcap:
        return "logit soft-capping"
    if sliding_window:
        return "a sliding window"
    if not causal and query.shape[2] > 1:
        return "a non-causal layer"
    if not query.is_cuda:
        return "tensors not on a CUDA device"
    if query.dtype not in (torch.bfloat16, torch.float16):
        return f"dtype {query.dtype} (fp8attn takes bfloat16 or float16 models)"
    # The types the mode runs (the guarded mode can switch a layer to BF16).
    types = {"bf16": ("bf16",), "fp8_guarded": ("e4m3", "bf16"), "int8_qk": ("i8",)}.get(_mode, ("e4m3",))
    if value.shape[-1] != query.shape[-1]:
        return f"a value head_dim ({value.shape[-1]}) other than the query's ({query.shape[-1]})"
    for qk_type in types:
        if query.shape[-1] != key.shape[-1] or (qk_type, query.shape[-1]) not in _compiled_causal():
            return f"head_dim={query.shape[-1]} in {qk_type}, for which this build has no causal instance"
    return None


def _compiled_causal():
    """{(qk_type, head_dim)} of the causal attention instances compiled into this build."""
    from .. import list_kernels

    if not hasattr(_compiled_causal, "cache"):
        _compiled_causal.cache = {(k["qk_type"], k["head_dim"]) for k in list_kernels() if k["causal"]}
    return _compiled_causal.cache


def _sdpa(query, key, value, attention_mask, dropout, scaling, causal):
    # As transformers' own sdpa path: causal only without a mask and for more than one query row (a mask, when
    # given, already holds the causal part; top-left alignment is then never used).
    is_causal = causal and attention_mask is None and query.shape[2] > 1
    gqa = key.shape[1] != query.shape[1]
    if gqa and attention_mask is not None:
        # As transformers' sdpa path: with a mask, enable_gqa would leave only SDPA's math backend (the whole
        # score matrix in memory); repeating K and V keeps the fused backends.
        group = query.shape[1] // key.shape[1]
        key, value = key.repeat_interleave(group, dim=1), value.repeat_interleave(group, dim=1)
        gqa = False
    out = torch.nn.functional.scaled_dot_product_attention(
        query, key, value, attn_mask=attention_mask, dropout_p=dropout, scale=scaling, is_causal=is_causal,
        enable_gqa=gqa)
    return out.transpose(1, 2)


def _fp8attn(query, key, value, scaling, mode):
    """(B, S_q, H_q, D) from transformers' (B, H, S, D) tensors in an accuracy mode (fp8attn.modes: the
    quantization runs on the GPU as fp8attn::quantize, then fp8attn::fmha_fwd)."""
    # Causal is bottom-right aligned: with S_q < S_k (decode steps, a cache) each query sees the keys up to its
    # own position; with S_q == 1 that is every key.
    out = attention(query, key, value, mode=mode, causal=True, softmax_scale=float(scaling) if scaling else None,
                    layout="bhsd")
    return out.transpose(1, 2)


def _guarded(module, query, key, value, scaling):
    """fp8 under the per-layer QualityGuard (outputs (B, H, S, D) inside, as the guard compares rows)."""
    def fp8(q, k, v):
        return _fp8attn(q, k, v, scaling, "fp8").transpose(1, 2)

    def bf16(q, k, v):
        return _fp8attn(q, k, v, scaling, "bf16").transpose(1, 2)

    # Keyed by the module itself (two models in one process, e.g. draft and target, have separate layers), with
    # the layer index for reading the report.
    key_ = (getattr(module, "layer_idx", None), id(module))
    return _guard.attention(key_, query, key, value, fp8, bf16).transpose(1, 2)


def attention_forward(module, query, key, value, attention_mask, dropout=0.0, scaling=None, softcap=None,
                      sliding_window=None, is_causal=None, **kwargs):
    """The function transformers calls (see the module docstring): returns (out (B, S_q, H_q, D), None)."""
    causal = is_causal if is_causal is not None else getattr(module, "is_causal", True)
    why = _unsupported(module, query, key, value, attention_mask, dropout, softcap, sliding_window, causal, kwargs)
    if why is None and query.shape[2] > key.shape[2]:
        why = "more query rows than keys"  # not produced by a causal LM; SDPA defines it
    if why is not None:
        _fall_back(why)
        out = _sdpa(query, key, value, attention_mask, dropout if getattr(module, "training", False) else 0.0,
                    scaling, causal)
    elif _mode == "fp8_guarded":
        out = _guarded(module, query, key, value, scaling)
    else:
        out = _fp8attn(query, key, value, scaling, _mode)
    return out.to(query.dtype), None
