#pragma once
// --write-tuning=FILE: a tuning table (src/fmha/tuning/tuning_table.csv's format) from a run's attention rows.

#include <string>
#include <vector>

#include "report.h"

namespace fp8attn::profiler {

/// For every attention problem of the rows (type, head_dim, causal, seqlen_k), the fastest instance that
/// passed verification, written only where it beats the library's own pick (the "fp8attn" row) by more than
/// `margin` (0.02: 2%, above the timing noise), so the table holds exactly the corrections to the manifest
/// order. `gpu` is the device name the runtime matches against. Returns the file's text (header included).
std::string tuning_table_text(std::vector<Row> const& rows, std::string const& gpu, double margin = 0.02);

}  // namespace fp8attn::profiler
