#pragma once
// The problems to profile: the cartesian product of the command line's axes, or a named suite.

#include <cstdint>
#include <string>
#include <vector>

#include "fp8attn/fmha/device/fmha_fwd.h"
#include "fp8attn/types.h"
#include "options.h"

namespace fp8attn::profiler {

/// One attention problem: shape, inputs' type and the memory layout of Q, K, V and O.
struct ProblemSpec {
  int batch = 0;
  int heads_q = 0;
  int heads_kv = 0;
  int seqlen_q = 0;
  int seqlen_k = 0;
  int head_dim = 0;
  bool causal = false;
  DataType dtype = DataType::kE4M3;
  Layout layout = Layout::kBSHD;

  /// The library's problem description (output bf16).
  fmha::FmhaProblem problem() const;
  /// B * H_q * S_q * S_k * D: the work of the reference, used to decide whether the host can afford it.
  int64_t reference_work() const;
};

/// The problems the options ask for, in command-line order (the last axis varies fastest). Combinations with
/// heads_q not a multiple of heads_kv are skipped with a note on stderr.
std::vector<ProblemSpec> enumerate_problems(Options const& options);

/// The standard prefill suite (docs/CONVENTIONS.md, "The standard suite"), for each of `dtypes` and `layouts`.
std::vector<ProblemSpec> standard_suite(std::vector<DataType> const& dtypes, std::vector<Layout> const& layouts);

}  // namespace fp8attn::profiler
