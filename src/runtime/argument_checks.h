#pragma once
// Argument checks the operation handles share; each message names the argument and its value.

#include <cstdint>

#include "fp8attn/fmha/device/fmha_fwd.h"
#include "fp8attn/status.h"

namespace fp8attn::detail {

/// `ptr` aligned to `alignment` bytes ("<field>=0x... is not N-byte aligned"); null is refused ("<field> is
/// null") unless allow_null.
Status check_aligned(char const* field, void const* ptr, uintptr_t alignment, bool allow_null = false);

/// A [b, s, h, d] operand's strides: head_dim contiguous, the others non-negative multiples of 16 elements (what
/// the kernels' 16-byte vector loads and their compile-time divisibility hints assume).
Status check_strides(char const* name, fmha::TensorRef const& t);

}  // namespace fp8attn::detail
