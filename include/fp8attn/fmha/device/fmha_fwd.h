#pragma once
// fp8attn::fmha::device::FmhaFwd: the device-level handle for attention forward, CUTLASS style.
//
//   FmhaFwd::Arguments args;  ...fill...
//   if (auto s = FmhaFwd::can_implement(args); !s) { error(s.message()); }
//   void* ws = alloc(FmhaFwd::get_workspace_size(args));
//   FmhaFwd op;  op.initialize(args, ws, stream);  op.run(stream);
//
// Kernels are cubins compiled ahead of time from Triton and launched through the CUDA driver API
// (loaded lazily, once per context). No Python at run time.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "fp8attn/status.h"
#include "fp8attn/types.h"

namespace fp8attn::fmha {

namespace detail {
struct FmhaFwdPlan;
}

/// A [batch, seqlen, heads, head_dim] operand: pointer plus strides in ELEMENTS (head_dim stride must be 1).
struct TensorRef {
  void const* ptr = nullptr;
  int64_t stride_b = 0;
  int64_t stride_s = 0;
  int64_t stride_h = 0;
  int64_t stride_d = 1;

  /// Packed strides of a [batch, seqlen, heads, head_dim] tensor stored in `layout` order.
  static TensorRef packed(void const* ptr, Layout layout, int64_t seqlen, int64_t heads, int64_t head_dim);
};

/// Float32 descale factors on the device, element (b, kv head, query head, block) at
///   ptr[b * stride_b + h_kv * stride_h + h_q * stride_head_q + (token / kDescaleBlockTokens) * stride_block].
/// Per tensor: one float, strides 0. Per (batch, head_kv), the FlashAttention-3 convention: a [batch, heads_kv]
/// array, stride_b = heads_kv, stride_h = 1. stride_head_q (q only): one per query head. stride_block (q and k
/// only, "bdesc" instances): one per block of kDescaleBlockTokens query rows or keys, as quant::device::Quantize
/// writes them with granularity kPerBlock ([batch, heads, blocks]). Zero strides broadcast. Null means 1.0
/// (allowed for BF16/FP16 inputs only).
struct DescaleRef {
  float const* ptr = nullptr;
  int64_t stride_b = 0;
  int64_t stride_h = 0;
  int64_t stride_head_q = 0;
  int64_t stride_block = 0;

  static DescaleRef per_tensor(float const* ptr) { return {ptr, 0, 0}; }
  static DescaleRef per_head(float const* ptr, int64_t heads_kv) { return {ptr, heads_kv, 1}; }
  /// [batch, heads_q, blocks] for q, indexed by query head.
  static DescaleRef per_block_q(float const* ptr, int64_t heads_q, int64_t blocks) {
    return {ptr, heads_q * blocks, 0, blocks, 1};
  }
  /// [batch, heads_kv, blocks] for k.
  static DescaleRef per_block_k(float const* ptr, int64_t heads_kv, int64_t blocks) {
    return {ptr, heads_kv * blocks, blocks, 0, 1};
  }
};

/// Tokens per block of per-block descales (kernels/common/numerics.py DESCALE_BLOCK_TOKENS).
inline constexpr int kDescaleBlockTokens = 64;

struct FmhaProblem {
  int batch = 0;
  int heads_q = 0;
  int heads_kv = 0;  ///< heads_q must be a multiple of heads_kv (GQA/MQA)
  int seqlen_q = 0;
  int seqlen_k = 0;
  int head_dim = 0;
  bool causal = false;  ///< bottom-right aligned when seqlen_q != seqlen_k (FlashAttention convention)
  /// Q, K and V; kI8 is the INT8 Q.K^T mode: Q and K int8 with per-block descales, V e4m3.
  DataType input_type = DataType::kE4M3;
  DataType output_type = DataType::kBF16;  ///< O

  /// 4 * B * H_q * S_q * S_k * D, halved for causal attention when S_q == S_k.
  double flops() const;
};

namespace device {

class FmhaFwd {
 public:
  struct Arguments {
    FmhaProblem problem;
    TensorRef q;  ///< [batch, seqlen_q, heads_q, head_dim]
    TensorRef k;  ///< [batch, seqlen_k, heads_kv, head_dim]
    TensorRef v;  ///< [batch, seqlen_k, heads_kv, head_dim]; any strides (transposed in the workspace if needed)
    TensorRef o;  ///< [batch, seqlen_q, heads_q, head_dim], written (ptr is cast from const)
    float* lse = nullptr;  ///< optional [batch, heads_q, seqlen_q] float32, natural log; -inf for empty rows
    DescaleRef q_descale;
    DescaleRef k_descale;
    DescaleRef v_descale;
    float softmax_scale = 0.0f;  ///< 0 selects 1/sqrt(head_dim)
    std::string kernel_name;     ///< empty: the heuristic picks; otherwise this exact instance
    /// FP8 only: v is the sequence-contiguous view of a V^T that TransposeV wrote with key_permuted = true
    /// (stride_s == 1, rows of padded_seqlen(seqlen_k) or more elements). The attention kernel then reads it as
    /// it is: no transpose at run(), e.g. for a V reused across calls or produced transposed by a quantization
    /// pass. Only the "vkperm" instances read this order. In the last 32-key block, the positions whose key is
    /// >= seqlen_k must hold finite values (TransposeV writes zeros there; they meet P = 0, and 0 * NaN is NaN);
    /// note that they are not the row's last positions: position 16h + 4t + 2j + e holds key 16h + 8j + 2t + e.
    bool v_key_permuted = false;
    /// INT8 with per-block k descales only: the caller's k descales come in equal pairs, entries 2i and 2i + 1
    /// (keys [128i, 128i + 128)) holding one value, as quant::device::Quantize writes them with
    /// Granularity::kPerBlockPair (the int8_qk mode's K: one scale per 128 keys). The heuristic then runs the
    /// "kpair" twin of the instance it picks, which reads one k descale per 128-key tile (the same output on such
    /// descales, fewer instructions per tile). A promise the library cannot check without reading the descales:
    /// with unequal pairs a kpair instance applies entry 2i to both blocks.
    bool k_descale_paired = false;
    /// Sliding window (local attention, FlashAttention's convention): with c = seqlen_k - seqlen_q, query row i
    /// sees keys i + c - window_left <= j <= i + c + window_right; -1 leaves that side unlimited (causal caps
    /// the right side at 0). Tiles entirely outside a block's window are skipped. Every instance but evenn.
    int window_left = -1;
    int window_right = -1;
    /// Logit soft-capping (Gemma 2): scores s = softmax_scale * q.k become softcap * tanh(s / softcap); 0: off.
    /// Needs a "softcap" instance.
    float softcap = 0.0f;
    /// Varlen (packed sequences, FlashAttention's convention), set by giving both offset arrays: q and o are
    /// [total_q, heads_q, head_dim], k and v [total_k, heads_kv, head_dim] (the TensorRefs' stride_b is ignored);
    /// sequence b's query rows are cu_seqlens_q[b] .. cu_seqlens_q[b + 1] - 1 and its keys likewise (int32
    /// [batch + 1] on the device, never read on the host). problem.batch counts the sequences and
    /// problem.seqlen_q / seqlen_k bound their lengths (the grid); causal and windows apply per sequence
    /// (bottom-right aligned). A sequence whose offsets are not monotonic (with its neighbours too), leave
    /// [0, total] or exceed those bounds gets NaN in its rows (O and LSE) where its query range lies inside q, up
    /// to seqlen_q rows (the grid: rows past it are not written), and nothing is read for it. Rows of q that no
    /// sequence covers are not written. LSE is [batch, heads_q, seqlen_q] (rows past a sequence's length
    /// untouched). No per-block descales. The heuristic picks a Gluon "_varlen" instance (FP8 and BF16, head_dim
    /// 64 and 128; they run packed sequences only), else a Triton one (not evenn or warp-specialized). V in key
    /// order (FP8 V is transposed by the library into the workspace, each sequence's keys aligned to 16 columns
    /// for the Triton instances, to 128 and zero-padded for the Gluon ones).
    int32_t const* cu_seqlens_q = nullptr;
    int32_t const* cu_seqlens_k = nullptr;
    int64_t total_q = 0;
    int64_t total_k = 0;

    bool varlen() const { return cu_seqlens_q != nullptr || cu_seqlens_k != nullptr; }
  };

  /// Checks every argument against the compiled instances; the message names the argument and value.
  static Status can_implement(Arguments const& args);
  /// Bytes of device workspace run() needs (V^T staging, TMA descriptor scratch); may be 0. Returns 0 for
  /// arguments can_implement refuses.
  static size_t get_workspace_size(Arguments const& args);
  /// Name of the instance the heuristic (or kernel_name) selects, or the reason none does.
  static Status select_kernel(Arguments const& args, std::string* name);

  /// Validates, selects the instance, loads its module into the current CUDA context and packs the kernel
  /// parameters (Arguments become Params once). Pointers in `args` and the workspace must stay valid until
  /// the last run().
  Status initialize(Arguments const& args, void* workspace, StreamHandle stream = nullptr);
  /// Launches on `stream` (V transpose first, when needed). Asynchronous. No validation, no allocation, no
  /// host-device synchronization: safe to call repeatedly and to capture in a CUDA graph.
  Status run(StreamHandle stream = nullptr);
  Status operator()(Arguments const& args, void* workspace, StreamHandle stream = nullptr);

  /// The instance chosen by the last successful initialize() (empty before).
  char const* kernel_name() const;

 private:
  std::shared_ptr<detail::FmhaFwdPlan> plan_;  ///< what run() launches; null until initialize() succeeds
};

}  // namespace device
}  // namespace fp8attn::fmha
