#pragma once
// The configuration record of a V-transpose instance (codegen/operations/transpose_v.py: cpp_config).

namespace fp8attn::fmha::detail {

struct TransposeVKernelConfig {
  int block_s;   ///< sequence rows per CTA
  int head_dim;
  int warps;
  bool tma;      ///< host TMA descriptors (TransposeVTmaTritonParams) instead of pointers
  bool key_permuted;  ///< "kperm": keys permuted within 32-key blocks (TransposeVArguments::key_permuted)
};

}  // namespace fp8attn::fmha::detail
