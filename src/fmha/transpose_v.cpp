// TransposeV: the V transpose as an operation of its own (FmhaFwd runs the same plan inside its own).

#include "fp8attn/fmha/device/transpose_v.h"

#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>

#include "fmha_internal.h"
#include "runtime/cuda_driver.h"

namespace fp8attn::fmha {
namespace device {

struct TransposeV::Params {
  CUfunction function = nullptr;
  runtime::LaunchConfig launch;
  runtime::ParamPack params;
  bool empty = true;
};

namespace {

std::string num(int64_t v) { return std::to_string(v); }

Status select(TransposeVArguments const& a, detail::KernelInstance const** instance) {
  *instance = detail::find_transpose_instance(a.head_dim, a.key_permuted, a.kernel_name);
  if (*instance) {
    detail::TransposeVKernelConfig const& c = detail::transpose_config(**instance);
    if (c.head_dim != a.head_dim) {
      return Status(StatusCode::kErrorNotSupported, "kernel_name=" + a.kernel_name + " transposes head_dim=" +
                                                        num(c.head_dim) + ", not head_dim=" + num(a.head_dim));
    }
    if (c.key_permuted != a.key_permuted) {
      return Status(StatusCode::kErrorNotSupported,
                    "kernel_name=" + a.kernel_name + (c.key_permuted ? " permutes" : " does not permute") +
                        " keys, but key_permuted=" + (a.key_permuted ? "true" : "false"));
    }
    return Status::success();
  }
  if (!a.kernel_name.empty()) {
    return Status(StatusCode::kErrorKernelNotFound, "kernel_name=" + a.kernel_name + " is not a compiled V transpose");
  }
  return Status(StatusCode::kErrorNotSupported, "head_dim=" + num(a.head_dim) +
                                                    (a.key_permuted ? " has no compiled key-permuted" : " has no compiled") +
                                                    " V transpose in this build");
}

}  // namespace

Status TransposeV::can_implement(TransposeVArguments const& a) {
  if (a.batch < 0) return Status(StatusCode::kErrorInvalidProblem, "batch=" + num(a.batch) + " must be >= 0");
  if (a.heads < 1) return Status(StatusCode::kErrorInvalidProblem, "heads=" + num(a.heads) + " must be >= 1");
  if (a.seqlen < 0) return Status(StatusCode::kErrorInvalidProblem, "seqlen=" + num(a.seqlen) + " must be >= 0");
  if (size_of(a.type) != 1) {
    return Status(StatusCode::kErrorNotSupported,
                  std::string("type=") + to_string(a.type) + " is not a one-byte type (e4m3, e5m2)");
  }
  detail::KernelInstance const* instance = nullptr;
  if (Status s = select(a, &instance); !s) return s;
  if (a.batch == 0 || a.seqlen == 0) return Status::success();
  if (!a.v.ptr) return Status(StatusCode::kErrorNullPointer, "v.ptr is null");
  if (!a.vt) return Status(StatusCode::kErrorNullPointer, "vt is null");
  for (auto [field, ptr] : {std::pair<char const*, void const*>{"v.ptr", a.v.ptr}, {"vt", a.vt}}) {
    if (reinterpret_cast<uintptr_t>(ptr) % 16 != 0) {
      char text[32];
      std::snprintf(text, sizeof(text), "%p", ptr);
      return Status(StatusCode::kErrorMisalignedOperand, std::string(field) + "=" + text + " is not 16-byte aligned");
    }
  }
  if (a.v.stride_d != 1) {
    return Status(StatusCode::kErrorInvalidProblem, "v.stride_d=" + num(a.v.stride_d) + " must be 1");
  }
  for (auto [field, value] : {std::pair{"v.stride_b", a.v.stride_b}, std::pair{"v.stride_h", a.v.stride_h},
                              std::pair{"v.stride_s", a.v.stride_s}}) {
    if (value < 0 || value % 16 != 0) {
      return Status(StatusCode::kErrorMisalignedOperand,
                    std::string(field) + "=" + num(value) + " must be a non-negative multiple of 16 elements");
    }
  }
  return Status::success();
}

size_t TransposeV::output_bytes(TransposeVArguments const& a) {
  if (a.batch < 0 || a.heads < 0 || a.head_dim < 0 || a.seqlen < 0) return 0;
  return static_cast<size_t>(a.batch) * a.heads * a.head_dim * padded_seqlen(a.seqlen);
}

Status TransposeV::initialize(TransposeVArguments const& a, StreamHandle) {
  params_.reset();
  if (Status s = can_implement(a); !s) return s;
  detail::KernelInstance const* instance = nullptr;
  if (Status s = select(a, &instance); !s) return s;
  auto p = std::make_shared<Params>();
  p->empty = a.batch == 0 || a.seqlen == 0;
  if (!p->empty) {
    if (Status s = detail::plan_transpose(*instance, a.v, a.vt, a.batch, a.heads, a.seqlen, padded_seqlen(a.seqlen),
                                          nullptr, 0, 0, &p->function, &p->launch, &p->params);
        !s) {
      return s;
    }
  }
  params_ = std::move(p);
  return Status::success();
}

Status TransposeV::run(StreamHandle stream) {
  if (!params_) return Status(StatusCode::kErrorNotInitialized, "run() called before a successful initialize()");
  if (params_->empty) return Status::success();
  fp8attn::detail::CudaDriver const* driver = nullptr;
  if (Status s = fp8attn::detail::cuda_driver(&driver); !s) return s;
  return runtime::launch(*driver, params_->function, params_->launch, params_->params,
                         reinterpret_cast<CUstream>(stream), "transpose_v");
}

Status TransposeV::operator()(TransposeVArguments const& a, StreamHandle stream) {
  if (Status s = initialize(a, stream); !s) return s;
  return run(stream);
}

}  // namespace device
}  // namespace fp8attn::fmha
