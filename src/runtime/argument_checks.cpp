#include "runtime/argument_checks.h"

#include <cstdio>
#include <string>
#include <utility>

namespace fp8attn::detail {

Status check_aligned(char const* field, void const* ptr, uintptr_t alignment, bool allow_null) {
  if (!ptr) {
    return allow_null ? Status::success() : Status(StatusCode::kErrorNullPointer, std::string(field) + " is null");
  }
  if (reinterpret_cast<uintptr_t>(ptr) % alignment == 0) return Status::success();
  char text[32];
  std::snprintf(text, sizeof(text), "%p", ptr);
  return Status(StatusCode::kErrorMisalignedOperand,
                std::string(field) + "=" + text + " is not " + std::to_string(alignment) + "-byte aligned");
}

Status check_strides(char const* name, fmha::TensorRef const& t) {
  std::string const n(name);
  if (t.stride_d != 1) {
    return Status(StatusCode::kErrorInvalidProblem, n + ".stride_d=" + std::to_string(t.stride_d) + " must be 1");
  }
  for (auto [field, value] : {std::pair{".stride_b", t.stride_b}, std::pair{".stride_s", t.stride_s},
                              std::pair{".stride_h", t.stride_h}}) {
    if (value < 0 || value % 16 != 0) {
      return Status(StatusCode::kErrorMisalignedOperand,
                    n + field + "=" + std::to_string(value) + " must be a non-negative multiple of 16 elements");
    }
  }
  return Status::success();
}

}  // namespace fp8attn::detail
