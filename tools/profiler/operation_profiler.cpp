// The profilers of each operation kind, and what they share.

#include "operation_profiler.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>

#include "fmha_fwd_profiler.h"
#include "paged_profiler.h"
#include "quantize_profiler.h"
#include "transpose_v_profiler.h"

namespace fp8attn::profiler {

std::vector<std::unique_ptr<OperationProfiler>> make_profilers(Options const& options) {
  std::vector<std::unique_ptr<OperationProfiler>> out;
  if (options.operation == "fmha_fwd" || options.operation == "all") {
    out.push_back(std::make_unique<FmhaFwdProfiler>(options));
  }
  if (options.operation == "transpose_v" || options.operation == "all") {
    out.push_back(std::make_unique<TransposeVProfiler>(options));
  }
  if (options.operation == "quantize" || options.operation == "all") {
    out.push_back(std::make_unique<QuantizeProfiler>(options));
  }
  if (options.operation == "paged" || options.operation == "all") {
    out.push_back(std::make_unique<PagedProfiler>(options));
  }
  return out;
}

Status cuda_error(int err, std::string const& what) {
  auto const e = static_cast<cudaError_t>(err);
  return Status(StatusCode::kErrorCudaDriver,
                what + " failed: " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")");
}

float bf16_to_float(uint16_t bits) {
  uint32_t const u = uint32_t{bits} << 16;
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

std::vector<std::string> OperationProfiler::operation_names() const {
  std::vector<std::string> names;
  for (library::Operation const* op : library::operations(kind())) names.push_back(op->description().name);
  return names;
}

Row OperationProfiler::problem_failed(ProblemSpec const& spec, std::string const& notes) const {
  Row row;
  row.operation_kind = name();
  row.problem = spec;
  row.provider = "-";
  row.operation = "-";
  row.disposition = "failed";
  row.notes = notes;
  return row;
}

std::vector<ProblemSpec> OperationProfiler::kv_operand_problems(bool (*keep)(DataType),
                                                                std::optional<DataType> as_type) const {
  std::vector<ProblemSpec> out;
  // The attention problems' notes (skipped head pairs) are printed once, by the fmha_fwd profiler.
  for (ProblemSpec const& p : enumerate_problems(options_, options_.operation == "all" ? nullptr : stderr)) {
    if (!keep(p.dtype)) continue;
    ProblemSpec const v{p.batch, p.heads_kv, p.heads_kv, p.seqlen_k, p.seqlen_k, p.head_dim, false,
                        as_type.value_or(p.dtype), p.layout};
    bool const seen = std::any_of(out.begin(), out.end(), [&v](ProblemSpec const& o) {
      return o.batch == v.batch && o.heads_kv == v.heads_kv && o.seqlen_k == v.seqlen_k && o.head_dim == v.head_dim &&
             o.dtype == v.dtype && o.layout == v.layout;
    });
    if (!seen) out.push_back(v);
  }
  return out;
}

Row OperationProfiler::first_row(ProblemSpec const& spec, Candidate const& candidate) const {
  Row row;
  row.operation_kind = name();
  row.problem = spec;
  row.provider = candidate.provider;
  row.operation = candidate.operation;
  if (!candidate.implementable) {
    row.disposition = "not_supported";
    row.notes = candidate.implementable.message();
  }
  return row;
}

Row OperationProfiler::failed(Row row, std::string const& what, Status const& status) {
  row.disposition = "failed";
  row.notes = what + ": " + status.to_string();
  return row;
}

Status sync_stream(StreamHandle stream, char const* what) {
  cudaError_t const err = cudaStreamSynchronize(stream);
  if (err == cudaSuccess) return Status::success();
  return Status(StatusCode::kErrorCudaDriver,
                std::string(what) + ": " + cudaGetErrorName(err) + " (" + cudaGetErrorString(err) + ")");
}

bool device_usable() {
  cudaGetLastError();  // clears an error that is not sticky
  return cudaDeviceSynchronize() == cudaSuccess;
}

}  // namespace fp8attn::profiler
