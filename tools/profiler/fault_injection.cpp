// Fault injection for the verifier's self-test (--inject-fault).

#include "fault_injection.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <string>

namespace fp8attn::profiler {

Status zero_tile(fmha::TensorRef const& o, DataType type, int seqlen_q, int head_dim, StreamHandle stream) {
  int const rows = std::min(kZeroTileEnd, seqlen_q) - kZeroTileBegin;
  if (rows <= 0) return Status::success();
  if (o.stride_d != 1) {
    return Status(StatusCode::kErrorInvalidProblem,
                  "zero_tile: o.stride_d=" + std::to_string(o.stride_d) + " (head_dim must be contiguous)");
  }
  size_t const bytes = static_cast<size_t>(size_of(type));
  // Row s of (b=0, h=0) starts at s * stride_s elements: a 2-D memset, one line of head_dim elements per row.
  auto* first = static_cast<char*>(const_cast<void*>(o.ptr)) + kZeroTileBegin * o.stride_s * bytes;
  cudaError_t const err = cudaMemset2DAsync(first, static_cast<size_t>(o.stride_s) * bytes, 0,
                                            static_cast<size_t>(head_dim) * bytes, static_cast<size_t>(rows), stream);
  if (err != cudaSuccess) {
    return Status(StatusCode::kErrorCudaDriver, std::string("zero_tile: cudaMemset2DAsync failed: ") +
                                                    cudaGetErrorName(err) + " (" + cudaGetErrorString(err) + ")");
  }
  return Status::success();
}

}  // namespace fp8attn::profiler
