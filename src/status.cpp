#include "fp8attn/status.h"

namespace fp8attn {

char const* to_string(StatusCode code) {
  switch (code) {
    case StatusCode::kSuccess: return "kSuccess";
    case StatusCode::kErrorInvalidProblem: return "kErrorInvalidProblem";
    case StatusCode::kErrorNullPointer: return "kErrorNullPointer";
    case StatusCode::kErrorMisalignedOperand: return "kErrorMisalignedOperand";
    case StatusCode::kErrorNotSupported: return "kErrorNotSupported";
    case StatusCode::kErrorKernelNotFound: return "kErrorKernelNotFound";
    case StatusCode::kErrorWorkspaceNull: return "kErrorWorkspaceNull";
    case StatusCode::kErrorNotInitialized: return "kErrorNotInitialized";
    case StatusCode::kErrorCudaDriver: return "kErrorCudaDriver";
    case StatusCode::kErrorInternal: return "kErrorInternal";
  }
  return "kErrorUnknown";
}

std::string Status::to_string() const {
  std::string text = fp8attn::to_string(code_);
  if (!message_.empty()) text += ": " + message_;
  return text;
}

}  // namespace fp8attn
