// judge: the verification verdict on an output's error statistics (global and per-row tolerance).

#include <cmath>
#include <cstdio>
#include <string>

#include "reference/fmha_reference.h"

namespace fp8attn::reference {

std::string row_coordinates(int64_t row, int64_t seqlen, int64_t heads) {
  if (row < 0 || seqlen < 1 || heads < 1) return "(none)";
  int64_t const h = row % heads;
  int64_t const s = (row / heads) % seqlen;
  int64_t const b = row / heads / seqlen;
  char buf[96];
  std::snprintf(buf, sizeof(buf), "(b=%lld, s=%lld, h=%lld)", static_cast<long long>(b), static_cast<long long>(s),
                static_cast<long long>(h));
  return buf;
}

Verdict judge(ErrorStats const& stats, Tolerance const& tolerance, fmha::FmhaProblem const& problem) {
  Verdict v;
  auto fail = [&v](std::string const& why) {
    v.correct = false;
    v.why += (v.why.empty() ? "" : "; ") + why;
  };
  std::string const worst_row = "row " + row_coordinates(stats.max_row, problem.seqlen_q, problem.heads_q);
  char buf[192];
  if (stats.nonfinite > 0) {
    // The row error of a row with a non-finite element is +inf, so the worst row is the first such row.
    std::snprintf(buf, sizeof(buf), "%lld of %lld output elements are not finite (the first in ",
                  static_cast<long long>(stats.nonfinite), static_cast<long long>(stats.count));
    fail(buf + worst_row + ")");
  }
  if (!(stats.rel_l2 <= tolerance.rel_l2)) {
    std::snprintf(buf, sizeof(buf), "rel_l2 %.2e > tolerance %.1e", stats.rel_l2, tolerance.rel_l2);
    fail(buf);
  }
  if (std::isfinite(stats.max_row_rel_l2) && !(stats.max_row_rel_l2 <= tolerance.row_rel_l2)) {
    std::snprintf(buf, sizeof(buf), " rel_l2 %.2e > row tolerance %.1e", stats.max_row_rel_l2, tolerance.row_rel_l2);
    fail(worst_row + buf);
  }
  return v;
}

}  // namespace fp8attn::reference
