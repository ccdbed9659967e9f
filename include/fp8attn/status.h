#pragma once
// Status: a scoped code plus a reason that names the offending argument and its value.

#include <string>
#include <utility>

namespace fp8attn {

enum class StatusCode {
  kSuccess,
  kErrorInvalidProblem,      ///< a shape or scalar argument is out of range
  kErrorNullPointer,         ///< a required pointer is null
  kErrorMisalignedOperand,   ///< a pointer or stride breaks the alignment the kernels need
  kErrorNotSupported,        ///< valid, but no compiled instance implements it
  kErrorKernelNotFound,      ///< a kernel forced by name is not in this build
  kErrorWorkspaceNull,       ///< get_workspace_size() > 0 but no workspace was given
  kErrorNotInitialized,      ///< run() before a successful initialize()
  kErrorCudaDriver,          ///< the CUDA driver is missing or a driver call failed
  kErrorInternal,
};

/// Name of a status code, e.g. "kErrorInvalidProblem".
char const* to_string(StatusCode code);

class Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status success() { return Status(); }

  bool ok() const { return code_ == StatusCode::kSuccess; }
  explicit operator bool() const { return ok(); }
  StatusCode code() const { return code_; }
  /// Why it failed, naming the argument and its value; empty on success.
  std::string const& message() const { return message_; }
  /// "kErrorInvalidProblem: head_dim=96 is not compiled in this build; compiled: 64,128,256".
  std::string to_string() const;

 private:
  StatusCode code_ = StatusCode::kSuccess;
  std::string message_;
};

}  // namespace fp8attn
