#include <string>
#include <vector>

#include "fp8attn/library/operation.h"
#include "kernel_instance.h"

namespace fp8attn::library {
namespace {

DataType type_of(char const* name) { return parse_data_type(name).value_or(DataType::kF32); }

std::vector<FmhaDescription> build() {
  std::vector<FmhaDescription> ops;
  for (size_t i = 0; i < detail::kNumKernelInstances; ++i) {
    detail::KernelInstance const& k = *detail::kKernelInstances[i];
    if (k.kind != detail::KernelKind::kFmhaFwd) continue;
    DataType qk = type_of(k.qk_type);
    bool fp8 = qk == DataType::kE4M3 || qk == DataType::kE5M2;
    ops.push_back(FmhaDescription{k.name, qk, type_of(k.v_type), type_of(k.acc_type), type_of(k.out_type),
                                  k.block_m, k.block_n, k.head_dim, k.warps, k.stages, k.causal,
                                  k.warp_specialized, k.even_n, fp8, !k.warp_specialized, k.launch_warps,
                                  k.shared_bytes});
  }
  return ops;
}

}  // namespace

std::vector<FmhaDescription> const& fmha_operations() {
  static std::vector<FmhaDescription> const ops = build();
  return ops;
}

FmhaDescription const* find_fmha_operation(std::string_view name) {
  for (FmhaDescription const& op : fmha_operations()) {
    if (op.name == name) return &op;
  }
  return nullptr;
}

char const* triton_version() { return detail::kTritonVersion; }

}  // namespace fp8attn::library
