#pragma once
// The configuration record of a V-transpose instance (codegen/operations/transpose_v.py: cpp_config).

namespace fp8attn::fmha::detail {

struct TransposeVKernelConfig {
  int block_s;   ///< sequence rows per CTA
  int head_dim;
  int warps;
  bool tma;      ///< host TMA descriptors (TransposeVTmaTritonParams) instead of pointers
};

}  // namespace fp8attn::fmha::detail
