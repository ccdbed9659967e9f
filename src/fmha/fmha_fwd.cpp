// FmhaFwd: the device-level handle. can_implement = validate + select + limits; initialize = the same once,
// then the launch plan; run = launch the plan.

#include "fp8attn/fmha/device/fmha_fwd.h"

#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>

#include "fmha_internal.h"

namespace fp8attn::fmha {

TensorRef TensorRef::packed(void const* ptr, Layout layout, int64_t seqlen, int64_t heads, int64_t head_dim) {
  TensorRef t;
  t.ptr = ptr;
  t.stride_d = 1;
  if (layout == Layout::kBSHD) {
    t.stride_h = head_dim;
    t.stride_s = heads * head_dim;
    t.stride_b = seqlen * heads * head_dim;
  } else {
    t.stride_s = head_dim;
    t.stride_h = seqlen * head_dim;
    t.stride_b = heads * seqlen * head_dim;
  }
  return t;
}

double FmhaProblem::flops() const {
  double f = 4.0 * batch * heads_q * static_cast<double>(seqlen_q) * seqlen_k * head_dim;
  return (causal && seqlen_q == seqlen_k) ? f / 2 : f;
}

namespace {

using detail::KernelInstance;

/// validate + select + the limits that depend on the instance; *instance is the selected one on success, and
/// *layout (when given) its workspace plan, so that initialize() computes it once.
Status check_and_select(device::FmhaFwd::Arguments const& args, KernelInstance const** instance,
                        detail::WorkspaceLayout* layout = nullptr) {
  if (Status s = detail::validate(args); !s) return s;
  if (Status s = detail::select_instance(args, instance); !s) return s;
  FmhaProblem const& p = args.problem;
  // One-dimensional grid: at most 2^31 - 1 programs (never reached by a problem that fits in memory).
  int64_t const programs = detail::attention_programs(p, **instance);
  if (programs > std::numeric_limits<int32_t>::max()) {
    return Status(StatusCode::kErrorInvalidProblem,
                  "batch=" + std::to_string(p.batch) + ", heads_q=" + std::to_string(p.heads_q) + ", seqlen_q=" +
                      std::to_string(p.seqlen_q) + ": " + std::to_string(programs) + " programs of " +
                      std::to_string(detail::fmha_config(**instance).block_m) +
                      " query rows exceed the grid limit 2^31-1");
  }
  detail::WorkspaceLayout const w = detail::plan_workspace(args, **instance);
  if (layout) *layout = w;
  if (w.too_large) {
    return Status(StatusCode::kErrorInvalidProblem,
                  "batch=" + std::to_string(p.batch) + ", heads_kv=" + std::to_string(p.heads_kv) + ", seqlen_k=" +
                      std::to_string(p.seqlen_k) + ", seqlen_q=" + std::to_string(p.seqlen_q) + ": the workspace would be " +
                      std::to_string(w.requested) + " bytes, more than any GPU holds (2^48)");
  }
  bool const key_permuted = detail::fmha_config(**instance).v_key_permuted;
  if (detail::needs_v_transpose(args, **instance) && !detail::find_transpose_instance(p.head_dim, key_permuted)) {
    return Status(StatusCode::kErrorNotSupported, std::string("v is head_dim-contiguous and needs the ") +
                                                      (key_permuted ? "key-permuted " : "") +
                                                      "V transpose for head_dim=" + std::to_string(p.head_dim) +
                                                      ", which is not compiled in this build");
  }
  return Status::success();
}

std::string ptr_text(void const* p) {
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%p", p);
  return buffer;
}

}  // namespace

namespace device {

Status FmhaFwd::can_implement(Arguments const& args) {
  KernelInstance const* instance = nullptr;
  return check_and_select(args, &instance);
}

size_t FmhaFwd::get_workspace_size(Arguments const& args) {
  KernelInstance const* instance = nullptr;
  detail::WorkspaceLayout layout;
  if (!check_and_select(args, &instance, &layout)) return 0;
  return layout.total;
}

Status FmhaFwd::select_kernel(Arguments const& args, std::string* name) {
  KernelInstance const* instance = nullptr;
  if (Status s = detail::validate(args); !s) return s;  // a name is only given for arguments that can run
  Status s = detail::select_instance(args, &instance);
  if (s && name) *name = instance->name;
  return s;
}

Status FmhaFwd::initialize(Arguments const& args, void* workspace, StreamHandle) {
  KernelInstance const* instance = nullptr;
  detail::WorkspaceLayout layout;
  if (Status s = check_and_select(args, &instance, &layout); !s) {
    plan_.reset();
    return s;
  }
  size_t const needed = layout.total;
  if (needed > 0 && !workspace) {
    plan_.reset();
    return Status(StatusCode::kErrorWorkspaceNull,
                  "workspace is null but get_workspace_size()=" + std::to_string(needed) + " bytes");
  }
  if (reinterpret_cast<uintptr_t>(workspace) % 256 != 0) {
    plan_.reset();
    return Status(StatusCode::kErrorMisalignedOperand, "workspace=" + ptr_text(workspace) + " is not 256-byte aligned");
  }
  // Reuse the plan's storage when this handle owns it alone (repeated initialize() allocates nothing).
  if (!plan_ || plan_.use_count() > 1) plan_ = std::make_shared<detail::FmhaFwdPlan>();
  if (Status s = detail::make_plan(args, *instance, layout, workspace, plan_.get()); !s) {
    plan_.reset();
    return s;
  }
  return Status::success();
}

Status FmhaFwd::run(StreamHandle stream) {
  if (!plan_) return Status(StatusCode::kErrorNotInitialized, "run() called before a successful initialize()");
  return detail::run_plan(*plan_, stream);
}

Status FmhaFwd::operator()(Arguments const& args, void* workspace, StreamHandle stream) {
  if (Status s = initialize(args, workspace, stream); !s) return s;
  return run(stream);
}

char const* FmhaFwd::kernel_name() const { return plan_ ? plan_->instance->name : ""; }

}  // namespace device
}  // namespace fp8attn::fmha
