#pragma once
// The smoothing mean's sample (QuantizeArguments::smooth_sample_stride): which tokens it holds, as a count. Internal;
// tests/cpu/test_quantize_arguments.cpp checks it against counting the tokens one by one.

#include <algorithm>
#include <cstdint>

#include "fp8attn/quant/device/quantize.h"

namespace fp8attn::quant::detail {

/// Tokens of a sequence of seqlen > 0 tokens in its sampled blocks 0, n, 2n, ... of kQuantizeBlockTokens (n =
/// stride >= 1): the divisor of the mean. Every sampled block that starts inside the sequence is full but the last,
/// which holds what is left (blocks past seqlen, V^T's padding, hold zeros and count nothing).
inline int64_t sampled_tokens(int64_t seqlen, int64_t stride) {
  int64_t const span = stride * kQuantizeBlockTokens;
  int64_t const starting_inside = (seqlen - 1) / span + 1;  // sampled blocks that start before seqlen
  return (starting_inside - 1) * kQuantizeBlockTokens +
         std::min<int64_t>(kQuantizeBlockTokens, seqlen - (starting_inside - 1) * span);
}

}  // namespace fp8attn::quant::detail
