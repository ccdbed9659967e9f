#include "tuning_writer.h"

#include <map>
#include <set>
#include <tuple>

#include "fp8attn/types.h"

namespace fp8attn::profiler {

std::string tuning_table_text(std::vector<Row> const& rows, std::string const& gpu, double margin) {
  // Per problem: the library's pick and every verified instance's time. A problem is all of ProblemSpec
  // (MHA and GQA problems of the same length must not be compared with each other).
  using Problem = std::tuple<int, int, int, int, int, int, int, int, int>;
  struct Times {
    std::string pick;
    std::map<std::string, double> ms;  // instance -> runtime
  };
  std::map<Problem, Times> problems;
  for (Row const& r : rows) {
    if (r.operation_kind != "fmha_fwd" || r.disposition != "passed" || !r.runtime_ms) continue;
    ProblemSpec const& p = r.problem;
    Times& t = problems[Problem{static_cast<int>(p.dtype), p.head_dim, p.causal ? 1 : 0, p.seqlen_k, p.seqlen_q,
                                p.batch, p.heads_q, p.heads_kv, static_cast<int>(p.layout)}];
    if (r.provider == "fp8attn") t.pick = r.operation;
    if (r.provider == "instance") t.ms[r.operation] = *r.runtime_ms;
  }
  // Per table key (type, head_dim, causal, seqlen_k): the instance with the least total time over the key's
  // problems, among those measured on all of them, kept only if it beats the pick's total by more than the
  // margin (otherwise the pick itself: a row for every measured key, so that a row's range (the previous
  // row's max_seqlen_k, this one's] never covers a length where something else was measured faster). A key
  // whose problems disagree on the pick, or lack the pick's time, gets no row.
  using Key = std::tuple<int, int, int, int>;
  struct Group {
    std::set<std::string> picks;
    std::map<std::string, double> total;
    std::map<std::string, int> count;
    int problems = 0;
  };
  std::map<Key, Group> groups;
  for (auto const& [problem, t] : problems) {
    Group& g = groups[Key{std::get<0>(problem), std::get<1>(problem), std::get<2>(problem), std::get<3>(problem)}];
    g.picks.insert(t.pick);
    ++g.problems;
    for (auto const& [name, ms] : t.ms) {
      g.total[name] += ms;
      ++g.count[name];
    }
  }
  std::string text =
      "# Written by fp8attn_profiler --write-tuning on " + gpu +
      ": per problem bucket, the verified instance with the least total time where it beats the library's pick "
      "by more than " + std::to_string(static_cast<int>(margin * 100 + 0.5)) +
      "%, else the pick. Use with FP8ATTN_TUNING_FILE=<this file>.\n"
      "gpu,input_type,head_dim,causal,max_seqlen_k,kernel\n";
  // The runtime takes the first row whose max_seqlen_k holds seqlen_k, so a length without a row would be covered
  // by the next longer one: after a skipped length, a (type, head_dim, causal) gets no more rows (the manifest
  // order decides there).
  std::set<std::tuple<int, int, int>> stopped;
  for (auto const& [key, g] : groups) {  // std::map: seqlen_k ascending within a (type, head_dim, causal)
    std::tuple<int, int, int> const family{std::get<0>(key), std::get<1>(key), std::get<2>(key)};
    if (stopped.count(family)) continue;
    std::string const pick = g.picks.size() == 1 ? *g.picks.begin() : std::string();
    auto const pick_total = g.total.find(pick);
    if (pick.empty() || pick_total == g.total.end() || g.count.at(pick) != g.problems) {
      stopped.insert(family);
      continue;
    }
    std::string chosen = pick;
    double best = pick_total->second;
    for (auto const& [name, total] : g.total) {
      if (g.count.at(name) == g.problems && total * (1.0 + margin) < pick_total->second && total < best) {
        chosen = name;
        best = total;
      }
    }
    auto const [type, head_dim, causal, seqlen_k] = key;
    text += gpu + "," + to_string(static_cast<DataType>(type)) + "," + std::to_string(head_dim) + "," +
            std::to_string(causal) + "," + std::to_string(seqlen_k) + "," + chosen + "\n";
  }
  return text;
}

}  // namespace fp8attn::profiler
