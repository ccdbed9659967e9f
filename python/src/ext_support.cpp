// ext_support.h's functions: errors as Python exceptions, reading and checking tensors, TensorRef and
// DescaleRef from them.

#include "ext_support.h"

#include <utility>

namespace fp8attn_py {

using fp8attn::Status;
using fp8attn::StatusCode;
using fp8attn::fmha::DescaleRef;
using fp8attn::fmha::TensorRef;

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

TensorView read(char const* name, nb::handle h) {
  TensorView v;
  if (!fp8attn_py::read_tensor(name, h.ptr(), &v)) throw nb::python_error();
  return v;
}

void check_device(char const* name, TensorView const& t, int device, char const* reference) {
  if (t.device < 0) raise_value_error(name, ": must be a CUDA tensor, got a CPU tensor");
  if (t.device != device) raise_value_error(name, ": is on cuda:", t.device, " but ", reference, " is on cuda:", device);
}

void check_rank(char const* name, TensorView const& t, int rank, char const* what) {
  if (t.ndim != rank) {
    raise_value_error(name, ": expected a ", rank, "-D ", what, " tensor, got ", t.ndim, "-D with shape ",
                      shape_string(t));
  }
}

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

}  // namespace fp8attn_py
