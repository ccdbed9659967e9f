// CPU test of the profiler's suite files: parse_suite (tools/profiler/problem_space.cpp) and the standard suite
// embedded from bench/suites/standard.csv, which must hold exactly the documented points. Exit code 0 when every
// check passed.

#include <cstdio>
#include <string>
#include <vector>

#include "options.h"
#include "problem_space.h"

namespace {

using fp8attn::Status;
using fp8attn::profiler::parse_suite;
using fp8attn::profiler::SuiteEntry;

int g_failures = 0;

void check(bool ok, std::string const& what) {
  if (!ok) {
    ++g_failures;
    std::printf("FAILED: %s\n", what.c_str());
  }
}

bool same(SuiteEntry const& a, SuiteEntry const& b) {
  return a.batch == b.batch && a.heads_q == b.heads_q && a.heads_kv == b.heads_kv && a.seqlen_q == b.seqlen_q &&
         a.seqlen_k == b.seqlen_k && a.head_dim == b.head_dim && a.causal == b.causal;
}

std::string text(SuiteEntry const& e) {
  char buf[128];
  std::snprintf(buf, sizeof(buf), "B=%d Hq=%d Hkv=%d Sq=%d Sk=%d D=%d causal=%d", e.batch, e.heads_q, e.heads_kv,
                e.seqlen_q, e.seqlen_k, e.head_dim, e.causal ? 1 : 0);
  return buf;
}

// The standard suite as documented (32768 tokens per problem, H_q * D = 4096), written out independently of the
// file: D=128 over six lengths, D=64 and D=256 over two, each full and causal; GQA 64/8 D=128 S=8192 causal.
void test_standard_suite() {
  std::vector<SuiteEntry> expected;
  for (int s : {512, 1024, 2048, 4096, 8192, 16384})
    for (bool causal : {false, true}) expected.push_back({32768 / s, 32, 32, s, s, 128, causal});
  for (int d : {64, 256})
    for (int s : {2048, 8192})
      for (bool causal : {false, true}) expected.push_back({32768 / s, 4096 / d, 4096 / d, s, s, d, causal});
  expected.push_back({4, 64, 8, 8192, 8192, 128, true});

  std::vector<SuiteEntry> got;
  Status const s = parse_suite(fp8attn::profiler::standard_suite_text(), "standard.csv", &got);
  check(s.ok(), "the embedded standard suite does not parse: " + s.message());
  check(got.size() == expected.size(), "the standard suite has " + std::to_string(got.size()) + " problems, expected " +
                                           std::to_string(expected.size()));
  for (SuiteEntry const& e : expected) {
    int found = 0;
    for (SuiteEntry const& g : got) found += same(e, g) ? 1 : 0;
    check(found == 1, "the standard suite holds " + text(e) + " " + std::to_string(found) + " times, expected once");
  }
  // Through the profiler's own path: every problem for each --dtype and --layout.
  std::vector<fp8attn::profiler::ProblemSpec> const specs = fp8attn::profiler::standard_suite(
      {fp8attn::DataType::kE4M3, fp8attn::DataType::kBF16}, {fp8attn::Layout::kBSHD});
  check(specs.size() == 2 * expected.size(), "standard_suite(2 dtypes, 1 layout) gave " +
                                                 std::to_string(specs.size()) + " problems");
}

void expect_error(std::string const& csv, std::string const& part, std::string const& what) {
  std::vector<SuiteEntry> entries;
  Status const s = parse_suite(csv, "x.csv", &entries);
  check(!s.ok() && s.message().find(part) != std::string::npos,
        what + ": expected an error containing '" + part + "', got '" + s.message() + "'");
}

void test_parse_suite() {
  std::vector<SuiteEntry> entries;
  // Comments, blank lines, CRLF, spaces, columns in another order.
  Status s = parse_suite("# comment\r\n\r\ncausal, head_dim,batch,heads_q,heads_kv,seqlen_q,seqlen_k\r\n"
                         "1,64,2,8,2,100,300\r\n  # another\n0,128,1,4,4,7,7",
                         "x.csv", &entries);
  check(s.ok() && entries.size() == 2, "a valid file with comments and CRLF: " + s.message());
  if (entries.size() == 2) {
    check(same(entries[0], {2, 8, 2, 100, 300, 64, true}), "first entry: " + text(entries[0]));
    check(same(entries[1], {1, 4, 4, 7, 7, 128, false}), "second entry: " + text(entries[1]));
  }
  char const* const header = "batch,heads_q,heads_kv,seqlen_q,seqlen_k,head_dim,causal\n";
  expect_error("batch,heads_q,heads_kv,seqlen_q,seqlen_k,causal\n1,1,1,1,1,0\n", "x.csv:1: the header line has no "
               "column head_dim", "missing column");
  expect_error("batch,batch,heads_q,heads_kv,seqlen_q,seqlen_k,head_dim,causal\n", "column batch is named twice",
               "duplicate column");
  expect_error(std::string(header) + "1,1,1,1,1,64\n", "x.csv:2: 6 fields, the header has 7", "short line");
  expect_error(std::string(header) + "1,1,1,1,1,64,2\n", "x.csv:2: causal='2' is not 0 or 1", "causal=2");
  expect_error(std::string(header) + "#\n1,x,1,1,1,64,0\n", "x.csv:3: heads_q='x' is not an integer", "heads_q=x");
  expect_error(std::string(header) + "1,1,1,0,1,64,0\n", "seqlen_q='0' is not an integer in [1, 2^30]", "seqlen_q=0");
  expect_error(std::string(header) + "1,6,4,1,1,64,0\n", "heads_q=6 is not a multiple of heads_kv=4", "GQA 6/4");
  expect_error(header, "x.csv: no problem", "header only");
  expect_error("# nothing\n", "x.csv: no header line", "empty");
}

}  // namespace

int main() {
  test_standard_suite();
  test_parse_suite();
  if (g_failures == 0) std::printf("test_profiler_suite: all checks passed\n");
  return g_failures == 0 ? 0 : 1;
}
