#pragma once
// The problems to profile: the cartesian product of the command line's axes, or a suite file.

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "fp8attn/fmha/device/fmha_fwd.h"
#include "fp8attn/status.h"
#include "fp8attn/types.h"
#include "options.h"

namespace fp8attn::profiler {

/// One attention problem: shape, inputs' type and the memory layout of Q, K, V and O. The V transpose profiles
/// the V operand of such a problem ([batch, seqlen_k, heads_kv, head_dim]).
struct ProblemSpec {
  int batch = 0;
  int heads_q = 0;
  int heads_kv = 0;
  int seqlen_q = 0;
  int seqlen_k = 0;
  int head_dim = 0;
  bool causal = false;
  DataType dtype = DataType::kE4M3;
  Layout layout = Layout::kBSHD;

  /// The library's problem description (output bf16); its flops() is the FLOP count of every row.
  fmha::FmhaProblem problem() const;
  /// B * H_q * S_q * S_k * D: the work of the reference, used to decide whether the host can afford it.
  int64_t reference_work() const;
  /// "B=4 H_q=32 H_kv=32 S_q=8192 S_k=8192 D=128 causal e4m3 bshd", for messages.
  std::string to_string() const;
};

/// One problem of a suite file; the input type and the layout come from the options (--dtype, --layout).
struct SuiteEntry {
  int batch = 0;
  int heads_q = 0;
  int heads_kv = 0;
  int seqlen_q = 0;
  int seqlen_k = 0;
  int head_dim = 0;
  bool causal = false;
};

/// Parses a suite file (bench/suites/*.csv): '#' comment lines and blank lines are skipped; the first other line
/// names the columns batch, heads_q, heads_kv, seqlen_q, seqlen_k, head_dim, causal (any order, each once); every
/// further line is one problem. On error the message names `source`, the line and the column.
Status parse_suite(std::string_view text, std::string const& source, std::vector<SuiteEntry>* entries);

/// The text of bench/suites/standard.csv, embedded at build time.
std::string_view standard_suite_text();

/// The problems the options ask for, in command-line order (the last axis varies fastest). Combinations with
/// heads_q not a multiple of heads_kv are skipped, with a note on `notes` unless it is null.
std::vector<ProblemSpec> enumerate_problems(Options const& options, std::FILE* notes = stderr);

/// The standard prefill suite (bench/suites/standard.csv), for each of `dtypes` and `layouts`. Throws
/// UsageError when the embedded file does not parse (a defect of the build, named precisely).
std::vector<ProblemSpec> standard_suite(std::vector<DataType> const& dtypes, std::vector<Layout> const& layouts);

}  // namespace fp8attn::profiler
