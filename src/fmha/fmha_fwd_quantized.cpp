// FmhaFwdQuantized: quantize Q, K, V into the workspace (quant::device::Quantize), then FmhaFwd over them.

#include "fp8attn/fmha/device/fmha_fwd_quantized.h"

#include <cstdint>
#include <string>
#include <utility>

#include "fp8attn/fmha/device/transpose_v.h"
#include "fp8attn/quant/device/quantize.h"

namespace fp8attn::fmha {

char const* to_string(AccuracyMode mode) {
  switch (mode) {
    case AccuracyMode::kFp8: return "fp8";
    case AccuracyMode::kFp8PerHead: return "fp8_per_head";
    case AccuracyMode::kFp8SmoothRotate: return "fp8_smooth_rotate";
    case AccuracyMode::kInt8QK: return "int8_qk";
    case AccuracyMode::kBf16: return "bf16";
  }
  return "unknown";
}

namespace device {
namespace {

using quant::Granularity;
using quant::OutputLayout;
using quant::QuantizeArguments;
using quant::device::Quantize;
using Arguments = FmhaFwdQuantized::Arguments;

/// Where validation places the workspace when the caller's is not known yet: far above any user-space address
/// (x86-64 and aarch64 user space ends below 2^48), so that the overlap checks cannot hit the caller's tensors.
constexpr uintptr_t kValidationBase = uintptr_t{1} << 56;

size_t align_up(size_t v) { return (v + 255) / 256 * 256; }

/// Every launch's arguments, with their buffers laid out in the workspace at `base`.
struct Pieces {
  bool quantized = false;
  QuantizeArguments q, k, v;
  FmhaFwd::Arguments attention;
  size_t total = 0;  ///< workspace bytes
};

QuantizeArguments quantize_args(Arguments const& a, TensorRef const& x, int seqlen, int heads) {
  QuantizeArguments q;
  q.batch = a.problem.batch;
  q.seqlen = seqlen;
  q.heads = heads;
  q.head_dim = a.problem.head_dim;
  q.input_type = a.problem.input_type;
  q.input = x;
  return q;
}

/// Takes `bytes` of the workspace (256-byte aligned) and returns its address.
struct Allocator {
  uintptr_t base;
  size_t used = 0;
  void* take(size_t bytes) {
    void* p = reinterpret_cast<void*>(base + used);
    used += align_up(bytes);
    return p;
  }
};

Status compose(Arguments const& a, uintptr_t base, Pieces* out) {
  FmhaProblem const& p = a.problem;
  Pieces& r = *out;
  r = Pieces{};
  FmhaFwd::Arguments& att = r.attention;
  att.problem = p;
  att.problem.output_type = DataType::kBF16;
  att.o = a.o;
  att.lse = a.lse;
  att.softmax_scale = a.softmax_scale;
  if (a.mode == AccuracyMode::kBf16) {
    if (p.input_type != DataType::kBF16) {
      return Status(StatusCode::kErrorNotSupported, std::string("mode=bf16 takes bf16 inputs, not input_type=") +
                                                        fp8attn::to_string(p.input_type));
    }
    att.q = a.q;
    att.k = a.k;
    att.v = a.v;
    Allocator ws{base};
    ws.take(FmhaFwd::get_workspace_size(att));
    r.total = ws.used;
    return FmhaFwd::can_implement(att);
  }
  r.quantized = true;
  bool const int8 = a.mode == AccuracyMode::kInt8QK;
  if (a.lse && (int8 || a.mode == AccuracyMode::kFp8SmoothRotate)) {
    // Smoothing K shifts every score of query row i by softmax_scale * q_i . mean(K): O does not change, LSE does.
    return Status(StatusCode::kErrorNotSupported, std::string("lse with mode=") + to_string(a.mode) +
                                                      ": K smoothing moves each row's log-sum-exp by a constant "
                                                      "(O is unchanged); use mode=fp8 or fp8_per_head for LSE");
  }
  r.q = quantize_args(a, a.q, p.seqlen_q, p.heads_q);
  r.k = quantize_args(a, a.k, p.seqlen_k, p.heads_kv);
  r.v = quantize_args(a, a.v, p.seqlen_k, p.heads_kv);
  r.q.output_type = r.k.output_type = int8 ? DataType::kI8 : DataType::kE4M3;
  if (a.mode == AccuracyMode::kFp8PerHead) {
    r.q.granularity = r.k.granularity = r.v.granularity = Granularity::kPerHead;
    r.q.heads_kv = p.heads_kv;  // the query heads of a kv head share its descale (FlashAttention-3's convention)
  }
  if (int8) r.q.granularity = r.k.granularity = Granularity::kPerBlock;
  r.k.smooth = int8 || a.mode == AccuracyMode::kFp8SmoothRotate;
  // int8_qk: K's mean from sampled blocks (the library's rule, every 8th from 2k tokens on): the statistics pass
  // reads ~1/8 of K, and on SmolLM2 (emulated) the perplexity did not move against the full mean.
  if (int8) r.k.smooth_sample_stride = 0;
  // int8_qk rotates too: on SmolLM2 it took the perplexity cost from +0.20 / +0.22% to +0.07 / +0.13% (windows of
  // 2048 / 8192; docs/ACCURACY.md).
  r.q.rotate = r.k.rotate = int8 || a.mode == AccuracyMode::kFp8SmoothRotate;
  r.q.rotation_seed = r.k.rotation_seed = a.rotation_seed;

  // V straight into V^T; in the vkperm key order when an instance reads it (then no transpose at all).
  for (bool kperm : {true, false}) {
    Allocator ws{base};
    int64_t const pad = padded_seqlen(p.seqlen_k);
    TensorRef const q8 = TensorRef::packed(ws.take(size_t(p.batch) * p.seqlen_q * p.heads_q * p.head_dim), Layout::kBSHD,
                                           p.seqlen_q, p.heads_q, p.head_dim);
    TensorRef const k8 = TensorRef::packed(ws.take(size_t(p.batch) * p.seqlen_k * p.heads_kv * p.head_dim),
                                           Layout::kBSHD, p.seqlen_k, p.heads_kv, p.head_dim);
    void* const vt = ws.take(size_t(p.batch) * p.heads_kv * p.head_dim * pad);
    r.q.output = q8;
    r.k.output = k8;
    r.v.output.ptr = vt;
    r.v.layout = kperm ? OutputLayout::kVtKeyPermuted : OutputLayout::kVt;
    for (QuantizeArguments* x : {&r.q, &r.k, &r.v}) {
      x->descale = static_cast<float*>(ws.take(Quantize::descale_count(*x) * sizeof(float)));
    }
    if (kperm && !Quantize::can_implement(r.v)) continue;
    if (int8) {
      // K's descales one per 128 tokens, in pairs of the per-block layout (block_pair), where the build has the
      // 128-token apply: the attention then runs the kpair instances (one k descale a 128-key tile). Per 64 tokens
      // elsewhere.
      r.k.granularity = Granularity::kPerBlockPair;
      if (!Quantize::can_implement(r.k)) r.k.granularity = Granularity::kPerBlock;
    }
    for (QuantizeArguments* x : {&r.q, &r.k, &r.v}) {
      if (Status s = Quantize::can_implement(*x); !s) {
        return Status(s.code(), std::string(x == &r.q ? "quantizing q: " : x == &r.k ? "quantizing k: " : "quantizing v: ") +
                                    s.message());
      }
    }
    att.problem.input_type = int8 ? DataType::kI8 : DataType::kE4M3;
    att.q = q8;
    att.k = k8;
    att.v = TensorRef{vt, int64_t{p.heads_kv} * p.head_dim * pad, 1, int64_t{p.head_dim} * pad, pad};
    att.v_key_permuted = kperm;
    int64_t const q_blocks = (int64_t{p.seqlen_q} + kDescaleBlockTokens - 1) / kDescaleBlockTokens;
    int64_t const k_blocks = (int64_t{p.seqlen_k} + kDescaleBlockTokens - 1) / kDescaleBlockTokens;
    if (int8) {
      att.q_descale = DescaleRef::per_block_q(r.q.descale, p.heads_q, q_blocks);
      att.k_descale = DescaleRef::per_block_k(r.k.descale, p.heads_kv, k_blocks);
      att.k_descale_paired = r.k.granularity == Granularity::kPerBlockPair;
      att.v_descale = DescaleRef::per_tensor(r.v.descale);
    } else if (a.mode == AccuracyMode::kFp8PerHead) {
      att.q_descale = DescaleRef::per_head(r.q.descale, p.heads_kv);
      att.k_descale = DescaleRef::per_head(r.k.descale, p.heads_kv);
      att.v_descale = DescaleRef::per_head(r.v.descale, p.heads_kv);
    } else {
      att.q_descale = DescaleRef::per_tensor(r.q.descale);
      att.k_descale = DescaleRef::per_tensor(r.k.descale);
      att.v_descale = DescaleRef::per_tensor(r.v.descale);
    }
    Status const s = FmhaFwd::can_implement(att);
    if (!s && kperm) continue;  // no vkperm instance for this problem: the plain V^T
    if (!s) return Status(s.code(), std::string("attention over the quantized operands: ") + s.message());
    for (QuantizeArguments* x : {&r.q, &r.k, &r.v}) ws.take(Quantize::get_workspace_size(*x));
    ws.take(FmhaFwd::get_workspace_size(att));
    r.total = ws.used;
    return Status::success();
  }
  return Status(StatusCode::kErrorInternal, "no V^T layout composed");
}

}  // namespace

struct FmhaFwdQuantized::Plan {
  bool quantized = false;
  Quantize q, k, v;
  FmhaFwd attention;
};

Status FmhaFwdQuantized::can_implement(Arguments const& a) {
  Pieces pieces;
  return compose(a, kValidationBase, &pieces);
}

size_t FmhaFwdQuantized::get_workspace_size(Arguments const& a) {
  Pieces pieces;
  return compose(a, kValidationBase, &pieces) ? pieces.total : 0;
}

Status FmhaFwdQuantized::initialize(Arguments const& a, void* workspace, StreamHandle stream) {
  plan_.reset();
  Pieces sized;
  if (Status s = compose(a, kValidationBase, &sized); !s) return s;
  if (sized.total > 0 && !workspace) {
    return Status(StatusCode::kErrorNullPointer,
                  "workspace is null; this mode needs " + std::to_string(sized.total) + " bytes (get_workspace_size)");
  }
  if (reinterpret_cast<uintptr_t>(workspace) % 256 != 0) {
    return Status(StatusCode::kErrorMisalignedOperand, "workspace is not 256-byte aligned");
  }
  Pieces r;
  auto const base = reinterpret_cast<uintptr_t>(workspace);
  if (Status s = compose(a, base, &r); !s) return s;
  auto plan = std::make_shared<Plan>();
  plan->quantized = r.quantized;
  // The quantizations' statistics, then the attention's own workspace, after the operands (compose's order).
  Allocator ws{base, 0};
  size_t attention_offset = 0;
  if (r.quantized) {
    ws.used = r.total - align_up(FmhaFwd::get_workspace_size(r.attention));
    for (QuantizeArguments const* x : {&r.q, &r.k, &r.v}) ws.used -= align_up(Quantize::get_workspace_size(*x));
    void* const q_stats = ws.take(Quantize::get_workspace_size(r.q));
    void* const k_stats = ws.take(Quantize::get_workspace_size(r.k));
    void* const v_stats = ws.take(Quantize::get_workspace_size(r.v));
    if (Status s = plan->q.initialize(r.q, q_stats, stream); !s) return s;
    if (Status s = plan->k.initialize(r.k, k_stats, stream); !s) return s;
    if (Status s = plan->v.initialize(r.v, v_stats, stream); !s) return s;
    attention_offset = ws.used;
  }
  if (Status s = plan->attention.initialize(r.attention, reinterpret_cast<void*>(base + attention_offset), stream); !s) {
    return s;
  }
  plan_ = std::move(plan);
  return Status::success();
}

Status FmhaFwdQuantized::run(StreamHandle stream) {
  if (!plan_) return Status(StatusCode::kErrorNotInitialized, "run() called before a successful initialize()");
  if (plan_->quantized) {
    for (Quantize* x : {&plan_->q, &plan_->k, &plan_->v}) {
      if (Status s = x->run(stream); !s) return s;
    }
  }
  return plan_->attention.run(stream);
}

Status FmhaFwdQuantized::operator()(Arguments const& a, void* workspace, StreamHandle stream) {
  if (Status s = initialize(a, workspace, stream); !s) return s;
  return run(stream);
}

char const* FmhaFwdQuantized::kernel_name() const { return plan_ ? plan_->attention.kernel_name() : ""; }

}  // namespace device
}  // namespace fp8attn::fmha
