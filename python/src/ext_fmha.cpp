// _fp8attn_ext's attention forward: fmha_fwd, the varlen call, V's transpose, workspace size and instance
// selection (fp8attn/fmha.py is their Python API). This file checks what FmhaFwd::Arguments cannot express:
// ranks, shapes that must agree between operands, devices and dtypes; everything else is
// FmhaFwd::can_implement's, whose Status becomes ValueError or RuntimeError with its message.

#include "ext_support.h"

#include <string>
#include <utility>

#include "fp8attn/fmha/device/fmha_fwd.h"
#include "fp8attn/fmha/device/transpose_v.h"
#include "fp8attn/types.h"

namespace fp8attn_py {

using namespace nb::literals;

using fp8attn::DataType;
using fp8attn::Status;
using fp8attn::fmha::device::FmhaFwd;

namespace {

/// Everything one call passes; the same set serves fmha_fwd, workspace_size and select_kernel.
struct Call {
  nb::handle q, k, v, out, lse, q_descale, k_descale, v_descale;
  bool causal;
  float softmax_scale;
  std::string const& kernel_name;
  bool bhsd;
  bool v_key_permuted;
  bool k_descale_paired;
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
  args.k_descale_paired = c.k_descale_paired;
  args.window_left = c.window_left;
  args.window_right = c.window_right;
  args.softcap = c.softcap;
  return args;
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

/// Runs attention forward on `stream`. When a workspace is needed, `allocate(nbytes, stream)` returns its
/// device address (an int; torch's caching allocator, stream-ordered) and `release(address)` is called once
/// the launches are queued, whatever happened. Returns the name of the instance that ran.
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

#define FP8ATTN_CALL_PARAMS                                                                             \
  nb::handle q, nb::handle k, nb::handle v, nb::handle out, nb::handle lse, nb::handle q_descale,        \
      nb::handle k_descale, nb::handle v_descale, bool causal, float softmax_scale,                      \
      std::string const& kernel_name, bool bhsd, bool v_key_permuted, int window_left, int window_right, float softcap, \
      bool k_descale_paired
#define FP8ATTN_CALL                                                                                      \
  Call {                                                                                                  \
    q, k, v, out, lse, q_descale, k_descale, v_descale, causal, softmax_scale, kernel_name, bhsd, v_key_permuted, \
        k_descale_paired, window_left, window_right, softcap                                              \
  }
#define FP8ATTN_CALL_NB_ARGS                                                                               \
  "q"_a, "k"_a, "v"_a, "out"_a, "lse"_a.none(), "q_descale"_a.none(), "k_descale"_a.none(),               \
      "v_descale"_a.none(), "causal"_a, "softmax_scale"_a, "kernel_name"_a, "bhsd"_a, "v_key_permuted"_a,         \
      "window_left"_a, "window_right"_a, "softcap"_a, "k_descale_paired"_a

}  // namespace

void bind_fmha(nb::module_& m) {
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
}

}  // namespace fp8attn_py
