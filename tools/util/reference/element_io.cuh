#pragma once
// Element conversions and type dispatch shared by the device reference, the generators and the comparisons.
// Private to tools/util/reference.

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <string>
#include <utility>

#include "fp8attn/status.h"
#include "fp8attn/types.h"

namespace fp8attn::reference::detail {

__device__ __forceinline__ float to_float(__nv_fp8_e4m3 x) { return static_cast<float>(x); }
__device__ __forceinline__ float to_float(__nv_fp8_e5m2 x) { return static_cast<float>(x); }
__device__ __forceinline__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float to_float(__half x) { return __half2float(x); }
__device__ __forceinline__ float to_float(float x) { return x; }

// The fp8 constructors round to nearest and saturate to the largest finite value (__NV_SATFINITE).
template <typename T>
__device__ __forceinline__ T from_float(float x);
template <>
__device__ __forceinline__ __nv_fp8_e4m3 from_float<__nv_fp8_e4m3>(float x) {
  return __nv_fp8_e4m3(x);
}
template <>
__device__ __forceinline__ __nv_fp8_e5m2 from_float<__nv_fp8_e5m2>(float x) {
  return __nv_fp8_e5m2(x);
}
template <>
__device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}
template <>
__device__ __forceinline__ __half from_float<__half>(float x) {
  return __float2half_rn(x);
}
template <>
__device__ __forceinline__ float from_float<float>(float x) {
  return x;
}

/// A device descale: ptr[b * stride_b + h_kv * stride_h], or 1.0 when ptr is null.
__device__ __forceinline__ float load_descale(float const* ptr, int64_t stride_b, int64_t stride_h, int64_t b,
                                              int64_t h_kv) {
  return ptr == nullptr ? 1.0f : ptr[b * stride_b + h_kv * stride_h];
}

template <typename T>
struct TypeTag {
  using type = T;
};

/// Calls f(TypeTag<T>{}) with the C++ type of `type`; an error naming `what` when `type` is not one of them.
template <typename F>
Status dispatch_type(DataType type, char const* what, F&& f) {
  switch (type) {
    case DataType::kE4M3:
      return f(TypeTag<__nv_fp8_e4m3>{});
    case DataType::kE5M2:
      return f(TypeTag<__nv_fp8_e5m2>{});
    case DataType::kBF16:
      return f(TypeTag<__nv_bfloat16>{});
    case DataType::kF16:
      return f(TypeTag<__half>{});
    case DataType::kF32:
      return f(TypeTag<float>{});
    case DataType::kI8:
      break;  // the reference reads and writes floating-point elements only
  }
  return Status(StatusCode::kErrorInvalidProblem,
                std::string(what) + "=" + std::to_string(static_cast<int>(type)) + " is not a known data type");
}

/// Bytes per element; the reference keeps its own table so it does not link the library it checks.
inline int element_bytes(DataType type) {
  switch (type) {
    case DataType::kE4M3:
    case DataType::kE5M2:
    case DataType::kI8:
      return 1;
    case DataType::kBF16:
    case DataType::kF16:
      return 2;
    case DataType::kF32:
      return 4;
  }
  return 0;
}

/// Short name of a data type, as on the command line ("e4m3", ...).
inline char const* type_name(DataType type) {
  switch (type) {
    case DataType::kE4M3:
      return "e4m3";
    case DataType::kE5M2:
      return "e5m2";
    case DataType::kBF16:
      return "bf16";
    case DataType::kF16:
      return "f16";
    case DataType::kF32:
      return "f32";
    case DataType::kI8:
      return "i8";
  }
  return "unknown";
}

/// Success, or a kErrorCudaDriver status naming the call that failed and the CUDA error.
inline Status cuda_status(cudaError_t err, char const* what) {
  if (err == cudaSuccess) return Status::success();
  return Status(StatusCode::kErrorCudaDriver,
                std::string(what) + " failed: " + cudaGetErrorName(err) + " (" + cudaGetErrorString(err) + ")");
}

// StreamHandle and cudaStream_t are both `CUstream_st*`; this only documents the crossing.
inline cudaStream_t to_cuda(StreamHandle stream) { return stream; }

/// Grid size for grid-stride loops: enough blocks to fill the GPU, never more than needed.
inline unsigned grid_for(int64_t count, int threads) {
  int64_t const blocks = (count + threads - 1) / threads;
  return static_cast<unsigned>(blocks < 8192 ? (blocks > 0 ? blocks : 1) : 8192);
}

}  // namespace fp8attn::reference::detail
