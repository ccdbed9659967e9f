#pragma once
// One compiled kernel instance as the generator embeds it (codegen/aot_compile.py writes one .cpp per
// instance, codegen/emit_registry.py the table). Operation-independent: what the runtime needs to load and
// launch it, plus a pointer to its operation's configuration record (src/fmha/*_kernel_config.h).
// Internal: the public view is library::Operation.

#include <cstddef>

#include "fp8attn/library/operation.h"

namespace fp8attn::detail {

/// How a kernel expects one of its host TMA descriptor parameters encoded (from Triton's tensordesc_meta):
/// the swizzle and box the compiler chose (it may split a logical block into several copies).
struct TensorDescMeta {
  int swizzle;        ///< CUtensorMapSwizzle
  int element_bytes;
  int data_type;      ///< CUtensorMapDataType
  int rank;
  unsigned block[5];  ///< box, outermost first (Triton's order)
};

struct KernelInstance {
  char const* name;              ///< procedural name, the key everywhere
  char const* function;          ///< entry symbol inside the cubin
  unsigned char const* cubin;
  size_t cubin_size;
  int launch_warps;              ///< threads per CTA = 32 * launch_warps
  int shared_bytes;              ///< dynamic shared memory per CTA
  int global_scratch_bytes;      ///< per program, for device-side TMA descriptors
  int global_scratch_align;
  library::OperationKind kind;
  library::KernelFamily family;
  void const* config;            ///< the operation's record: fmha::detail::FmhaKernelConfig, ...
  TensorDescMeta const* tensor_descs;  ///< one per tensordesc parameter, in order; null when none
  int num_tensor_descs;

  /// The configuration record, typed (the caller knows the kind).
  template <typename Config>
  Config const& config_as() const {
    return *static_cast<Config const*>(config);
  }
};

/// Every instance in this build, in manifest order (generated).
extern KernelInstance const* const kKernelInstances[];
extern size_t const kNumKernelInstances;
extern char const kTritonVersion[];

}  // namespace fp8attn::detail
