// fmha_host: float64 attention forward on the host, the ground truth for small problems.
//
// Written for clarity, not speed: two passes over each query row (row maximum, then exp-sum and P.V), so no
// online-softmax rescaling can hide an error. Cost is O(B * H_q * S_q * S_k * D); keep problems small.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "reference/fmha_reference.h"

namespace fp8attn::reference {
namespace {

Status invalid(std::string message) { return Status(StatusCode::kErrorInvalidProblem, std::move(message)); }

Status check_shape(fmha::FmhaProblem const& p) {
  if (p.batch < 1) return invalid("batch=" + std::to_string(p.batch) + " must be >= 1");
  if (p.heads_q < 1) return invalid("heads_q=" + std::to_string(p.heads_q) + " must be >= 1");
  if (p.heads_kv < 1) return invalid("heads_kv=" + std::to_string(p.heads_kv) + " must be >= 1");
  if (p.heads_q % p.heads_kv != 0) {
    return invalid("heads_q=" + std::to_string(p.heads_q) +
                   " must be a multiple of heads_kv=" + std::to_string(p.heads_kv));
  }
  if (p.seqlen_q < 0) return invalid("seqlen_q=" + std::to_string(p.seqlen_q) + " must be >= 0");
  if (p.seqlen_k < 0) return invalid("seqlen_k=" + std::to_string(p.seqlen_k) + " must be >= 0");
  if (p.head_dim < 1) return invalid("head_dim=" + std::to_string(p.head_dim) + " must be >= 1");
  return Status::success();
}

Status check_size(char const* name, std::vector<double> const& t, int64_t expected) {
  if (static_cast<int64_t>(t.size()) == expected) return Status::success();
  return invalid(std::string(name) + ".size()=" + std::to_string(t.size()) + " does not match the problem (" +
                 std::to_string(expected) + " elements expected)");
}

}  // namespace

Status fmha_host(fmha::FmhaProblem const& problem, std::vector<double> const& q, std::vector<double> const& k,
                 std::vector<double> const& v, double softmax_scale, std::vector<double>* o, std::vector<double>* lse) {
  if (Status s = check_shape(problem); !s) return s;
  if (o == nullptr) return Status(StatusCode::kErrorNullPointer, "o is null");

  int64_t const B = problem.batch, Hq = problem.heads_q, Hkv = problem.heads_kv;
  int64_t const Sq = problem.seqlen_q, Sk = problem.seqlen_k, D = problem.head_dim;
  if (Status s = check_size("q", q, B * Sq * Hq * D); !s) return s;
  if (Status s = check_size("k", k, B * Sk * Hkv * D); !s) return s;
  if (Status s = check_size("v", v, B * Sk * Hkv * D); !s) return s;

  double const scale = softmax_scale == 0.0 ? 1.0 / std::sqrt(static_cast<double>(D)) : softmax_scale;
  int64_t const group = Hq / Hkv;
  // Bottom-right alignment: the last query row lines up with the last key.
  int64_t const diagonal = Sk - Sq;
  double const neg_inf = -std::numeric_limits<double>::infinity();

  o->assign(static_cast<size_t>(B * Sq * Hq * D), 0.0);
  if (lse != nullptr) lse->assign(static_cast<size_t>(B * Hq * Sq), neg_inf);

  std::vector<double> scores(static_cast<size_t>(Sk));
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t h = 0; h < Hq; ++h) {
      int64_t const hk = h / group;
      for (int64_t i = 0; i < Sq; ++i) {
        int64_t const visible = problem.causal ? std::min(Sk, std::max<int64_t>(0, i + diagonal + 1)) : Sk;
        double* out = o->data() + ((b * Sq + i) * Hq + h) * D;
        if (visible == 0) continue;  // no key: O stays 0, LSE stays -inf

        double const* qrow = q.data() + ((b * Sq + i) * Hq + h) * D;
        double row_max = neg_inf;
        for (int64_t j = 0; j < visible; ++j) {
          double const* krow = k.data() + ((b * Sk + j) * Hkv + hk) * D;
          double dot = 0.0;
          for (int64_t d = 0; d < D; ++d) dot += qrow[d] * krow[d];
          scores[j] = dot * scale;
          row_max = std::max(row_max, scores[j]);
        }

        double sum = 0.0;
        for (int64_t j = 0; j < visible; ++j) {
          double const p = std::exp(scores[j] - row_max);
          sum += p;
          double const* vrow = v.data() + ((b * Sk + j) * Hkv + hk) * D;
          for (int64_t d = 0; d < D; ++d) out[d] += p * vrow[d];
        }
        for (int64_t d = 0; d < D; ++d) out[d] /= sum;
        if (lse != nullptr) (*lse)[(b * Hq + h) * Sq + i] = row_max + std::log(sum);
      }
    }
  }
  return Status::success();
}

}  // namespace fp8attn::reference
