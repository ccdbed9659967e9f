#pragma once
// One compiled kernel instance as the generator embeds it (codegen/aot_compile.py writes one per .cpp;
// codegen/emit_registry.py writes the table). Internal: the public view is library::FmhaDescription.

#include <cstddef>

namespace fp8attn::detail {

enum class KernelKind { kFmhaFwd, kTransposeV };

struct KernelInstance {
  char const* name;       ///< procedural name, the key everywhere
  char const* function;   ///< entry symbol inside the cubin
  unsigned char const* cubin;
  size_t cubin_size;
  int launch_warps;       ///< threads per CTA = 32 * launch_warps
  int shared_bytes;       ///< dynamic shared memory per CTA
  int global_scratch_bytes;  ///< per program, for device-side TMA descriptors
  int global_scratch_align;
  KernelKind kind;
  int head_dim;
  int block_m;            ///< query rows per CTA (sequence rows per CTA for the V transpose)
  int block_n;            ///< keys per main-loop tile
  int warps;              ///< num_warps at compile time (the name's w<N>)
  int stages;
  bool causal;
  bool warp_specialized;
  bool even_n;            ///< no masked tail: needs seqlen_k % block_n == 0, never causal
  char const* qk_type;
  char const* v_type;
  char const* acc_type;
  char const* out_type;
};

/// Every instance in this build, in manifest order (generated).
extern KernelInstance const* const kKernelInstances[];
extern size_t const kNumKernelInstances;
extern char const kTritonVersion[];

}  // namespace fp8attn::detail
