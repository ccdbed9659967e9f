// _fp8attn_ext's view of the registry: the compiled attention instances and operations of every kind.

#include "ext_support.h"

#include <string>

#include "fp8attn/library/operation.h"
#include "fp8attn/types.h"

namespace fp8attn_py {

using namespace nb::literals;

namespace {

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
  r["k_descale_paired"] = d.k_descale_paired;
  r["softcap"] = d.softcap;
  r["varlen"] = d.varlen;
  r["launch_warps"] = d.launch_warps;
  r["shared_bytes"] = d.shared_bytes;
  return r;
}

}  // namespace

void bind_library(nb::module_& m) {
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
      "triton_version", [] { return std::string(fp8attn::library::triton_version()); },
      "Triton version the cubins were compiled with.");
}

}  // namespace fp8attn_py
