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

/// The cartesian product of the axes may hold at most this many problems (checked before anything is allocated).
inline constexpr int64_t kMaxProblems = 1000000;

/// A deliberate error injected after each run and before verification, to check the verifier itself.
enum class Fault {
  kNone,
  kZeroTile,  ///< zero-tile: rows [128, 256) of O of (batch 0, head 0) set to 0 (one 128-row tile)
};

struct Options {
  bool help = false;
  bool list = false;                ///< --list: print the compiled operations (filtered by --kernels) and exit
  std::string operation = "fmha_fwd";  ///< fmha_fwd, transpose_v or all (--operation; "fmha" is read as fmha_fwd)
  bool operation_given = false;     ///< --operation was on the command line (--list then lists only that kind)
  std::string kernels;              ///< CUTLASS filter over operation names; empty: every instance that can run
  std::string suite;                ///< "" or "standard"
  bool profile_heuristic = true;    ///< provider "fp8attn": the library's own pick (kernel_name empty)
  bool profile_instances = true;    ///< provider "instance": each compiled instance forced by name
  ProblemAxes axes;
  int warmup_iterations = 10;
  int profiling_iterations = 50;
  bool verify_device = true;
  bool verify_host = false;
  int64_t host_verification_limit = int64_t{1} << 28;  ///< B * H_q * S_q * S_k * D at most, for the host reference
  std::optional<double> tolerance;                     ///< relative L2 of the whole output; default by dtype
  std::optional<double> row_tolerance;                 ///< relative L2 of each output row; default 2x tolerance
  Fault inject_fault = Fault::kNone;                   ///< --inject-fault: a self-test of the verifier
  std::string output;                                  ///< CSV file; empty: none
  std::string write_tuning;                            ///< tuning table file (--write-tuning); empty: none
  uint64_t seed = 2024;
};

/// Parses argv; throws UsageError naming the flag and value on anything it does not understand, including an
/// empty list item and axes whose cartesian product exceeds kMaxProblems.
Options parse_options(int argc, char const* const* argv);

/// The usage text printed by --help.
std::string usage();

/// Relative-L2 tolerance of the whole output for `dtype` inputs: --verification-tolerance if given, else 5e-2
/// (fp8) or 1e-2 (16-bit).
double tolerance_for(Options const& options, DataType dtype);

/// Relative-L2 tolerance of each output row (the head_dim elements of one (b, s, h)):
/// --verification-row-tolerance if given, else twice tolerance_for (1e-1 for fp8, 2e-2 for bf16 by default).
double row_tolerance_for(Options const& options, DataType dtype);

/// "zero-tile", "none".
char const* to_string(Fault fault);

}  // namespace fp8attn::profiler
