#pragma once
// The tuning table (src/fmha/tuning/tuning_table.csv, and FP8ATTN_TUNING_FILE): per GPU model and problem
// bucket, the instance to run instead of the manifest order's first choice.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fp8attn/fmha/device/fmha_fwd.h"

namespace fp8attn::fmha::detail {

struct TuningEntry {
  std::string gpu;       ///< the device name, as cuDeviceGetName gives it (e.g. "NVIDIA H200")
  DataType input_type;
  int head_dim;
  bool causal;
  int64_t max_seqlen_k;  ///< applies to seqlen_k <= max_seqlen_k
  std::string kernel;
};

/// Parses a table's text. Comment lines start with '#'; the header line names the columns. A line that cannot
/// be read is skipped with a warning "<source>:<line>: <why>" appended to *warnings.
std::vector<TuningEntry> parse_tuning_table(std::string_view text, std::string const& source,
                                            std::vector<std::string>* warnings);

/// Whether the entry names a packed-sequence instance (a procedural name with "_varlen"). Such entries apply to
/// varlen calls only and the others to dense calls only: the two kinds of call run different instances (the
/// gluon "_varlen" ones take packed sequences only), so each needs rows of its own.
bool entry_is_varlen(TuningEntry const& entry);

/// Whether the entry covers this GPU (its name is entry.gpu exactly), problem bucket and kind of call (varlen:
/// packed sequences, problem.seqlen_k their max_seqlen_k).
bool entry_matches(TuningEntry const& entry, std::string_view gpu, FmhaProblem const& problem, bool varlen);

/// The GPU the embedded table's rows were measured on: the rows every GPU without rows of its own uses.
inline constexpr std::string_view kReferenceGpu = "NVIDIA H200";

/// Whose rows a device named `gpu` uses: its own when the table has any row naming it, else kReferenceGpu's.
/// Every GPU this library runs on is an sm_90 part, and on an H100 (no rows of its own in the embedded table) the
/// H200's picks were measured faster than the manifest order (docs/perf/NOTES.md, 2026-12-05); other sm_90 parts
/// (H20, H800, GH200) take them unmeasured. A GPU with rows of its own (a user's FP8ATTN_TUNING_FILE, e.g. from
/// fp8attn_profiler --write-tuning) uses those alone: a bucket they leave out runs the manifest order, as the writer
/// meant (it writes a row only where the manifest loses).
std::string_view rows_gpu(std::vector<TuningEntry> const& table, std::string_view gpu);

/// The entries the runtime uses: FP8ATTN_TUNING_FILE's (when set) before the embedded table's, without the
/// ones that name an instance this build does not have (stale). Built once; its warnings go to stderr once.
std::vector<TuningEntry> const& tuning_table();

}  // namespace fp8attn::fmha::detail
