// Problem enumeration for fp8attn_profiler.

#include "problem_space.h"

#include <cstdio>
#include <utility>

namespace fp8attn::profiler {

fmha::FmhaProblem ProblemSpec::problem() const {
  fmha::FmhaProblem p;
  p.batch = batch;
  p.heads_q = heads_q;
  p.heads_kv = heads_kv;
  p.seqlen_q = seqlen_q;
  p.seqlen_k = seqlen_k;
  p.head_dim = head_dim;
  p.causal = causal;
  p.input_type = dtype;
  p.output_type = DataType::kBF16;
  return p;
}

int64_t ProblemSpec::reference_work() const { return int64_t{batch} * heads_q * seqlen_q * seqlen_k * head_dim; }

std::vector<ProblemSpec> enumerate_problems(Options const& options) {
  if (options.suite == "standard") return standard_suite(options.axes.dtype, options.axes.layout);

  ProblemAxes const& a = options.axes;
  // heads_kv and seqlen_k default to "same as the query side": one pass with an empty marker value (0).
  std::vector<int> const heads_kv = a.heads_kv.empty() ? std::vector<int>{0} : a.heads_kv;
  std::vector<int> const seqlen_k = a.seqlen_k.empty() ? std::vector<int>{0} : a.seqlen_k;

  // Head pairs first, so that an invalid pair is reported once rather than once per problem.
  std::vector<std::pair<int, int>> heads;
  for (int hq : a.heads_q) {
    for (int hkv_given : heads_kv) {
      int const hkv = hkv_given == 0 ? hq : hkv_given;
      if (hq % hkv == 0) {
        heads.emplace_back(hq, hkv);
      } else {
        std::fprintf(stderr, "note: skipping heads_q=%d heads_kv=%d: heads_q must be a multiple of heads_kv\n", hq,
                     hkv);
      }
    }
  }

  std::vector<ProblemSpec> out;
  for (DataType dtype : a.dtype)
    for (Layout layout : a.layout)
      for (int batch : a.batch)
        for (auto [hq, hkv] : heads)
          for (int sq : a.seqlen_q)
            for (int sk_given : seqlen_k)
              for (int d : a.head_dim)
                for (bool causal : a.causal) {
                  int const sk = sk_given == 0 ? sq : sk_given;
                  out.push_back(ProblemSpec{batch, hq, hkv, sq, sk, d, causal, dtype, layout});
                }
  return out;
}

std::vector<ProblemSpec> standard_suite(std::vector<DataType> const& dtypes, std::vector<Layout> const& layouts) {
  // 32768 tokens per problem (batch = 32768 / S) and H_q * D = 4096: docs/CONVENTIONS.md, "The standard suite".
  constexpr int kTokens = 32768;
  constexpr int kModelWidth = 4096;
  struct Shape {
    int seqlen, head_dim, heads_q, heads_kv;
    std::vector<bool> causal;
  };
  std::vector<Shape> shapes;
  for (int s : {1024, 4096, 8192, 16384})
    shapes.push_back({s, 128, kModelWidth / 128, kModelWidth / 128, {false, true}});
  for (int d : {64, 256}) shapes.push_back({8192, d, kModelWidth / d, kModelWidth / d, {false, true}});
  // GQA as the conventions list it: 64 query heads over 8 kv heads, D=128 (so H_q * D = 8192 here).
  shapes.push_back({8192, 128, 64, 8, {true}});

  std::vector<ProblemSpec> out;
  for (DataType dtype : dtypes)
    for (Layout layout : layouts)
      for (Shape const& s : shapes)
        for (bool causal : s.causal)
          out.push_back(ProblemSpec{kTokens / s.seqlen, s.heads_q, s.heads_kv, s.seqlen, s.seqlen, s.head_dim, causal,
                                    dtype, layout});
  return out;
}

}  // namespace fp8attn::profiler
