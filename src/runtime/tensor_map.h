#pragma once
// Host TMA descriptors (CUtensorMap) for kernels that take `tensordesc` parameters: encoded on the host with
// cuTensorMapEncodeTiled (looked up through the driver like every other entry point) the way the compiled
// kernel expects them (its TensorDescMeta: swizzle, element type, box), and passed by value followed by the
// shape and strides Triton 3.6 expands a descriptor into.

#include <cuda.h>

#include <cstdint>

#include "cuda_driver.h"
#include "kernel_instance.h"
#include "param_pack.h"

namespace fp8attn::runtime {

/// Encodes a descriptor over `address` with `shape` and `strides` (elements; Triton's outermost-first order;
/// the last stride must be 1) as `meta` says. Fails with a message naming the field on a view TMA cannot
/// describe (address not 16-byte aligned, strides not multiples of 16 bytes or beyond 2^40 bytes).
Status encode_tensor_map(detail::CudaDriver const& driver, detail::TensorDescMeta const& meta, void const* address,
                         int64_t const* shape, int64_t const* strides, CUtensorMap* map);

/// The same, filling a whole descriptor parameter (map, then shape and strides as the kernel receives them).
template <int Rank>
Status make_tensor_map_param(detail::CudaDriver const& driver, detail::TensorDescMeta const& meta, void const* address,
                             int64_t const (&shape)[Rank], int64_t const (&strides)[Rank], TensorMapParam<Rank>* param) {
  if (meta.rank != Rank) return Status(StatusCode::kErrorInternal, "tensor map rank differs from the kernel's");
  if (Status s = encode_tensor_map(driver, meta, address, shape, strides, &param->map); !s) return s;
  for (int i = 0; i < Rank; ++i) {
    param->shape[i] = static_cast<int32_t>(shape[i]);
    param->strides[i] = strides[i];
  }
  return Status::success();
}

}  // namespace fp8attn::runtime
