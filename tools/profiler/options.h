#pragma once
// Command-line options of fp8attn_profiler (cutlass_profiler style: --flag=value, comma lists, start:end:step).

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "fp8attn/types.h"

namespace fp8attn::profiler {

/// A bad command line: the message names the flag and the value. main() prints it and exits with code 2.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// The problem axes; each list is one axis of the cartesian product. Empty heads_kv / seqlen_k: follow
/// heads_q / seqlen_q (paired, not crossed).
struct ProblemAxes {
  std::vector<int> batch{4};
  std::vector<int> heads_q{32};
  std::vector<int> heads_kv;
  std::vector<int> seqlen_q{8192};
  std::vector<int> seqlen_k;
  std::vector<int> head_dim{128};
  std::vector<bool> causal{false, true};
  std::vector<DataType> dtype{DataType::kE4M3};
  std::vector<Layout> layout{Layout::kBSHD};
};

struct Options {
  bool help = false;
  bool list = false;              ///< --list: print the compiled instances (filtered by --kernels) and exit
  std::string operation = "fmha";
  std::string kernels;            ///< CUTLASS filter over kernel names; empty: every instance that can run
  std::string suite;              ///< "" or "standard"
  bool profile_heuristic = true;  ///< provider "fp8attn": the heuristic's pick (kernel_name empty)
  bool profile_instances = true;  ///< provider "instance": each compiled instance forced by name
  ProblemAxes axes;
  int warmup_iterations = 10;
  int profiling_iterations = 50;
  bool verify_device = true;
  bool verify_host = false;
  int64_t host_verification_limit = int64_t{1} << 28;  ///< B * H_q * S_q * S_k * D at most, for the host reference
  std::optional<double> tolerance;                     ///< relative L2; default by dtype (see tolerance_for)
  std::string output;                                  ///< CSV file; empty: none
  uint64_t seed = 2024;
};

/// Parses argv; throws UsageError naming the flag and value on anything it does not understand.
Options parse_options(int argc, char const* const* argv);

/// The usage text printed by --help.
std::string usage();

/// Relative-L2 tolerance for `dtype` inputs: --verification-tolerance if given, else 5e-2 (fp8) or 1e-2 (16-bit).
double tolerance_for(Options const& options, DataType dtype);

}  // namespace fp8attn::profiler
