// The profilers of each operation kind, and what they share.

#include "operation_profiler.h"

#include <cuda_runtime.h>

#include "fmha_fwd_profiler.h"
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
