// compare_device: error statistics of the library's output against the float32 device reference.
//
// Each block reduces its share of the tensor to one partial; the host sums the partials in block order, so
// the result does not depend on scheduling (no floating-point atomics).

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "element_io.cuh"
#include "reference/fmha_reference.h"
#include "strided_index.cuh"

namespace fp8attn::reference {
namespace {

using detail::to_float;

constexpr int kThreads = 256;

struct Partial {
  double err2;  // sum of (o - ref)^2 over finite o
  double ref2;  // sum of ref^2 over all elements
  double max_abs;
  unsigned long long nonfinite;
};

template <typename T>
__device__ __forceinline__ T warp_reduce_sum(T x) {
  for (int offset = 16; offset > 0; offset /= 2) x += __shfl_xor_sync(0xffffffffu, x, offset);
  return x;
}

__device__ __forceinline__ double warp_reduce_max(double x) {
  for (int offset = 16; offset > 0; offset /= 2) x = fmax(x, __shfl_xor_sync(0xffffffffu, x, offset));
  return x;
}

template <typename T>
__global__ void __launch_bounds__(kThreads) compare_kernel(fmha::TensorRef o, float const* ref, int64_t count,
                                                           int64_t S, int64_t H, int64_t D, Partial* partials) {
  T const* out = static_cast<T const*>(o.ptr);
  double err2 = 0.0, ref2 = 0.0, max_abs = 0.0;
  unsigned long long nonfinite = 0;
  int64_t const stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride) {
    double const x = to_float(out[detail::offset_of(o, detail::unpack_bshd(i, S, H, D))]);
    double const r = ref[i];
    ref2 += r * r;
    if (!isfinite(x)) {
      ++nonfinite;
      continue;
    }
    double const e = x - r;
    err2 += e * e;
    max_abs = fmax(max_abs, fabs(e));
  }

  __shared__ Partial warp_partials[kThreads / 32];
  int const warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  err2 = warp_reduce_sum(err2);
  ref2 = warp_reduce_sum(ref2);
  max_abs = warp_reduce_max(max_abs);
  nonfinite = warp_reduce_sum(nonfinite);
  if (lane == 0) warp_partials[warp] = Partial{err2, ref2, max_abs, nonfinite};
  __syncthreads();
  if (threadIdx.x == 0) {
    Partial total = warp_partials[0];
    for (int w = 1; w < kThreads / 32; ++w) {
      total.err2 += warp_partials[w].err2;
      total.ref2 += warp_partials[w].ref2;
      total.max_abs = fmax(total.max_abs, warp_partials[w].max_abs);
      total.nonfinite += warp_partials[w].nonfinite;
    }
    partials[blockIdx.x] = total;
  }
}

}  // namespace

Status compare_device(fmha::device::FmhaFwd::Arguments const& args, float const* o_ref, ErrorStats* stats,
                      StreamHandle stream) {
  if (stats == nullptr) return Status(StatusCode::kErrorNullPointer, "stats is null");
  fmha::FmhaProblem const& p = args.problem;
  int64_t const count = static_cast<int64_t>(p.batch) * p.seqlen_q * p.heads_q * p.head_dim;
  if (p.batch < 0 || p.seqlen_q < 0 || p.heads_q < 0 || p.head_dim < 0) {
    return Status(StatusCode::kErrorInvalidProblem,
                  "problem shape has a negative extent (batch=" + std::to_string(p.batch) +
                      ", seqlen_q=" + std::to_string(p.seqlen_q) + ", heads_q=" + std::to_string(p.heads_q) +
                      ", head_dim=" + std::to_string(p.head_dim) + ")");
  }
  *stats = ErrorStats{};
  if (count == 0) return Status::success();
  if (args.o.ptr == nullptr) return Status(StatusCode::kErrorNullPointer, "o.ptr is null");
  if (o_ref == nullptr) return Status(StatusCode::kErrorNullPointer, "o_ref is null");

  cudaStream_t const s = detail::to_cuda(stream);
  unsigned const blocks = detail::grid_for(count, kThreads);
  Partial* partials = nullptr;
  if (Status st = detail::cuda_status(cudaMallocAsync(&partials, blocks * sizeof(Partial), s),
                                      "cudaMallocAsync (compare_device)");
      !st) {
    return st;
  }
  Status launched = detail::dispatch_type(p.output_type, "output_type", [&](auto tag) {
    using T = typename decltype(tag)::type;
    compare_kernel<T><<<blocks, kThreads, 0, s>>>(args.o, o_ref, count, p.seqlen_q, p.heads_q, p.head_dim, partials);
    return detail::cuda_status(cudaGetLastError(), "compare_device launch");
  });
  std::vector<Partial> host(blocks);
  Status copied = launched;
  if (launched) {
    copied =
        detail::cuda_status(cudaMemcpyAsync(host.data(), partials, blocks * sizeof(Partial), cudaMemcpyDeviceToHost, s),
                            "cudaMemcpyAsync (compare_device)");
  }
  cudaFreeAsync(partials, s);
  if (Status st = detail::cuda_status(cudaStreamSynchronize(s), "cudaStreamSynchronize (compare_device)"); !st) {
    return st;
  }
  if (!copied) return copied;

  double err2 = 0.0, ref2 = 0.0;
  for (Partial const& part : host) {
    err2 += part.err2;
    ref2 += part.ref2;
    stats->max_abs = std::fmax(stats->max_abs, part.max_abs);
    stats->nonfinite += static_cast<int64_t>(part.nonfinite);
  }
  stats->count = count;
  stats->rel_l2 = ref2 > 0.0 ? std::sqrt(err2 / ref2) : (err2 > 0.0 ? INFINITY : 0.0);
  return Status::success();
}

}  // namespace fp8attn::reference
