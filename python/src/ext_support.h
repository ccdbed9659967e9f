#pragma once
// What the binding files of _fp8attn_ext share (fp8attn_ext.cpp defines the module; ext_fmha.cpp, ext_quantize.cpp,
// ext_paged.cpp and ext_library.cpp bind one part of the library each): Status as Python exceptions, torch
// tensors read and checked (torch_tensor.h), the library's TensorRef and DescaleRef made from them, and the
// initialize + run of a device handle with a workspace from Python's allocator. Internal to the module.
//
// Messages are built with std::to_string, never iostreams: formatting a number through an ostream crashed
// (SIGSEGV in num_put/codecvt) inside torch's process on the H200, where the locale facets the stream used did
// not come from the libstdc++ this module was compiled against.

#include <nanobind/nanobind.h>
// std::string arguments and results (kernel names) through nanobind's caster, in every binding file alike.
#include <nanobind/stl/string.h>

#include <cstdint>
#include <string>
#include <type_traits>

#include "fp8attn/fmha/device/fmha_fwd.h"
#include "fp8attn/status.h"
#include "torch_tensor.h"

namespace fp8attn_py {

namespace nb = nanobind;

// ---- Errors ------------------------------------------------------------------------------------------

/// Argument errors are ValueError; everything else (driver failures, internal errors) is RuntimeError. Both
/// carry Status::to_string(): the code's name and the reason.
[[noreturn]] void raise_status(fp8attn::Status const& status);

inline std::string text(std::string const& s) { return s; }
inline std::string text(char const* s) { return s; }
template <typename T, typename = std::enable_if_t<std::is_arithmetic_v<T>>>
std::string text(T value) {
  return std::to_string(value);
}

template <typename... Parts>
[[noreturn]] void raise_value_error(Parts const&... parts) {
  std::string message;
  ((message += text(parts)), ...);
  throw nb::value_error(message.c_str());
}

std::string shape_string(TensorView const& t);

char const* dtype_name(TensorView const& t);

// ---- Operands ----------------------------------------------------------------------------------------

TensorView read(char const* name, nb::handle h);

/// Every tensor must live on the same CUDA device; `reference` (q for attention) fixes which.
void check_device(char const* name, TensorView const& t, int device, char const* reference = "q");

void check_rank(char const* name, TensorView const& t, int rank, char const* what);

/// A BHSD operand is read as its [B, S, H, D] view: swap dims 1 and 2.
void to_bshd(TensorView* t);

fp8attn::fmha::TensorRef tensor_ref(TensorView const& t);

/// [1] (or a 0-d scalar) per tensor; [batch | 1, heads_kv | 1] per (batch, kv head); for q also [batch,
/// heads_q] per query head (when heads_q != heads_kv); for q and k (blocks > 0) [batch, heads, blocks] per
/// block of kDescaleBlockTokens tokens (fp8attn.quantize(granularity="block")). Size-1 dimensions broadcast.
/// heads_q: 0 for k and v.
fp8attn::fmha::DescaleRef descale_ref(char const* name, TensorView const& t, int64_t batch, int64_t heads_kv,
                                      int64_t heads_q, int64_t blocks, int device);

int to_int(char const* what, int64_t value);

// ---- Running a device handle -------------------------------------------------------------------------

/// op.initialize(args, workspace) + op.run() with a workspace of `needed` bytes from allocate/release (none when
/// 0), the GIL released around them; raises on failure.
template <typename Op>
void initialize_and_run(Op& op, typename Op::Arguments const& args, size_t needed, uintptr_t stream_handle,
                        nb::handle allocate, nb::handle release) {
  nb::object workspace;
  void* workspace_ptr = nullptr;
  if (needed > 0) {
    workspace = allocate(needed, stream_handle);
    workspace_ptr = reinterpret_cast<void*>(nb::cast<uintptr_t>(workspace));
  }
  auto stream = reinterpret_cast<fp8attn::StreamHandle>(stream_handle);
  fp8attn::Status status;
  {
    // Module loading and launching touch no Python object; the tensors stay referenced by the caller.
    nb::gil_scoped_release unlocked;
    status = op.initialize(args, workspace_ptr, stream);
    if (status) status = op.run(stream);
  }
  // Freed after the launches are queued: the caching allocator reuses the block only for work ordered after
  // them on this stream.
  if (workspace.is_valid()) release(workspace);
  if (!status) raise_status(status);
}

// ---- The module's parts (each in its own file) -------------------------------------------------------

void bind_fmha(nb::module_& m);      ///< ext_fmha.cpp: attention forward, varlen, V transpose, selection
void bind_quantize(nb::module_& m);  ///< ext_quantize.cpp: quantization and the accuracy modes' fused call
void bind_paged(nb::module_& m);     ///< ext_paged.cpp: the paged FP8 KV cache's decode and append
void bind_library(nb::module_& m);   ///< ext_library.cpp: the registry's instances and operations

}  // namespace fp8attn_py
