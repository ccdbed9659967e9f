#pragma once
// Profiling of attention forward: per problem, the candidate kernels (the heuristic's pick and the compiled
// instances), each verified against the references (globally and row by row) and timed.

#include <string>
#include <vector>

#include "fp8attn/fmha/device/fmha_fwd.h"
#include "fp8attn/status.h"
#include "operation_profiler.h"

namespace fp8attn::profiler {

class ProblemTensors;

class FmhaFwdProfiler : public OperationProfiler {
 public:
  using OperationProfiler::OperationProfiler;

  library::OperationKind kind() const override { return library::OperationKind::kFmhaFwd; }
  char const* name() const override { return "fmha_fwd"; }
  /// The attention instances of this build (library::fmha_operations()).
  std::vector<std::string> operation_names() const override;
  /// The problems of the axes or the suite. With --inject-fault=zero-tile every problem needs seqlen_q > 128.
  std::vector<ProblemSpec> problems() const override;
  /// Adds one row per candidate of `spec` to the report.
  bool profile(ProblemSpec const& spec, StreamHandle stream, Report* report) override;

 private:
  /// The verification a problem gets, computed once and shared by its candidates.
  struct References {
    bool device = false;  ///< o_ref holds the device reference
    bool host = false;    ///< host_o holds the host reference
    std::vector<double> host_o;
    std::string notes;  ///< why a reference is missing, when it is
    Status status;      ///< an error computing a reference
  };

  std::vector<Candidate> candidates(ProblemSpec const& spec, fmha::device::FmhaFwd::Arguments const& args) const;
  References compute_references(ProblemSpec const& spec, ProblemTensors& tensors, StreamHandle stream) const;
  Row run_candidate(ProblemSpec const& spec, Candidate const& candidate, ProblemTensors& tensors,
                    References const& refs, StreamHandle stream) const;
  /// Fills `row` with the verification verdict for the output currently in tensors.o().
  void verify(ProblemSpec const& spec, ProblemTensors& tensors, References const& refs, StreamHandle stream,
              Row* row) const;
};

}  // namespace fp8attn::profiler
