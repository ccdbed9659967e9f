// Links against the installed library and asks it something that needs no GPU.
#include <cstdio>

#include "fp8attn/fmha/device/fmha_fwd.h"
#include "fp8attn/library/operation.h"

int main() {
  using fp8attn::fmha::device::FmhaFwd;
  FmhaFwd::Arguments args;
  args.problem.head_dim = 96;  // not compiled: must be refused with a reason
  args.problem.batch = args.problem.heads_q = args.problem.heads_kv = 1;
  fp8attn::Status s = FmhaFwd::can_implement(args);
  std::printf("%zu operations; can_implement(head_dim=96): %s\n", fp8attn::library::fmha_operations().size(),
              s.to_string().c_str());
  return (!s.ok() && !fp8attn::library::fmha_operations().empty()) ? 0 : 1;
}
