"""Logit soft-capping (Gemma 2): scores s become cap * tanh(s / cap). Shared by the prefill and decode kernels."""

import triton
import triton.language as tl

from common import numerics

_LOG2E = tl.constexpr(numerics.LOG2E)


@triton.jit
def softcap(s, cap):
    """cap * tanh(s / cap), with tanh(x) = sign(x) (1 - e^-2|x|) / (1 + e^-2|x|) (exact at 0, no overflow)."""
    x = s / cap
    e = tl.math.exp2(-2.0 * _LOG2E * tl.abs(x))
    t = (1.0 - e) / (1.0 + e)
    return cap * tl.where(x < 0, -t, t)
