#include "tensor_map.h"

#include <string>

namespace fp8attn::runtime {

Status encode_tiled(detail::CudaDriver const& d, TiledTensor const& t, CUtensorMap* map) {
  if (t.rank < 1 || t.rank > 5) return Status(StatusCode::kErrorInternal, "tensor map rank " + std::to_string(t.rank));
  if (reinterpret_cast<uintptr_t>(t.address) % 16 != 0) {
    return Status(StatusCode::kErrorMisalignedOperand, "tensor map address is not 16-byte aligned");
  }
  for (int i = 0; i + 1 < t.rank; ++i) {
    // The driver's rules: strides are multiples of 16 bytes below 2^40.
    if (t.byte_strides[i] % 16 != 0 || t.byte_strides[i] >= (uint64_t{1} << 40)) {
      return Status(StatusCode::kErrorMisalignedOperand, "tensor map stride " + std::to_string(t.byte_strides[i]) +
                                                             " bytes is not a multiple of 16 below 2^40");
    }
  }
  uint32_t element_strides[5] = {1, 1, 1, 1, 1};
  CUresult r = d.cuTensorMapEncodeTiled(map, t.type, static_cast<cuuint32_t>(t.rank), const_cast<void*>(t.address),
                                        t.dims, t.byte_strides, t.box, element_strides,
                                        CU_TENSOR_MAP_INTERLEAVE_NONE, t.swizzle, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                                        CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) return detail::driver_error(d, r, "cuTensorMapEncodeTiled");
  return Status::success();
}

}  // namespace fp8attn::runtime
