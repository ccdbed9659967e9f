#pragma once
// --inject-fault: deliberate errors written into an output after a run and before its verification, so that
// the verifier can be checked (a self-test: the rows must come out incorrect).

#include "fp8attn/fmha/device/fmha_fwd.h"
#include "fp8attn/status.h"
#include "fp8attn/types.h"

namespace fp8attn::profiler {

/// The output rows zero-tile zeroes for (batch 0, head 0): [kZeroTileBegin, kZeroTileEnd), one 128-row tile.
inline constexpr int kZeroTileBegin = 128;
inline constexpr int kZeroTileEnd = 256;

/// Zeroes rows [kZeroTileBegin, min(kZeroTileEnd, seqlen_q)) of (batch 0, head 0) of `o`, a
/// [batch, seqlen_q, heads, head_dim] tensor of `type` elements with o's strides. Asynchronous on `stream`.
Status zero_tile(fmha::TensorRef const& o, DataType type, int seqlen_q, int head_dim, StreamHandle stream);

}  // namespace fp8attn::profiler
