// Table and CSV output of fp8attn_profiler.

#include "report.h"

#include <cerrno>
#include <cstring>
#include <string>

namespace fp8attn::profiler {
namespace {

std::string format(std::optional<double> const& v, char const* fmt) {
  if (!v) return "-";
  char buf[64];
  std::snprintf(buf, sizeof(buf), fmt, *v);
  return buf;
}

// RFC 4180: quote when needed, double the quotes inside.
std::string csv_field(std::string const& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c == '\n' ? ' ' : c;
  }
  return out + "\"";
}

std::string csv_number(std::optional<double> const& v) {
  if (!v) return "";
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.6g", *v);
  return buf;
}

}  // namespace

Report::~Report() {
  if (csv_ != nullptr) std::fclose(csv_);
}

Status Report::open_csv(std::string const& path) {
  csv_ = std::fopen(path.c_str(), "w");
  if (csv_ == nullptr) {
    return Status(StatusCode::kErrorInvalidProblem,
                  "--output=" + path + ": cannot open for writing (" + std::strerror(errno) + ")");
  }
  std::fprintf(csv_,
               "operation_kind,batch,heads_q,heads_kv,seqlen_q,seqlen_k,head_dim,causal,dtype,layout,provider,"
               "operation,disposition,runtime_ms,tflops,gbps,rel_error,max_row_error,max_abs_error,notes\n");
  std::fflush(csv_);
  return Status::success();
}

void Report::print_header(int operation_width) {
  operation_width_ = operation_width;
  std::printf("%-11s %5s %4s %4s %6s %6s %4s %3s %-4s %-4s %-8s %-*s %-13s %10s %8s %8s %9s %9s %9s  %s\n", "kind",
              "batch", "hq", "hkv", "sq", "sk", "d", "cau", "type", "lay", "provider", operation_width_, "operation",
              "disposition", "runtime_ms", "tflops", "gbps", "rel_err", "row_err", "max_abs", "notes");
  std::fflush(stdout);
}

void Report::add(Row const& row) {
  ++rows_;
  if (row.operation_kind == "fmha_fwd") attention_rows_.push_back(row);
  if (row.disposition == "failed" || row.disposition == "incorrect") ++bad_rows_;
  ProblemSpec const& p = row.problem;
  std::printf("%-11s %5d %4d %4d %6d %6d %4d %3d %-4s %-4s %-8s %-*s %-13s %10s %8s %8s %9s %9s %9s  %s\n",
              row.operation_kind.c_str(), p.batch, p.heads_q, p.heads_kv, p.seqlen_q, p.seqlen_k, p.head_dim,
              p.causal ? 1 : 0, to_string(p.dtype), to_string(p.layout), row.provider.c_str(), operation_width_,
              row.operation.c_str(), row.disposition.c_str(), format(row.runtime_ms, "%.4f").c_str(),
              format(row.tflops, "%.1f").c_str(), format(row.gbps, "%.1f").c_str(),
              format(row.rel_error, "%.2e").c_str(), format(row.max_row_error, "%.2e").c_str(),
              format(row.max_abs_error, "%.2e").c_str(), row.notes.c_str());
  std::fflush(stdout);
  if (csv_ == nullptr) return;
  std::string line = row.operation_kind;
  for (int v : {p.batch, p.heads_q, p.heads_kv, p.seqlen_q, p.seqlen_k, p.head_dim, p.causal ? 1 : 0}) {
    line += "," + std::to_string(v);
  }
  line += std::string(",") + to_string(p.dtype) + "," + to_string(p.layout) + "," + csv_field(row.provider) + "," +
          csv_field(row.operation) + "," + row.disposition + "," + csv_number(row.runtime_ms) + "," +
          csv_number(row.tflops) + "," + csv_number(row.gbps) + "," + csv_number(row.rel_error) + "," +
          csv_number(row.max_row_error) + "," + csv_number(row.max_abs_error) + "," + csv_field(row.notes) + "\n";
  std::fputs(line.c_str(), csv_);
  std::fflush(csv_);
}

}  // namespace fp8attn::profiler
