#pragma once
// fp8attn::quant::device::Quantize: BF16/FP16 Q, K or V [batch, seqlen, heads, head_dim] -> the e4m3 (or int8)
// operands of the attention kernels and their float32 descales (x ~= q * descale), on the GPU, in one to six
// launches (fewer when fewer statistics are needed, one more when rotating at head_dim <= 128).
//
//   per tensor    one descale, amax(|y|) / QMAX over the whole tensor                 descale [1]
//   per head      one per (batch, kv head): the query heads of a GQA group share one   descale [batch, heads_kv]
//   per block     one per (batch, head, block of kQuantizeBlockTokens tokens)          descale [batch, heads, blocks]
//   block pair    one per (batch, head, 2 * kQuantizeBlockTokens tokens), written to   descale [batch, heads, blocks]
//                 both of its blocks' entries (the last alone where it has no pair): the per-block layout, read by
//                 any per-block attention instance, and with FmhaFwd::Arguments::k_descale_paired by the "kpair"
//                 ones, which read one k descale per 128-key tile. [batch, seqlen, heads, head_dim] output only.
//
// QMAX is 448 for e4m3 and 127 for int8 (symmetric, round to nearest even). Exact transforms applied first
// (y below): `rotate` multiplies by a random-sign Hadamard matrix over head_dim (Q and K rotated with the same
// seed keep Q K^T), `smooth` subtracts each (batch, head)'s mean over the sequence (for K: softmax does not
// change). A given (static) descale skips the statistics: values beyond QMAX * descale saturate to +-QMAX.
// Non-finite inputs: the amax ignores them; +-Inf saturates, NaN stays NaN in e4m3 and becomes 0 in int8.
//
// V for the FP8 P.V product can be written directly as V^T [batch, heads, head_dim, padded_seqlen(seqlen)]
// (packed, zero padding), optionally in the key-permuted order of the "vkperm" attention instances, which
// then need no transpose (Arguments::v_key_permuted).

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "fp8attn/fmha/device/fmha_fwd.h"
#include "fp8attn/status.h"
#include "fp8attn/types.h"

namespace fp8attn::quant {

/// Tokens per block of the per-block granularity: the blocks the attention kernels' per-block descales use.
inline constexpr int kQuantizeBlockTokens = fmha::kDescaleBlockTokens;

/// The library's smoothing sample stride for a sequence of seqlen tokens (QuantizeArguments::smooth_sample_stride
/// 0): every n-th block with n = max(1, min(8, blocks / 4)), blocks = cdiv(seqlen, kQuantizeBlockTokens), so the mean
/// comes from at least 4 blocks (at most 1 in 8 is read). On SmolLM2 (emulated, docs/perf/NOTES.md) every 8th block
/// costs no perplexity against the full mean.
int smooth_sample_stride_for(int seqlen);

enum class Granularity { kPerTensor, kPerHead, kPerBlock, kPerBlockPair };
enum class OutputLayout {
  kBSHD,            ///< [batch, seqlen, heads, head_dim] with the output TensorRef's strides
  kVt,              ///< V^T [batch, heads, head_dim, padded_seqlen], packed (the FP8 P.V operand)
  kVtKeyPermuted,   ///< as kVt, keys in the vkperm attention instances' order (fmha::TransposeVArguments)
};

char const* to_string(Granularity granularity);  ///< "tensor", "head", "block", "block_pair"
char const* to_string(OutputLayout layout);      ///< "bshd", "vt", "vt_kperm"

struct QuantizeArguments {
  int batch = 0;
  int seqlen = 0;
  int heads = 0;
  int head_dim = 0;
  /// Per-head descales are per (batch, kv head): heads / heads_kv consecutive heads share one. 0: heads.
  int heads_kv = 0;
  DataType input_type = DataType::kBF16;   ///< bf16 (f16 where compiled)
  DataType output_type = DataType::kE4M3;  ///< e4m3 or i8
  Granularity granularity = Granularity::kPerTensor;
  OutputLayout layout = OutputLayout::kBSHD;
  bool smooth = false;         ///< subtract each (batch, head)'s mean over the sequence (K)
  /// smooth: the mean is taken over every smooth_sample_stride-th block of kQuantizeBlockTokens tokens (1: over
  /// every token; 0: the library's rule, smooth_sample_stride_for(seqlen)). Any vector subtracted from every key
  /// leaves softmax exact, so a sampled mean changes only how well the centred keys round, and the statistics
  /// pass reads 1/stride of the tensor. 0 or 1 without smooth.
  int smooth_sample_stride = 1;
  bool rotate = false;         ///< random-sign Hadamard rotation over head_dim (Q and K, same seed)
  uint32_t rotation_seed = 0;  ///< the signs: kernels/common/numerics.py hadamard_sign
  fmha::TensorRef input;       ///< head_dim contiguous; other strides multiples of 16 elements
  /// kBSHD: the output's strides (head_dim contiguous, multiples of 16 elements); kVt*: only ptr is used.
  fmha::TensorRef output;
  /// Written (16 bytes or more apart from everything else): see the granularities above. Null with a
  /// static descale.
  float* descale = nullptr;
  /// Given instead of computed (per tensor [1] or per head [batch, heads_kv]); not with per block.
  float const* static_descale = nullptr;
  std::string kernel_name;  ///< empty: the apply instance compiled for these types, head_dim and layout
};

namespace device {

class Quantize {
 public:
  using Arguments = QuantizeArguments;
  /// Checks the arguments against the compiled instances; the message names the argument and value.
  static Status can_implement(Arguments const& args);
  /// The apply instance these arguments select (kernel_name, or the one compiled for the types, head_dim and
  /// layout), or why none; pointers are not looked at.
  static Status select_kernel(Arguments const& args, std::string* name);
  /// Device workspace run() needs: the rotation matrix (rotate at head_dim <= 128: head_dim^2 input elements) and
  /// the statistics (smoothing, computed per-tensor / per-head descales); 0 when neither is needed or the
  /// arguments are refused. initialize() refuses a null workspace when this is not 0.
  static size_t get_workspace_size(Arguments const& args);
  /// Floats the descale output holds for these arguments (0 with a static descale).
  static size_t descale_count(Arguments const& args);
  /// Bytes the output must hold: kBSHD counts by the strides' extent; kVt* batch * heads * head_dim *
  /// padded_seqlen(seqlen).
  static size_t output_bytes(Arguments const& args);
  /// Validates, selects the instances, loads their modules and packs every launch's parameters.
  Status initialize(Arguments const& args, void* workspace = nullptr, StreamHandle stream = nullptr);
  /// Launches the stages on `stream`. Asynchronous; no validation or allocation.
  Status run(StreamHandle stream = nullptr);
  Status operator()(Arguments const& args, void* workspace = nullptr, StreamHandle stream = nullptr);

 private:
  struct Plan;
  std::shared_ptr<Plan> plan_;
};

}  // namespace device
}  // namespace fp8attn::quant
