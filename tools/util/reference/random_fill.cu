// Input generators: deterministic N(0,1)-like values, and NaN poisoning of outputs.

#include <cmath>
#include <cstdint>

#include "element_io.cuh"
#include "reference/fmha_reference.h"

namespace fp8attn::reference {
namespace {

using detail::from_float;

// SplitMix64 finalizer: a counter-based hash, so element i gets the same value whatever the launch shape.
__device__ __forceinline__ uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// One Box-Muller draw from two 24-bit uniforms of one hash: u1 in (0, 1] keeps log() finite, so |x| <= ~5.8.
__device__ __forceinline__ float normal_at(uint64_t seed, int64_t index) {
  uint64_t const h = mix64(mix64(seed) ^ static_cast<uint64_t>(index));
  float const u1 = (static_cast<float>(h >> 40) + 1.0f) * 0x1.0p-24f;
  float const u2 = static_cast<float>(h & 0xffffffull) * 0x1.0p-24f;
  return sqrtf(-2.0f * logf(u1)) * cospif(2.0f * u2);
}

template <typename T>
__global__ void fill_random_kernel(T* out, int64_t count, uint64_t seed, float scale, float clip) {
  int64_t const stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride) {
    float const x = normal_at(seed, i) * scale;
    out[i] = from_float<T>(fminf(fmaxf(x, -clip), clip));
  }
}

}  // namespace

Status fill_random(void* ptr, DataType type, int64_t count, uint64_t seed, StreamHandle stream) {
  if (count < 0) return Status(StatusCode::kErrorInvalidProblem, "count=" + std::to_string(count) + " must be >= 0");
  if (count == 0) return Status::success();
  if (ptr == nullptr) return Status(StatusCode::kErrorNullPointer, "ptr is null (count=" + std::to_string(count) + ")");

  // e4m3 spreads N(0,1) over its range (448 / 6 maps the largest draws to the largest finite value 448) so a
  // per-tensor descale of 6/448 recovers unit variance. Other types take x as is (their own range suffices).
  float scale = 1.0f, clip = INFINITY;
  if (type == DataType::kE4M3) {
    scale = kE4M3FillScale;
    clip = 448.0f;
  } else if (type == DataType::kE5M2) {
    clip = 57344.0f;
  }
  constexpr int kThreads = 256;
  unsigned const blocks = detail::grid_for(count, kThreads);
  return detail::dispatch_type(type, "type", [&](auto tag) {
    using T = typename decltype(tag)::type;
    fill_random_kernel<T>
        <<<blocks, kThreads, 0, detail::to_cuda(stream)>>>(static_cast<T*>(ptr), count, seed, scale, clip);
    return detail::cuda_status(cudaGetLastError(), "fill_random launch");
  });
}

Status fill_nan(void* ptr, DataType type, int64_t count, StreamHandle stream) {
  if (count < 0) return Status(StatusCode::kErrorInvalidProblem, "count=" + std::to_string(count) + " must be >= 0");
  if (count == 0) return Status::success();
  if (ptr == nullptr) return Status(StatusCode::kErrorNullPointer, "ptr is null (count=" + std::to_string(count) + ")");
  int const bytes = detail::element_bytes(type);
  if (bytes == 0) {
    return Status(StatusCode::kErrorInvalidProblem,
                  "type=" + std::to_string(static_cast<int>(type)) + " is not a known data type");
  }
  // All-ones bits are a NaN in every type we use (f32, bf16, f16, e4m3 S.1111.111, e5m2 S.11111.11), so a
  // byte memset poisons any of them.
  return detail::cuda_status(cudaMemsetAsync(ptr, 0xff, static_cast<size_t>(count) * bytes, detail::to_cuda(stream)),
                             "cudaMemsetAsync (fill_nan)");
}

}  // namespace fp8attn::reference
