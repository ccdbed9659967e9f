// compare_host: error statistics of a host tensor against its float64 reference, globally and row by row.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>

#include "reference/fmha_reference.h"

namespace fp8attn::reference {

ErrorStats compare_host(std::vector<double> const& out, std::vector<double> const& ref, int64_t row_length) {
  ErrorStats stats;
  size_t const n = std::min(out.size(), ref.size());
  // A mismatch in size is a caller bug; the missing elements count as non-finite rather than being ignored.
  size_t const total = std::max(out.size(), ref.size());
  size_t const row = row_length >= 1 ? static_cast<size_t>(row_length) : std::max<size_t>(total, 1);
  double const inf = std::numeric_limits<double>::infinity();
  double err2 = 0.0, ref2 = 0.0;
  stats.max_row_rel_l2 = 0.0;
  for (size_t begin = 0; begin < total; begin += row) {
    size_t const end = std::min(begin + row, total);
    double row_err2 = 0.0, row_ref2 = 0.0;
    bool row_finite = true;
    for (size_t i = begin; i < end; ++i) {
      if (i >= n) {
        ++stats.nonfinite;
        row_finite = false;
        continue;
      }
      row_ref2 += ref[i] * ref[i];
      // A NaN would poison the norm; count it instead so the caller sees how many elements went bad.
      if (!std::isfinite(out[i])) {
        ++stats.nonfinite;
        row_finite = false;
        continue;
      }
      double const e = out[i] - ref[i];
      row_err2 += e * e;
      stats.max_abs = std::max(stats.max_abs, std::fabs(e));
    }
    err2 += row_err2;
    ref2 += row_ref2;
    double const row_error =
        row_finite ? std::sqrt(row_err2) / std::max(std::sqrt(row_ref2), std::numeric_limits<double>::min()) : inf;
    // Strictly greater: on ties the lowest row is kept.
    if (stats.max_row < 0 || row_error > stats.max_row_rel_l2) {
      stats.max_row_rel_l2 = row_error;
      stats.max_row = stats.rows;
    }
    ++stats.rows;
  }
  stats.count = static_cast<int64_t>(total);
  if (ref2 > 0.0) {
    stats.rel_l2 = std::sqrt(err2 / ref2);
  } else {
    stats.rel_l2 = err2 > 0.0 ? inf : 0.0;
  }
  return stats;
}

}  // namespace fp8attn::reference
