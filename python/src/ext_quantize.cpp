// _fp8attn_ext's quantization: the quantize operation and the accuracy modes' fused call (FmhaFwdQuantized);
// fp8attn/quantize_op.py and fp8attn/modes.py are their Python API.

#include "ext_support.h"

#include <string>
#include <utility>

#include "fp8attn/fmha/device/fmha_fwd_quantized.h"
#include "fp8attn/quant/device/quantize.h"
#include "fp8attn/types.h"

namespace fp8attn_py {

using namespace nb::literals;

using fp8attn::DataType;
using fp8attn::Status;

namespace {

/// x [batch, seqlen, heads, head_dim] (bf16/f16) -> `out` (e4m3/int8; [b, s, h, d] or V^T [b, h, d, padded_seqlen]
/// contiguous when layout is "vt"/"vt_kperm") and `descale` (float32, preallocated; None with static_descale).
/// Returns the workspace through allocate/release as fmha_fwd does.
void quantize(nb::handle x_obj, nb::handle out_obj, nb::handle descale_obj, nb::handle static_obj, int granularity,
              int layout, int heads_kv, bool smooth, bool rotate, uint32_t seed, uintptr_t stream_handle,
              nb::handle allocate, nb::handle release, std::string const& kernel_name, int smooth_sample_stride) {
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
  if (granularity < 0 || granularity > static_cast<int>(Granularity::kPerBlockPair)) {
    raise_value_error("granularity=", granularity, ": expected 0 tensor, 1 head, 2 block or 3 block_pair");
  }
  a.granularity = static_cast<Granularity>(granularity);
  a.layout = static_cast<OutputLayout>(layout);
  a.smooth = smooth;
  a.smooth_sample_stride = smooth_sample_stride;
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

}  // namespace

void bind_quantize(nb::module_& m) {
  m.def("quantize", &quantize, "x"_a, "out"_a, "descale"_a.none(), "static_descale"_a.none(), "granularity"_a,
        "layout"_a, "heads_kv"_a, "smooth"_a, "rotate"_a, "seed"_a, "stream"_a, "allocate"_a, "release"_a,
        "kernel_name"_a = "", "smooth_sample_stride"_a = 1,
        "BF16/FP16 x -> e4m3/int8 `out` and float32 `descale` on `stream` (fp8attn.quantize is the Python API).\n"
        "granularity: 0 tensor, 1 head, 2 block, 3 block_pair; layout: 0 bshd, 1 vt, 2 vt_kperm;\n"
        "smooth_sample_stride: the smoothing mean from every n-th block (0: the library's rule).");
  m.def("smooth_sample_stride_for", &fp8attn::quant::smooth_sample_stride_for, "seqlen"_a,
        "The library's smoothing sample stride for a sequence (quantize's smooth_sample_stride=0).");
  m.attr("QUANTIZE_BLOCK_TOKENS") = fp8attn::quant::kQuantizeBlockTokens;
  m.def("fmha_fwd_quantized", &fmha_fwd_quantized, "q"_a, "k"_a, "v"_a, "out"_a, "mode"_a, "causal"_a,
        "softmax_scale"_a, "seed"_a, "stream"_a, "allocate"_a, "release"_a,
        "BF16 q, k, v -> out through the C++ FmhaFwdQuantized in accuracy mode `mode` (0 fp8, 1 fp8_per_head,\n"
        "2 fp8_smooth_rotate, 3 int8_qk, 4 bf16); returns the attention instance's name.");
}

}  // namespace fp8attn_py
