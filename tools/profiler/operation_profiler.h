#pragma once
// Per-operation profilers, as cutlass_profiler's OperationProfiler: one class per operation kind, which takes its
// problems from the options, finds its candidates among the compiled operations, verifies and times each one.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "fp8attn/library/operation.h"
#include "fp8attn/status.h"
#include "fp8attn/types.h"
#include "options.h"
#include "problem_space.h"
#include "report.h"

namespace fp8attn::profiler {

class OperationProfiler {
 public:
  explicit OperationProfiler(Options const& options) : options_(options) {}
  virtual ~OperationProfiler() = default;
  OperationProfiler(OperationProfiler const&) = delete;
  OperationProfiler& operator=(OperationProfiler const&) = delete;

  /// The kind of operation this profiler measures.
  virtual library::OperationKind kind() const = 0;
  /// Its name: the --operation value and the kind column ("fmha_fwd", "transpose_v").
  virtual char const* name() const = 0;
  /// The names of the compiled operations of this kind in this build (what --kernels filters).
  virtual std::vector<std::string> operation_names() const;
  /// The problems this profiler takes from the options (the axes or the suite). Throws UsageError, naming the
  /// flag, when an option cannot apply to one of them. Allocates nothing on the device.
  virtual std::vector<ProblemSpec> problems() const = 0;
  /// Profiles one problem: one row per candidate, each added to `report` as soon as it is measured, so that a
  /// crash keeps what was measured. Returns false when the GPU is no longer usable (a sticky CUDA error), after
  /// which nothing more can be measured in this process.
  virtual bool profile(ProblemSpec const& problem, StreamHandle stream, Report* report) = 0;

 protected:
  /// One kernel to profile for a problem, and whether it can run it.
  struct Candidate {
    std::string provider;
    std::string kernel_name;  ///< forced name; empty: the handle's own choice (the heuristic)
    std::string operation;    ///< name shown in the row
    Status implementable;
  };

  /// A candidate's row before it runs: kind, problem, provider and operation filled in; disposition
  /// "not_supported" (with the reason) when the candidate cannot run the problem.
  Row first_row(ProblemSpec const& spec, Candidate const& candidate) const;
  /// `row` marked failed: "<what>: <status>".
  static Row failed(Row row, std::string const& what, Status const& status);
  /// The row of a problem that failed before any candidate ran (allocation, inputs).
  Row problem_failed(ProblemSpec const& spec, std::string const& notes) const;
  /// The K/V operand [batch, seqlen_k, heads_kv, head_dim] of each attention problem of the options, in
  /// ProblemSpec form (heads_q = heads_kv, seqlen_q = seqlen_k, not causal), duplicates dropped; `keep` filters
  /// the attention problems by input type, `as_type` (if set) replaces it.
  std::vector<ProblemSpec> kv_operand_problems(bool (*keep)(DataType), std::optional<DataType> as_type) const;

  Options const& options_;
};

/// The profilers --operation selects: fmha_fwd, transpose_v, quantize, paged, or all of them, in that order.
std::vector<std::unique_ptr<OperationProfiler>> make_profilers(Options const& options);

/// A kErrorCudaDriver status "<what> failed: <name> (<text>)" for a CUDA runtime error.
Status cuda_error(int err, std::string const& what);

/// The float value of bfloat16 bits.
float bf16_to_float(uint16_t bits);

/// Waits for `stream`; on a CUDA error the message names `what`.
Status sync_stream(StreamHandle stream, char const* what);

/// Clears a CUDA error that is not sticky; false when the context is broken for good.
bool device_usable();

}  // namespace fp8attn::profiler
