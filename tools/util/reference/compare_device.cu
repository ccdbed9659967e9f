// compare_device: error statistics of the library's output against the float32 device reference, globally and
// row by row (a row: the head_dim elements of one (b, s, h); see ErrorStats).
//
// One warp per row (grid-stride over rows, so each warp visits its rows in increasing order); each block reduces
// its warps to one partial; the host combines the partials in block order, so the result does not depend on
// scheduling (no floating-point atomics). The worst row is the lowest-indexed one on ties, at every level.

#include <cfloat>
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
constexpr int kWarps = kThreads / 32;

struct Partial {
  double err2;  // sum of (o - ref)^2 over finite o
  double ref2;  // sum of ref^2 over all elements
  double max_abs;
  double max_row_rel_l2;  // -1 until a row is seen
  long long max_row;      // -1 until a row is seen
  unsigned long long nonfinite;
};

// The worse of two (row error, row) pairs: the larger error, the lower row on ties; an empty one (-1) loses.
__host__ __device__ __forceinline__ bool worse_row(double rel, long long row, double best_rel, long long best_row) {
  if (row < 0) return false;
  if (best_row < 0) return true;
  return rel > best_rel || (rel == best_rel && row < best_row);
}

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
__global__ void __launch_bounds__(kThreads) compare_kernel(fmha::TensorRef o, float const* ref, int64_t rows,
                                                           int64_t S, int64_t H, int64_t D, Partial* partials) {
  T const* out = static_cast<T const*>(o.ptr);
  int const warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  // Warp-uniform after each row's reduction: every lane holds the same sums.
  double err2 = 0.0, ref2 = 0.0, max_row_rel = -1.0;
  long long max_row = -1;
  double max_abs = 0.0;                 // per lane until the end
  unsigned long long nonfinite = 0;     // warp-uniform
  int64_t const stride = static_cast<int64_t>(gridDim.x) * kWarps;
  for (int64_t row = static_cast<int64_t>(blockIdx.x) * kWarps + warp; row < rows; row += stride) {
    detail::Bshd c = detail::unpack_bshd(row * D, S, H, D);
    double row_err2 = 0.0, row_ref2 = 0.0;
    unsigned long long row_nonfinite = 0;
    for (int64_t d = lane; d < D; d += 32) {
      c.d = d;
      double const x = to_float(out[detail::offset_of(o, c)]);
      double const r = ref[row * D + d];
      row_ref2 += r * r;
      if (!isfinite(x)) {
        ++row_nonfinite;
        continue;
      }
      double const e = x - r;
      row_err2 += e * e;
      max_abs = fmax(max_abs, fabs(e));
    }
    row_err2 = warp_reduce_sum(row_err2);
    row_ref2 = warp_reduce_sum(row_ref2);
    row_nonfinite = warp_reduce_sum(row_nonfinite);
    err2 += row_err2;
    ref2 += row_ref2;
    nonfinite += row_nonfinite;
    double const rel = row_nonfinite > 0 ? INFINITY : sqrt(row_err2) / fmax(sqrt(row_ref2), DBL_MIN);
    if (worse_row(rel, row, max_row_rel, max_row)) {
      max_row_rel = rel;
      max_row = row;
    }
  }
  max_abs = warp_reduce_max(max_abs);

  __shared__ Partial warp_partials[kWarps];
  if (lane == 0) warp_partials[warp] = Partial{err2, ref2, max_abs, max_row_rel, max_row, nonfinite};
  __syncthreads();
  if (threadIdx.x == 0) {
    Partial total = warp_partials[0];
    for (int w = 1; w < kWarps; ++w) {
      Partial const& p = warp_partials[w];
      total.err2 += p.err2;
      total.ref2 += p.ref2;
      total.max_abs = fmax(total.max_abs, p.max_abs);
      total.nonfinite += p.nonfinite;
      if (worse_row(p.max_row_rel_l2, p.max_row, total.max_row_rel_l2, total.max_row)) {
        total.max_row_rel_l2 = p.max_row_rel_l2;
        total.max_row = p.max_row;
      }
    }
    partials[blockIdx.x] = total;
  }
}

}  // namespace

Status compare_device(fmha::device::FmhaFwd::Arguments const& args, float const* o_ref, ErrorStats* stats,
                      StreamHandle stream) {
  if (stats == nullptr) return Status(StatusCode::kErrorNullPointer, "stats is null");
  fmha::FmhaProblem const& p = args.problem;
  int64_t const rows = static_cast<int64_t>(p.batch) * p.seqlen_q * p.heads_q;
  int64_t const count = rows * p.head_dim;
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
  unsigned const blocks = detail::grid_for(rows, kWarps);
  Partial* partials = nullptr;
  if (Status st = detail::cuda_status(cudaMallocAsync(&partials, blocks * sizeof(Partial), s),
                                      "cudaMallocAsync (compare_device)");
      !st) {
    return st;
  }
  Status launched = detail::dispatch_type(p.output_type, "output_type", [&](auto tag) {
    using T = typename decltype(tag)::type;
    compare_kernel<T><<<blocks, kThreads, 0, s>>>(args.o, o_ref, rows, p.seqlen_q, p.heads_q, p.head_dim, partials);
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

  double err2 = 0.0, ref2 = 0.0, max_row_rel = -1.0;
  long long max_row = -1;
  for (Partial const& part : host) {
    err2 += part.err2;
    ref2 += part.ref2;
    stats->max_abs = std::fmax(stats->max_abs, part.max_abs);
    stats->nonfinite += static_cast<int64_t>(part.nonfinite);
    if (worse_row(part.max_row_rel_l2, part.max_row, max_row_rel, max_row)) {
      max_row_rel = part.max_row_rel_l2;
      max_row = part.max_row;
    }
  }
  stats->count = count;
  stats->rows = rows;
  stats->rel_l2 = ref2 > 0.0 ? std::sqrt(err2 / ref2) : (err2 > 0.0 ? INFINITY : 0.0);
  stats->max_row = max_row;
  stats->max_row_rel_l2 = max_row < 0 ? 0.0 : max_row_rel;
  return Status::success();
}

}  // namespace fp8attn::reference
