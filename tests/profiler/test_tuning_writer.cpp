// --write-tuning's table from synthetic rows: only the problems where a verified instance beats the library's
// pick by more than the margin get a line; failed or incorrect rows never count; lines sorted by seqlen_k; and the
// text parses back with the runtime's own parser into the same entries.

#include <string>
#include <vector>

#include "check.h"
#include "fmha/fmha_tuning.h"
#include "tuning_writer.h"

using fp8attn::DataType;
using fp8attn::profiler::ProblemSpec;
using fp8attn::profiler::Row;

namespace {

Row row(int seqlen, bool causal, std::string provider, std::string op, double ms, std::string disposition = "passed") {
  Row r;
  r.operation_kind = "fmha_fwd";
  r.problem = ProblemSpec{4, 32, 32, seqlen, seqlen, 128, causal, DataType::kE4M3};
  r.provider = std::move(provider);
  r.operation = std::move(op);
  r.disposition = std::move(disposition);
  r.runtime_ms = ms;
  return r;
}

int count_lines(std::string const& text) {
  int n = 0;
  for (char c : text) n += c == '\n';
  return n;
}

}  // namespace

int main() {
  std::vector<Row> rows = {
      // S=8192 full: the pick is the fastest -> no line.
      row(8192, false, "fp8attn", "pick_a", 1.00), row(8192, false, "instance", "pick_a", 1.00),
      row(8192, false, "instance", "other", 1.05),
      // S=2048 full: another instance is 10% faster -> a line.
      row(2048, false, "fp8attn", "pick_a", 1.00), row(2048, false, "instance", "pick_a", 1.00),
      row(2048, false, "instance", "faster", 0.90),
      // S=4096 full: 1% faster only (noise) -> no line.
      row(4096, false, "fp8attn", "pick_a", 1.00), row(4096, false, "instance", "slightly", 0.99),
      // S=1024 causal: the fastest row is incorrect -> never chosen; the next one is 5% faster -> a line.
      row(1024, true, "fp8attn", "pick_c", 1.00), row(1024, true, "instance", "wrong", 0.50, "incorrect"),
      row(1024, true, "instance", "good", 0.95),
      // S=512 full: faster than the pick but listed after a longer seqlen in the input -> sorted first.
      row(512, false, "fp8attn", "pick_a", 1.00), row(512, false, "instance", "short", 0.80),
  };
  std::string const text = fp8attn::profiler::tuning_table_text(rows, "NVIDIA H200");
  CHECK(text.find("gpu,input_type,head_dim,causal,max_seqlen_k,kernel\n") != std::string::npos, "header");
  CHECK(text.find("NVIDIA H200,e4m3,128,0,2048,faster\n") != std::string::npos, "the 10% faster instance: " + text);
  CHECK(text.find("NVIDIA H200,e4m3,128,1,1024,good\n") != std::string::npos, "the verified one, not the wrong one");
  CHECK(text.find("wrong") == std::string::npos, "an incorrect row is never chosen");
  CHECK(text.find("slightly") == std::string::npos && text.find("other") == std::string::npos, "no noise lines");
  CHECK(text.find(",512,short") < text.find(",2048,faster"), "seqlen_k ascending within a (type, D, causal)");

  std::vector<std::string> warnings;
  auto entries = fp8attn::fmha::detail::parse_tuning_table(text, "written.csv", &warnings);
  CHECK(warnings.empty(), warnings.empty() ? "" : warnings[0]);
  CHECK(entries.size() == 3, "three entries, got " + std::to_string(entries.size()) + " from " +
                                 std::to_string(count_lines(text)) + " lines");
  return fp8attn_test::finish("test_tuning_writer");
}
