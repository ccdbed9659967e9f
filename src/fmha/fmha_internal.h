#pragma once
// Internals shared by the attention handle (fmha_fwd.cpp), its validation (fmha_validate.cpp), the instance
// heuristic (fmha_heuristic.cpp), the Arguments -> launch plan step (fmha_params.cpp) and the V transpose
// (transpose_v.cpp).

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fmha/fmha_kernel_config.h"
#include "fmha/transpose_v_kernel_config.h"
#include "fp8attn/fmha/device/fmha_fwd.h"
#include "fp8attn/fmha/device/transpose_v.h"
#include "runtime/kernel_instance.h"
#include "runtime/launcher.h"
#include "runtime/param_pack.h"

namespace fp8attn::fmha::detail {

using fp8attn::detail::KernelInstance;
using Arguments = device::FmhaFwd::Arguments;

inline FmhaKernelConfig const& fmha_config(KernelInstance const& k) { return k.config_as<FmhaKernelConfig>(); }
inline TransposeVKernelConfig const& transpose_config(KernelInstance const& k) {
  return k.config_as<TransposeVKernelConfig>();
}

// ---- validation (fmha_validate.cpp) ----

/// Every check of can_implement except the instance choice; the message names the argument and value.
Status validate(Arguments const& args);

// ---- heuristic (fmha_heuristic.cpp) ----

/// Whether an instance takes packed sequences (cu_seqlens): every Triton instance but the warp-specialized and
/// evenn ones (no per-sequence offsets), and the gluon "_varlen" ones (the dense gluon instances compile the path
/// out; codegen/operations/fmha_fwd.py says why).
bool takes_varlen(KernelInstance const& instance);

/// Whether `instance` computes args' problem (and LSE when args.lse is set, with V in args' layout); if not,
/// *why names the field and value.
bool instance_supports(KernelInstance const& instance, Arguments const& args, std::string* why);
/// Whether a call is small enough that one launch beats two: FP8 with a head_dim-contiguous V and little work,
/// for which the heuristic prefers the instances that transpose V on chip ("vnat").
bool prefers_single_launch(Arguments const& args);
/// The instance forced by args.kernel_name, or the tuning table's pick for this GPU, or the heuristic's; with
/// args.k_descale_paired, that pick's "kpair" twin where the build has one that runs the call.
Status select_instance(Arguments const& args, KernelInstance const** instance);
/// The "kpair" twin of a per-block-descale attention instance (its name with "_kpair" after "_bdesc"), or nullptr.
KernelInstance const* paired_twin(KernelInstance const& instance);
struct TuningEntry;
/// The first instance a matching table entry names that supports args (nullptr if none): select_instance's
/// table step, for a given GPU name (tests call it without a GPU).
KernelInstance const* tuned_instance(Arguments const& args, std::vector<TuningEntry> const& table,
                                    std::string_view gpu);
/// The V-transpose instance for this head dim and key order (or the one named), or nullptr.
KernelInstance const* find_transpose_instance(int head_dim, bool key_permuted, std::string const& name = {});

// ---- plan (fmha_params.cpp) ----

/// A workspace larger than this (256 TiB) cannot exist on any GPU: such problems are refused, which also keeps
/// every size computation far from overflow.
inline constexpr uint64_t kMaxWorkspaceBytes = uint64_t{1} << 48;

/// Where things go in the caller's workspace.
struct WorkspaceLayout {
  bool transpose_v = false;
  int64_t seqlen_pad = 0;      ///< row length of V^T
  size_t vt_offset = 0;        ///< V^T: [batch, heads_kv, head_dim, seqlen_pad]
  size_t vt_bytes = 0;
  size_t scratch_offset = 0;   ///< per-program scratch for device-side TMA descriptors
  size_t scratch_bytes = 0;
  size_t total = 0;         ///< 0 when too_large
  bool too_large = false;   ///< more than kMaxWorkspaceBytes
  uint64_t requested = 0;   ///< the size asked for (saturated), for the message
};

/// Whether the FP8 path must copy V into V^T (false when the caller's V is already sequence-contiguous).
bool needs_v_transpose(Arguments const& args, KernelInstance const& instance);
/// Programs (CTAs) of the attention launch: query blocks * batch * heads_q.
int64_t attention_programs(FmhaProblem const& problem, KernelInstance const& instance);
WorkspaceLayout plan_workspace(Arguments const& args, KernelInstance const& instance);

/// Everything run() needs, computed once by initialize(): functions, grids and packed parameters.
struct FmhaFwdPlan {
  bool empty = true;  ///< nothing to launch (batch == 0 or seqlen_q == 0)
  bool transpose_v = false;
  CUfunction transpose_function = nullptr;
  runtime::LaunchConfig transpose_launch;
  runtime::ParamPack transpose_params;
  CUfunction attention_function = nullptr;
  runtime::LaunchConfig attention_launch;
  runtime::ParamPack attention_params;
  KernelInstance const* instance = nullptr;
};

/// Selected, validated arguments -> plan (loads modules into the current context, packs the parameters).
/// `layout` is plan_workspace(args, instance), computed once by the caller.
Status make_plan(Arguments const& args, KernelInstance const& instance, WorkspaceLayout const& layout, void* workspace,
                 FmhaFwdPlan* plan);
/// Launches a plan (V transpose first when needed). No validation, no allocation.
Status run_plan(FmhaFwdPlan const& plan, StreamHandle stream);

/// Packs a V transpose of v (any strides, head_dim contiguous) into vt with rows of seqlen_pad elements. Varlen
/// (cu_seqlens non-null, v packed [total_k, heads, head_dim]): one row of seqlen_pad = varlen_vt_row(total_k,
/// batch, align) elements per (head, d), sequence b from varlen_vt_start (kernels/common/varlen.py); seqlen is
/// the longest length.
Status plan_transpose(KernelInstance const& instance, TensorRef const& v, void* vt, int batch, int heads, int seqlen,
                      int64_t seqlen_pad, int32_t const* cu_seqlens, int64_t total, int64_t align, CUfunction* function,
                      runtime::LaunchConfig* launch, runtime::ParamPack* params);

/// Varlen V^T: each sequence's columns start on a multiple of the alignment and hold zeros up to its length rounded
/// up to it (kernels/common/varlen.py, the same values; the kernels' `varlen` argument carries it). The Triton
/// kernel clips each sequence with descriptors of its own and needs 16-byte TMA bases; the Gluon kernel reads one
/// descriptor, so no key tile may reach the next sequence's columns: 128, or the key tile where it is wider (256).
/// Validation sizes the V^T row with the smallest (kVarlenVtAlignTriton); instance_supports with each instance's.
inline constexpr int64_t kVarlenVtAlignTriton = 16;
inline constexpr int64_t kVarlenVtAlignGluon = 128;

/// The V^T column alignment of `instance` for packed sequences (kernels/fmha_fwd/fmha_fwd_gluon.py _vt_align).
int64_t varlen_vt_align(KernelInstance const& instance);

/// The varlen V^T row length: every sequence's keys, each sequence starting on a multiple of `align`.
int64_t varlen_vt_row(int64_t total_k, int64_t batch, int64_t align);

}  // namespace fp8attn::fmha::detail
