#pragma once
// --write-tuning=FILE: a tuning table (src/fmha/tuning/tuning_table.csv's format) from a run's attention rows.

#include <string>
#include <vector>

#include "report.h"

namespace fp8attn::profiler {

/// One row per measured table key (type, head_dim, causal, seqlen_k; ascending seqlen_k): the verified instance
/// with the least total time over that key's problems if it beats the library's own pick (the "fp8attn" rows)
/// by more than `margin` (0.02: 2%, above the timing noise), else the pick. Picks are compared with instance
/// times of the same problem only. `gpu` is the device name the runtime matches exactly. Returns the file's
/// text (header included).
std::string tuning_table_text(std::vector<Row> const& rows, std::string const& gpu, double margin = 0.02);

}  // namespace fp8attn::profiler
