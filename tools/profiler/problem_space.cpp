// Problem enumeration for fp8attn_profiler: command-line axes, suite files.

#include "problem_space.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <utility>

#include "standard_suite.h"  // generated from bench/suites/standard.csv

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

std::string ProblemSpec::to_string() const {
  char buf[160];
  std::snprintf(buf, sizeof(buf), "B=%d H_q=%d H_kv=%d S_q=%d S_k=%d D=%d %s %s %s", batch, heads_q, heads_kv,
                seqlen_q, seqlen_k, head_dim, causal ? "causal" : "full", fp8attn::to_string(dtype),
                fp8attn::to_string(layout));
  return buf;
}

namespace {

std::vector<std::string_view> split_view(std::string_view text, char sep) {
  std::vector<std::string_view> parts;
  size_t begin = 0;
  while (true) {
    size_t const end = text.find(sep, begin);
    parts.push_back(text.substr(begin, end == std::string_view::npos ? std::string_view::npos : end - begin));
    if (end == std::string_view::npos) return parts;
    begin = end + 1;
  }
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

constexpr char const* kSuiteColumns[] = {"batch", "heads_q", "heads_kv", "seqlen_q", "seqlen_k", "head_dim", "causal"};
constexpr int kNumSuiteColumns = 7;

}  // namespace

Status parse_suite(std::string_view text, std::string const& source, std::vector<SuiteEntry>* entries) {
  entries->clear();
  int column_of[kNumSuiteColumns];  // suite column -> position in the line
  bool have_header = false;
  size_t fields_per_line = 0;
  std::vector<std::string_view> const lines = split_view(text, '\n');
  for (size_t n = 0; n < lines.size(); ++n) {
    std::string_view const line = trim(lines[n]);
    if (line.empty() || line.front() == '#') continue;
    std::string const where = source + ":" + std::to_string(n + 1) + ": ";
    std::vector<std::string_view> fields = split_view(line, ',');
    for (std::string_view& f : fields) f = trim(f);
    if (!have_header) {
      for (int c = 0; c < kNumSuiteColumns; ++c) {
        column_of[c] = -1;
        for (size_t i = 0; i < fields.size(); ++i) {
          if (fields[i] != kSuiteColumns[c]) continue;
          if (column_of[c] >= 0) {
            return Status(StatusCode::kErrorInvalidProblem, where + "column " + kSuiteColumns[c] + " is named twice");
          }
          column_of[c] = static_cast<int>(i);
        }
        if (column_of[c] < 0) {
          return Status(StatusCode::kErrorInvalidProblem,
                        where + "the header line has no column " + kSuiteColumns[c] + " (got '" + std::string(line) +
                            "')");
        }
      }
      have_header = true;
      fields_per_line = fields.size();
      continue;
    }
    if (fields.size() != fields_per_line) {
      return Status(StatusCode::kErrorInvalidProblem, where + std::to_string(fields.size()) +
                                                          " fields, the header has " + std::to_string(fields_per_line) +
                                                          ": '" + std::string(line) + "'");
    }
    int values[kNumSuiteColumns];
    for (int c = 0; c < kNumSuiteColumns; ++c) {
      std::string const field(fields[static_cast<size_t>(column_of[c])]);
      errno = 0;
      char* end = nullptr;
      long long const v = std::strtoll(field.c_str(), &end, 10);
      bool const is_causal = c == kNumSuiteColumns - 1;
      if (field.empty() || errno != 0 || end != field.c_str() + field.size() || v < (is_causal ? 0 : 1) ||
          v > (is_causal ? 1 : (1 << 30))) {
        return Status(StatusCode::kErrorInvalidProblem, where + kSuiteColumns[c] + "='" + field + "' is not " +
                                                            (is_causal ? "0 or 1" : "an integer in [1, 2^30]"));
      }
      values[c] = static_cast<int>(v);
    }
    SuiteEntry e{values[0], values[1], values[2], values[3], values[4], values[5], values[6] == 1};
    if (e.heads_q % e.heads_kv != 0) {
      return Status(StatusCode::kErrorInvalidProblem, where + "heads_q=" + std::to_string(e.heads_q) +
                                                          " is not a multiple of heads_kv=" +
                                                          std::to_string(e.heads_kv));
    }
    entries->push_back(e);
  }
  if (!have_header) return Status(StatusCode::kErrorInvalidProblem, source + ": no header line");
  if (entries->empty()) return Status(StatusCode::kErrorInvalidProblem, source + ": no problem");
  return Status::success();
}

std::string_view standard_suite_text() { return generated::kStandardSuite; }

std::vector<ProblemSpec> enumerate_problems(Options const& options, std::FILE* notes) {
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
      } else if (notes != nullptr) {
        std::fprintf(notes, "note: skipping heads_q=%d heads_kv=%d: heads_q must be a multiple of heads_kv\n", hq,
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
  std::vector<SuiteEntry> entries;
  if (Status s = parse_suite(standard_suite_text(), generated::kStandardSuitePath, &entries); !s) {
    throw UsageError("the standard suite embedded at build time does not parse: " + s.message());
  }
  std::vector<ProblemSpec> out;
  for (DataType dtype : dtypes)
    for (Layout layout : layouts)
      for (SuiteEntry const& e : entries)
        out.push_back(ProblemSpec{e.batch, e.heads_q, e.heads_kv, e.seqlen_q, e.seqlen_k, e.head_dim, e.causal, dtype,
                                  layout});
  return out;
}

}  // namespace fp8attn::profiler
