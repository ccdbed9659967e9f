// FmhaFwd: argument validation, workspace planning and the initialize/run life cycle.

#include "fp8attn/fmha/device/fmha_fwd.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <set>
#include <cstdio>
#include <string>

#include "fmha_internal.h"
#include "module_cache.h"

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

constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();
constexpr int64_t kStrideAlign = 16;  // elements; the kernels are compiled with tt.divisibility=16 on strides
constexpr uintptr_t kPointerAlign = 16;
constexpr int64_t kMaxGridY = 65535;  // batch * heads_q programs along grid y

Status invalid(std::string text) { return Status(StatusCode::kErrorInvalidProblem, std::move(text)); }
Status misaligned(std::string text) { return Status(StatusCode::kErrorMisalignedOperand, std::move(text)); }

// snprintf, not an ostream: the library also runs inside processes (Python, torch) whose iostream locale
// facets may come from another libstdc++ than the one it was built with.
std::string ptr_text(void const* p) {
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%p", p);
  return buffer;
}

std::string join(std::set<int> const& values) {
  std::string text;
  for (int v : values) text += (text.empty() ? "" : ",") + std::to_string(v);
  return text;
}

Status check_problem(FmhaProblem const& p) {
  if (p.batch < 0) return invalid("batch=" + std::to_string(p.batch) + " must be >= 0");
  if (p.heads_q < 1) return invalid("heads_q=" + std::to_string(p.heads_q) + " must be >= 1");
  if (p.heads_kv < 1) return invalid("heads_kv=" + std::to_string(p.heads_kv) + " must be >= 1");
  if (p.heads_q % p.heads_kv != 0) {
    return invalid("heads_q=" + std::to_string(p.heads_q) + " is not a multiple of heads_kv=" + std::to_string(p.heads_kv));
  }
  if (p.seqlen_q < 0) return invalid("seqlen_q=" + std::to_string(p.seqlen_q) + " must be >= 0");
  if (p.seqlen_k < 0) return invalid("seqlen_k=" + std::to_string(p.seqlen_k) + " must be >= 0");
  if (static_cast<int64_t>(p.batch) * p.heads_q > kMaxGridY) {
    return invalid("batch*heads_q=" + std::to_string(static_cast<int64_t>(p.batch) * p.heads_q) +
                   " exceeds the grid limit " + std::to_string(kMaxGridY));
  }
  // Types and head dims: name what this build has.
  std::set<int> dims;
  std::set<std::string> in_types, out_types;
  for (size_t i = 0; i < fp8attn::detail::kNumKernelInstances; ++i) {
    KernelInstance const& k = *fp8attn::detail::kKernelInstances[i];
    if (k.kind != fp8attn::detail::KernelKind::kFmhaFwd) continue;
    in_types.insert(k.qk_type);
    out_types.insert(k.out_type);
    if (to_string(p.input_type) == std::string(k.qk_type)) dims.insert(k.head_dim);
  }
  auto list = [](std::set<std::string> const& s) {
    std::string text;
    for (auto const& v : s) text += (text.empty() ? "" : ",") + v;
    return text;
  };
  if (!in_types.count(to_string(p.input_type))) {
    return Status(StatusCode::kErrorNotSupported, std::string("input_type=") + to_string(p.input_type) +
                                                      " is not compiled in this build; compiled: " + list(in_types));
  }
  if (!out_types.count(to_string(p.output_type))) {
    return Status(StatusCode::kErrorNotSupported, std::string("output_type=") + to_string(p.output_type) +
                                                      " is not compiled in this build; compiled: " + list(out_types));
  }
  if (!dims.count(p.head_dim)) {
    return Status(StatusCode::kErrorNotSupported, "head_dim=" + std::to_string(p.head_dim) + " is not compiled in this build for " +
                                                      to_string(p.input_type) + "; compiled: " + join(dims));
  }
  return Status::success();
}

/// Pointer, alignment and strides of one [batch, seqlen, heads, head_dim] operand.
Status check_tensor(char const* name, TensorRef const& t, int64_t seqlen, int64_t heads, int64_t head_dim, int64_t batch,
                    bool allow_sequence_contiguous) {
  std::string n = name;
  bool empty = batch == 0 || seqlen == 0;
  if (!t.ptr) {
    if (empty) return Status::success();
    return Status(StatusCode::kErrorNullPointer, n + ".ptr is null");
  }
  if (reinterpret_cast<uintptr_t>(t.ptr) % kPointerAlign != 0) {
    return misaligned(n + ".ptr=" + ptr_text(t.ptr) + " is not 16-byte aligned");
  }
  bool d_contiguous = t.stride_d == 1;
  bool s_contiguous = allow_sequence_contiguous && t.stride_s == 1;
  if (!d_contiguous && !s_contiguous) {
    return invalid(n + ".stride_d=" + std::to_string(t.stride_d) + " must be 1 (head_dim contiguous)" +
                   (allow_sequence_contiguous ? " or " + n + ".stride_s must be 1 (sequence contiguous)" : ""));
  }
  struct Stride {
    char const* field;
    int64_t value;
    int64_t extent;
  };
  Stride strides[] = {{"stride_b", t.stride_b, batch},
                      {"stride_h", t.stride_h, heads},
                      {"stride_s", t.stride_s, seqlen},
                      {"stride_d", t.stride_d, head_dim}};
  int64_t span = 0;  // largest element offset, which the kernels compute in 32 bits within one (b, h)
  for (Stride const& s : strides) {
    bool unit = (s.value == 1) && ((std::string(s.field) == "stride_d") || (s_contiguous && std::string(s.field) == "stride_s"));
    if (s.value < 0) return invalid(n + "." + s.field + "=" + std::to_string(s.value) + " must be >= 0");
    if (!unit && s.value % kStrideAlign != 0) {
      return misaligned(n + "." + s.field + "=" + std::to_string(s.value) + " is not a multiple of " +
                        std::to_string(kStrideAlign) + " elements");
    }
    if (s.value > kInt32Max) return invalid(n + "." + s.field + "=" + std::to_string(s.value) + " does not fit in int32");
    if (std::string(s.field) != "stride_b" && std::string(s.field) != "stride_h") span += s.value * (s.extent - 1);
  }
  if (span > kInt32Max) {
    return invalid(n + ": seqlen*stride_s=" + std::to_string(span) + " elements does not fit in int32");
  }
  return Status::success();
}

Status check_descale(char const* name, DescaleRef const& d, bool required) {
  std::string n = name;
  if (!d.ptr) {
    if (required) {
      return Status(StatusCode::kErrorNullPointer, n + ".ptr is null; FP8 inputs need float32 descales on the device");
    }
    return Status::success();
  }
  if (reinterpret_cast<uintptr_t>(d.ptr) % alignof(float) != 0) {
    return misaligned(n + ".ptr=" + ptr_text(d.ptr) + " is not 4-byte aligned");
  }
  if (d.stride_b < 0 || d.stride_h < 0 || d.stride_b > kInt32Max || d.stride_h > kInt32Max) {
    return invalid(n + " strides (" + std::to_string(d.stride_b) + ", " + std::to_string(d.stride_h) +
                   ") must be in [0, 2^31)");
  }
  return Status::success();
}

}  // namespace

namespace detail {

bool needs_v_transpose(Arguments const& args, KernelInstance const& instance) {
  bool fp8 = std::string(instance.v_type) == "e4m3" || std::string(instance.v_type) == "e5m2";
  return fp8 && args.v.stride_d == 1 && args.problem.seqlen_k > 0;
}

WorkspaceLayout plan_workspace(Arguments const& args, KernelInstance const& instance) {
  auto align = [](size_t x) { return (x + 255) / 256 * 256; };
  FmhaProblem const& p = args.problem;
  WorkspaceLayout w;
  w.transpose_v = needs_v_transpose(args, instance);
  size_t offset = 0;
  if (w.transpose_v) {
    w.seqlen_pad = (p.seqlen_k + kVtSeqAlign - 1) / kVtSeqAlign * kVtSeqAlign;
    w.vt_offset = offset;
    w.vt_bytes = static_cast<size_t>(p.batch) * p.heads_kv * p.head_dim * w.seqlen_pad * size_of(p.input_type);
    offset = align(offset + w.vt_bytes);
  }
  if (instance.global_scratch_bytes > 0) {
    size_t programs = static_cast<size_t>((p.seqlen_q + instance.block_m - 1) / instance.block_m) * p.batch * p.heads_q;
    w.scratch_offset = offset;
    w.scratch_bytes = programs * instance.global_scratch_bytes;
    offset = align(offset + w.scratch_bytes);
  }
  if (!args.q_descale.ptr || !args.k_descale.ptr || !args.v_descale.ptr) {
    w.ones_offset = offset;
    w.ones_bytes = sizeof(float);
    offset = align(offset + w.ones_bytes);
  }
  w.total = offset;
  return w;
}

}  // namespace detail

namespace device {

Status FmhaFwd::can_implement(Arguments const& args) {
  FmhaProblem const& p = args.problem;
  if (Status s = check_problem(p); !s) return s;
  int64_t b = p.batch, hq = p.heads_q, hkv = p.heads_kv, d = p.head_dim;
  bool fp8 = p.input_type == DataType::kE4M3 || p.input_type == DataType::kE5M2;
  if (Status s = check_tensor("q", args.q, p.seqlen_q, hq, d, b, false); !s) return s;
  if (Status s = check_tensor("k", args.k, p.seqlen_k, hkv, d, b, false); !s) return s;
  if (Status s = check_tensor("v", args.v, p.seqlen_k, hkv, d, b, fp8); !s) return s;
  if (Status s = check_tensor("o", args.o, p.seqlen_q, hq, d, b, false); !s) return s;
  bool empty_out = p.batch == 0 || p.seqlen_q == 0;
  if (!empty_out) {
    // O is written: a zero stride over an extent > 1 would make programs race on the same elements.
    if ((p.batch > 1 && args.o.stride_b == 0) || (p.heads_q > 1 && args.o.stride_h == 0) ||
        (p.seqlen_q > 1 && args.o.stride_s == 0)) {
      return invalid("o strides (b=" + std::to_string(args.o.stride_b) + ", h=" + std::to_string(args.o.stride_h) +
                     ", s=" + std::to_string(args.o.stride_s) + ") alias output elements");
    }
  }
  if (args.lse) {
    if (reinterpret_cast<uintptr_t>(args.lse) % kPointerAlign != 0) {
      return misaligned("lse=" + ptr_text(args.lse) + " is not 16-byte aligned");
    }
    if (b * hq * p.seqlen_q > kInt32Max) {
      return invalid("lse has batch*heads_q*seqlen_q=" + std::to_string(b * hq * p.seqlen_q) + " elements (> 2^31)");
    }
  }
  if (Status s = check_descale("q_descale", args.q_descale, fp8); !s) return s;
  if (Status s = check_descale("k_descale", args.k_descale, fp8); !s) return s;
  if (Status s = check_descale("v_descale", args.v_descale, fp8); !s) return s;
  if (!std::isfinite(args.softmax_scale) || args.softmax_scale < 0.0f) {
    return invalid("softmax_scale=" + std::to_string(args.softmax_scale) + " must be finite and > 0 (0 selects 1/sqrt(head_dim))");
  }
  KernelInstance const* instance = nullptr;
  if (Status s = detail::select_instance(args, &instance); !s) return s;
  detail::WorkspaceLayout w = detail::plan_workspace(args, *instance);
  if (w.transpose_v) {
    if (!detail::find_transpose_instance(p.head_dim)) {
      return Status(StatusCode::kErrorNotSupported,
                    "v is head_dim-contiguous and needs the V transpose for head_dim=" + std::to_string(p.head_dim) +
                        ", which is not compiled in this build");
    }
    if (hkv * d * w.seqlen_pad > kInt32Max) {
      return invalid("v: heads_kv*head_dim*seqlen_k=" + std::to_string(hkv * d * w.seqlen_pad) + " exceeds int32 strides");
    }
  }
  return Status::success();
}

size_t FmhaFwd::get_workspace_size(Arguments const& args) {
  KernelInstance const* instance = nullptr;
  if (!detail::select_instance(args, &instance)) return 0;
  return detail::plan_workspace(args, *instance).total;
}

Status FmhaFwd::select_kernel(Arguments const& args, std::string* name) {
  KernelInstance const* instance = nullptr;
  Status s = detail::select_instance(args, &instance);
  if (s && name) *name = instance->name;
  return s;
}

Status FmhaFwd::initialize(Arguments const& args, void* workspace, StreamHandle) {
  initialized_ = false;
  if (Status s = can_implement(args); !s) return s;
  KernelInstance const* instance = nullptr;
  if (Status s = detail::select_instance(args, &instance); !s) return s;
  size_t needed = detail::plan_workspace(args, *instance).total;
  if (needed > 0 && !workspace) {
    return Status(StatusCode::kErrorWorkspaceNull,
                  "workspace is null but get_workspace_size()=" + std::to_string(needed) + " bytes");
  }
  if (reinterpret_cast<uintptr_t>(workspace) % 256 != 0) {
    return misaligned("workspace=" + ptr_text(workspace) + " is not 256-byte aligned");
  }
  fp8attn::detail::CudaDriver const* driver = nullptr;
  if (Status s = fp8attn::detail::cuda_driver(&driver); !s) return s;
  // Load the modules now so that run() does no first-use work.
  CUfunction function;
  if (Status s = fp8attn::detail::get_function(*driver, *instance, &function); !s) return s;
  if (detail::needs_v_transpose(args, *instance)) {
    if (Status s = fp8attn::detail::get_function(*driver, *detail::find_transpose_instance(args.problem.head_dim), &function); !s) {
      return s;
    }
  }
  args_ = args;
  instance_ = instance;
  workspace_ = workspace;
  kernel_name_ = instance->name;
  initialized_ = true;
  return Status::success();
}

Status FmhaFwd::run(StreamHandle stream) {
  if (!initialized_) return Status(StatusCode::kErrorNotInitialized, "run() called before a successful initialize()");
  if (args_.problem.batch == 0 || args_.problem.seqlen_q == 0) return Status::success();  // nothing to write
  auto const* instance = static_cast<KernelInstance const*>(instance_);
  fp8attn::detail::CudaDriver const* driver = nullptr;
  if (Status s = fp8attn::detail::cuda_driver(&driver); !s) return s;
  return detail::launch(*driver, args_, *instance, detail::plan_workspace(args_, *instance), workspace_, stream);
}

Status FmhaFwd::operator()(Arguments const& args, void* workspace, StreamHandle stream) {
  if (Status s = initialize(args, workspace, stream); !s) return s;
  return run(stream);
}

}  // namespace device
}  // namespace fp8attn::fmha
