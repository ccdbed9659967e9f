#pragma once
// Profiling of decode over the paged FP8 KV cache (paged::device::PagedDecode): for each attention problem's
// shape (batch, heads, seqlen_k as the context, head_dim; q_len = seqlen_q when it is 1..8, else 1), each compiled
// page size, a cache with a shuffled block table; verified against a float64 host reference on sampled rows,
// timed; GB/s counts the K and V bytes the call must read (the effective bandwidth).

#include "fp8attn/paged/device/paged.h"
#include "operation_profiler.h"

namespace fp8attn::profiler {

class PagedProfiler : public OperationProfiler {
 public:
  using OperationProfiler::OperationProfiler;

  library::OperationKind kind() const override { return library::OperationKind::kPaged; }
  char const* name() const override { return "paged"; }
  /// The decode shapes of the options' problems (ProblemSpec: seqlen_k the context, seqlen_q the new tokens).
  std::vector<ProblemSpec> problems() const override;
  /// One row per compiled page size.
  bool profile(ProblemSpec const& spec, StreamHandle stream, Report* report) override;
};

}  // namespace fp8attn::profiler
