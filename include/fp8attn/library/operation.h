#pragma once
// The registry of compiled operations, keyed by procedural kernel name (CUTLASS library style).

#include <string>
#include <string_view>
#include <vector>

#include "fp8attn/types.h"

namespace fp8attn::library {

/// What one compiled attention instance implements; every field is also spelled out in its name.
struct FmhaDescription {
  std::string name;
  DataType qk_type;
  DataType v_type;
  DataType acc_type;
  DataType out_type;
  int block_m;
  int block_n;
  int head_dim;
  int warps;             ///< num_warps requested at compile time (the name's w<N>)
  int stages;
  bool causal;
  bool warp_specialized;  ///< schedule "ws"
  bool even_n;            ///< variant "evenn": only for seqlen_k % block_n == 0
  bool v_transposed;      ///< reads V sequence-contiguous (all FP8 instances)
  bool writes_lse;        ///< can return LSE (not the warp-specialized instances: Triton 3.6 loses it)
  int launch_warps;       ///< warps actually launched (warp specialization adds partitions)
  int shared_bytes;       ///< dynamic shared memory per CTA
};

/// Every attention instance compiled into this build, in manifest order.
std::vector<FmhaDescription> const& fmha_operations();
/// The instance with this exact name, or nullptr.
FmhaDescription const* find_fmha_operation(std::string_view name);

/// CUTLASS filter semantics: ',' separates alternatives (OR); inside one alternative '*' splits it into
/// substrings that must all occur in order. An empty filter matches everything.
bool matches_filter(std::string_view name, std::string_view filter);

/// Triton version the cubins were compiled with (e.g. "3.6.0").
char const* triton_version();

}  // namespace fp8attn::library
