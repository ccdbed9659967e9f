#pragma once
// Profiling of the quantize operation (quant::device::Quantize): each accuracy mode's recipe for the K operand
// of every attention problem (and V^T in the vkperm order), verified against a float64 host reference (values
// and descales), timed, GB/s of bf16 read + quantized bytes written.

#include <string>
#include <vector>

#include "fp8attn/quant/device/quantize.h"
#include "operation_profiler.h"

namespace fp8attn::profiler {

class QuantizeProfiler : public OperationProfiler {
 public:
  using OperationProfiler::OperationProfiler;

  library::OperationKind kind() const override { return library::OperationKind::kQuantize; }
  char const* name() const override { return "quantize"; }
  /// The K operand of each attention problem: [batch, seqlen_k, heads_kv, head_dim] in bf16, duplicates dropped
  /// (ProblemSpec form: heads_q = heads_kv, seqlen_q = seqlen_k, dtype bf16).
  std::vector<ProblemSpec> problems() const override;
  /// One row per recipe (fp8, fp8_per_head, fp8_smooth_rotate's K, int8_qk's K, V^T for vkperm).
  bool profile(ProblemSpec const& spec, StreamHandle stream, Report* report) override;
};

}  // namespace fp8attn::profiler
