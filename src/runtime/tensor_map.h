#pragma once
// Host TMA descriptors (CUtensorMap) for kernels that take `tensordesc` parameters: encoded on the host with
// cuTensorMapEncodeTiled (looked up through the driver like every other entry point) and passed by value.

#include <cuda.h>

#include <cstdint>

#include "cuda_driver.h"
#include "param_pack.h"

namespace fp8attn::runtime {

/// A tiled view of global memory: `rank` dims, innermost first as the driver wants them (the reverse of
/// Triton's order), strides in BYTES for dims 1.. (dim 0 is contiguous), and the box a TMA copy moves.
struct TiledTensor {
  CUtensorMapDataType type = CU_TENSOR_MAP_DATA_TYPE_UINT8;
  int element_bytes = 1;
  int rank = 0;
  void const* address = nullptr;
  uint64_t dims[5] = {};
  uint64_t byte_strides[5] = {};  ///< byte_strides[i] is the stride of dims[i + 1]
  uint32_t box[5] = {};
  CUtensorMapSwizzle swizzle = CU_TENSOR_MAP_SWIZZLE_NONE;
};

/// Encodes `t` into *map; the message names the failing field on a bad view.
Status encode_tiled(detail::CudaDriver const& driver, TiledTensor const& t, CUtensorMap* map);

/// Encodes `t` and fills the parameter Triton expects: the map, then shape and strides in Triton's
/// (outermost-first) order, strides in elements.
template <int Rank>
Status make_tensor_map_param(detail::CudaDriver const& driver, TiledTensor const& t, TensorMapParam<Rank>* param) {
  if (t.rank != Rank) return Status(StatusCode::kErrorInternal, "tensor map rank mismatch");
  if (Status s = encode_tiled(driver, t, &param->map); !s) return s;
  for (int i = 0; i < Rank; ++i) {
    int const d = Rank - 1 - i;  // Triton's dim i is the driver's dim Rank-1-i
    param->shape[i] = static_cast<int32_t>(t.dims[d]);
    param->strides[i] = d == 0 ? 1 : static_cast<int64_t>(t.byte_strides[d - 1] / t.element_bytes);
  }
  return Status::success();
}

}  // namespace fp8attn::runtime
