// _fp8attn_ext: the Python face of fp8attn's C++ library, for torch tensors.
//
// One call of fp8attn.fmha_fwd crosses into C++ once: this module reads the tensors' pointers, shapes,
// strides, devices and dtypes through the Python object protocol (torch_tensor.h; no DLPack, no torch
// link), builds FmhaFwd::Arguments, validates, asks Python for a workspace only when one is needed (the
// `allocate` callback: torch's caching allocator), and launches on the given stream.
//
// The bindings check what the handles' Arguments cannot express (ranks, shapes that must agree between operands,
// devices and dtypes); everything else is each handle's can_implement, whose Status becomes ValueError (bad
// arguments) or RuntimeError (driver and internal failures) with its message.
//
// The bindings live in one file per part of the library (ext_fmha.cpp, ext_quantize.cpp, ext_paged.cpp,
// ext_library.cpp), over the helpers of ext_support.h; this file makes the module.

#include <nanobind/nanobind.h>

#include "ext_support.h"
#include "fp8attn/fmha/device/transpose_v.h"
#include "torch_tensor.h"

#ifndef FP8ATTN_VERSION_STRING
#define FP8ATTN_VERSION_STRING "0.0.0"
#endif

namespace nb = nanobind;
using namespace nb::literals;

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

  fp8attn_py::bind_fmha(m);
  fp8attn_py::bind_quantize(m);
  fp8attn_py::bind_paged(m);
  fp8attn_py::bind_library(m);
}
