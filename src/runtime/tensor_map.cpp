#include "tensor_map.h"

#include <cstdio>
#include <string>

namespace fp8attn::runtime {

Status encode_tensor_map(detail::CudaDriver const& d, detail::TensorDescMeta const& meta, void const* address,
                         int64_t const* shape, int64_t const* strides, CUtensorMap* map) {
  int const rank = meta.rank;
  if (rank < 1 || rank > 5) return Status(StatusCode::kErrorInternal, "tensor map rank " + std::to_string(rank));
  if (reinterpret_cast<uintptr_t>(address) % 16 != 0) {
    char text[32];
    std::snprintf(text, sizeof(text), "%p", address);
    return Status(StatusCode::kErrorMisalignedOperand, std::string("tensor map address=") + text +
                                                           " is not 16-byte aligned");
  }
  if (strides[rank - 1] != 1) {
    return Status(StatusCode::kErrorInvalidProblem, "tensor map: the innermost dimension must be contiguous");
  }
  // The driver wants the innermost dimension first and byte strides for dimensions 1..rank-1.
  cuuint64_t dims[5], byte_strides[5];
  cuuint32_t box[5], element_strides[5] = {1, 1, 1, 1, 1};
  for (int i = 0; i < rank; ++i) {
    int const t = rank - 1 - i;  // Triton's index of the driver's dimension i
    if (shape[t] < 1 || shape[t] > (int64_t{1} << 32)) {
      return Status(StatusCode::kErrorInvalidProblem,
                    "tensor map: dimension of " + std::to_string(shape[t]) + " elements is outside [1, 2^32]");
    }
    dims[i] = static_cast<cuuint64_t>(shape[t]);
    box[i] = meta.block[t];
    if (i > 0) {
      int64_t const bytes = strides[t] * meta.element_bytes;
      // The driver's rules: multiples of 16 bytes, below 2^40.
      if (strides[t] < 0 || bytes % 16 != 0 || bytes >= (int64_t{1} << 40)) {
        return Status(StatusCode::kErrorMisalignedOperand, "tensor map: stride of " + std::to_string(bytes) +
                                                               " bytes is not a multiple of 16 below 2^40");
      }
      byte_strides[i - 1] = static_cast<cuuint64_t>(bytes);
    }
  }
  CUresult r = d.cuTensorMapEncodeTiled(map, static_cast<CUtensorMapDataType>(meta.data_type),
                                        static_cast<cuuint32_t>(rank), const_cast<void*>(address), dims, byte_strides,
                                        box, element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
                                        static_cast<CUtensorMapSwizzle>(meta.swizzle), CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
                                        CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) return detail::driver_error(d, r, "cuTensorMapEncodeTiled");
  return Status::success();
}

}  // namespace fp8attn::runtime
