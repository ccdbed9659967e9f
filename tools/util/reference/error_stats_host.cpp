// compare_host: error statistics of a host tensor against its float64 reference.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>

#include "reference/fmha_reference.h"

namespace fp8attn::reference {

ErrorStats compare_host(std::vector<double> const& out, std::vector<double> const& ref) {
  ErrorStats stats;
  size_t const n = std::min(out.size(), ref.size());
  stats.count = static_cast<int64_t>(n);
  double err2 = 0.0, ref2 = 0.0;
  for (size_t i = 0; i < n; ++i) {
    ref2 += ref[i] * ref[i];
    // A NaN would poison the norm; count it instead so the caller sees how many elements went bad.
    if (!std::isfinite(out[i])) {
      ++stats.nonfinite;
      continue;
    }
    double const e = out[i] - ref[i];
    err2 += e * e;
    stats.max_abs = std::max(stats.max_abs, std::fabs(e));
  }
  // A mismatch in size is a caller bug; report the missing elements as non-finite rather than ignore them.
  stats.nonfinite += static_cast<int64_t>(std::max(out.size(), ref.size()) - n);
  stats.count = static_cast<int64_t>(std::max(out.size(), ref.size()));
  if (ref2 > 0.0) {
    stats.rel_l2 = std::sqrt(err2 / ref2);
  } else {
    stats.rel_l2 = err2 > 0.0 ? std::numeric_limits<double>::infinity() : 0.0;
  }
  return stats;
}

}  // namespace fp8attn::reference
