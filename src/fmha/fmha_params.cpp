// Arguments -> launch plan, once per initialize(): the workspace layout, the loaded functions, the grids and
// the packed kernel parameters (generated structs, filled by field name). run() only launches the plan.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include "fmha_internal.h"
#include "generated/kernel_params.h"
#include "runtime/cuda_driver.h"
#include "runtime/module_cache.h"
#include "runtime/tensor_map.h"

namespace fp8attn::fmha::detail {
namespace {

using fp8attn::detail::CudaDriver;
using fp8attn::detail::TensorDescMeta;

char* at(void* workspace, size_t offset) { return static_cast<char*>(workspace) + offset; }

/// The Gluon kernel's parameters: host TMA descriptors (4-D, Triton's outermost-first order, so that TMA clips at
/// each sequence's end) encoded as the compiled kernel expects them (instance.tensor_descs), then the scalars.
/// FP8: V is read as V^T [batch, heads_kv, head_dim, seqlen_k] with strides (vb, vh, vs, 1); BF16: as given,
/// [batch, seqlen_k, heads_kv, head_dim] with strides (vb, vs, vh, 1).
/// vt_extent: V^T's sequence extent for TMA: seqlen_k for a caller's sequence-contiguous V (TMA's zero fill
/// past it keeps the caller's padding, possibly NaN, out of P.V), the padded length for the V^T fp8attn wrote
/// (its padding is zeros, and a key-permuted V^T holds keys < seqlen_k at positions past it); varlen: the whole
/// V^T row (each sequence's columns zero-padded to varlen_vt_align, so no tile reaches the next sequence).
/// Varlen (packed sequences, the "_varlen" instances): the descriptors cover the packed q, k, o as [1, total, heads,
/// head_dim] and the FP8 V^T row as [1, heads_kv, head_dim, row]; the kernel offsets each sequence by cu_seqlens
/// and stores the rows of a sequence's last block from registers (O's pointer and strides), masked to the
/// sequence. BF16 reads V through vt_desc over the packed V, except a key tile that reaches past its sequence's
/// end, which goes through a descriptor of the sequence's own rows that the kernel makes on the device (V's
/// pointer and strides, the program's global scratch), so that no tile reads the next sequence.
template <typename FillCommon>
Status pack_gluon(CudaDriver const& driver, Arguments const& args, KernelInstance const& instance, void const* v_ptr,
                  int64_t vb, int64_t vh, int64_t vs, int64_t vt_extent, FillCommon const& fill_common,
                  runtime::ParamPack* pack) {
  FmhaProblem const& p = args.problem;
  if (instance.num_tensor_descs != 4) return Status(StatusCode::kErrorInternal, "gluon fmha: expected 4 descriptors");
  bool const varlen = args.varlen();
  bool const v_natural = !fmha_config(instance).v_transposed;
  int64_t const d = p.head_dim;
  // TMA cannot describe an empty dimension: with seqlen_k == 0 (or no packed keys) the kernel loads no K/V tile,
  // so the maps only need to be valid.
  int64_t const batch = varlen ? 1 : p.batch;
  int64_t const sq = varlen ? std::max<int64_t>(args.total_q, 1) : p.seqlen_q;
  int64_t const sk = std::max<int64_t>(varlen ? args.total_k : p.seqlen_k, 1);
  // A batch dimension of 1 never steps, but its stride must still be a valid one.
  int64_t const qb = varlen ? args.q.stride_s * sq : args.q.stride_b;
  int64_t const kb = varlen ? args.k.stride_s * sk : args.k.stride_b;
  int64_t const ob = varlen ? args.o.stride_s * sq : args.o.stride_b;
  generated::FmhaFwdGluonParams kp;
  fill_common(kp);
  kp.batch = p.batch;  // the persistent kernel counts its query blocks itself
  kp.O = args.o.ptr;
  kp.stride_os = args.o.stride_s;
  kp.stride_oh = args.o.stride_h;
  kp.V = v_ptr;  // read by the BF16 varlen path only (V as given: vs, vh are its row and head strides)
  kp.stride_vs = vs;
  kp.stride_vh = vh;
  if (varlen) {
    kp.cu_seqlens_q = args.cu_seqlens_q;
    kp.cu_seqlens_k = args.cu_seqlens_k;
    kp.varlen = static_cast<int32_t>(varlen_vt_align(instance));  // varlen: the V^T alignment (common/varlen.py)
    kp.total_q = static_cast<int32_t>(args.total_q);
    kp.total_k = static_cast<int32_t>(args.total_k);
  }
  TensorDescMeta const* m = instance.tensor_descs;
  if (Status s = runtime::make_tensor_map_param(driver, m[0], args.q.ptr, {batch, sq, p.heads_q, d},
                                                {qb, args.q.stride_s, args.q.stride_h, 1}, &kp.q_desc);
      !s) {
    return s;
  }
  if (Status s = runtime::make_tensor_map_param(driver, m[1], args.k.ptr, {batch, sk, p.heads_kv, d},
                                                {kb, args.k.stride_s, args.k.stride_h, 1}, &kp.k_desc);
      !s) {
    return s;
  }
  // FP8 reads V^T [batch, heads_kv, head_dim, extent]; BF16 reads V as given, [batch, seqlen_k, heads_kv, head_dim]
  // (16-bit wgmma takes a head_dim-contiguous B operand).
  if (Status s = v_natural ? runtime::make_tensor_map_param(driver, m[2], v_ptr, {batch, sk, p.heads_kv, d},
                                                            {varlen ? vs * sk : vb, vs, vh, 1}, &kp.vt_desc)
                           : runtime::make_tensor_map_param(driver, m[2], v_ptr,
                                                            {batch, p.heads_kv, d, std::max(vt_extent, sk)},
                                                            {varlen ? vh * p.heads_kv : vb, vh, vs, 1}, &kp.vt_desc);
      !s) {
    return s;
  }
  if (Status s = runtime::make_tensor_map_param(driver, m[3], args.o.ptr, {batch, sq, p.heads_q, d},
                                                {ob, args.o.stride_s, args.o.stride_h, 1}, &kp.o_desc);
      !s) {
    return s;
  }
  kp.pack(*pack);
  return Status::success();
}

}  // namespace

bool needs_v_transpose(Arguments const& args, KernelInstance const& instance) {
  return fmha_config(instance).v_transposed && args.v.stride_d == 1 && args.problem.seqlen_k > 0;
}

int64_t attention_programs(FmhaProblem const& p, KernelInstance const& instance) {
  // 128-bit: batch and heads_q near 2^31 each would overflow int64; saturated (can_implement refuses it).
  __int128 const block_m = fmha_config(instance).block_m;
  __int128 const programs = (__int128{p.seqlen_q} + block_m - 1) / block_m * p.batch * p.heads_q;
  return programs > INT64_MAX ? INT64_MAX : static_cast<int64_t>(programs);
}

WorkspaceLayout plan_workspace(Arguments const& args, KernelInstance const& instance) {
  FmhaProblem const& p = args.problem;
  WorkspaceLayout w;
  w.transpose_v = needs_v_transpose(args, instance);
  // Sizes in 128-bit arithmetic: validated shapes can still ask for more bytes than size_t holds (batch and
  // seqlen near 2^31); such a plan is marked too_large and refused by can_implement.
  unsigned __int128 offset = 0;
  auto align = [](unsigned __int128 x) { return (x + 255) / 256 * 256; };
  if (w.transpose_v) {
    // Varlen: one V^T row over every sequence, each starting on a multiple of kVarlenVtAlign columns
    // (kernels/common/varlen.py varlen_vt_start), as one "batch".
    w.seqlen_pad = args.varlen() ? varlen_vt_row(args.total_k, p.batch, varlen_vt_align(instance))
                                 : padded_seqlen(p.seqlen_k);
    unsigned __int128 const vt = static_cast<unsigned __int128>(args.varlen() ? 1 : p.batch) * p.heads_kv *
                                 p.head_dim * w.seqlen_pad * size_of(p.input_type);
    w.vt_offset = static_cast<size_t>(offset);
    w.vt_bytes = static_cast<size_t>(vt);
    offset = align(offset + vt);
  }
  if (instance.global_scratch_bytes > 0) {
    unsigned __int128 const scratch =
        static_cast<unsigned __int128>(attention_programs(p, instance)) * instance.global_scratch_bytes;
    w.scratch_offset = static_cast<size_t>(offset);
    w.scratch_bytes = static_cast<size_t>(scratch);
    offset = align(offset + scratch);
  }
  w.too_large = offset > kMaxWorkspaceBytes;
  w.total = w.too_large ? 0 : static_cast<size_t>(offset);
  w.requested = offset > UINT64_MAX ? UINT64_MAX : static_cast<uint64_t>(offset);
  return w;
}

int64_t varlen_vt_align(KernelInstance const& instance) {
  if (instance.family != library::KernelFamily::kGluon) return kVarlenVtAlignTriton;
  return std::max<int64_t>(kVarlenVtAlignGluon, fmha_config(instance).block_n);
}

int64_t varlen_vt_row(int64_t total_k, int64_t batch, int64_t align) {
  return (total_k + align - 1) / align * align + align * batch;
}

Status plan_transpose(KernelInstance const& instance, TensorRef const& v, void* vt, int batch, int heads, int seqlen,
                      int64_t seqlen_pad, int32_t const* cu_seqlens, int64_t total, int64_t align, CUfunction* function,
                      runtime::LaunchConfig* launch, runtime::ParamPack* params) {
  CudaDriver const* driver = nullptr;
  if (Status s = fp8attn::detail::cuda_driver(&driver); !s) return s;
  if (Status s = fp8attn::detail::get_function(*driver, instance, function); !s) return s;
  params->clear();
  if (cu_seqlens && transpose_config(instance).tma) {
    return Status(StatusCode::kErrorInternal, "transpose_v: the TMA transpose has no varlen offsets");
  }
  if (transpose_config(instance).tma) {
    // Host descriptors: V as [batch, seqlen, heads, head_dim], V^T as [batch * heads * head_dim, seqlen_pad].
    if (instance.num_tensor_descs != 2) return Status(StatusCode::kErrorInternal, "transpose_v: expected 2 descriptors");
    int64_t const d = transpose_config(instance).head_dim;
    generated::TransposeVTmaTritonParams tp;
    if (Status s = runtime::make_tensor_map_param(*driver, instance.tensor_descs[0], v.ptr,
                                                  {batch, seqlen, heads, d}, {v.stride_b, v.stride_s, v.stride_h, 1},
                                                  &tp.v_desc);
        !s) {
      return s;
    }
    if (Status s = runtime::make_tensor_map_param(*driver, instance.tensor_descs[1], vt,
                                                  {int64_t{batch} * heads * d, seqlen_pad}, {seqlen_pad, 1}, &tp.vt_desc);
        !s) {
      return s;
    }
    tp.seqlen_pad = static_cast<int32_t>(seqlen_pad);
    tp.heads_kv = heads;
    tp.pack(*params);
  } else {
    generated::TransposeVTritonParams tp;
    tp.V = v.ptr;
    tp.VT = vt;
    tp.seqlen = seqlen;
    tp.seqlen_pad = static_cast<int32_t>(seqlen_pad);
    tp.heads_kv = heads;
    tp.stride_vb = v.stride_b;
    tp.stride_vh = v.stride_h;
    tp.stride_vs = v.stride_s;
    tp.cu_seqlens = cu_seqlens;
    tp.varlen = cu_seqlens ? static_cast<int32_t>(align) : 0;  // varlen: the V^T alignment (kernels/common/varlen.py)
    tp.total = cu_seqlens ? static_cast<int32_t>(total) : 0;
    if (cu_seqlens) tp.stride_vb = 0;
    tp.pack(*params);
  }
  int64_t const block_s = transpose_config(instance).block_s;
  // Varlen: blocks of the longest sequence with its zero padding (to kVarlenVtAlign) per (sequence, head); dense:
  // of the padded row.
  int64_t const columns = cu_seqlens ? (seqlen + align - 1) / align * align : seqlen_pad;
  int64_t const programs = (columns + block_s - 1) / block_s * batch * heads;
  *launch = runtime::LaunchConfig::for_instance(instance, static_cast<unsigned>(programs));
  return Status::success();
}

Status make_plan(Arguments const& args, KernelInstance const& instance, WorkspaceLayout const& w, void* workspace,
                 FmhaFwdPlan* plan) {
  FmhaProblem const& p = args.problem;
  plan->instance = &instance;
  // Varlen with no query rows: nothing to write (and the kernel's descriptors for an empty sequence cover row 0
  // of q, which must exist).
  plan->empty = p.batch == 0 || p.seqlen_q == 0 || (args.varlen() && args.total_q == 0);
  plan->transpose_v = false;
  if (plan->empty) return Status::success();

  CudaDriver const* driver = nullptr;
  if (Status s = fp8attn::detail::cuda_driver(&driver); !s) return s;
  if (Status s = fp8attn::detail::get_function(*driver, instance, &plan->attention_function); !s) return s;

  // V as the attention kernel reads it: (pointer, stride_b, stride_h, row stride).
  void const* v_ptr = args.v.ptr;
  int64_t vb = args.v.stride_b, vh = args.v.stride_h, vs = args.v.stride_s;
  if (w.transpose_v) {
    KernelInstance const* t = find_transpose_instance(p.head_dim, fmha_config(instance).v_key_permuted);
    void* vt = at(workspace, w.vt_offset);
    if (Status s = plan_transpose(*t, args.v, vt, p.batch, p.heads_kv, p.seqlen_k, w.seqlen_pad, args.cu_seqlens_k,
                                  args.total_k, varlen_vt_align(instance), &plan->transpose_function,
                                  &plan->transpose_launch,
                                  &plan->transpose_params);
        !s) {
      return s;
    }
    plan->transpose_v = true;
    v_ptr = vt;
    vh = static_cast<int64_t>(p.head_dim) * w.seqlen_pad;
    vb = args.varlen() ? 0 : vh * p.heads_kv;
    vs = w.seqlen_pad;
  } else if (fmha_config(instance).v_transposed) {
    vs = args.v.stride_d;  // the caller's V is already sequence-contiguous: head_dim rows of stride_d elements
  }

  // Null descales (BF16/FP16 inputs) read a 1.0f kept per context, so run() has nothing to fill.
  CUdeviceptr one = 0;
  if (!args.q_descale.ptr || !args.k_descale.ptr || !args.v_descale.ptr) {
    if (Status s = fp8attn::detail::constant_one(*driver, &one); !s) return s;
  }
  auto descale = [one](DescaleRef const& d) {
    return d.ptr ? static_cast<void const*>(d.ptr) : reinterpret_cast<void const*>(one);
  };

  float const scale = args.softmax_scale > 0.0f ? args.softmax_scale : 1.0f / std::sqrt(static_cast<float>(p.head_dim));
  // The scalars both families' kernels take, by field name.
  auto fill_common = [&](auto& kp) {
    kp.LSE = args.lse;
    kp.q_descale = descale(args.q_descale);
    kp.k_descale = descale(args.k_descale);
    kp.v_descale = descale(args.v_descale);
    kp.q_descale_stride_b = args.q_descale.ptr ? args.q_descale.stride_b : 0;
    kp.q_descale_stride_h = args.q_descale.ptr ? args.q_descale.stride_h : 0;
    kp.k_descale_stride_b = args.k_descale.ptr ? args.k_descale.stride_b : 0;
    kp.k_descale_stride_h = args.k_descale.ptr ? args.k_descale.stride_h : 0;
    kp.v_descale_stride_b = args.v_descale.ptr ? args.v_descale.stride_b : 0;
    kp.v_descale_stride_h = args.v_descale.ptr ? args.v_descale.stride_h : 0;
    kp.q_descale_stride_hq = args.q_descale.ptr ? args.q_descale.stride_head_q : 0;
    kp.q_descale_stride_blk = args.q_descale.ptr ? args.q_descale.stride_block : 0;
    kp.k_descale_stride_blk = args.k_descale.ptr ? args.k_descale.stride_block : 0;
    // A window reaching past every key is no window: -1 keeps the kernel's int32 bound arithmetic in range.
    kp.window_left = args.window_left >= p.seqlen_k ? -1 : args.window_left;
    kp.window_right = args.window_right >= p.seqlen_q ? -1 : args.window_right;
    kp.softcap = args.softcap;
    kp.softmax_scale = scale;
    kp.seqlen_q = p.seqlen_q;
    kp.seqlen_k = p.seqlen_k;
    kp.heads_q = p.heads_q;
    kp.group_size = p.heads_q / p.heads_kv;
    kp.write_lse = args.lse ? 1 : 0;
    kp.global_scratch = w.scratch_bytes ? at(workspace, w.scratch_offset) : nullptr;
  };
  plan->attention_params.clear();
  if (instance.family == library::KernelFamily::kGluon) {
    // The padded length where the V^T is fp8attn's own (written here, or given as v_key_permuted).
    int64_t const vt_extent = args.varlen()                            ? w.seqlen_pad
                              : w.transpose_v || args.v_key_permuted ? padded_seqlen(p.seqlen_k)
                                                                     : p.seqlen_k;
    if (Status s = pack_gluon(*driver, args, instance, v_ptr, vb, vh, vs, vt_extent, fill_common,
                              &plan->attention_params);
        !s) {
      return s;
    }
  } else {
    generated::FmhaFwdTritonParams kp;
    fill_common(kp);
    kp.Q = args.q.ptr;
    kp.K = args.k.ptr;
    kp.V = v_ptr;
    kp.O = args.o.ptr;
    kp.stride_qb = args.q.stride_b;
    kp.stride_qh = args.q.stride_h;
    kp.stride_qs = args.q.stride_s;
    kp.stride_kb = args.k.stride_b;
    kp.stride_kh = args.k.stride_h;
    kp.stride_ks = args.k.stride_s;
    kp.stride_vb = vb;
    kp.stride_vh = vh;
    kp.stride_vs = vs;
    kp.stride_ob = args.o.stride_b;
    kp.stride_oh = args.o.stride_h;
    kp.stride_os = args.o.stride_s;
    if (args.varlen()) {
      // Packed sequences: the kernel offsets each sequence by cu_seqlens; the batch strides are not used.
      kp.stride_qb = kp.stride_kb = kp.stride_ob = 0;
      if (!w.transpose_v) kp.stride_vb = 0;
      kp.cu_seqlens_q = args.cu_seqlens_q;
      kp.cu_seqlens_k = args.cu_seqlens_k;
      kp.varlen = static_cast<int32_t>(kVarlenVtAlignTriton);  // the V^T alignment (kernels/common/varlen.py)
      kp.total_q = static_cast<int32_t>(args.total_q);
      kp.total_k = static_cast<int32_t>(args.total_k);
    }
    kp.pack(plan->attention_params);
  }
  int64_t programs = attention_programs(p, instance);
  if (instance.family == library::KernelFamily::kGluon) {
    // Persistent: as many programs as the SMs hold at once (one for the warp-specialized kernel, whose registers
    // leave room for one CTA; four for the single-warpgroup one: programs_per_sm), each walking query blocks
    // program_id, program_id + grid, ...
    int sms = 0;
    if (Status s = fp8attn::detail::multiprocessor_count(*driver, &sms); !s) return s;
    programs = std::min<int64_t>(programs, int64_t{sms} * std::max(1, fmha_config(instance).programs_per_sm));
  }
  plan->attention_launch = runtime::LaunchConfig::for_instance(instance, static_cast<unsigned>(programs));
  return Status::success();
}

Status run_plan(FmhaFwdPlan const& plan, StreamHandle stream) {
  if (plan.empty) return Status::success();
  CudaDriver const* driver = nullptr;
  if (Status s = fp8attn::detail::cuda_driver(&driver); !s) return s;
  auto const cu_stream = reinterpret_cast<CUstream>(stream);
  if (plan.transpose_v) {
    if (Status s = runtime::launch(*driver, plan.transpose_function, plan.transpose_launch, plan.transpose_params,
                                   cu_stream, "transpose_v");
        !s) {
      return s;
    }
  }
  return runtime::launch(*driver, plan.attention_function, plan.attention_launch, plan.attention_params, cu_stream,
                         plan.instance->name);
}

}  // namespace fp8attn::fmha::detail
