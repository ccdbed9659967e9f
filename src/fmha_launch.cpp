// Argument packing and launch of the attention and V-transpose cubins through cuLaunchKernelEx.
//
// Parameter order is the Triton kernels' signature without constexprs (codegen/kernel_signature.py lists it;
// the build checks every compiled PTX entry against that list), followed by Triton's two hidden pointers:
// global scratch (device-side TMA descriptors) and profile scratch (unused, null).

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "fmha_internal.h"
#include "module_cache.h"

namespace fp8attn::fmha::detail {
namespace {

using fp8attn::detail::CudaDriver;

/// Holds the values and hands cuLaunchKernelEx an array of pointers to them, in push order.
class KernelParams {
 public:
  void ptr(void const* p) { push(Value{reinterpret_cast<uint64_t>(p), 0, 0.0f, Kind::kU64}); }
  void i32(int64_t v) { push(Value{0, static_cast<int32_t>(v), 0.0f, Kind::kI32}); }
  void f32(float v) { push(Value{0, 0, v, Kind::kF32}); }

  void** pointers() {
    addresses_.clear();
    for (Value& v : values_) {
      addresses_.push_back(v.kind == Kind::kU64 ? static_cast<void*>(&v.u64)
                           : v.kind == Kind::kI32 ? static_cast<void*>(&v.i32)
                                                  : static_cast<void*>(&v.f32));
    }
    return addresses_.data();
  }

 private:
  enum class Kind { kU64, kI32, kF32 };
  struct Value {
    uint64_t u64;
    int32_t i32;
    float f32;
    Kind kind;
  };
  void push(Value v) { values_.push_back(v); }
  std::vector<Value> values_;
  std::vector<void*> addresses_;
};

Status launch_kernel(CudaDriver const& d, KernelInstance const& instance, unsigned grid_x, unsigned grid_y,
                     KernelParams& params, StreamHandle stream) {
  CUfunction function;
  if (Status s = fp8attn::detail::get_function(d, instance, &function); !s) return s;
  CUlaunchConfig config = {};
  config.gridDimX = grid_x;
  config.gridDimY = grid_y;
  config.gridDimZ = 1;
  config.blockDimX = 32 * instance.launch_warps;
  config.blockDimY = 1;
  config.blockDimZ = 1;
  config.sharedMemBytes = instance.shared_bytes;
  config.hStream = reinterpret_cast<CUstream>(stream);
  CUresult r = d.cuLaunchKernelEx(&config, function, params.pointers(), nullptr);
  if (r != CUDA_SUCCESS) return fp8attn::detail::driver_error(d, r, (std::string("launch of ") + instance.name).c_str());
  return Status::success();
}

char* at(void* workspace, size_t offset) { return static_cast<char*>(workspace) + offset; }

}  // namespace

Status launch(CudaDriver const& d, Arguments const& args, KernelInstance const& instance, WorkspaceLayout const& w,
              void* workspace, StreamHandle stream) {
  FmhaProblem const& p = args.problem;
  float const* ones = nullptr;
  if (w.ones_bytes) {
    ones = reinterpret_cast<float const*>(at(workspace, w.ones_offset));
    uint32_t one_bits = 0x3f800000u;  // 1.0f
    CUresult r = d.cuMemsetD32Async(reinterpret_cast<CUdeviceptr>(ones), one_bits, 1, reinterpret_cast<CUstream>(stream));
    if (r != CUDA_SUCCESS) return fp8attn::detail::driver_error(d, r, "cuMemsetD32Async(descale 1.0)");
  }

  // V operand as the attention kernel reads it: (pointer, stride_b, stride_h, row stride).
  void const* v_ptr = args.v.ptr;
  int64_t vb = args.v.stride_b, vh = args.v.stride_h, vs = args.v.stride_s;
  bool fp8 = std::string(instance.v_type) == "e4m3" || std::string(instance.v_type) == "e5m2";
  if (w.transpose_v) {
    KernelInstance const* t = find_transpose_instance(p.head_dim);
    void* vt = at(workspace, w.vt_offset);
    KernelParams tp;
    tp.ptr(args.v.ptr);
    tp.ptr(vt);
    tp.i32(p.seqlen_k);
    tp.i32(w.seqlen_pad);
    tp.i32(p.heads_kv);
    tp.i32(args.v.stride_b);
    tp.i32(args.v.stride_h);
    tp.i32(args.v.stride_s);
    tp.ptr(nullptr);
    tp.ptr(nullptr);
    unsigned grid_s = static_cast<unsigned>((w.seqlen_pad + t->block_m - 1) / t->block_m);
    if (Status s = launch_kernel(d, *t, grid_s, static_cast<unsigned>(p.batch * p.heads_kv), tp, stream); !s) return s;
    v_ptr = vt;
    vh = static_cast<int64_t>(p.head_dim) * w.seqlen_pad;
    vb = vh * p.heads_kv;
    vs = w.seqlen_pad;
  } else if (fp8) {
    vs = args.v.stride_d;  // caller's V is already sequence-contiguous: head_dim rows of stride_d elements
  }

  KernelParams kp;
  kp.ptr(args.q.ptr);
  kp.ptr(args.k.ptr);
  kp.ptr(v_ptr);
  kp.ptr(args.o.ptr);
  kp.ptr(args.lse);
  kp.ptr(args.q_descale.ptr ? args.q_descale.ptr : ones);
  kp.ptr(args.k_descale.ptr ? args.k_descale.ptr : ones);
  kp.ptr(args.v_descale.ptr ? args.v_descale.ptr : ones);
  kp.i32(args.q_descale.ptr ? args.q_descale.stride_b : 0);
  kp.i32(args.q_descale.ptr ? args.q_descale.stride_h : 0);
  kp.i32(args.k_descale.ptr ? args.k_descale.stride_b : 0);
  kp.i32(args.k_descale.ptr ? args.k_descale.stride_h : 0);
  kp.i32(args.v_descale.ptr ? args.v_descale.stride_b : 0);
  kp.i32(args.v_descale.ptr ? args.v_descale.stride_h : 0);
  kp.f32(args.softmax_scale > 0.0f ? args.softmax_scale : 1.0f / std::sqrt(static_cast<float>(p.head_dim)));
  kp.i32(p.seqlen_q);
  kp.i32(p.seqlen_k);
  kp.i32(p.heads_q);
  kp.i32(p.heads_q / p.heads_kv);
  kp.i32(args.lse ? 1 : 0);
  kp.i32(args.q.stride_b);
  kp.i32(args.q.stride_h);
  kp.i32(args.q.stride_s);
  kp.i32(args.k.stride_b);
  kp.i32(args.k.stride_h);
  kp.i32(args.k.stride_s);
  kp.i32(vb);
  kp.i32(vh);
  kp.i32(vs);
  kp.i32(args.o.stride_b);
  kp.i32(args.o.stride_h);
  kp.i32(args.o.stride_s);
  kp.ptr(w.scratch_bytes ? at(workspace, w.scratch_offset) : nullptr);
  kp.ptr(nullptr);
  unsigned grid_m = static_cast<unsigned>((p.seqlen_q + instance.block_m - 1) / instance.block_m);
  return launch_kernel(d, instance, grid_m, static_cast<unsigned>(p.batch * p.heads_q), kp, stream);
}

}  // namespace fp8attn::fmha::detail
