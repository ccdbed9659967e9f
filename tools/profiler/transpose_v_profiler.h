#pragma once
// Profiling of the V transpose (V [b, s, h, d] -> V^T [b, h, d, s_pad], the FP8 attention kernels' P.V operand)
// through its public handle fmha::device::TransposeV: byte-exact verification against a host copy, GB/s.

#include <cstdint>
#include <string>
#include <vector>

#include "fp8attn/fmha/device/transpose_v.h"
#include "fp8attn/status.h"
#include "operation_profiler.h"

namespace fp8attn::profiler {

class TransposeVProfiler : public OperationProfiler {
 public:
  using OperationProfiler::OperationProfiler;

  library::OperationKind kind() const override { return library::OperationKind::kTransposeV; }
  char const* name() const override { return "transpose_v"; }
  /// The V operand of each attention problem of the options: batch, seqlen_k, heads_kv and head_dim, in
  /// ProblemSpec form (heads_q = heads_kv, seqlen_q = seqlen_k, not causal); duplicates dropped, and one-byte
  /// input types only (the transpose moves bytes; bf16 V is read by the kernels as it is).
  std::vector<ProblemSpec> problems() const override;
  /// Adds one row per candidate of `spec` to the report.
  bool profile(ProblemSpec const& spec, StreamHandle stream, Report* report) override;

 private:
  std::vector<Candidate> candidates(fmha::TransposeVArguments const& args) const;
  /// Runs, verifies (against `expected`, the host copy of V^T; empty: not verified) and times one candidate.
  Row run_candidate(ProblemSpec const& spec, Candidate const& candidate, fmha::TransposeVArguments args,
                    std::vector<uint8_t> const& expected, size_t vt_bytes, StreamHandle stream) const;
};

}  // namespace fp8attn::profiler
