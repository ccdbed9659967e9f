#pragma once
// Profiler rows: an aligned table on stdout as rows arrive, and optionally the same rows as CSV.

#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "fp8attn/status.h"
#include "problem_space.h"

namespace fp8attn::profiler {

/// One profiled (problem, provider, kernel): one line of the table and of the CSV. Measurements that were not
/// taken stay empty.
struct Row {
  std::string operation_kind;  ///< "fmha_fwd", "transpose_v" (OperationProfiler::name())
  ProblemSpec problem;
  std::string provider;     ///< "fp8attn" (the library's pick) or "instance" (forced by name)
  std::string operation;    ///< the kernel's name
  std::string disposition;  ///< passed, incorrect, failed, not_supported, not_verified
  std::optional<double> runtime_ms, tflops, gbps;
  std::optional<double> rel_error;       ///< relative L2 error of the whole output
  std::optional<double> max_row_error;   ///< the largest relative L2 error of one output row (b, s, h)
  std::optional<double> max_abs_error;
  std::string notes;
};

class Report {
 public:
  Report() = default;
  ~Report();
  Report(Report const&) = delete;
  Report& operator=(Report const&) = delete;

  /// Opens (truncates) `path` and writes the CSV header; the message names the path.
  Status open_csv(std::string const& path);
  /// Prints the table header; `operation_width` fits the longest kernel name.
  void print_header(int operation_width);
  /// Prints the row to stdout and appends it to the CSV, flushing both so a crash keeps what was measured.
  void add(Row const& row);

  int rows() const { return rows_; }
  /// The attention rows added so far (kept for --write-tuning).
  std::vector<Row> const& attention_rows() const { return attention_rows_; }
  /// Rows whose disposition is failed or incorrect.
  int bad_rows() const { return bad_rows_; }

 private:
  std::FILE* csv_ = nullptr;
  int operation_width_ = 40;
  int rows_ = 0;
  std::vector<Row> attention_rows_;
  int bad_rows_ = 0;
};

}  // namespace fp8attn::profiler
