#pragma once
// Profiling of attention forward: per problem, the candidate kernels (the heuristic's pick and the compiled
// instances), each verified against the references and timed.

#include <string>
#include <vector>

#include "fp8attn/fmha/device/fmha_fwd.h"
#include "fp8attn/status.h"
#include "options.h"
#include "problem_space.h"
#include "report.h"

namespace fp8attn::profiler {

class ProblemTensors;

class FmhaProfiler {
 public:
  FmhaProfiler(Options const& options, Report* report, StreamHandle stream)
      : options_(options), report_(report), stream_(stream) {}

  /// Adds one row per candidate of `spec` to the report. Returns false when the GPU is no longer usable
  /// (a sticky CUDA error), after which nothing more can be measured in this process.
  bool profile(ProblemSpec const& spec);

 private:
  /// One kernel to profile for a problem, and whether it can run it.
  struct Candidate {
    std::string provider;
    std::string kernel_name;  ///< forced name; empty for the heuristic
    std::string operation;    ///< name shown in the row
    Status implementable;
  };

  /// The verification a problem gets, computed once and shared by its candidates.
  struct References {
    bool device = false;  ///< o_ref holds the device reference
    bool host = false;    ///< host_o holds the host reference
    std::vector<double> host_o;
    std::string notes;  ///< why a reference is missing, when it is
    Status status;      ///< an error computing a reference
  };

  std::vector<Candidate> candidates(ProblemSpec const& spec, fmha::device::FmhaFwd::Arguments const& args) const;
  References compute_references(ProblemSpec const& spec, ProblemTensors& tensors) const;
  Row run_candidate(ProblemSpec const& spec, Candidate const& candidate, ProblemTensors& tensors,
                    References const& refs) const;
  /// Fills `row` with the verification verdict for the output currently in tensors.o().
  void verify(ProblemSpec const& spec, ProblemTensors& tensors, References const& refs, Row* row) const;
  /// Clears a non-sticky CUDA error; false when the context is broken for good.
  bool device_usable() const;

  Options const& options_;
  Report* report_;
  StreamHandle stream_;
};

}  // namespace fp8attn::profiler
