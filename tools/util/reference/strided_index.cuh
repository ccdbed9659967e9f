#pragma once
// Walking a strided [batch, seqlen, heads, head_dim] operand in packed BSHD order. Private to tools/util/reference.

#include <cstdint>

#include "fp8attn/fmha/device/fmha_fwd.h"

namespace fp8attn::reference::detail {

/// Coordinates of one element of a [B, S, H, D] tensor.
struct Bshd {
  int64_t b, s, h, d;
};

/// The coordinates of packed index `idx` of a [*, S, H, D] tensor.
__device__ __forceinline__ Bshd unpack_bshd(int64_t idx, int64_t S, int64_t H, int64_t D) {
  Bshd c;
  c.d = idx % D;
  idx /= D;
  c.h = idx % H;
  idx /= H;
  c.s = idx % S;
  c.b = idx / S;
  return c;
}

/// Element offset of coordinates `c` in the strided operand `t`.
__device__ __forceinline__ int64_t offset_of(fmha::TensorRef const& t, Bshd const& c) {
  return c.b * t.stride_b + c.s * t.stride_s + c.h * t.stride_h + c.d * t.stride_d;
}

}  // namespace fp8attn::reference::detail
