// CPU test of the float64 host reference (fp8attn::reference::fmha_host), compare_host and the verdict (judge).
//
// fmha_host is checked against a second, independently written formula: GQA by expanding K and V to every query
// head, causal masking by absolute token positions, softmax through the full score matrix and its log-sum-exp.
// Plus hand-computed cases, rows that see no key, argument validation. The verdict must catch one wrong 128-row
// tile and one wrong row that the global relative L2 lets through. Exit code: 0 when every check passed.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "reference/fmha_reference.h"

namespace {

using fp8attn::StatusCode;
using fp8attn::fmha::FmhaProblem;
using fp8attn::reference::compare_host;
using fp8attn::reference::ErrorStats;
using fp8attn::reference::fmha_host;
using fp8attn::reference::judge;
using fp8attn::reference::Tolerance;
using fp8attn::reference::Verdict;

constexpr double kInf = std::numeric_limits<double>::infinity();

int g_failures = 0;

void check(bool ok, std::string const& what) {
  if (!ok) {
    ++g_failures;
    std::printf("FAILED: %s\n", what.c_str());
  }
}

FmhaProblem make_problem(int b, int hq, int hkv, int sq, int sk, int d, bool causal) {
  FmhaProblem p;
  p.batch = b;
  p.heads_q = hq;
  p.heads_kv = hkv;
  p.seqlen_q = sq;
  p.seqlen_k = sk;
  p.head_dim = d;
  p.causal = causal;
  return p;
}

std::string describe(FmhaProblem const& p) {
  char buf[160];
  std::snprintf(buf, sizeof(buf), "b%d_hq%d_hkv%d_sq%d_sk%d_d%d_%s", p.batch, p.heads_q, p.heads_kv, p.seqlen_q,
                p.seqlen_k, p.head_dim, p.causal ? "causal" : "full");
  return buf;
}

std::vector<double> random_tensor(int64_t n, std::mt19937_64& rng) {
  std::normal_distribution<double> dist(0.0, 1.0);
  std::vector<double> t(static_cast<size_t>(n));
  for (double& x : t) x = dist(rng);
  return t;
}

// Independent formula. Tensors are indexed [b][s][h][d]; all intermediate matrices are materialized.
void naive_attention(FmhaProblem const& p, std::vector<double> const& q, std::vector<double> const& k,
                     std::vector<double> const& v, double scale, std::vector<double>* o, std::vector<double>* lse) {
  int64_t const B = p.batch, Hq = p.heads_q, Hkv = p.heads_kv, Sq = p.seqlen_q, Sk = p.seqlen_k, D = p.head_dim;
  // GQA by materializing K and V for every query head: query heads [g*r, (g+1)*r) share kv head g.
  int64_t const r = Hq / Hkv;
  std::vector<double> k_full(B * Sk * Hq * D), v_full(B * Sk * Hq * D);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t s = 0; s < Sk; ++s)
      for (int64_t g = 0; g < Hkv; ++g)
        for (int64_t rep = 0; rep < r; ++rep)
          for (int64_t d = 0; d < D; ++d) {
            int64_t const src = ((b * Sk + s) * Hkv + g) * D + d;
            int64_t const dst = ((b * Sk + s) * Hq + (g * r + rep)) * D + d;
            k_full[dst] = k[src];
            v_full[dst] = v[src];
          }

  o->assign(B * Sq * Hq * D, 0.0);
  lse->assign(B * Hq * Sq, 0.0);
  std::vector<double> S(Sq * Sk), P(Sq * Sk);
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t h = 0; h < Hq; ++h) {
      // Absolute positions: keys sit at 0..Sk-1 and the queries are the LAST Sq tokens, so query i sits at
      // position (Sk - Sq) + i. Causal: a key is visible when its position is not after the query's.
      for (int64_t i = 0; i < Sq; ++i) {
        int64_t const query_pos = (Sk - Sq) + i;
        for (int64_t j = 0; j < Sk; ++j) {
          bool const masked = p.causal && j > query_pos;
          double dot = 0.0;
          for (int64_t d = D - 1; d >= 0; --d) {  // reversed order: a different rounding path
            dot += q[((b * Sq + i) * Hq + h) * D + d] * k_full[((b * Sk + j) * Hq + h) * D + d];
          }
          S[i * Sk + j] = masked ? -kInf : scale * dot;
        }
      }
      // Row log-sum-exp, then P = exp(S - LSE), which already sums to 1.
      for (int64_t i = 0; i < Sq; ++i) {
        double mx = -kInf;
        for (int64_t j = 0; j < Sk; ++j) mx = std::max(mx, S[i * Sk + j]);
        double row_lse = -kInf;
        if (mx != -kInf) {
          double sum = 0.0;
          for (int64_t j = 0; j < Sk; ++j) sum += std::exp(S[i * Sk + j] - mx);
          row_lse = mx + std::log(sum);
        }
        (*lse)[(b * Hq + h) * Sq + i] = row_lse;
        for (int64_t j = 0; j < Sk; ++j) P[i * Sk + j] = row_lse == -kInf ? 0.0 : std::exp(S[i * Sk + j] - row_lse);
      }
      // O = P V, column by column.
      for (int64_t d = 0; d < D; ++d)
        for (int64_t i = 0; i < Sq; ++i) {
          double acc = 0.0;
          for (int64_t j = 0; j < Sk; ++j) acc += P[i * Sk + j] * v_full[((b * Sk + j) * Hq + h) * D + d];
          (*o)[((b * Sq + i) * Hq + h) * D + d] = acc;
        }
    }
  }
}

bool close(double a, double b, double tol) {
  if (std::isinf(a) || std::isinf(b)) return a == b;
  return std::fabs(a - b) <= tol * (1.0 + std::fabs(b));
}

void test_against_naive(FmhaProblem const& p, double scale, uint64_t seed) {
  std::mt19937_64 rng(seed);
  auto q = random_tensor(int64_t{p.batch} * p.seqlen_q * p.heads_q * p.head_dim, rng);
  auto k = random_tensor(int64_t{p.batch} * p.seqlen_k * p.heads_kv * p.head_dim, rng);
  auto v = random_tensor(int64_t{p.batch} * p.seqlen_k * p.heads_kv * p.head_dim, rng);
  std::vector<double> o, lse, o_naive, lse_naive;
  fp8attn::Status s = fmha_host(p, q, k, v, scale, &o, &lse);
  std::string const name = describe(p);
  check(s.ok(), name + ": fmha_host returned " + s.message());
  if (!s.ok()) return;
  double const effective_scale = scale == 0.0 ? 1.0 / std::sqrt(double(p.head_dim)) : scale;
  naive_attention(p, q, k, v, effective_scale, &o_naive, &lse_naive);

  int bad_o = 0, bad_lse = 0;
  for (size_t i = 0; i < o.size(); ++i) bad_o += !close(o[i], o_naive[i], 1e-12);
  for (size_t i = 0; i < lse.size(); ++i) bad_lse += !close(lse[i], lse_naive[i], 1e-12);
  check(o.size() == o_naive.size() && bad_o == 0,
        name + ": O differs from the naive formula in " + std::to_string(bad_o) + " elements");
  check(lse.size() == lse_naive.size() && bad_lse == 0,
        name + ": LSE differs from the naive formula in " + std::to_string(bad_lse) + " rows");
}

// One query, one key, D = 1: softmax of a single score is 1, so O = v and LSE = the score.
void test_one_by_one() {
  FmhaProblem p = make_problem(1, 1, 1, 1, 1, 1, false);
  std::vector<double> o, lse;
  fp8attn::Status s = fmha_host(p, {2.0}, {3.0}, {5.0}, 0.5, &o, &lse);
  check(s.ok() && o.size() == 1 && lse.size() == 1, "1x1: returned " + s.message());
  if (!s.ok()) return;
  check(o[0] == 5.0, "1x1: O=" + std::to_string(o[0]) + ", expected 5");
  check(lse[0] == 3.0, "1x1: LSE=" + std::to_string(lse[0]) + ", expected 3 (= 0.5 * 2 * 3)");
}

// One query, two keys: scores 0 and ln 3, so p = (1/4, 3/4), O = 4/4 + 3*8/4 = 7 and LSE = ln(1 + 3) = ln 4.
void test_one_by_two() {
  FmhaProblem p = make_problem(1, 1, 1, 1, 2, 1, false);
  std::vector<double> o, lse;
  fp8attn::Status s = fmha_host(p, {1.0}, {0.0, std::log(3.0)}, {4.0, 8.0}, 1.0, &o, &lse);
  check(s.ok(), "1x2: returned " + s.message());
  if (!s.ok()) return;
  check(std::fabs(o[0] - 7.0) < 1e-14, "1x2: O=" + std::to_string(o[0]) + ", expected 7");
  check(std::fabs(lse[0] - std::log(4.0)) < 1e-14, "1x2: LSE=" + std::to_string(lse[0]) + ", expected ln 4");
}

// Causal, seqlen_q=5 > seqlen_k=2: bottom-right alignment leaves rows 0..2 without a key (O = 0, LSE = -inf),
// row 3 sees key 0 only (O = v0, LSE = its score) and row 4 sees both keys.
void test_rows_without_keys() {
  FmhaProblem p = make_problem(1, 1, 1, 5, 2, 2, true);
  std::vector<double> q = {1, 0, 1, 0, 1, 0, 1, 0, 1, 0};
  std::vector<double> k = {2, 0, 0, 0};
  std::vector<double> v = {1, 2, 3, 4};
  std::vector<double> o, lse;
  fp8attn::Status s = fmha_host(p, q, k, v, 1.0, &o, &lse);
  check(s.ok(), "empty rows: returned " + s.message());
  if (!s.ok()) return;
  for (int i = 0; i < 3; ++i) {
    check(o[i * 2] == 0.0 && o[i * 2 + 1] == 0.0, "empty rows: row " + std::to_string(i) + " has O != 0");
    check(lse[i] == -kInf,
          "empty rows: row " + std::to_string(i) + " LSE=" + std::to_string(lse[i]) + ", expected -inf");
  }
  check(o[6] == 1.0 && o[7] == 2.0, "empty rows: row 3 should see key 0 only (O = v0)");
  check(lse[3] == 2.0, "empty rows: row 3 LSE=" + std::to_string(lse[3]) + ", expected 2");
  // Row 4: scores (2, 0): p0 = e^2 / (e^2 + 1).
  double const p0 = std::exp(2.0) / (std::exp(2.0) + 1.0);
  check(std::fabs(o[8] - (p0 * 1 + (1 - p0) * 3)) < 1e-14, "empty rows: row 4 O[0] wrong");
  check(std::fabs(lse[4] - std::log(std::exp(2.0) + 1.0)) < 1e-14, "empty rows: row 4 LSE wrong");
}

// seqlen_k = 0: no row sees a key.
void test_no_keys() {
  FmhaProblem p = make_problem(1, 2, 1, 3, 0, 4, false);
  std::vector<double> q(1 * 3 * 2 * 4, 1.0), o, lse;
  fp8attn::Status s = fmha_host(p, q, {}, {}, 0.0, &o, &lse);
  check(s.ok(), "seqlen_k=0: returned " + s.message());
  bool all_zero = true, all_neg_inf = true;
  for (double x : o) all_zero &= x == 0.0;
  for (double x : lse) all_neg_inf &= x == -kInf;
  check(all_zero && all_neg_inf, "seqlen_k=0: expected O = 0 and LSE = -inf everywhere");
}

void test_invalid_arguments() {
  std::vector<double> o;
  FmhaProblem p = make_problem(1, 2, 2, 3, 3, 4, false);
  std::vector<double> good(1 * 3 * 2 * 4, 0.0), short_q(5, 0.0);
  fp8attn::Status s = fmha_host(p, short_q, good, good, 0.0, &o, nullptr);
  check(s.code() == StatusCode::kErrorInvalidProblem && s.message().find("q.size()=5") != std::string::npos,
        "wrong q size: expected an error naming q.size()=5, got '" + s.message() + "'");

  p = make_problem(1, 6, 4, 3, 3, 4, false);
  s = fmha_host(p, good, good, good, 0.0, &o, nullptr);
  check(s.code() == StatusCode::kErrorInvalidProblem && s.message().find("heads_q=6") != std::string::npos,
        "heads_q=6, heads_kv=4: expected an error naming heads_q=6, got '" + s.message() + "'");

  p = make_problem(1, 2, 2, 3, 3, 4, false);
  s = fmha_host(p, good, good, good, 0.0, nullptr, nullptr);
  check(s.code() == StatusCode::kErrorNullPointer, "o=null: expected kErrorNullPointer");
}

void test_compare_host() {
  // Two rows of two elements; the NaN is in row 1.
  ErrorStats e = compare_host({1.0, 2.0, std::nan(""), 4.0}, {1.0, 2.0, 3.0, 4.0 + 1e-3}, 2);
  check(e.nonfinite == 1 && e.count == 4 && e.rows == 2, "compare_host: expected 1 non-finite of 4, in 2 rows");
  check(std::fabs(e.max_abs - 1e-3) < 1e-12, "compare_host: max_abs=" + std::to_string(e.max_abs));
  double const expected_rel = 1e-3 / std::sqrt(1 + 4 + 9 + (4 + 1e-3) * (4 + 1e-3));
  check(std::fabs(e.rel_l2 - expected_rel) < 1e-12, "compare_host: rel_l2=" + std::to_string(e.rel_l2));
  check(e.max_row == 1 && e.max_row_rel_l2 == kInf,
        "compare_host: the row holding the NaN should be the worst, with error inf; got row " +
            std::to_string(e.max_row) + " error " + std::to_string(e.max_row_rel_l2));
  ErrorStats same = compare_host({0.0, 0.0}, {0.0, 0.0}, 2);
  check(same.rel_l2 == 0.0 && same.max_abs == 0.0 && same.max_row_rel_l2 == 0.0 && same.max_row == 0,
        "compare_host: zeros against zeros should be exact (a row that sees no key: O = 0, reference 0)");
  // Row errors: row 0 exact, row 1 off by 10% of its norm, row 2 (of zeros) hit by 1e-3 where the reference is 0.
  ErrorStats rows = compare_host({3.0, 4.0, 3.3, 4.4, 1e-3, 0.0}, {3.0, 4.0, 3.0, 4.0, 0.0, 0.0}, 2);
  check(rows.rows == 3 && rows.max_row == 2 && rows.max_row_rel_l2 > 1e300,
        "compare_host: a non-zero output where the reference row is 0 should be the worst row, by far; got row " +
            std::to_string(rows.max_row) + " error " + std::to_string(rows.max_row_rel_l2));
  ErrorStats tenth = compare_host({3.0, 4.0, 3.3, 4.4}, {3.0, 4.0, 3.0, 4.0}, 2);
  check(tenth.max_row == 1 && std::fabs(tenth.max_row_rel_l2 - 0.1) < 1e-12,
        "compare_host: row 1 error should be 0.1, got " + std::to_string(tenth.max_row_rel_l2));
  ErrorStats whole = compare_host({3.3, 4.4}, {3.0, 4.0}, 0);
  check(whole.rows == 1 && std::fabs(whole.max_row_rel_l2 - whole.rel_l2) < 1e-15,
        "compare_host: row_length 0 should make the whole tensor one row");
}

bool contains(std::string const& text, std::string const& part) { return text.find(part) != std::string::npos; }

// The verdict must see a wrong tile. The output of a [1, 4096, 32, 8] problem (131072 rows) is the reference
// times (1 + 1% noise): correct. Zeroing one 128-row tile, rows s in [128, 256) of (b=0, h=0), moves the global
// relative L2 only to ~3e-2, under the FP8 tolerance of 5e-2, which is all the verdict checked before; each of
// those rows has error 1, over the row tolerance of 1e-1. A single corrupted row must fail the same way.
void test_verdict_sees_a_wrong_tile() {
  FmhaProblem const p = make_problem(1, 32, 32, 4096, 4096, 8, false);
  int64_t const D = p.head_dim, H = p.heads_q;
  int64_t const rows = int64_t{p.batch} * p.seqlen_q * p.heads_q;
  std::mt19937_64 rng(11);
  std::vector<double> const ref = random_tensor(rows * D, rng);
  std::vector<double> const noise = random_tensor(rows * D, rng);
  std::vector<double> good(ref.size());
  for (size_t i = 0; i < ref.size(); ++i) good[i] = ref[i] * (1.0 + 0.01 * noise[i]);
  Tolerance const fp8{5e-2, 1e-1};

  ErrorStats const e = compare_host(good, ref, D);
  Verdict const v = judge(e, fp8, p);
  check(v.correct && e.rows == rows, "correct output: expected it to pass, got '" + v.why + "'");
  check(e.max_row_rel_l2 < 5e-2, "correct output: max row error " + std::to_string(e.max_row_rel_l2));

  // Rows [128, 256) of (b=0, h=0): row index (b * S + s) * H + h.
  std::vector<double> tile = good;
  for (int64_t s = 128; s < 256; ++s) std::fill_n(tile.begin() + (s * H + 0) * D, D, 0.0);
  ErrorStats const z = compare_host(tile, ref, D);
  Verdict const vz = judge(z, fp8, p);
  check(z.rel_l2 <= fp8.rel_l2,
        "zeroed tile: the global rel_l2 " + std::to_string(z.rel_l2) + " should stay under 5e-2 (else this test "
        "would not show that the row check is needed)");
  check(z.max_row == 128 * H && z.max_row_rel_l2 == 1.0,
        "zeroed tile: worst row should be (b=0, s=128, h=0) = " + std::to_string(128 * H) + " with error 1, got " +
            std::to_string(z.max_row) + " with " + std::to_string(z.max_row_rel_l2));
  check(!vz.correct && contains(vz.why, "row (b=0, s=128, h=0) rel_l2 1.00e+00 > row tolerance 1.0e-01") &&
            !contains(vz.why, "not finite") && !contains(vz.why, "> tolerance"),
        "zeroed tile: expected incorrect for the row only, got '" + vz.why + "'");

  // One row, (b=0, s=3000, h=17), 50% too large.
  std::vector<double> one = good;
  int64_t const bad_row = 3000 * H + 17;
  for (int64_t d = 0; d < D; ++d) one[bad_row * D + d] *= 1.5;
  ErrorStats const r = compare_host(one, ref, D);
  Verdict const vr = judge(r, fp8, p);
  check(r.max_row == bad_row && std::fabs(r.max_row_rel_l2 - 0.5) < 0.03 && r.rel_l2 <= fp8.rel_l2,
        "one row: expected the worst row " + std::to_string(bad_row) + " at ~0.5 and a passing rel_l2, got row " +
            std::to_string(r.max_row) + " at " + std::to_string(r.max_row_rel_l2));
  check(!vr.correct && contains(vr.why, "row (b=0, s=3000, h=17) rel_l2 ") &&
            contains(vr.why, "> row tolerance 1.0e-01"), "one row: got '" + vr.why + "'");

  // One NaN: counted, and the verdict names its row.
  std::vector<double> nan = good;
  nan[(77 * H + 5) * D + 3] = std::nan("");
  Verdict const vn = judge(compare_host(nan, ref, D), fp8, p);
  check(!vn.correct && contains(vn.why, "1 of 1048576 output elements are not finite (the first in row (b=0, s=77, "
                                        "h=5))"),
        "one NaN: got '" + vn.why + "'");

  // The global limit still holds on its own: 10% noise everywhere.
  std::vector<double> noisy(ref.size());
  for (size_t i = 0; i < ref.size(); ++i) noisy[i] = ref[i] * (1.0 + 0.1 * noise[i]);
  Verdict const vg = judge(compare_host(noisy, ref, D), fp8, p);
  check(!vg.correct && contains(vg.why, "rel_l2 1.0") && contains(vg.why, "> tolerance 5.0e-02"),
        "10% noise: got '" + vg.why + "'");
}

}  // namespace

int main() {
  // Shapes: square and rectangular causal in both directions, GQA and MQA, odd lengths, long rows.
  test_against_naive(make_problem(2, 4, 4, 7, 7, 8, false), 0.0, 1);
  test_against_naive(make_problem(2, 4, 4, 7, 7, 8, true), 0.0, 2);
  test_against_naive(make_problem(1, 4, 2, 5, 9, 16, true), 0.0, 3);    // S_q < S_k, GQA 2:1
  test_against_naive(make_problem(2, 6, 2, 9, 4, 8, true), 0.3, 4);     // S_q > S_k: rows 0..4 see nothing
  test_against_naive(make_problem(1, 8, 1, 3, 17, 32, false), 0.0, 5);  // MQA
  test_against_naive(make_problem(1, 2, 1, 1, 1000, 4, true), 0.0, 6);  // one query row sees all 1000 keys
  test_against_naive(make_problem(1, 3, 3, 17, 113, 64, true), 0.0, 7);
  test_one_by_one();
  test_one_by_two();
  test_rows_without_keys();
  test_no_keys();
  test_invalid_arguments();
  test_compare_host();
  test_verdict_sees_a_wrong_tile();
  if (g_failures == 0) std::printf("test_host_reference: all checks passed\n");
  return g_failures == 0 ? 0 : 1;
}
