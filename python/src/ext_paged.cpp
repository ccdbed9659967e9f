// _fp8attn_ext's paged FP8 KV cache: decode and append (fp8attn/paged.py is their Python API).

#include "ext_support.h"

#include <string>
#include <utility>

#include "fp8attn/paged/device/paged.h"

namespace fp8attn_py {

using namespace nb::literals;

using fp8attn::Status;

namespace {

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

}  // namespace

void bind_paged(nb::module_& m) {
  m.def("paged_decode", &paged_decode, "q"_a, "out"_a, "k_pages"_a, "v_pages"_a, "k_descale"_a, "v_descale"_a,
        "block_table"_a, "seqlens"_a, "max_seqlen"_a, "softmax_scale"_a, "num_splits"_a, "stream"_a, "allocate"_a,
        "release"_a, "kernel_name"_a = "", "window_left"_a = -1, "softcap"_a = 0.0f,
        "Decode attention over a paged FP8 KV cache (fp8attn.paged.decode is the Python API). Returns the decode "
        "instance's name.");
  m.def("paged_append", &paged_append, "k"_a, "v"_a, "k_pages"_a, "v_pages"_a, "k_descale"_a, "v_descale"_a,
        "block_table"_a, "positions"_a, "stream"_a,
        "BF16 K/V rows into the paged FP8 cache (fp8attn.paged.append is the Python API).");
}

}  // namespace fp8attn_py
