// _fp8attn_ext: nanobind bindings of fp8attn::fmha::device::FmhaFwd over DLPack.
//
// Tensors arrive through DLPack as untyped nb::ndarray<>: FP8 tensors as uint8 views, BF16 as is (or as
// int16 views), because DLPack producers disagree on how to export FP8. A type string ("e4m3", "bf16", ...)
// says what the bytes are; this file only checks that the element size agrees with it.
//
// Every operand is given as a [batch, seqlen, heads, head_dim] tensor with arbitrary strides (in elements):
// a BHSD tensor is passed as its transposed view, so no layout flag crosses this boundary.
//
// What this file checks itself is what FmhaFwd::Arguments cannot express: ranks, shapes that must agree
// between operands, devices and element sizes. Everything else is FmhaFwd::can_implement's, whose Status
// becomes ValueError (bad arguments) or RuntimeError (driver and internal failures) with its message.

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>

#include <climits>
#include <cstdint>
#include <type_traits>
#include <stdexcept>
#include <string>

#include "fp8attn/fmha/device/fmha_fwd.h"
#include "fp8attn/library/operation.h"
#include "fp8attn/status.h"
#include "fp8attn/types.h"

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

using InArray = nb::ndarray<nb::ro>;  // read-only import: the cheaper unversioned DLPack path
using OutArray = nb::ndarray<>;

constexpr int kDLCUDA = static_cast<int>(nb::device::cuda::value);

// ---- Errors ------------------------------------------------------------------------------------------

/// Argument errors are ValueError; everything else (driver failures, a missing workspace, internal errors)
/// is RuntimeError. Both carry Status::to_string(): the code's name and the reason.
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

// Messages are built with std::to_string, never iostreams: formatting a number through an ostream crashed
// (SIGSEGV in num_put/codecvt) inside torch's process on the H200, where the locale facets the stream
// used did not come from the libstdc++ this module was compiled against.
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

template <typename Array>
std::string shape_string(Array const& a) {
  std::string s = "[";
  for (size_t i = 0; i < a.ndim(); ++i) s += (i ? ", " : "") + std::to_string(a.shape(i));
  return s + "]";
}

char const* device_name(int device_type) {
  switch (device_type) {
    case 1: return "cpu";
    case 2: return "cuda";
    case 3: return "cuda_host";
    case 13: return "cuda_managed";
    default: return "non-cuda";
  }
}

// ---- Operand checks ----------------------------------------------------------------------------------

/// Every tensor must live on the same CUDA device; the first one checked fixes which.
struct DeviceCheck {
  int device_id = -1;

  template <typename Array>
  void operator()(char const* name, Array const& a) {
    if (a.device_type() != kDLCUDA) {
      raise_value_error(name, ": must be a CUDA tensor, got a ", device_name(a.device_type()), " tensor");
    }
    if (device_id < 0) {
      device_id = a.device_id();
    } else if (a.device_id() != device_id) {
      raise_value_error(name, ": is on cuda:", a.device_id(), " but q is on cuda:", device_id);
    }
  }
};

/// Element bits of a DLPack dtype must match `type`; raw integer views of the same width are accepted.
template <typename Array>
void check_element_type(char const* name, Array const& a, DataType type) {
  auto dt = a.dtype();
  int const bits = fp8attn::size_of(type) * 8;
  bool ok = dt.lanes == 1 && dt.bits == bits;
  if (ok) {
    auto code = static_cast<nb::dlpack::dtype_code>(dt.code);
    bool const raw = code == nb::dlpack::dtype_code::Int || code == nb::dlpack::dtype_code::UInt;
    switch (type) {
      case DataType::kE4M3: ok = raw || code == nb::dlpack::dtype_code::Float8_E4M3FN; break;
      case DataType::kE5M2: ok = raw || code == nb::dlpack::dtype_code::Float8_E5M2; break;
      case DataType::kBF16: ok = raw || code == nb::dlpack::dtype_code::Bfloat; break;
      case DataType::kF16: ok = raw || code == nb::dlpack::dtype_code::Float; break;
      case DataType::kF32: ok = code == nb::dlpack::dtype_code::Float; break;
    }
  }
  if (!ok) {
    raise_value_error(name, ": element type (DLPack code ", int(dt.code), ", ", int(dt.bits),
                      " bits) does not hold ", fp8attn::to_string(type), " values");
  }
}

template <typename Array>
void check_rank(char const* name, Array const& a, size_t rank, char const* what) {
  if (a.ndim() != rank) {
    raise_value_error(name, ": expected a ", rank, "-D ", what, " tensor, got ", a.ndim(), "-D with shape ",
                      shape_string(a));
  }
}

int to_int(char const* what, size_t value) {
  if (value > static_cast<size_t>(INT_MAX)) raise_value_error(what, "=", value, " does not fit in int32");
  return static_cast<int>(value);
}

/// A [batch, seqlen, heads, head_dim] operand as pointer and element strides.
template <typename Array>
TensorRef tensor_ref(Array const& a) {
  TensorRef ref;
  ref.ptr = a.data();
  ref.stride_b = a.stride(0);
  ref.stride_s = a.stride(1);
  ref.stride_h = a.stride(2);
  ref.stride_d = a.stride(3);
  return ref;
}

/// [1] (or a 0-d scalar) per tensor, or [batch | 1, heads_kv | 1] per (batch, kv head); size-1 dimensions
/// broadcast.
DescaleRef descale_ref(char const* name, InArray const& a, int batch, int heads_kv, DeviceCheck& device) {
  if (!a.is_valid()) return {};
  device(name, a);
  check_element_type(name, a, DataType::kF32);
  bool const per_tensor = a.ndim() == 0 || (a.ndim() == 1 && a.shape(0) == 1);
  bool const per_head = a.ndim() == 2 && (a.shape(0) == 1 || a.shape(0) == static_cast<size_t>(batch)) &&
                        (a.shape(1) == 1 || a.shape(1) == static_cast<size_t>(heads_kv));
  if (!per_tensor && !per_head) {
    raise_value_error(name, ": shape ", shape_string(a), " is neither [1] (per tensor) nor [batch=", batch,
                      ", heads_kv=", heads_kv, "] (per batch and kv head)");
  }
  DescaleRef ref;
  ref.ptr = static_cast<float const*>(a.data());
  if (per_head) {
    ref.stride_b = a.shape(0) == 1 ? 0 : a.stride(0);
    ref.stride_h = a.shape(1) == 1 ? 0 : a.stride(1);
  }
  return ref;
}

DataType parse_type(char const* arg, std::string const& name) {
  auto type = fp8attn::parse_data_type(name);
  if (!type) raise_value_error(arg, "='", name, "' is not a data type; expected e4m3, e5m2, bf16, f16 or f32");
  return *type;
}

/// Everything one call passes; the same set serves fmha_fwd, can_implement, workspace_size, select_kernel.
struct CallArgs {
  InArray q, k, v;
  OutArray out, lse;
  InArray q_descale, k_descale, v_descale;
  std::string input_type;
  std::string output_type;
  bool causal = false;
  float softmax_scale = 0.0f;
  std::string kernel_name;
};

/// Builds FmhaFwd::Arguments, raising ValueError for what the Arguments cannot express.
FmhaFwd::Arguments make_arguments(CallArgs const& c, DeviceCheck& device) {
  char const* const bshd = "[batch, seqlen, heads, head_dim]";
  check_rank("q", c.q, 4, bshd);
  check_rank("k", c.k, 4, bshd);
  check_rank("v", c.v, 4, bshd);
  check_rank("out", c.out, 4, bshd);
  device("q", c.q);
  device("k", c.k);
  device("v", c.v);
  device("out", c.out);

  DataType const input_type = parse_type("input_type", c.input_type);
  DataType const output_type = parse_type("output_type", c.output_type);
  check_element_type("q", c.q, input_type);
  check_element_type("k", c.k, input_type);
  check_element_type("v", c.v, input_type);
  check_element_type("out", c.out, output_type);

  // Shapes that must agree between operands (FmhaProblem holds each size once).
  auto const& q = c.q;
  auto const& k = c.k;
  if (k.shape(0) != q.shape(0)) raise_value_error("k: batch=", k.shape(0), " does not match q's batch=", q.shape(0));
  if (k.shape(3) != q.shape(3)) {
    raise_value_error("k: head_dim=", k.shape(3), " does not match q's head_dim=", q.shape(3));
  }
  for (size_t i = 0; i < 4; ++i) {
    if (c.v.shape(i) != k.shape(i)) {
      raise_value_error("v: shape ", shape_string(c.v), " does not match k's shape ", shape_string(k),
                        " ([batch, seqlen_k, heads_kv, head_dim])");
    }
    if (c.out.shape(i) != q.shape(i)) {
      raise_value_error("out: shape ", shape_string(c.out), " does not match q's shape ", shape_string(q),
                        " (as [batch, seqlen, heads, head_dim])");
    }
  }

  FmhaFwd::Arguments args;
  auto& p = args.problem;
  p.batch = to_int("batch", q.shape(0));
  p.seqlen_q = to_int("seqlen_q", q.shape(1));
  p.heads_q = to_int("heads_q", q.shape(2));
  p.head_dim = to_int("head_dim", q.shape(3));
  p.seqlen_k = to_int("seqlen_k", k.shape(1));
  p.heads_kv = to_int("heads_kv", k.shape(2));
  p.causal = c.causal;
  p.input_type = input_type;
  p.output_type = output_type;

  args.q = tensor_ref(c.q);
  args.k = tensor_ref(c.k);
  args.v = tensor_ref(c.v);
  args.o = tensor_ref(c.out);

  if (c.lse.is_valid()) {
    device("lse", c.lse);
    check_element_type("lse", c.lse, DataType::kF32);
    check_rank("lse", c.lse, 3, "[batch, heads_q, seqlen_q]");
    if (c.lse.shape(0) != q.shape(0) || c.lse.shape(1) != q.shape(2) || c.lse.shape(2) != q.shape(1)) {
      raise_value_error("lse: shape ", shape_string(c.lse), " is not [batch=", q.shape(0),
                        ", heads_q=", q.shape(2), ", seqlen_q=", q.shape(1), "]");
    }
    // The kernels write LSE densely: rows of seqlen_q floats, one per (batch, head_q). (Strides of an
    // empty tensor mean nothing.)
    int64_t expected = 1;
    for (int i = 2; i >= 0 && c.lse.size() > 0; --i) {
      if (c.lse.shape(i) > 1 && c.lse.stride(i) != expected) {
        raise_value_error("lse: must be contiguous; strides (", c.lse.stride(0), ", ", c.lse.stride(1), ", ",
                          c.lse.stride(2), ") for shape ", shape_string(c.lse));
      }
      expected *= static_cast<int64_t>(c.lse.shape(i));
    }
    args.lse = static_cast<float*>(c.lse.data());
  }

  args.q_descale = descale_ref("q_descale", c.q_descale, p.batch, p.heads_kv, device);
  args.k_descale = descale_ref("k_descale", c.k_descale, p.batch, p.heads_kv, device);
  args.v_descale = descale_ref("v_descale", c.v_descale, p.batch, p.heads_kv, device);
  args.softmax_scale = c.softmax_scale;
  args.kernel_name = c.kernel_name;
  return args;
}

// ---- Bound functions ---------------------------------------------------------------------------------

void check_or_raise(FmhaFwd::Arguments const& args) {
  Status status = FmhaFwd::can_implement(args);
  if (!status) raise_status(status);
}

/// Runs attention forward on `stream`; returns the name of the instance that ran.
std::string fmha_fwd(CallArgs const& c, OutArray const& workspace, uintptr_t stream_handle) {
  DeviceCheck device;
  FmhaFwd::Arguments args = make_arguments(c, device);
  check_or_raise(args);
  size_t const needed = FmhaFwd::get_workspace_size(args);
  void* workspace_ptr = nullptr;
  if (workspace.is_valid()) {
    device("workspace", workspace);
    if (workspace.nbytes() < needed) {
      raise_value_error("workspace: ", workspace.nbytes(), " bytes given, ", needed, " needed");
    }
    workspace_ptr = workspace.data();
  } else if (needed > 0) {
    raise_value_error("workspace: is None but ", needed, " bytes are needed (see workspace_size())");
  }
  auto stream = reinterpret_cast<fp8attn::StreamHandle>(stream_handle);
  FmhaFwd op;
  Status status;
  {
    // Module loading and launching touch no Python object; the ndarrays stay referenced by the caller.
    nb::gil_scoped_release release;
    status = op.initialize(args, workspace_ptr, stream);
    if (status) status = op.run(stream);
  }
  if (!status) raise_status(status);
  return op.kernel_name();
}

nb::dict describe(fp8attn::library::FmhaDescription const& d) {
  nb::dict r;
  r["name"] = d.name;
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
  r["launch_warps"] = d.launch_warps;
  r["shared_bytes"] = d.shared_bytes;
  return r;
}

// The argument list shared by fmha_fwd, can_implement, workspace_size and select_kernel.
#define FP8ATTN_CALL_PARAMS                                                                              \
  InArray q, InArray k, InArray v, OutArray out, OutArray lse, InArray q_descale, InArray k_descale,    \
      InArray v_descale, std::string input_type, std::string output_type, bool causal, float softmax_scale, \
      std::string kernel_name
#define FP8ATTN_CALL_ARGS                                                                                \
  CallArgs{q, k, v, out, lse, q_descale, k_descale, v_descale, input_type, output_type, causal,          \
           softmax_scale, kernel_name}
#define FP8ATTN_CALL_NB_ARGS                                                                             \
  "q"_a, "k"_a, "v"_a, "out"_a, "lse"_a.none() = nb::none(), "q_descale"_a.none() = nb::none(),          \
      "k_descale"_a.none() = nb::none(), "v_descale"_a.none() = nb::none(), nb::kw_only(),               \
      "input_type"_a, "output_type"_a = "bf16", "causal"_a = false, "softmax_scale"_a = 0.0f,           \
      "kernel_name"_a = ""

}  // namespace

NB_MODULE(_fp8attn_ext, m) {
  m.doc() =
      "fp8attn's C++ library (FP8 attention for Hopper, ahead-of-time Triton kernels) over DLPack.\n"
      "Operands are [batch, seqlen, heads, head_dim] tensors with any strides (head_dim contiguous);\n"
      "FP8 tensors are passed as uint8 views and `input_type` names the real element type.";
  m.attr("__version__") = FP8ATTN_VERSION_STRING;

  m.def(
      "fmha_fwd",
      [](FP8ATTN_CALL_PARAMS, OutArray workspace, uintptr_t stream) {
        return fmha_fwd(FP8ATTN_CALL_ARGS, workspace, stream);
      },
      FP8ATTN_CALL_NB_ARGS, "workspace"_a.none() = nb::none(), "stream"_a = 0,
      "Attention forward into `out` (and `lse`), launched on `stream` (a cudaStream_t as int; 0 = default).\n"
      "`workspace` must hold workspace_size(...) bytes. Returns the name of the instance that ran.\n"
      "Raises ValueError for invalid arguments, RuntimeError for CUDA driver or internal failures.");

  m.def(
      "can_implement",
      [](FP8ATTN_CALL_PARAMS) {
        DeviceCheck device;
        check_or_raise(make_arguments(FP8ATTN_CALL_ARGS, device));
      },
      FP8ATTN_CALL_NB_ARGS, "Raises ValueError naming the offending argument if no instance can run this call.");

  m.def(
      "workspace_size",
      [](FP8ATTN_CALL_PARAMS) {
        DeviceCheck device;
        FmhaFwd::Arguments args = make_arguments(FP8ATTN_CALL_ARGS, device);
        check_or_raise(args);
        return FmhaFwd::get_workspace_size(args);
      },
      FP8ATTN_CALL_NB_ARGS, "Bytes of device workspace fmha_fwd needs for these arguments (validated first).");

  m.def(
      "select_kernel",
      [](FP8ATTN_CALL_PARAMS) {
        DeviceCheck device;
        FmhaFwd::Arguments args = make_arguments(FP8ATTN_CALL_ARGS, device);
        std::string name;
        Status status = FmhaFwd::select_kernel(args, &name);
        if (!status) raise_status(status);
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
      "find_kernel",
      [](std::string const& name) -> nb::object {
        auto const* d = fp8attn::library::find_fmha_operation(name);
        if (!d) return nb::none();
        return describe(*d);
      },
      "name"_a, "The fields of the instance with this exact name, or None.");

  m.def(
      "matches_filter",
      [](std::string const& name, std::string const& filter) {
        return fp8attn::library::matches_filter(name, filter);
      },
      "name"_a, "filter"_a, "CUTLASS filter semantics: ',' = OR, '*' = ordered substrings.");

  m.def(
      "triton_version", [] { return std::string(fp8attn::library::triton_version()); },
      "Triton version the cubins were compiled with.");
}
