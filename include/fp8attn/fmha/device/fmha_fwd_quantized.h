#pragma once
// fp8attn::fmha::device::FmhaFwdQuantized: attention over BF16/FP16 Q, K, V in an accuracy mode: the operands are
// quantized on the GPU (quant::device::Quantize, into the workspace) and attended by FmhaFwd, all planned in
// initialize() and launched by run() (3 to 9 launches; capturable in a CUDA graph).
//
//   mode               Q, K                                              V
//   kFp8               e4m3, one descale per tensor                      e4m3 per tensor, written as V^T
//   kFp8PerHead        e4m3, per (batch, kv head)                        e4m3 per (batch, kv head), V^T
//   kFp8SmoothRotate   e4m3 per tensor, K smoothed, Q and K rotated      e4m3 per tensor, V^T
//   kInt8QK            int8 per 64-token block, K smoothed, Q K rotated  e4m3 per tensor, V^T
//   kBf16              no quantization: FmhaFwd on the bf16 inputs       -
//
// V is quantized straight into the layout the FP8 P.V product reads (in the key order of the "vkperm"
// instances when one serves the problem), so no V transpose runs. docs/ACCURACY.md has what each mode costs.

#include <cstddef>
#include <memory>
#include <string>

#include "fp8attn/fmha/device/fmha_fwd.h"
#include "fp8attn/status.h"

namespace fp8attn::fmha {

enum class AccuracyMode { kFp8, kFp8PerHead, kFp8SmoothRotate, kInt8QK, kBf16 };

char const* to_string(AccuracyMode mode);  ///< "fp8", "fp8_per_head", "fp8_smooth_rotate", "int8_qk", "bf16"

namespace device {

class FmhaFwdQuantized {
 public:
  struct Arguments {
    /// problem.input_type: the inputs' type (bf16, or f16 for the quantized modes); output bf16.
    FmhaProblem problem;
    TensorRef q;  ///< [batch, seqlen_q, heads_q, head_dim], head_dim contiguous
    TensorRef k;  ///< [batch, seqlen_k, heads_kv, head_dim]
    TensorRef v;  ///< [batch, seqlen_k, heads_kv, head_dim]
    TensorRef o;  ///< [batch, seqlen_q, heads_q, head_dim], written
    float* lse = nullptr;  ///< not with kFp8SmoothRotate / kInt8QK (smoothing K moves LSE, not O)
    float softmax_scale = 0.0f;  ///< 0: 1/sqrt(head_dim)
    AccuracyMode mode = AccuracyMode::kFp8;
    uint32_t rotation_seed = 0;  ///< kFp8SmoothRotate: the Hadamard signs (Q and K share them)
  };

  /// Whether the mode can run these arguments (the quantize instances and an attention instance for them).
  static Status can_implement(Arguments const& args);
  /// Workspace for the quantized operands, their descales and statistics, and the attention's own.
  static size_t get_workspace_size(Arguments const& args);
  /// Validates, plans every quantization and the attention (their instances, the workspace layout, the
  /// packed parameters). The workspace must stay valid until the last run().
  Status initialize(Arguments const& args, void* workspace, StreamHandle stream = nullptr);
  /// Launches the quantizations, then the attention. Asynchronous; no validation or allocation.
  Status run(StreamHandle stream = nullptr);
  Status operator()(Arguments const& args, void* workspace, StreamHandle stream = nullptr);
  /// The attention instance the last successful initialize() chose.
  char const* kernel_name() const;

 private:
  struct Plan;
  std::shared_ptr<Plan> plan_;
};

}  // namespace device
}  // namespace fp8attn::fmha
