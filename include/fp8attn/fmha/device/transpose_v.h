#pragma once
// fp8attn::fmha::device::TransposeV: V [batch, seqlen, heads, head_dim] -> V^T [batch, heads, head_dim, seqlen_pad].
//
// Hopper's FP8 wgmma reads both operands K-major; for O = P V the reduction runs over the sequence, so the
// FP8 attention kernels read V sequence-contiguous. FmhaFwd runs this operation itself when the caller's V is
// head_dim-contiguous; it is public so that a caller who reuses V across calls (a KV cache, a profiler) can
// transpose once and pass the sequence-contiguous view.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "fp8attn/fmha/device/fmha_fwd.h"
#include "fp8attn/status.h"
#include "fp8attn/types.h"

namespace fp8attn::fmha {

/// Rows of V^T are padded to a multiple of this many elements (whole 32-key blocks, which the key-permuted
/// order works in; 16-byte aligned FP8 rows); the padding is written with zeros.
inline constexpr int64_t kVtSeqAlign = 32;

/// seqlen rounded up to kVtSeqAlign: the row length (in elements) of V^T.
inline constexpr int64_t padded_seqlen(int64_t seqlen) { return (seqlen + kVtSeqAlign - 1) / kVtSeqAlign * kVtSeqAlign; }

struct TransposeVArguments {
  int batch = 0;
  int heads = 0;
  int seqlen = 0;
  int head_dim = 0;
  DataType type = DataType::kE4M3;  ///< one-byte types only (the bytes are moved as they are)
  TensorRef v;                      ///< [batch, seqlen, heads, head_dim], head_dim contiguous
  void* vt = nullptr;               ///< [batch, heads, head_dim, padded_seqlen(seqlen)], packed, written
  /// Store the keys of each 32-key block in the order the Gluon attention kernel's P fragment holds them:
  /// position 16h + 4t + 2j + e holds key 16h + 8j + 2t + e (h, j, e in {0, 1}, t in 0..3). This is the V^T
  /// the "vkperm" attention instances read; FmhaFwd runs this variant itself for them.
  bool key_permuted = false;
  std::string kernel_name;          ///< empty: the instance compiled for head_dim (and key_permuted)
};

namespace device {

class TransposeV {
 public:
  /// Checks the arguments against the compiled instances; the message names the argument and value.
  static Status can_implement(TransposeVArguments const& args);
  /// Bytes of V^T the output buffer must hold: batch * heads * head_dim * padded_seqlen(seqlen) elements.
  static size_t output_bytes(TransposeVArguments const& args);
  /// Validates, selects the instance, loads its module and packs the launch parameters.
  Status initialize(TransposeVArguments const& args, StreamHandle stream = nullptr);
  /// Launches on `stream`. Asynchronous; no validation or allocation.
  Status run(StreamHandle stream = nullptr);
  Status operator()(TransposeVArguments const& args, StreamHandle stream = nullptr);

 private:
  struct Params;
  std::shared_ptr<Params> params_;
};

}  // namespace device
}  // namespace fp8attn::fmha
