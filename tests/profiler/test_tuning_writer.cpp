// --write-tuning's table from synthetic rows: a row per measured key naming the pick unless a verified instance
// beats it by more than the margin; failed or incorrect rows never count; MHA and GQA problems of one key compared
// by totals over the instances measured on both; no row where the picks differ; rows sorted by seqlen_k; and the
// text parses back with the runtime's own parser.

#include <string>
#include <vector>

#include "check.h"
#include "fmha/fmha_tuning.h"
#include "tuning_writer.h"

using fp8attn::DataType;
using fp8attn::profiler::ProblemSpec;
using fp8attn::profiler::Row;

namespace {

Row row(int seqlen, bool causal, std::string provider, std::string op, double ms, std::string disposition = "passed",
        int heads_kv = 32) {
  Row r;
  r.operation_kind = "fmha_fwd";
  r.problem = ProblemSpec{4, 32, heads_kv, seqlen, seqlen, 128, causal, DataType::kE4M3};
  r.provider = std::move(provider);
  r.operation = std::move(op);
  r.disposition = std::move(disposition);
  r.runtime_ms = ms;
  return r;
}

bool has(std::string const& text, std::string const& line) { return text.find(line + "\n") != std::string::npos; }

}  // namespace

int main() {
  std::string const g = "NVIDIA H200,e4m3,128,";
  std::vector<Row> rows = {
      // S=8192 full: the pick is the fastest -> a row naming the pick.
      row(8192, false, "fp8attn", "pick_a", 1.00), row(8192, false, "instance", "pick_a", 1.00),
      row(8192, false, "instance", "other", 1.05),
      // S=2048 full: another instance is 10% faster -> a row naming it.
      row(2048, false, "fp8attn", "pick_a", 1.00), row(2048, false, "instance", "pick_a", 1.00),
      row(2048, false, "instance", "faster", 0.90),
      // S=4096 full: 1% faster only (noise) -> the pick.
      row(4096, false, "fp8attn", "pick_a", 1.00), row(4096, false, "instance", "pick_a", 1.00),
      row(4096, false, "instance", "slightly", 0.99),
      // S=1024 causal: the fastest row is incorrect -> never chosen; the next one is 5% faster.
      row(1024, true, "fp8attn", "pick_c", 1.00), row(1024, true, "instance", "pick_c", 1.00),
      row(1024, true, "instance", "wrong", 0.50, "incorrect"), row(1024, true, "instance", "good", 0.95),
      // S=512 full, listed last: sorted first.
      row(512, false, "fp8attn", "pick_a", 1.00), row(512, false, "instance", "pick_a", 1.00),
      row(512, false, "instance", "short", 0.80),
      // S=8192 causal: an MHA and a GQA problem share the key. The GQA one takes twice as long; "mha_only" is
      // fast on MHA but was not measured on GQA, "both" is 5% faster on each -> "both" (totals over the key).
      row(8192, true, "fp8attn", "pick_c", 1.00), row(8192, true, "instance", "pick_c", 1.00),
      row(8192, true, "instance", "mha_only", 0.50), row(8192, true, "instance", "both", 0.95),
      row(8192, true, "fp8attn", "pick_c", 2.00, "passed", 8), row(8192, true, "instance", "pick_c", 2.00, "passed", 8),
      row(8192, true, "instance", "both", 1.90, "passed", 8),
      // S=16384 causal: the two problems' picks differ -> no row, and no row for longer causal lengths either
      // (S=32768 would otherwise cover 16384 at lookup).
      row(16384, true, "fp8attn", "pick_c", 1.00), row(16384, true, "instance", "pick_c", 1.00),
      row(16384, true, "fp8attn", "pick_g", 2.00, "passed", 8), row(16384, true, "instance", "pick_g", 2.00, "passed", 8),
      row(32768, true, "fp8attn", "pick_c", 1.00), row(32768, true, "instance", "pick_c", 1.00),
  };
  std::string const text = fp8attn::profiler::tuning_table_text(rows, "NVIDIA H200");
  CHECK(has(text, "gpu,input_type,head_dim,causal,max_seqlen_k,kernel"), "header");
  CHECK(has(text, g + "0,512,short"), "10%+ faster: " + text);
  CHECK(has(text, g + "0,2048,faster"), "the 10% faster instance");
  CHECK(has(text, g + "0,4096,pick_a"), "1% is noise: the pick keeps its row");
  CHECK(has(text, g + "0,8192,pick_a"), "the pick where it is fastest");
  CHECK(has(text, g + "1,1024,good"), "the verified one, not the incorrect one");
  CHECK(has(text, g + "1,8192,both"), "totals over the key's problems, only instances measured on all of them");
  CHECK(text.find("wrong") == std::string::npos && text.find("mha_only") == std::string::npos, "never chosen");
  CHECK(text.find(",16384,") == std::string::npos, "no row where the problems' picks differ");
  CHECK(text.find(",32768,") == std::string::npos, "no row after a skipped length of the same (type, D, causal)");
  CHECK(text.find(",512,short") < text.find(",2048,faster") && text.find(",2048,faster") < text.find(",4096,"),
        "seqlen_k ascending within a (type, D, causal)");

  std::vector<std::string> warnings;
  auto entries = fp8attn::fmha::detail::parse_tuning_table(text, "written.csv", &warnings);
  CHECK(warnings.empty(), warnings.empty() ? "" : warnings[0]);
  CHECK(entries.size() == 6, "six entries, got " + std::to_string(entries.size()));
  return fp8attn_test::finish("test_tuning_writer");
}
