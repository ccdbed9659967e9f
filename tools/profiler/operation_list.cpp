// --list through library::operations() (every kind); library::fmha_operations() for the attention-only fields.

#include "operation_list.h"

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "fp8attn/library/operation.h"

namespace fp8attn::profiler {

void print_operations(Options const& options) {
  std::vector<library::Operation const*> selected;
  for (library::Operation const* op : library::operations()) {
    library::OperationDescription const& d = op->description();
    bool const kind_wanted =
        !options.operation_given || options.operation == "all" || options.operation == library::to_string(d.kind);
    if (kind_wanted && library::matches_filter(d.name, options.kernels)) selected.push_back(op);
  }
  if (selected.empty()) {
    std::string what = options.operation_given && options.operation != "all" ? options.operation + " operation"
                                                                             : "operation";
    if (!options.kernels.empty()) throw UsageError("--kernels=" + options.kernels + ": matches no compiled " + what);
    throw UsageError("this build has no compiled " + what);
  }

  size_t width = 24;
  for (library::Operation const* op : selected) width = std::max(width, op->description().name.size());
  std::printf("# %zu of %zu compiled operations (triton %s)\n", selected.size(), library::operations().size(),
              library::triton_version());
  std::printf("%-*s %-11s %-6s %12s %13s %4s  %s\n", static_cast<int>(width), "operation", "kind", "family",
              "launch_warps", "shared_bytes", "lse", "summary");
  for (library::Operation const* op : selected) {
    library::OperationDescription const& d = op->description();
    char const* lse = "-";
    if (d.kind == library::OperationKind::kFmhaFwd) {
      library::FmhaDescription const* fmha = library::find_fmha_operation(d.name);
      lse = fmha == nullptr ? "?" : (fmha->writes_lse ? "yes" : "no");
    }
    std::printf("%-*s %-11s %-6s %12d %13d %4s  %s\n", static_cast<int>(width), d.name.c_str(),
                library::to_string(d.kind), library::to_string(d.family), d.launch_warps, d.shared_bytes, lse,
                d.summary.c_str());
  }
}

}  // namespace fp8attn::profiler
