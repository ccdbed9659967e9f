#include "tuning_writer.h"

#include <cstdio>
#include <map>
#include <tuple>

#include "fp8attn/types.h"

namespace fp8attn::profiler {

std::string tuning_table_text(std::vector<Row> const& rows, std::string const& gpu, double margin) {
  // (type, head_dim, causal, seqlen_k) -> (the library's pick, the fastest passing instance). Problems with the
  // same key but other batch/heads/seqlen_q: the fastest over all of them is kept, and the pick of the last.
  using Key = std::tuple<int, int, int, int>;
  struct Best {
    Row const* pick = nullptr;
    Row const* fastest = nullptr;
  };
  std::map<Key, Best> best;
  for (Row const& r : rows) {
    if (r.operation_kind != "fmha_fwd" || r.disposition != "passed" || !r.runtime_ms) continue;
    ProblemSpec const& p = r.problem;
    Best& b = best[Key{static_cast<int>(p.dtype), p.head_dim, p.causal ? 1 : 0, p.seqlen_k}];
    if (r.provider == "fp8attn") {
      b.pick = &r;
    } else if (r.provider == "instance" && (!b.fastest || *r.runtime_ms < *b.fastest->runtime_ms)) {
      b.fastest = &r;
    }
  }
  std::string text =
      "# Written by fp8attn_profiler --write-tuning on " + gpu +
      ": the fastest verified instance per problem where it beats the library's own pick by more than " +
      std::to_string(static_cast<int>(margin * 100 + 0.5)) + "%. Use with FP8ATTN_TUNING_FILE=<this file>.\n"
      "gpu,input_type,head_dim,causal,max_seqlen_k,kernel\n";
  for (auto const& [key, b] : best) {  // std::map: seqlen_k ascending within a (type, head_dim, causal)
    if (!b.pick || !b.fastest || b.fastest->operation == b.pick->operation) continue;
    if (*b.fastest->runtime_ms * (1.0 + margin) >= *b.pick->runtime_ms) continue;
    ProblemSpec const& p = b.fastest->problem;
    text += gpu + "," + to_string(p.dtype) + "," + std::to_string(p.head_dim) + "," + (p.causal ? "1" : "0") + "," +
            std::to_string(p.seqlen_k) + "," + b.fastest->operation + "\n";
  }
  return text;
}

}  // namespace fp8attn::profiler
