#pragma once
// Internals shared by the FmhaFwd handle (fmha_fwd.cpp), the instance heuristic (fmha_heuristic.cpp) and
// the launchers (fmha_launch.cpp).

#include <cstddef>
#include <cstdint>
#include <string>

#include "cuda_driver.h"
#include "fp8attn/fmha/device/fmha_fwd.h"
#include "kernel_instance.h"

namespace fp8attn::fmha::detail {

using fp8attn::detail::KernelInstance;
using Arguments = device::FmhaFwd::Arguments;

/// Rows of V^T in the workspace are padded to this many elements (16-byte aligned FP8 rows).
constexpr int64_t kVtSeqAlign = 16;

/// Whether `instance` computes `problem` (and LSE when `wants_lse`); if not, *why names the field and value.
bool instance_supports(KernelInstance const& instance, FmhaProblem const& problem, bool wants_lse, std::string* why);

/// The instance forced by args.kernel_name, or the heuristic's pick for args.problem.
Status select_instance(Arguments const& args, KernelInstance const** instance);

/// The V-transpose instance for this head dim, or nullptr.
KernelInstance const* find_transpose_instance(int head_dim);

/// Whether the FP8 path must copy V into V^T (false when the caller's V is already sequence-contiguous).
bool needs_v_transpose(Arguments const& args, KernelInstance const& instance);

struct WorkspaceLayout {
  bool transpose_v = false;
  int64_t seqlen_pad = 0;      ///< row length of V^T
  size_t vt_offset = 0;        ///< V^T: [batch, heads_kv, head_dim, seqlen_pad]
  size_t vt_bytes = 0;
  size_t scratch_offset = 0;   ///< per-program scratch for device-side TMA descriptors
  size_t scratch_bytes = 0;
  size_t ones_offset = 0;      ///< a 1.0f standing in for every null (BF16) descale
  size_t ones_bytes = 0;
  size_t total = 0;
};

WorkspaceLayout plan_workspace(Arguments const& args, KernelInstance const& instance);

/// Launches the V transpose (when the layout asks for it), then attention.
Status launch(fp8attn::detail::CudaDriver const& driver, Arguments const& args, KernelInstance const& instance,
              WorkspaceLayout const& layout, void* workspace, StreamHandle stream);

}  // namespace fp8attn::fmha::detail
