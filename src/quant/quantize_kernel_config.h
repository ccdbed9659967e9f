#pragma once
// The configuration record of a quantize instance (codegen/operations/quantize.py: cpp_config).

#include "fp8attn/types.h"

namespace fp8attn::quant::detail {

enum class QuantizeStage { kApply, kStats, kReduce, kRotation };

struct QuantizeKernelConfig {
  QuantizeStage stage;
  DataType in_type;   ///< bf16 / f16 (f32 for reduce; the matrix's type for rotation)
  DataType out_type;  ///< e4m3 / i8 for apply
  int block_s;        ///< tokens per program (0 for reduce and rotation)
  int head_dim;       ///< 0 for reduce and rotation
  int warps;
  bool key_permuted;  ///< apply writes V^T in the vkperm key order
  int reduce_width;   ///< the reduce stage's widest row (its WIDTH constexpr)
  int programs_per_sm;  ///< apply: a PERSISTENT instance's grid, this many programs an SM (0: one per block)
};

}  // namespace fp8attn::quant::detail
