// The registry lists the build's instances consistently with their names.
#include <set>
#include <string>

#include "check.h"
#include "fp8attn/library/operation.h"

using namespace fp8attn;

int main() {
  auto const& ops = library::fmha_operations();
  CHECK(!ops.empty(), "no attention instance in this build");
  CHECK(std::string(library::triton_version()) == "3.6.0", library::triton_version());
  std::set<std::string> names;
  for (auto const& op : ops) {
    CHECK(names.insert(op.name).second, "duplicate name " + op.name);
    std::string tile = "_" + std::to_string(op.block_m) + "x" + std::to_string(op.block_n) + "x" + std::to_string(op.head_dim) + "_";
    CHECK(op.name.rfind("fp8attn_sm90_fmha_fwd_", 0) == 0, op.name);
    CHECK(op.name.find(tile) != std::string::npos, op.name + " lacks " + tile);
    CHECK(op.name.find(std::string("_") + to_string(op.qk_type) + "_" + to_string(op.v_type) + "_" + to_string(op.acc_type) +
                       "_" + to_string(op.out_type) + "_") != std::string::npos,
          op.name + ": types");
    CHECK(op.name.find("_w" + std::to_string(op.warps) + "_s" + std::to_string(op.stages) + "_") != std::string::npos, op.name);
    CHECK((op.name.find("_causal") != std::string::npos) == op.causal, op.name + ": causal flag");
    CHECK((op.name.find("_ws") != std::string::npos) == op.warp_specialized, op.name + ": ws flag");
    CHECK((op.name.find("_evenn") != std::string::npos) == op.even_n, op.name + ": evenn flag");
    CHECK(op.launch_warps >= op.warps, op.name + ": launched warps below requested");
    CHECK(op.shared_bytes > 0 && op.shared_bytes <= 232448, op.name + ": shared memory " + std::to_string(op.shared_bytes));
    bool const vnat = op.name.find("_vnat") != std::string::npos;
    CHECK(op.v_transposed == (op.v_type == DataType::kE4M3 && !vnat), op.name + ": FP8 V is read as V^T unless vnat");
    CHECK((op.name.find("_bdesc") != std::string::npos) == op.block_descale, op.name + ": bdesc flag");
    CHECK(op.qk_type != DataType::kI8 || (op.v_type == DataType::kE4M3 && op.block_descale),
          op.name + ": INT8 Q.K^T reads e4m3 V with per-block descales");
    CHECK(op.writes_lse == !op.warp_specialized, op.name + ": LSE capability");
    CHECK(library::find_fmha_operation(op.name) == &op, "find " + op.name);
  }
  CHECK(library::find_fmha_operation("fp8attn_sm90_fmha_fwd_nothing") == nullptr, "find of a missing name");
  return fp8attn_test::finish("test_registry");
}
