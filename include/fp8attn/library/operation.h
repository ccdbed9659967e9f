#pragma once
// The library of compiled operations (CUTLASS library style): every kernel instance of the build, of every
// operation kind and kernel family, behind one type-erased `Operation` interface and keyed by its
// procedural name. Tools (the profiler), tests and bindings iterate over it; the device-level handles
// (fmha::device::FmhaFwd, ...) are the typed way in.

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fp8attn/status.h"
#include "fp8attn/types.h"

namespace fp8attn::library {

/// What an operation computes. Each kind has its own Arguments type (see Operation).
enum class OperationKind {
  kFmhaFwd,     ///< attention forward; arguments: fmha::device::FmhaFwd::Arguments
  kTransposeV,  ///< V [b, s, h, d] -> V^T [b, h, d, s] for the FP8 P.V operand; arguments: fmha::TransposeVArguments
  kQuantize,    ///< BF16/FP16 -> e4m3/int8 operands and descales; arguments: quant::QuantizeArguments
  kPaged,       ///< paged FP8 KV cache: decode instances take paged::PagedDecodeArguments, append instances
                ///< paged::PagedAppendArguments (combine instances are an internal stage of decode)
};

/// Which compiler front end produced the kernel.
enum class KernelFamily {
  kTriton,  ///< triton.language, compiled with triton.compile(ASTSource)
  kGluon,   ///< triton.experimental.gluon, compiled with triton.compile(GluonASTSource)
};

char const* to_string(OperationKind kind);  ///< "fmha_fwd", "transpose_v", "quantize", "paged"
char const* to_string(KernelFamily family);  ///< "triton", "gluon"
std::optional<OperationKind> parse_operation_kind(std::string_view name);

/// What every operation states about itself.
struct OperationDescription {
  std::string name;           ///< procedural name, the key everywhere
  OperationKind kind;
  KernelFamily family;
  DataType input_type;        ///< element type read (Q/K/V for attention, V for the transpose)
  DataType accumulator_type;  ///< f32 for attention; the input type for data movement
  DataType output_type;
  int launch_warps;           ///< warps launched per CTA (warp specialization adds partitions)
  int shared_bytes;           ///< dynamic shared memory per CTA
  std::string summary;        ///< one line for listings, e.g. "attention forward, 128x128 tile, D=128, causal"
};

/// One compiled operation. `arguments` points at the kind's Arguments type (OperationKind says which);
/// the operation runs exactly its own kernel (no heuristic).
class Operation {
 public:
  virtual ~Operation() = default;
  virtual OperationDescription const& description() const = 0;
  /// Whether this instance can run `arguments`; the message names the argument and value when not.
  virtual Status can_implement(void const* arguments) const = 0;
  /// Bytes of device workspace run() needs (0 when the arguments are invalid).
  virtual size_t get_workspace_size(void const* arguments) const = 0;
  /// Validates, then launches on `stream` (asynchronous).
  virtual Status run(void const* arguments, void* workspace, StreamHandle stream) const = 0;
};

/// Every operation of this build, of every kind, in manifest order.
std::vector<Operation const*> const& operations();
/// The operations of one kind, in manifest order.
std::vector<Operation const*> operations(OperationKind kind);
/// The operation with this exact name, or nullptr.
Operation const* find_operation(std::string_view name);

/// The attention-specific fields of an kFmhaFwd operation; every field is also spelled out in its name.
struct FmhaDescription {
  std::string name;
  DataType qk_type;
  DataType v_type;
  DataType acc_type;
  DataType out_type;
  int block_m;
  int block_n;
  int head_dim;
  int warps;              ///< num_warps requested at compile time (the name's w<N>)
  int stages;
  bool causal;
  bool warp_specialized;  ///< schedule "ws"
  bool even_n;            ///< variant "evenn": only for seqlen_k % block_n == 0
  bool v_transposed;      ///< reads V sequence-contiguous (all FP8 instances)
  bool v_key_permuted;    ///< "vkperm": reads the key-permuted V^T of fp8attn's own transpose, never a caller's V
  bool block_descale;     ///< "bdesc": per-block q and k descales (fmha::DescaleRef::stride_block)
  bool softcap;           ///< "softcap": logit soft-capping (FmhaFwd::Arguments::softcap)
  bool varlen;            ///< takes packed sequences (cu_seqlens): Triton instances but ws/evenn, gluon "_varlen" ones
  bool writes_lse;        ///< can return LSE (not the warp-specialized instances: Triton 3.6 loses it)
  int launch_warps;       ///< warps actually launched (warp specialization adds partitions)
  int shared_bytes;       ///< dynamic shared memory per CTA
  KernelFamily family;
  bool k_descale_paired;  ///< "kpair": one k descale per 128-key tile (FmhaFwd::Arguments::k_descale_paired)
};

/// Every attention instance compiled into this build, in manifest order.
std::vector<FmhaDescription> const& fmha_operations();
/// The attention instance with this exact name, or nullptr.
FmhaDescription const* find_fmha_operation(std::string_view name);

/// CUTLASS filter semantics: ',' separates alternatives (OR); inside one alternative '*' splits it into
/// substrings that must all occur in order. An empty filter matches everything.
bool matches_filter(std::string_view name, std::string_view filter);

/// Triton version the cubins were compiled with (e.g. "3.6.0").
char const* triton_version();

}  // namespace fp8attn::library
