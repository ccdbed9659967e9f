// The library of operations: one Operation object per compiled instance, built once from the generated
// instance table. Each kind has its own small adapter class here (as cutlass_library keys its operation
// wrappers by kind); the adapters forward to the typed device handles with the instance forced by name.

#include <memory>
#include <string>
#include <vector>

#include "fmha/fmha_internal.h"
#include "fp8attn/fmha/device/fmha_fwd.h"
#include "fp8attn/fmha/device/transpose_v.h"
#include "fp8attn/library/operation.h"
#include "fp8attn/paged/device/paged.h"
#include "fp8attn/quant/device/quantize.h"
#include "paged/paged_kernel_config.h"
#include "quant/quantize_kernel_config.h"
#include "runtime/kernel_instance.h"

namespace fp8attn::library {
namespace {

using detail::KernelInstance;
using fmha::detail::FmhaKernelConfig;
using fmha::detail::TransposeVKernelConfig;

std::string fmha_summary(FmhaKernelConfig const& c) {
  return "attention forward, " + std::string(to_string(c.qk_type)) + " in, " + to_string(c.out_type) + " out, " +
         std::to_string(c.block_m) + "x" + std::to_string(c.block_n) + " tile, D=" + std::to_string(c.head_dim) +
         (c.causal ? ", causal" : ", full") + (c.warp_specialized ? ", warp-specialized" : "") +
         (c.even_n ? ", seqlen_k % " + std::to_string(c.block_n) + " == 0 only" : "") +
         (c.v_fp8() && !c.v_transposed ? ", V transposed on chip" : "") +
         (c.v_key_permuted ? ", key-permuted V^T" : "") + (c.block_descale ? ", per-block q/k descales" : "") +
         (c.k_descale_paired ? " (k in equal pairs: one a 128-key tile)" : "") +
         (c.qk_type == DataType::kI8 ? ", INT8 Q.K^T with e4m3 V" : "") + (c.softcap ? ", logit soft-capping" : "") +
         (c.varlen ? ", packed sequences (varlen)" : "");
}

class FmhaFwdOperation : public Operation {
 public:
  explicit FmhaFwdOperation(KernelInstance const& k) {
    FmhaKernelConfig const& c = k.config_as<FmhaKernelConfig>();
    description_ = {k.name,     OperationKind::kFmhaFwd, k.family,        c.qk_type, c.acc_type, c.out_type,
                    k.launch_warps, k.shared_bytes,        fmha_summary(c)};
  }
  OperationDescription const& description() const override { return description_; }
  Status can_implement(void const* arguments) const override {
    return fmha::device::FmhaFwd::can_implement(forced(arguments));
  }
  size_t get_workspace_size(void const* arguments) const override {
    return fmha::device::FmhaFwd::get_workspace_size(forced(arguments));
  }
  Status run(void const* arguments, void* workspace, StreamHandle stream) const override {
    fmha::device::FmhaFwd op;
    return op(forced(arguments), workspace, stream);
  }

 private:
  fmha::device::FmhaFwd::Arguments forced(void const* arguments) const {
    auto args = *static_cast<fmha::device::FmhaFwd::Arguments const*>(arguments);
    args.kernel_name = description_.name;
    return args;
  }
  OperationDescription description_;
};

class TransposeVOperation : public Operation {
 public:
  explicit TransposeVOperation(KernelInstance const& k) {
    TransposeVKernelConfig const& c = k.config_as<TransposeVKernelConfig>();
    description_ = {k.name,         OperationKind::kTransposeV, k.family,       DataType::kE4M3, DataType::kE4M3,
                    DataType::kE4M3, k.launch_warps,             k.shared_bytes,
                    "V -> V^T (one-byte elements), " + std::to_string(c.block_s) + " rows per CTA, D=" +
                        std::to_string(c.head_dim)};
  }
  OperationDescription const& description() const override { return description_; }
  Status can_implement(void const* arguments) const override {
    return fmha::device::TransposeV::can_implement(forced(arguments));
  }
  size_t get_workspace_size(void const*) const override { return 0; }
  Status run(void const* arguments, void*, StreamHandle stream) const override {
    fmha::device::TransposeV op;
    return op(forced(arguments), stream);
  }

 private:
  fmha::TransposeVArguments forced(void const* arguments) const {
    auto args = *static_cast<fmha::TransposeVArguments const*>(arguments);
    args.kernel_name = description_.name;
    return args;
  }
  OperationDescription description_;
};

std::string quantize_summary(quant::detail::QuantizeKernelConfig const& c) {
  using quant::detail::QuantizeStage;
  if (c.stage == QuantizeStage::kReduce) return "quantize stage: partial sums / amax -> mean / descale";
  if (c.stage == QuantizeStage::kRotation) {
    return "quantize stage: the random-sign Hadamard matrix in " + std::string(to_string(c.in_type)) +
           ", once per call";
  }
  std::string const tile = std::to_string(c.block_s) + " tokens per CTA, D=" + std::to_string(c.head_dim);
  if (c.stage == QuantizeStage::kStats) {
    return "quantize stage: per-block column sums / amax of " + std::string(to_string(c.in_type)) + ", " + tile;
  }
  return "quantize " + std::string(to_string(c.in_type)) + " -> " + to_string(c.out_type) + ", " + tile +
         (c.key_permuted ? ", V^T in the vkperm key order" : "") +
         (c.programs_per_sm > 0 ? ", persistent (" + std::to_string(c.programs_per_sm) + " CTAs per SM)" : "");
}

/// A quantize instance. Only apply instances run on their own; the stats, reduce and rotation stages are listed (they
/// are compiled instances of this kind) but refuse to be run alone, with a message saying so.
class QuantizeOperation : public Operation {
 public:
  explicit QuantizeOperation(KernelInstance const& k) {
    auto const& c = k.config_as<quant::detail::QuantizeKernelConfig>();
    description_ = {k.name,         OperationKind::kQuantize, k.family,      c.in_type, DataType::kF32, c.out_type,
                    k.launch_warps, k.shared_bytes,           quantize_summary(c)};
  }
  OperationDescription const& description() const override { return description_; }
  Status can_implement(void const* arguments) const override {
    return quant::device::Quantize::can_implement(forced(arguments));
  }
  size_t get_workspace_size(void const* arguments) const override {
    return quant::device::Quantize::get_workspace_size(forced(arguments));
  }
  Status run(void const* arguments, void* workspace, StreamHandle stream) const override {
    quant::device::Quantize op;
    return op(forced(arguments), workspace, stream);
  }

 private:
  quant::QuantizeArguments forced(void const* arguments) const {
    auto args = *static_cast<quant::QuantizeArguments const*>(arguments);
    args.kernel_name = description_.name;
    return args;
  }
  OperationDescription description_;
};

/// A paged-cache instance: decode instances run paged::PagedDecodeArguments, append instances
/// paged::PagedAppendArguments; combine instances are decode's internal stage and refuse to run alone.
class PagedOperation : public Operation {
 public:
  explicit PagedOperation(KernelInstance const& k) : stage_(k.config_as<paged::detail::PagedKernelConfig>().stage) {
    auto const& c = k.config_as<paged::detail::PagedKernelConfig>();
    std::string const tile = "D=" + std::to_string(c.head_dim);
    std::string summary;
    switch (stage_) {
      case paged::detail::PagedStage::kAppend:
        summary = "paged cache append: bf16 rows -> e4m3 pages of " + std::to_string(c.page) + " tokens, " + tile;
        break;
      case paged::detail::PagedStage::kDecode:
        summary = "paged decode over e4m3 pages of " + std::to_string(c.page) + " tokens, " + tile + ", " +
                  std::to_string(c.rows) + " query rows per CTA" +
                  (c.head_pairs ? std::string(", two kv heads per work item") +
                                      (c.pair_splits ? ", split over the keys" : ", one split")
                                : std::string());
        break;
      case paged::detail::PagedStage::kCombine:
        summary = "paged decode stage: split-KV combine, " + tile;
        break;
    }
    description_ = {k.name, OperationKind::kPaged, k.family, DataType::kE4M3, DataType::kF32,
                    stage_ == paged::detail::PagedStage::kAppend ? DataType::kE4M3 : DataType::kBF16,
                    k.launch_warps, k.shared_bytes, summary};
  }
  OperationDescription const& description() const override { return description_; }
  Status can_implement(void const* arguments) const override {
    switch (stage_) {
      case paged::detail::PagedStage::kDecode: return paged::device::PagedDecode::can_implement(decode(arguments));
      case paged::detail::PagedStage::kAppend: return paged::device::PagedAppend::can_implement(append(arguments));
      default: return internal();
    }
  }
  size_t get_workspace_size(void const* arguments) const override {
    return stage_ == paged::detail::PagedStage::kDecode
               ? paged::device::PagedDecode::get_workspace_size(decode(arguments))
               : 0;
  }
  Status run(void const* arguments, void* workspace, StreamHandle stream) const override {
    switch (stage_) {
      case paged::detail::PagedStage::kDecode: {
        paged::device::PagedDecode op;
        return op(decode(arguments), workspace, stream);
      }
      case paged::detail::PagedStage::kAppend: {
        paged::device::PagedAppend op;
        return op(append(arguments), stream);
      }
      default: return internal();
    }
  }

 private:
  paged::PagedDecodeArguments decode(void const* arguments) const {
    auto args = *static_cast<paged::PagedDecodeArguments const*>(arguments);
    args.kernel_name = description_.name;
    return args;
  }
  paged::PagedAppendArguments append(void const* arguments) const {
    auto args = *static_cast<paged::PagedAppendArguments const*>(arguments);
    args.kernel_name = description_.name;
    return args;
  }
  Status internal() const {
    return Status(StatusCode::kErrorNotSupported,
                  "kernel_name=" + description_.name + " is an internal stage of paged decode, not run alone");
  }
  paged::detail::PagedStage stage_;
  OperationDescription description_;
};

struct Library {
  std::vector<std::unique_ptr<Operation>> owned;
  std::vector<Operation const*> all;
  std::vector<FmhaDescription> fmha;

  Library() {
    for (size_t i = 0; i < detail::kNumKernelInstances; ++i) {
      KernelInstance const& k = *detail::kKernelInstances[i];
      switch (k.kind) {
        case OperationKind::kFmhaFwd: {
          owned.push_back(std::make_unique<FmhaFwdOperation>(k));
          FmhaKernelConfig const& c = k.config_as<FmhaKernelConfig>();
          fmha.push_back(FmhaDescription{k.name, c.qk_type, c.v_type, c.acc_type, c.out_type, c.block_m, c.block_n,
                                         c.head_dim, c.warps, c.stages, c.causal, c.warp_specialized, c.even_n,
                                         c.v_transposed, c.v_key_permuted, c.block_descale, c.softcap,
                                         fmha::detail::takes_varlen(k), !c.warp_specialized,
                                         k.launch_warps,
                                         k.shared_bytes, k.family, c.k_descale_paired});
          break;
        }
        case OperationKind::kTransposeV:
          owned.push_back(std::make_unique<TransposeVOperation>(k));
          break;
        case OperationKind::kQuantize:
          owned.push_back(std::make_unique<QuantizeOperation>(k));
          break;
        case OperationKind::kPaged:
          owned.push_back(std::make_unique<PagedOperation>(k));
          break;
      }
      all.push_back(owned.back().get());
    }
  }
};

Library const& library() {
  static Library const lib;
  return lib;
}

}  // namespace

std::vector<Operation const*> const& operations() { return library().all; }

std::vector<Operation const*> operations(OperationKind kind) {
  std::vector<Operation const*> out;
  for (Operation const* op : library().all) {
    if (op->description().kind == kind) out.push_back(op);
  }
  return out;
}

Operation const* find_operation(std::string_view name) {
  for (Operation const* op : library().all) {
    if (op->description().name == name) return op;
  }
  return nullptr;
}

std::vector<FmhaDescription> const& fmha_operations() { return library().fmha; }

FmhaDescription const* find_fmha_operation(std::string_view name) {
  for (FmhaDescription const& op : fmha_operations()) {
    if (op.name == name) return &op;
  }
  return nullptr;
}

char const* triton_version() { return detail::kTritonVersion; }

char const* to_string(OperationKind kind) {
  switch (kind) {
    case OperationKind::kFmhaFwd: return "fmha_fwd";
    case OperationKind::kTransposeV: return "transpose_v";
    case OperationKind::kQuantize: return "quantize";
    case OperationKind::kPaged: return "paged";
  }
  return "unknown";
}

char const* to_string(KernelFamily family) {
  switch (family) {
    case KernelFamily::kTriton: return "triton";
    case KernelFamily::kGluon: return "gluon";
  }
  return "unknown";
}

std::optional<OperationKind> parse_operation_kind(std::string_view name) {
  for (OperationKind k : {OperationKind::kFmhaFwd, OperationKind::kTransposeV, OperationKind::kQuantize,
                          OperationKind::kPaged}) {
    if (name == to_string(k)) return k;
  }
  return std::nullopt;
}

}  // namespace fp8attn::library
