// _fp8attn_ext: the Python face of fp8attn's C++ library, for torch tensors.
//
// One call of fp8attn.fmha_fwd crosses into C++ once: this module reads the tensors' pointers, shapes,
// strides, devices and dtypes through the Python object protocol (torch_tensor.h; no DLPack, no torch
// link), builds FmhaFwd::Arguments, validates, asks Python for a workspace only when one is needed (the
// `allocate` callback: torch's caching allocator), and launches on the given stream.
//
// What this file checks itself is what FmhaFwd::Arguments cannot express: ranks, shapes that must agree
// between operands, devices and dtypes. Everything else is FmhaFwd::can_implement's, whose Status becomes
// ValueError (bad arguments) or RuntimeError (driver and internal failures) with its message.
//
// Messages are built with std::to_string, never iostreams: formatting a number through an ostream crashed
// (SIGSEGV in num_put/codecvt) inside torch's process on the H200, where the locale facets the stream used did
// not come from the libstdc++ this module was compiled against.

#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

#include "fp8attn/fmha/device/fmha_fwd.h"
#include "fp8attn/fmha/device/fmha_fwd_quantized.h"
#include "fp8attn/fmha/device/transpose_v.h"
#include "fp8attn/library/operation.h"
#include "fp8attn/paged/device/paged.h"
#include "fp8attn/quant/device/quantize.h"
#include "fp8attn/status.h"
#include "fp8attn/types.h"
#include "torch_tensor.h"

#ifndef FP8ATTN_VERSION_STRING
#define FP8ATTN_VERSION_STRING "0.0.0"
#endif

namespace nb = nanobind;
using namespace nb::literals;

namespace {

using fp8attn::DataType;
using fp8attn::Status;
using fp8attn::StatusCode;
using fp8attn::fmha::DescaleRef;
using fp8attn::fmha::TensorRef;
using fp8attn::fmha::device::FmhaFwd;
using fp8attn_py::TensorView;

// ---- Errors ------------------------------------------------------------------------------------------

/// Argument errors are ValueError; everything else (driver failures, internal errors) is RuntimeError. Both
/// carry Status::to_string(): the code's name and the reason.
[[noreturn]] void raise_status(Status const& status) {
  switch (status.code()) {
    case StatusCode::kErrorInvalidProblem:
    case StatusCode::kErrorNullPointer:
    case StatusCode::kErrorMisalignedOperand:
    case StatusCode::kErrorNotSupported:
    case StatusCode::kErrorKernelNotFound:
      throw nb::value_error(status.to_string().c_str());
    default:
      throw std::runtime_error(status.to_string());
  }
}

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

std::string shape_string(TensorView const& t) {
  std::string s = "[";
  for (int i = 0; i < t.ndim; ++i) s += (i ? ", " : "") + std::to_string(t.shape[i]);
  return s + "]";
}

char const* dtype_name(TensorView const& t) {
  static char const* const names[] = {"torch.float8_e4m3fn", "torch.float8_e5m2", "torch.bfloat16", "torch.float16",
                                      "torch.float32", "torch.int8", "torch.int32"};
  return t.dtype >= 0 ? names[t.dtype] : "an unsupported dtype";
}

// ---- Operands ----------------------------------------------------------------------------------------

TensorView read(char const* name, nb::handle h) {
  TensorView v;
  if (!fp8attn_py::read_tensor(name, h.ptr(), &v)) throw nb::python_error();
  return v;
}

/// Every tensor must live on the same CUDA device; `reference` (q for attention) fixes which.
void check_device(char const* name, TensorView const& t, int device, char const* reference = "q") {
  if (t.device < 0) raise_value_error(name, ": must be a CUDA tensor, got a CPU tensor");
  if (t.device != device) raise_value_error(name, ": is on cuda:", t.device, " but ", reference, " is on cuda:", device);
}

void check_rank(char const* name, TensorView const& t, int rank, char const* what) {
  if (t.ndim != rank) {
    raise_value_error(name, ": expected a ", rank, "-D ", what, " tensor, got ", t.ndim, "-D with shape ",
                      shape_string(t));
  }
}

/// A BHSD operand is read as its [B, S, H, D] view: swap dims 1 and 2.
void to_bshd(TensorView* t) {
  std::swap(t->shape[1], t->shape[2]);
  std::swap(t->stride[1], t->stride[2]);
}

TensorRef tensor_ref(TensorView const& t) {
  TensorRef ref;
  ref.ptr = reinterpret_cast<void const*>(t.data);
  ref.stride_b = t.stride[0];
  ref.stride_s = t.stride[1];
  ref.stride_h = t.stride[2];
  ref.stride_d = t.stride[3];
  return ref;
}

/// [1] (or a 0-d scalar) per tensor; [batch | 1, heads_kv | 1] per (batch, kv head); for q also [batch,
/// heads_q] per query head (when heads_q != heads_kv); for q and k (blocks > 0) [batch, heads, blocks] per
/// block of kDescaleBlockTokens tokens (fp8attn.quantize(granularity="block")). Size-1 dimensions broadcast.
/// heads_q: 0 for k and v.
DescaleRef descale_ref(char const* name, TensorView const& t, int64_t batch, int64_t heads_kv, int64_t heads_q,
                       int64_t blocks, int device) {
  if (!t.present) return {};
  check_device(name, t, device);
  if (t.dtype != fp8attn_py::kTorchF32) raise_value_error(name, ": dtype ", dtype_name(t), " must be torch.float32");
  auto fits = [&t](int dim, int64_t n) { return t.shape[dim] == 1 || t.shape[dim] == n; };
  auto stride = [&t](int dim) { return t.shape[dim] == 1 ? 0 : t.stride[dim]; };
  int64_t const heads = heads_q > 0 ? heads_q : heads_kv;  // the operand's own heads
  DescaleRef ref;
  ref.ptr = reinterpret_cast<float const*>(t.data);
  if (t.ndim == 0 || (t.ndim == 1 && t.shape[0] == 1)) return ref;
  if (t.ndim == 2 && fits(0, batch) && fits(1, heads_kv)) {
    ref.stride_b = stride(0);
    ref.stride_h = stride(1);
    return ref;
  }
  if (t.ndim == 2 && heads_q > 0 && fits(0, batch) && t.shape[1] == heads_q) {
    ref.stride_b = stride(0);
    ref.stride_head_q = stride(1);
    return ref;
  }
  if (t.ndim == 3 && blocks > 0 && fits(0, batch) && fits(1, heads) && t.shape[2] == blocks) {
    ref.stride_b = stride(0);
    (heads_q > 0 ? ref.stride_head_q : ref.stride_h) = stride(1);
    ref.stride_block = stride(2);
    return ref;
  }
  raise_value_error(name, ": shape ", shape_string(t), " is not [1] (per tensor), [batch=", batch, ", heads_kv=",
                    heads_kv, "] (per batch and kv head)",
                    heads_q > 0 ? ", [batch, heads_q=" + std::to_string(heads_q) + "] (per query head)" : "",
                    blocks > 0 ? ", or [batch, heads=" + std::to_string(heads) + ", blocks=" + std::to_string(blocks) +
                                     "] (per " + std::to_string(fp8attn::fmha::kDescaleBlockTokens) + "-token block)"
                               : "");
}

int to_int(char const* what, int64_t value) {
  if (value > INT32_MAX) raise_value_error(what, "=", value, " does not fit in int32");
  return static_cast<int>(value);
}

/// Everything one call passes; the same set serves fmha_fwd, workspace_size and select_kernel.
struct Call {
  nb::handle q, k, v, out, lse, q_descale, k_descale, v_descale;
  bool causal;
  float softmax_scale;
  std::string const& kernel_name;
  bool bhsd;
  bool v_key_permuted;
  int window_left;
  int window_right;
  float softcap;
};

/// The kernels write LSE densely: rows of seqlen_q floats, one per (batch, head_q). (Strides of an empty tensor
/// mean nothing.)
void check_lse_contiguous(TensorView const& lse) {
  bool const empty = lse.shape[0] == 0 || lse.shape[1] == 0 || lse.shape[2] == 0;
  int64_t expected = 1;
  for (int i = 2; i >= 0 && !empty; --i) {
    if (lse.shape[i] > 1 && lse.stride[i] != expected) {
      raise_value_error("lse: must be contiguous; strides (", lse.stride[0], ", ", lse.stride[1], ", ", lse.stride[2],
                        ") for shape ", shape_string(lse));
    }
    expected *= lse.shape[i];
  }
}

/// Builds FmhaFwd::Arguments, raising ValueError for what the Arguments cannot express. *device: q's device.
FmhaFwd::Arguments make_arguments(Call const& c, int* device) {
  TensorView q = read("q", c.q), k = read("k", c.k), v = read("v", c.v), out = read("out", c.out);
  char const* const bshd = c.bhsd ? "[batch, heads, seqlen, head_dim]" : "[batch, seqlen, heads, head_dim]";
  check_rank("q", q, 4, bshd);
  check_rank("k", k, 4, bshd);
  check_rank("v", v, 4, bshd);
  check_rank("out", out, 4, bshd);
  if (q.device < 0) raise_value_error("q: must be a CUDA tensor, got a CPU tensor");
  *device = q.device;
  check_device("k", k, q.device);
  check_device("v", v, q.device);
  check_device("out", out, q.device);
  if (c.bhsd) {
    to_bshd(&q);
    to_bshd(&k);
    to_bshd(&v);
    to_bshd(&out);
  }

  if (q.dtype < 0 || q.dtype == fp8attn_py::kTorchF32) {
    raise_value_error("q: dtype ", dtype_name(q),
                      " is not supported; expected torch.float8_e4m3fn, torch.bfloat16 or torch.int8 (with an e4m3 v)");
  }
  if (k.dtype != q.dtype) raise_value_error("k: dtype ", dtype_name(k), " differs from q's ", dtype_name(q));
  // INT8 Q.K^T reads an e4m3 V; otherwise V has Q's type.
  int const v_dtype = q.dtype == fp8attn_py::kTorchI8 ? fp8attn_py::kTorchE4M3 : q.dtype;
  if (v.dtype != v_dtype && q.dtype == fp8attn_py::kTorchI8) {
    raise_value_error("v: dtype ", dtype_name(v), " is not torch.float8_e4m3fn (int8 q and k read an e4m3 v)");
  }
  if (v.dtype != v_dtype) raise_value_error("v: dtype ", dtype_name(v), " differs from q's ", dtype_name(q));
  if (out.dtype != fp8attn_py::kTorchBF16 && out.dtype != fp8attn_py::kTorchF16) {
    raise_value_error("out: dtype ", dtype_name(out), " is not supported; expected torch.bfloat16");
  }

  // Shapes that must agree between operands (FmhaProblem holds each size once).
  if (k.shape[0] != q.shape[0]) raise_value_error("k: batch=", k.shape[0], " does not match q's batch=", q.shape[0]);
  if (k.shape[3] != q.shape[3]) {
    raise_value_error("k: head_dim=", k.shape[3], " does not match q's head_dim=", q.shape[3]);
  }
  for (int i = 0; i < 4; ++i) {
    if (v.shape[i] != k.shape[i]) {
      raise_value_error("v: shape ", shape_string(v), " does not match k's shape ", shape_string(k),
                        " (as [batch, seqlen_k, heads_kv, head_dim])");
    }
    if (out.shape[i] != q.shape[i]) {
      raise_value_error("out: shape ", shape_string(out), " does not match q's shape ", shape_string(q),
                        " (as [batch, seqlen, heads, head_dim])");
    }
  }

  FmhaFwd::Arguments args;
  auto& p = args.problem;
  p.batch = to_int("batch", q.shape[0]);
  p.seqlen_q = to_int("seqlen_q", q.shape[1]);
  p.heads_q = to_int("heads_q", q.shape[2]);
  p.head_dim = to_int("head_dim", q.shape[3]);
  p.seqlen_k = to_int("seqlen_k", k.shape[1]);
  p.heads_kv = to_int("heads_kv", k.shape[2]);
  p.causal = c.causal;
  p.input_type = fp8attn_py::data_type_of(q.dtype);
  p.output_type = fp8attn_py::data_type_of(out.dtype);
  args.q = tensor_ref(q);
  args.k = tensor_ref(k);
  args.v = tensor_ref(v);
  args.o = tensor_ref(out);

  TensorView lse = read("lse", c.lse);
  if (lse.present) {
    check_device("lse", lse, q.device);
    if (lse.dtype != fp8attn_py::kTorchF32) raise_value_error("lse: dtype ", dtype_name(lse), " must be torch.float32");
    check_rank("lse", lse, 3, "[batch, heads_q, seqlen_q]");
    if (lse.shape[0] != q.shape[0] || lse.shape[1] != q.shape[2] || lse.shape[2] != q.shape[1]) {
      raise_value_error("lse: shape ", shape_string(lse), " is not [batch=", q.shape[0], ", heads_q=", q.shape[2],
                        ", seqlen_q=", q.shape[1], "]");
    }
    check_lse_contiguous(lse);
    args.lse = reinterpret_cast<float*>(lse.data);
  }
  int64_t const block = fp8attn::fmha::kDescaleBlockTokens;
  args.q_descale = descale_ref("q_descale", read("q_descale", c.q_descale), p.batch, p.heads_kv, p.heads_q,
                               (p.seqlen_q + block - 1) / block, q.device);
  args.k_descale = descale_ref("k_descale", read("k_descale", c.k_descale), p.batch, p.heads_kv, 0,
                               (p.seqlen_k + block - 1) / block, q.device);
  args.v_descale = descale_ref("v_descale", read("v_descale", c.v_descale), p.batch, p.heads_kv, 0, 0, q.device);
  args.softmax_scale = c.softmax_scale;
  args.kernel_name = c.kernel_name;
  args.v_key_permuted = c.v_key_permuted;
  args.window_left = c.window_left;
  args.window_right = c.window_right;
  args.softcap = c.softcap;
  return args;
}

// ---- Bound functions ---------------------------------------------------------------------------------

/// Runs attention forward on `stream`. When a workspace is needed, `allocate(nbytes, stream)` returns its
/// device address (an int; torch's caching allocator, stream-ordered) and `release(address)` is called once
/// the launches are queued, whatever happened. Returns the name of the instance that ran.
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
  Status status;
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

/// Varlen: q, k, v, out arrive as [1, total, heads, head_dim] views (fmha.fmha_fwd_varlen adds the leading 1),
/// cu_seqlens_q / cu_seqlens_k as contiguous int32 [batch + 1] on q's device, LSE as [batch, heads_q,
/// max_seqlen_q]. The descales are per tensor or [batch, heads_kv] per sequence.
FmhaFwd::Arguments make_varlen_arguments(Call const& c, nb::handle cu_q_obj, nb::handle cu_k_obj, int max_seqlen_q,
                                         int max_seqlen_k, int* device) {
  Call dense = c;
  nb::none none;
  dense.lse = dense.q_descale = dense.k_descale = dense.v_descale = none;  // checked below against the batch
  FmhaFwd::Arguments args = make_arguments(dense, device);
  TensorView cu_q = read("cu_seqlens_q", cu_q_obj), cu_k = read("cu_seqlens_k", cu_k_obj);
  for (auto [name, view] : {std::pair<char const*, TensorView const*>{"cu_seqlens_q", &cu_q}, {"cu_seqlens_k", &cu_k}}) {
    check_rank(name, *view, 1, "[batch + 1]");
    check_device(name, *view, *device, "q");
    if (view->dtype != fp8attn_py::kTorchI32 || view->shape[0] < 1 || (view->shape[0] > 1 && view->stride[0] != 1)) {
      raise_value_error(name, ": must be a contiguous torch.int32 [batch + 1] tensor, got ", dtype_name(*view), " ",
                        shape_string(*view));
    }
  }
  if (cu_k.shape[0] != cu_q.shape[0]) {
    raise_value_error("cu_seqlens_k: ", cu_k.shape[0], " offsets, cu_seqlens_q has ", cu_q.shape[0]);
  }
  if (max_seqlen_q < 0 || max_seqlen_k < 0) {
    raise_value_error("max_seqlen_q=", max_seqlen_q, ", max_seqlen_k=", max_seqlen_k, ": must be >= 0");
  }
  auto& p = args.problem;
  args.total_q = p.seqlen_q;  // the packed length ([1, total, ...] views)
  args.total_k = p.seqlen_k;
  p.batch = to_int("batch", cu_q.shape[0] - 1);
  p.seqlen_q = max_seqlen_q;
  p.seqlen_k = max_seqlen_k;
  args.cu_seqlens_q = reinterpret_cast<int32_t const*>(cu_q.data);
  args.cu_seqlens_k = reinterpret_cast<int32_t const*>(cu_k.data);
  args.q_descale = descale_ref("q_descale", read("q_descale", c.q_descale), p.batch, p.heads_kv, p.heads_q, 0, *device);
  args.k_descale = descale_ref("k_descale", read("k_descale", c.k_descale), p.batch, p.heads_kv, 0, 0, *device);
  args.v_descale = descale_ref("v_descale", read("v_descale", c.v_descale), p.batch, p.heads_kv, 0, 0, *device);
  TensorView lse = read("lse", c.lse);
  if (lse.present) {
    check_device("lse", lse, *device);
    if (lse.dtype != fp8attn_py::kTorchF32 || lse.ndim != 3 || lse.shape[0] != p.batch || lse.shape[1] != p.heads_q ||
        lse.shape[2] != p.seqlen_q) {
      raise_value_error("lse: must be torch.float32 [batch=", p.batch, ", heads_q=", p.heads_q,
                        ", max_seqlen_q=", p.seqlen_q, "], got ", dtype_name(lse), " ", shape_string(lse));
    }
    check_lse_contiguous(lse);
    args.lse = reinterpret_cast<float*>(lse.data);
  }
  return args;
}

char const* fmha_fwd_varlen(Call const& c, nb::handle cu_q, nb::handle cu_k, int max_seqlen_q, int max_seqlen_k,
                            uintptr_t stream_handle, nb::handle allocate, nb::handle release) {
  int device = 0;
  FmhaFwd::Arguments const args = make_varlen_arguments(c, cu_q, cu_k, max_seqlen_q, max_seqlen_k, &device);
  if (Status s = FmhaFwd::can_implement(args); !s) raise_status(s);
  FmhaFwd op;
  initialize_and_run(op, args, FmhaFwd::get_workspace_size(args), stream_handle, allocate, release);
  return op.kernel_name();
}

char const* fmha_fwd(Call const& c, uintptr_t stream_handle, nb::handle allocate, nb::handle release) {
  int device = 0;
  FmhaFwd::Arguments const args = make_arguments(c, &device);
  if (Status s = FmhaFwd::can_implement(args); !s) raise_status(s);
  FmhaFwd op;
  initialize_and_run(op, args, FmhaFwd::get_workspace_size(args), stream_handle, allocate, release);
  return op.kernel_name();
}

/// V [batch, seqlen, heads, head_dim] (one-byte type) -> V^T `vt` [batch, heads, head_dim, padded_seqlen],
/// contiguous, preallocated by the caller; keys permuted within 32-key blocks when key_permuted.
void transpose_v(nb::handle v_obj, nb::handle vt_obj, bool key_permuted, bool bhsd, uintptr_t stream_handle) {
  TensorView v = read("v", v_obj), vt = read("vt", vt_obj);
  check_rank("v", v, 4, bhsd ? "[batch, heads, seqlen, head_dim]" : "[batch, seqlen, heads, head_dim]");
  check_rank("vt", vt, 4, "[batch, heads, head_dim, padded_seqlen]");
  if (v.device < 0) raise_value_error("v: must be a CUDA tensor, got a CPU tensor");
  check_device("vt", vt, v.device, "v");
  if (bhsd) to_bshd(&v);
  if (v.dtype != fp8attn_py::kTorchE4M3 && v.dtype != fp8attn_py::kTorchE5M2) {
    raise_value_error("v: dtype ", dtype_name(v), " is not supported; expected torch.float8_e4m3fn or float8_e5m2");
  }
  if (vt.dtype != v.dtype) raise_value_error("vt: dtype ", dtype_name(vt), " differs from v's ", dtype_name(v));
  int64_t const want[4] = {v.shape[0], v.shape[2], v.shape[3], fp8attn::fmha::padded_seqlen(v.shape[1])};
  int64_t expected_stride = 1;
  for (int i = 3; i >= 0; --i) {
    if (vt.shape[i] != want[i] || (want[i] > 1 && vt.stride[i] != expected_stride)) {
      raise_value_error("vt: shape ", shape_string(vt), " must be contiguous [", want[0], ", ", want[1], ", ", want[2],
                        ", ", want[3], "]");
    }
    expected_stride *= want[i];
  }
  fp8attn::fmha::TransposeVArguments a;
  a.batch = to_int("batch", v.shape[0]);
  a.seqlen = to_int("seqlen", v.shape[1]);
  a.heads = to_int("heads", v.shape[2]);
  a.head_dim = to_int("head_dim", v.shape[3]);
  a.type = v.dtype == fp8attn_py::kTorchE4M3 ? DataType::kE4M3 : DataType::kE5M2;
  a.v = tensor_ref(v);
  a.vt = reinterpret_cast<void*>(vt.data);
  a.key_permuted = key_permuted;
  fp8attn::fmha::device::TransposeV op;
  Status status;
  {
    nb::gil_scoped_release unlocked;
    status = op(a, reinterpret_cast<fp8attn::StreamHandle>(stream_handle));
  }
  if (!status) raise_status(status);
}

/// x [batch, seqlen, heads, head_dim] (bf16/f16) -> `out` (e4m3/int8; [b, s, h, d] or V^T [b, h, d, padded_seqlen]
/// contiguous when layout is "vt"/"vt_kperm") and `descale` (float32, preallocated; None with static_descale).
/// Returns the workspace through allocate/release as fmha_fwd does.
void quantize(nb::handle x_obj, nb::handle out_obj, nb::handle descale_obj, nb::handle static_obj, int granularity,
              int layout, int heads_kv, bool smooth, bool rotate, uint32_t seed, uintptr_t stream_handle,
              nb::handle allocate, nb::handle release, std::string const& kernel_name) {
  using fp8attn::quant::Granularity;
  using fp8attn::quant::OutputLayout;
  TensorView x = read("x", x_obj), out = read("out", out_obj);
  TensorView descale = read("descale", descale_obj), fixed = read("static_descale", static_obj);
  check_rank("x", x, 4, "[batch, seqlen, heads, head_dim]");
  if (x.device < 0) raise_value_error("x: must be a CUDA tensor, got a CPU tensor");
  check_device("out", out, x.device, "x");
  if (x.dtype != fp8attn_py::kTorchBF16 && x.dtype != fp8attn_py::kTorchF16) {
    raise_value_error("x: dtype ", dtype_name(x), " is not supported; expected torch.bfloat16 or float16");
  }
  if (out.dtype != fp8attn_py::kTorchE4M3 && out.dtype != fp8attn_py::kTorchI8) {
    raise_value_error("out: dtype ", dtype_name(out), " is not supported; expected torch.float8_e4m3fn or int8");
  }
  for (auto [name, view] : {std::pair<char const*, TensorView*>{"descale", &descale}, {"static_descale", &fixed}}) {
    if (!view->present) continue;
    check_device(name, *view, x.device, "x");
    if (view->dtype != fp8attn_py::kTorchF32) raise_value_error(name, ": dtype ", dtype_name(*view), " must be float32");
  }
  fp8attn::quant::QuantizeArguments a;
  a.batch = to_int("batch", x.shape[0]);
  a.seqlen = to_int("seqlen", x.shape[1]);
  a.heads = to_int("heads", x.shape[2]);
  a.head_dim = to_int("head_dim", x.shape[3]);
  a.heads_kv = heads_kv;
  a.input_type = fp8attn_py::data_type_of(x.dtype);
  a.output_type = fp8attn_py::data_type_of(out.dtype);
  a.granularity = static_cast<Granularity>(granularity);
  a.layout = static_cast<OutputLayout>(layout);
  a.smooth = smooth;
  a.rotate = rotate;
  a.rotation_seed = seed;
  a.kernel_name = kernel_name;
  a.input = tensor_ref(x);
  if (a.layout == OutputLayout::kBSHD) {
    check_rank("out", out, 4, "[batch, seqlen, heads, head_dim]");
    a.output = tensor_ref(out);
  } else {
    a.output.ptr = reinterpret_cast<void const*>(out.data);
  }
  a.descale = descale.present ? reinterpret_cast<float*>(descale.data) : nullptr;
  a.static_descale = fixed.present ? reinterpret_cast<float const*>(fixed.data) : nullptr;
  // The kernels read descales densely: as many contiguous floats as the granularity needs.
  auto elements = [](TensorView const& t) {
    int64_t n = 1;
    for (int i = 0; i < t.ndim; ++i) n *= t.shape[i];
    return n;
  };
  auto contiguous = [](TensorView const& t) {
    int64_t expected = 1;
    for (int i = t.ndim - 1; i >= 0; --i) {
      if (t.shape[i] > 1 && t.stride[i] != expected) return false;
      expected *= t.shape[i];
    }
    return true;
  };
  if (fixed.present) {
    int64_t const need = a.granularity == Granularity::kPerHead ? int64_t{a.batch} * (heads_kv ? heads_kv : a.heads) : 1;
    if (elements(fixed) != need || !contiguous(fixed)) {
      raise_value_error("static_descale: must hold ", need, " contiguous float32 (", a.granularity == Granularity::kPerHead
                        ? "[batch, heads_kv]" : "[1]", "), got ", shape_string(fixed));
    }
  }
  if (descale.present) {
    int64_t const need = static_cast<int64_t>(fp8attn::quant::device::Quantize::descale_count(a));
    if (elements(descale) != need || !contiguous(descale)) {
      raise_value_error("descale: must hold ", need, " contiguous float32, got ", shape_string(descale));
    }
  }
  using fp8attn::quant::device::Quantize;
  if (Status s = Quantize::can_implement(a); !s) raise_status(s);
  Quantize op;
  initialize_and_run(op, a, Quantize::get_workspace_size(a), stream_handle, allocate, release);
}

/// BF16 q, k, v [batch, seqlen, heads, head_dim] -> `out` (bf16, preallocated) through FmhaFwdQuantized in
/// accuracy mode `mode` (fp8attn::fmha::AccuracyMode's order). Returns the attention instance's name.
char const* fmha_fwd_quantized(nb::handle q_obj, nb::handle k_obj, nb::handle v_obj, nb::handle out_obj, int mode,
                               bool causal, float softmax_scale, uint32_t seed, uintptr_t stream_handle,
                               nb::handle allocate, nb::handle release) {
  using fp8attn::fmha::device::FmhaFwdQuantized;
  TensorView q = read("q", q_obj), k = read("k", k_obj), v = read("v", v_obj), out = read("out", out_obj);
  for (auto [name, view] : {std::pair<char const*, TensorView*>{"q", &q}, {"k", &k}, {"v", &v}, {"out", &out}}) {
    check_rank(name, *view, 4, "[batch, seqlen, heads, head_dim]");
  }
  if (q.device < 0) raise_value_error("q: must be a CUDA tensor, got a CPU tensor");
  check_device("k", k, q.device);
  check_device("v", v, q.device);
  check_device("out", out, q.device);
  if (q.dtype != fp8attn_py::kTorchBF16 && q.dtype != fp8attn_py::kTorchF16) {
    raise_value_error("q: dtype ", dtype_name(q), " is not supported; expected torch.bfloat16 or torch.float16");
  }
  for (auto [name, view] : {std::pair<char const*, TensorView*>{"k", &k}, {"v", &v}}) {
    if (view->dtype != q.dtype) raise_value_error(name, ": dtype ", dtype_name(*view), " differs from q's ", dtype_name(q));
  }
  if (out.dtype != fp8attn_py::kTorchBF16) raise_value_error("out: dtype ", dtype_name(out), " must be torch.bfloat16");
  for (int i = 0; i < 4; ++i) {
    if (v.shape[i] != k.shape[i]) {
      raise_value_error("v: shape ", shape_string(v), " does not match k's shape ", shape_string(k));
    }
    if (out.shape[i] != q.shape[i]) {
      raise_value_error("out: shape ", shape_string(out), " does not match q's shape ", shape_string(q));
    }
  }
  if (k.shape[0] != q.shape[0]) raise_value_error("k: batch=", k.shape[0], " does not match q's batch=", q.shape[0]);
  if (k.shape[3] != q.shape[3]) raise_value_error("k: head_dim=", k.shape[3], " does not match q's head_dim=", q.shape[3]);
  if (mode < 0 || mode > static_cast<int>(fp8attn::fmha::AccuracyMode::kBf16)) raise_value_error("mode=", mode, " is not a mode");
  FmhaFwdQuantized::Arguments a;
  a.problem = {to_int("batch", q.shape[0]), to_int("heads_q", q.shape[2]), to_int("heads_kv", k.shape[2]),
               to_int("seqlen_q", q.shape[1]), to_int("seqlen_k", k.shape[1]), to_int("head_dim", q.shape[3]), causal,
               fp8attn_py::data_type_of(q.dtype), DataType::kBF16};
  a.q = tensor_ref(q);
  a.k = tensor_ref(k);
  a.v = tensor_ref(v);
  a.o = tensor_ref(out);
  a.softmax_scale = softmax_scale;
  a.mode = static_cast<fp8attn::fmha::AccuracyMode>(mode);
  a.rotation_seed = seed;
  if (Status s = FmhaFwdQuantized::can_implement(a); !s) raise_status(s);
  FmhaFwdQuantized op;
  initialize_and_run(op, a, FmhaFwdQuantized::get_workspace_size(a), stream_handle, allocate, release);
  return op.kernel_name();
}

/// The cache tensors: k_pages e4m3 [num_pages, page_size, heads_kv, head_dim] and v_pages e4m3 [num_pages,
/// heads_kv, head_dim, page_size] (V transposed inside each page), both contiguous, descales float32
/// [num_pages, heads_kv] (per page) or [1, heads_kv] (static), block table int32 [batch, max_pages] contiguous.
fp8attn::paged::PagedCache paged_cache(TensorView const& kp, TensorView const& vp, TensorView const& kd,
                                       TensorView const& vd, TensorView const& table, int device) {
  check_rank("k_pages", kp, 4, "[num_pages, page_size, heads_kv, head_dim]");
  check_rank("v_pages", vp, 4, "[num_pages, heads_kv, head_dim, page_size]");
  if (kp.device < 0) raise_value_error("k_pages: must be a CUDA tensor, got a CPU tensor");
  for (auto [name, view] : {std::pair<char const*, TensorView const*>{"k_pages", &kp}, {"v_pages", &vp}}) {
    check_device(name, *view, device, "q");
    if (view->dtype != fp8attn_py::kTorchE4M3) raise_value_error(name, ": dtype ", dtype_name(*view), " must be torch.float8_e4m3fn");
    // v_pages holds the same sizes as k_pages in the order [num_pages, heads_kv, head_dim, page_size].
    int64_t const want[4] = {kp.shape[0], view == &vp ? kp.shape[2] : kp.shape[1],
                             view == &vp ? kp.shape[3] : kp.shape[2], view == &vp ? kp.shape[1] : kp.shape[3]};
    int64_t expected = 1;
    for (int i = 3; i >= 0; --i) {
      if (view->shape[i] != want[i]) {
        raise_value_error(name, ": shape ", shape_string(*view), " does not match k_pages' ", shape_string(kp),
                          view == &vp ? " as [num_pages, heads_kv, head_dim, page_size]" : "");
      }
      if (view->shape[i] > 1 && view->stride[i] != expected) raise_value_error(name, ": must be contiguous");
      expected *= view->shape[i];
    }
  }
  fp8attn::paged::PagedCache c;
  c.k_pages = reinterpret_cast<void*>(kp.data);
  c.v_pages = reinterpret_cast<void*>(vp.data);
  c.num_pages = to_int("num_pages", kp.shape[0]);
  c.page_size = to_int("page_size", kp.shape[1]);
  c.heads_kv = to_int("heads_kv", kp.shape[2]);
  c.head_dim = to_int("head_dim", kp.shape[3]);
  for (auto [name, view] : {std::pair<char const*, TensorView const*>{"k_descale", &kd}, {"v_descale", &vd}}) {
    check_rank(name, *view, 2, "[num_pages or 1, heads_kv]");
    check_device(name, *view, device, "q");
    if (view->dtype != fp8attn_py::kTorchF32) raise_value_error(name, ": dtype ", dtype_name(*view), " must be torch.float32");
    if ((view->shape[0] != 1 && view->shape[0] != kp.shape[0]) || view->shape[1] != kp.shape[2]) {
      raise_value_error(name, ": shape ", shape_string(*view), " is neither [num_pages=", kp.shape[0], ", heads_kv=",
                        kp.shape[2], "] nor [1, heads_kv]");
    }
    if (view->stride[0] != kd.stride[0] || view->stride[1] != kd.stride[1] || view->shape[0] != kd.shape[0]) {
      raise_value_error(name, ": must have k_descale's shape and strides");
    }
  }
  c.k_descale = reinterpret_cast<float const*>(kd.data);
  c.v_descale = reinterpret_cast<float const*>(vd.data);
  c.descale_stride_page = kd.shape[0] == 1 ? 0 : kd.stride[0];
  c.descale_stride_head = kd.stride[1];
  check_rank("block_table", table, 2, "[batch, max_pages]");
  check_device("block_table", table, device, "q");
  if (table.dtype != fp8attn_py::kTorchI32) raise_value_error("block_table: dtype must be torch.int32");
  if ((table.shape[1] > 1 && table.stride[1] != 1) || (table.shape[0] > 1 && table.stride[0] != table.shape[1])) {
    raise_value_error("block_table: must be contiguous [batch, max_pages] (the kernels index row b at b * max_pages)");
  }
  c.block_table = reinterpret_cast<int32_t const*>(table.data);
  c.max_pages = to_int("max_pages", table.shape[1]);
  return c;
}

/// Decode: q bf16 [batch, q_len, heads_q, head_dim] -> out (same shape, bf16) over the paged cache.
char const* paged_decode(nb::handle q_obj, nb::handle out_obj, nb::handle kp, nb::handle vp, nb::handle kd,
                         nb::handle vd, nb::handle table_obj, nb::handle seqlens_obj, int max_seqlen,
                         float softmax_scale, int num_splits, uintptr_t stream_handle, nb::handle allocate,
                         nb::handle release, std::string const& kernel_name, int window_left, float softcap) {
  TensorView q = read("q", q_obj), out = read("out", out_obj), table = read("block_table", table_obj);
  TensorView seqlens = read("seqlens", seqlens_obj);
  check_rank("q", q, 4, "[batch, q_len, heads_q, head_dim]");
  if (q.device < 0) raise_value_error("q: must be a CUDA tensor, got a CPU tensor");
  if (q.dtype != fp8attn_py::kTorchBF16) raise_value_error("q: dtype ", dtype_name(q), " must be torch.bfloat16");
  check_device("out", out, q.device);
  fp8attn::paged::PagedDecodeArguments a;
  a.cache = paged_cache(read("k_pages", kp), read("v_pages", vp), read("k_descale", kd), read("v_descale", vd), table,
                        q.device);
  check_rank("seqlens", seqlens, 1, "[batch]");
  check_device("seqlens", seqlens, q.device);
  if (seqlens.dtype != fp8attn_py::kTorchI32 || seqlens.shape[0] != q.shape[0] ||
      (seqlens.shape[0] > 1 && seqlens.stride[0] != 1)) {
    raise_value_error("seqlens: must be a contiguous torch.int32 [batch=", q.shape[0], "], got ", shape_string(seqlens));
  }
  check_device("out", out, q.device);
  if (out.dtype != fp8attn_py::kTorchBF16 || out.ndim != 4 || out.shape[0] != q.shape[0] || out.shape[1] != q.shape[1] ||
      out.shape[2] != q.shape[2] || out.shape[3] != q.shape[3]) {
    raise_value_error("out: must be torch.bfloat16 of q's shape ", shape_string(q), ", got ", dtype_name(out), " ",
                      shape_string(out));
  }
  if (table.shape[0] != q.shape[0]) raise_value_error("block_table: batch=", table.shape[0], " is not q's ", q.shape[0]);
  a.cache.seqlens = reinterpret_cast<int32_t const*>(seqlens.data);
  if (q.shape[3] != a.cache.head_dim) raise_value_error("q: head_dim=", q.shape[3], " is not the cache's ", a.cache.head_dim);
  a.batch = to_int("batch", q.shape[0]);
  a.q_len = to_int("q_len", q.shape[1]);
  a.heads_q = to_int("heads_q", q.shape[2]);
  a.q = tensor_ref(q);
  a.o = tensor_ref(out);
  a.max_seqlen = max_seqlen;
  a.softmax_scale = softmax_scale;
  a.num_splits = num_splits;
  a.kernel_name = kernel_name;
  a.window_left = window_left;
  a.softcap = softcap;
  using fp8attn::paged::device::PagedDecode;
  if (Status s = PagedDecode::can_implement(a); !s) raise_status(s);
  PagedDecode op;
  initialize_and_run(op, a, PagedDecode::get_workspace_size(a), stream_handle, allocate, release);
  return op.kernel_name();
}

/// Append: bf16 k, v [batch, new_tokens, heads_kv, head_dim] at positions[b] + t, quantized into the pages.
void paged_append(nb::handle k_obj, nb::handle v_obj, nb::handle kp, nb::handle vp, nb::handle kd, nb::handle vd,
                  nb::handle table_obj, nb::handle positions_obj, uintptr_t stream_handle) {
  TensorView k = read("k", k_obj), v = read("v", v_obj), positions = read("positions", positions_obj);
  check_rank("k", k, 4, "[batch, new_tokens, heads_kv, head_dim]");
  check_rank("v", v, 4, "[batch, new_tokens, heads_kv, head_dim]");
  if (k.device < 0) raise_value_error("k: must be a CUDA tensor, got a CPU tensor");
  for (auto [name, view] : {std::pair<char const*, TensorView const*>{"k", &k}, {"v", &v}}) {
    check_device(name, *view, k.device, "k");
    if (view->dtype != fp8attn_py::kTorchBF16) raise_value_error(name, ": dtype ", dtype_name(*view), " must be torch.bfloat16");
    for (int i = 0; i < 4; ++i) {
      if (view->shape[i] != k.shape[i]) raise_value_error(name, ": shape ", shape_string(*view), " differs from k's");
    }
  }
  fp8attn::paged::PagedAppendArguments a;
  a.cache = paged_cache(read("k_pages", kp), read("v_pages", vp), read("k_descale", kd), read("v_descale", vd),
                        read("block_table", table_obj), k.device);
  if (k.shape[2] != a.cache.heads_kv || k.shape[3] != a.cache.head_dim) {
    raise_value_error("k: shape ", shape_string(k), " does not match the cache's heads_kv and head_dim");
  }
  check_rank("positions", positions, 1, "[batch]");
  check_device("positions", positions, k.device, "k");
  if (positions.dtype != fp8attn_py::kTorchI32 || positions.shape[0] != k.shape[0] ||
      (positions.shape[0] > 1 && positions.stride[0] != 1)) {
    raise_value_error("positions: must be a contiguous torch.int32 [batch=", k.shape[0], "]");
  }
  a.batch = to_int("batch", k.shape[0]);
  a.new_tokens = to_int("new_tokens", k.shape[1]);
  a.k = tensor_ref(k);
  a.v = tensor_ref(v);
  a.positions = reinterpret_cast<int32_t const*>(positions.data);
  using fp8attn::paged::device::PagedAppend;
  if (Status s = PagedAppend::can_implement(a); !s) raise_status(s);
  PagedAppend op;
  Status status;
  {
    nb::gil_scoped_release unlocked;
    status = op(a, reinterpret_cast<fp8attn::StreamHandle>(stream_handle));
  }
  if (!status) raise_status(status);
}

nb::dict describe(fp8attn::library::FmhaDescription const& d) {
  nb::dict r;
  r["name"] = d.name;
  r["family"] = fp8attn::library::to_string(d.family);
  r["qk_type"] = fp8attn::to_string(d.qk_type);
  r["v_type"] = fp8attn::to_string(d.v_type);
  r["acc_type"] = fp8attn::to_string(d.acc_type);
  r["out_type"] = fp8attn::to_string(d.out_type);
  r["block_m"] = d.block_m;
  r["block_n"] = d.block_n;
  r["head_dim"] = d.head_dim;
  r["warps"] = d.warps;
  r["stages"] = d.stages;
  r["causal"] = d.causal;
  r["warp_specialized"] = d.warp_specialized;
  r["even_n"] = d.even_n;
  r["writes_lse"] = d.writes_lse;
  r["v_transposed"] = d.v_transposed;
  r["v_key_permuted"] = d.v_key_permuted;
  r["block_descale"] = d.block_descale;
  r["softcap"] = d.softcap;
  r["varlen"] = d.varlen;
  r["launch_warps"] = d.launch_warps;
  r["shared_bytes"] = d.shared_bytes;
  return r;
}

#define FP8ATTN_CALL_PARAMS                                                                             \
  nb::handle q, nb::handle k, nb::handle v, nb::handle out, nb::handle lse, nb::handle q_descale,        \
      nb::handle k_descale, nb::handle v_descale, bool causal, float softmax_scale,                      \
      std::string const& kernel_name, bool bhsd, bool v_key_permuted, int window_left, int window_right, float softcap
#define FP8ATTN_CALL                                                                                      \
  Call {                                                                                                  \
    q, k, v, out, lse, q_descale, k_descale, v_descale, causal, softmax_scale, kernel_name, bhsd, v_key_permuted, \
        window_left, window_right, softcap                                                                \
  }
#define FP8ATTN_CALL_NB_ARGS                                                                               \
  "q"_a, "k"_a, "v"_a, "out"_a, "lse"_a.none(), "q_descale"_a.none(), "k_descale"_a.none(),               \
      "v_descale"_a.none(), "causal"_a, "softmax_scale"_a, "kernel_name"_a, "bhsd"_a, "v_key_permuted"_a,         \
      "window_left"_a, "window_right"_a, "softcap"_a

}  // namespace

NB_MODULE(_fp8attn_ext, m) {
  m.doc() =
      "fp8attn's C++ library (FP8 attention for Hopper, ahead-of-time Triton kernels), for torch tensors.\n"
      "Operands are [batch, seqlen, heads, head_dim] tensors (or [batch, heads, seqlen, head_dim] with\n"
      "bhsd=True) with any strides, head_dim contiguous. fp8attn/fmha.py is the documented API.";
  m.attr("__version__") = FP8ATTN_VERSION_STRING;
  m.attr("VT_SEQ_ALIGN") = fp8attn::fmha::kVtSeqAlign;  // V^T rows are padded to this many elements

  m.def(
      "register_dtypes",
      [](nb::handle e4m3, nb::handle e5m2, nb::handle bf16, nb::handle f16, nb::handle f32, nb::handle i8,
         nb::handle i32) {
        PyObject* const dtypes[] = {e4m3.ptr(), e5m2.ptr(), bf16.ptr(), f16.ptr(), f32.ptr(), i8.ptr(), i32.ptr()};
        fp8attn_py::register_dtypes(dtypes);
      },
      "e4m3"_a, "e5m2"_a, "bf16"_a, "f16"_a, "f32"_a, "i8"_a, "i32"_a,
      "The torch dtype objects (float8_e4m3fn, float8_e5m2, bfloat16, float16, float32, int8, int32); called\n"
      "once at import.");

  m.def(
      "fmha_fwd_varlen",
      [](FP8ATTN_CALL_PARAMS, nb::handle cu_seqlens_q, nb::handle cu_seqlens_k, int max_seqlen_q, int max_seqlen_k,
         uintptr_t stream, nb::handle allocate, nb::handle release) {
        return fmha_fwd_varlen(FP8ATTN_CALL, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, stream, allocate,
                               release);
      },
      FP8ATTN_CALL_NB_ARGS, "cu_seqlens_q"_a, "cu_seqlens_k"_a, "max_seqlen_q"_a, "max_seqlen_k"_a, "stream"_a,
      "allocate"_a, "release"_a,
      "Varlen attention forward (fp8attn.fmha_fwd_varlen is the Python API); returns the instance's name.");
  m.def(
      "select_kernel_varlen",
      [](FP8ATTN_CALL_PARAMS, nb::handle cu_seqlens_q, nb::handle cu_seqlens_k, int max_seqlen_q, int max_seqlen_k) {
        int device = 0;
        FmhaFwd::Arguments const args =
            make_varlen_arguments(FP8ATTN_CALL, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, &device);
        std::string name;
        if (Status s = FmhaFwd::select_kernel(args, &name); !s) raise_status(s);
        return name;
      },
      FP8ATTN_CALL_NB_ARGS, "cu_seqlens_q"_a, "cu_seqlens_k"_a, "max_seqlen_q"_a, "max_seqlen_k"_a,
      "Name of the instance fmha_fwd_varlen would run for these arguments.");
  m.def(
      "fmha_fwd",
      [](FP8ATTN_CALL_PARAMS, uintptr_t stream, nb::handle allocate, nb::handle release) {
        return fmha_fwd(FP8ATTN_CALL, stream, allocate, release);
      },
      FP8ATTN_CALL_NB_ARGS, "stream"_a, "allocate"_a, "release"_a,
      "Attention forward into `out` (and `lse`) on `stream` (a cudaStream_t as int). When a workspace is needed,\n"
      "`allocate(nbytes, stream)` returns its device address and `release(address)` frees it after the launch.\n"
      "Returns the name of the instance that ran.\n"
      "Raises ValueError for invalid arguments, RuntimeError for CUDA driver or internal failures.");

  m.def("transpose_v", &transpose_v, "v"_a, "vt"_a, "key_permuted"_a, "bhsd"_a, "stream"_a,
        "V -> V^T into the preallocated contiguous `vt` [batch, heads, head_dim, padded_seqlen] on `stream`;\n"
        "keys permuted within 32-key blocks when key_permuted (what fmha_fwd's v_key_permuted reads).");

  m.def("quantize", &quantize, "x"_a, "out"_a, "descale"_a.none(), "static_descale"_a.none(), "granularity"_a,
        "layout"_a, "heads_kv"_a, "smooth"_a, "rotate"_a, "seed"_a, "stream"_a, "allocate"_a, "release"_a,
        "kernel_name"_a = "",
        "BF16/FP16 x -> e4m3/int8 `out` and float32 `descale` on `stream` (fp8attn.quantize is the Python API).\n"
        "granularity: 0 tensor, 1 head, 2 block; layout: 0 bshd, 1 vt, 2 vt_kperm.");
  m.attr("QUANTIZE_BLOCK_TOKENS") = fp8attn::quant::kQuantizeBlockTokens;
  m.def("paged_decode", &paged_decode, "q"_a, "out"_a, "k_pages"_a, "v_pages"_a, "k_descale"_a, "v_descale"_a,
        "block_table"_a, "seqlens"_a, "max_seqlen"_a, "softmax_scale"_a, "num_splits"_a, "stream"_a, "allocate"_a,
        "release"_a, "kernel_name"_a = "", "window_left"_a = -1, "softcap"_a = 0.0f,
        "Decode attention over a paged FP8 KV cache (fp8attn.paged.decode is the Python API). Returns the decode "
        "instance's name.");
  m.def("paged_append", &paged_append, "k"_a, "v"_a, "k_pages"_a, "v_pages"_a, "k_descale"_a, "v_descale"_a,
        "block_table"_a, "positions"_a, "stream"_a,
        "BF16 K/V rows into the paged FP8 cache (fp8attn.paged.append is the Python API).");
  m.def("fmha_fwd_quantized", &fmha_fwd_quantized, "q"_a, "k"_a, "v"_a, "out"_a, "mode"_a, "causal"_a,
        "softmax_scale"_a, "seed"_a, "stream"_a, "allocate"_a, "release"_a,
        "BF16 q, k, v -> out through the C++ FmhaFwdQuantized in accuracy mode `mode` (0 fp8, 1 fp8_per_head,\n"
        "2 fp8_smooth_rotate, 3 int8_qk, 4 bf16); returns the attention instance's name.");

  m.def(
      "workspace_size",
      [](FP8ATTN_CALL_PARAMS) {
        int device = 0;
        FmhaFwd::Arguments args = make_arguments(FP8ATTN_CALL, &device);
        if (Status s = FmhaFwd::can_implement(args); !s) raise_status(s);
        return FmhaFwd::get_workspace_size(args);
      },
      FP8ATTN_CALL_NB_ARGS, "Bytes of device workspace fmha_fwd needs for these arguments (validated first).");

  m.def(
      "select_kernel",
      [](FP8ATTN_CALL_PARAMS) {
        int device = 0;
        FmhaFwd::Arguments args = make_arguments(FP8ATTN_CALL, &device);
        std::string name;
        if (Status s = FmhaFwd::select_kernel(args, &name); !s) raise_status(s);
        return name;
      },
      FP8ATTN_CALL_NB_ARGS, "Name of the instance the heuristic (or kernel_name) picks for these arguments.");

  m.def(
      "list_kernels",
      [] {
        nb::list kernels;
        for (auto const& d : fp8attn::library::fmha_operations()) kernels.append(describe(d));
        return kernels;
      },
      "Every attention instance compiled into this build, in manifest order, as dicts of its fields.");

  m.def(
      "list_operations",
      [] {
        nb::list ops;
        for (fp8attn::library::Operation const* op : fp8attn::library::operations()) {
          auto const& d = op->description();
          nb::dict r;
          r["name"] = d.name;
          r["kind"] = fp8attn::library::to_string(d.kind);
          r["family"] = fp8attn::library::to_string(d.family);
          r["summary"] = d.summary;
          ops.append(r);
        }
        return ops;
      },
      "Every operation of every kind in this build (attention, V transpose), as dicts.");

  m.def(
      "find_kernel",
      [](std::string const& name) -> nb::object {
        auto const* d = fp8attn::library::find_fmha_operation(name);
        if (!d) return nb::none();
        return describe(*d);
      },
      "name"_a, "The fields of the attention instance with this exact name, or None.");

  m.def(
      "matches_filter",
      [](std::string const& name, std::string const& filter) {
        return fp8attn::library::matches_filter(name, filter);
      },
      "name"_a, "filter"_a, "CUTLASS filter semantics: ',' = OR, '*' = ordered substrings.");

  m.def(
      "flops",
      [](int batch, int heads_q, int seqlen_q, int seqlen_k, int head_dim, bool causal) {
        fp8attn::fmha::FmhaProblem p;
        p.batch = batch;
        p.heads_q = heads_q;
        p.seqlen_q = seqlen_q;
        p.seqlen_k = seqlen_k;
        p.head_dim = head_dim;
        p.causal = causal;
        return p.flops();
      },
      "batch"_a, "heads_q"_a, "seqlen_q"_a, "seqlen_k"_a, "head_dim"_a, "causal"_a,
      "FLOPs of attention forward as the library counts them (FmhaProblem::flops).");

  m.def(
      "triton_version", [] { return std::string(fp8attn::library::triton_version()); },
      "Triton version the cubins were compiled with.");
}
