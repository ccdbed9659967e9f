// The tuning table: parsing, lookup, and the table the runtime uses (embedded + FP8ATTN_TUNING_FILE).

#include "fmha_tuning.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "fmha_internal.h"
#include "generated/tuning_table.h"

namespace fp8attn::fmha::detail {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

std::vector<std::string_view> split(std::string_view line) {
  std::vector<std::string_view> fields;
  size_t start = 0;
  for (size_t i = 0; i <= line.size(); ++i) {
    if (i == line.size() || line[i] == ',') {
      fields.push_back(trim(line.substr(start, i - start)));
      start = i + 1;
    }
  }
  return fields;
}

bool parse_int(std::string_view s, int64_t* out) {
  if (s.empty() || s.size() > 18) return false;
  int64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + (c - '0');
  }
  *out = v;
  return true;
}

constexpr char kHeader[] = "gpu,input_type,head_dim,causal,max_seqlen_k,kernel";

}  // namespace

std::vector<TuningEntry> parse_tuning_table(std::string_view text, std::string const& source,
                                            std::vector<std::string>* warnings) {
  std::vector<TuningEntry> entries;
  bool header_seen = false;
  int line_no = 0;
  auto warn = [&](std::string const& why) {
    if (warnings) warnings->push_back(source + ":" + std::to_string(line_no) + ": " + why);
  };
  while (!text.empty()) {
    size_t const end = text.find('\n');
    std::string_view const line = trim(text.substr(0, end));
    text = end == std::string_view::npos ? std::string_view{} : text.substr(end + 1);
    ++line_no;
    if (line.empty() || line.front() == '#') continue;
    if (!header_seen) {
      if (line != kHeader) {
        warn("expected the header line '" + std::string(kHeader) + "'; the file is ignored");
        return {};
      }
      header_seen = true;
      continue;
    }
    std::vector<std::string_view> const f = split(line);
    if (f.size() != 6) {
      warn("expected 6 comma-separated fields, got " + std::to_string(f.size()) + "; line ignored");
      continue;
    }
    TuningEntry e;
    e.gpu = std::string(f[0]);
    std::optional<DataType> const type = parse_data_type(f[1]);
    int64_t head_dim = 0, causal = 0, max_seqlen_k = 0;
    if (e.gpu.empty()) {
      warn("empty gpu; line ignored");
    } else if (!type) {
      warn("input_type '" + std::string(f[1]) + "' is not a type (e4m3, e5m2, bf16, f16, f32); line ignored");
    } else if (!parse_int(f[2], &head_dim) || head_dim <= 0 || head_dim > 1024) {
      warn("head_dim '" + std::string(f[2]) + "' is not a positive integer; line ignored");
    } else if (!parse_int(f[3], &causal) || causal > 1) {
      warn("causal '" + std::string(f[3]) + "' is not 0 or 1; line ignored");
    } else if (!parse_int(f[4], &max_seqlen_k) || max_seqlen_k <= 0) {
      warn("max_seqlen_k '" + std::string(f[4]) + "' is not a positive integer; line ignored");
    } else if (f[5].empty()) {
      warn("empty kernel; line ignored");
    } else {
      e.input_type = *type;
      e.head_dim = static_cast<int>(head_dim);
      e.causal = causal == 1;
      e.max_seqlen_k = max_seqlen_k;
      e.kernel = std::string(f[5]);
      entries.push_back(std::move(e));
    }
  }
  if (!header_seen) warn("no header line; the file is ignored");
  return entries;
}

bool entry_is_varlen(TuningEntry const& e) { return e.kernel.find("_varlen") != std::string::npos; }

bool entry_matches(TuningEntry const& e, std::string_view gpu, FmhaProblem const& p, bool varlen) {
  // The whole name: "NVIDIA H20" is a prefix of "NVIDIA H200", and both are sm_90 parts this library runs on.
  // (Every call walks the table: the integer fields first, the name searches only for a row that passes them.)
  return e.input_type == p.input_type && e.head_dim == p.head_dim && e.causal == p.causal &&
         p.seqlen_k <= e.max_seqlen_k && gpu == e.gpu && entry_is_varlen(e) == varlen;
}

std::string_view rows_gpu(std::vector<TuningEntry> const& table, std::string_view gpu) {
  for (TuningEntry const& e : table) {
    if (e.gpu == gpu) return gpu;
  }
  return kReferenceGpu;
}

std::vector<TuningEntry> const& tuning_table() {
  static std::vector<TuningEntry> const table = [] {
    std::vector<std::string> warnings;
    std::vector<TuningEntry> user;
    if (char const* path = std::getenv("FP8ATTN_TUNING_FILE"); path && *path) {
      std::ifstream file(path);
      if (!file) {
        warnings.push_back(std::string(path) + ": FP8ATTN_TUNING_FILE cannot be read; ignored");
      } else {
        std::stringstream text;
        text << file.rdbuf();
        user = parse_tuning_table(text.str(), path, &warnings);
      }
    }
    std::vector<TuningEntry> const embedded =
        parse_tuning_table(generated::kTuningTable, generated::kTuningTablePath, &warnings);
    auto compiled = [](TuningEntry const& e) {
      for (size_t i = 0; i < fp8attn::detail::kNumKernelInstances; ++i) {
        KernelInstance const& k = *fp8attn::detail::kKernelInstances[i];
        if (k.kind == library::OperationKind::kFmhaFwd && e.kernel == k.name) return true;
      }
      return false;
    };
    // Every row stays, compiled or not: a call takes only the first row of its bucket (tuned_instance), and a row
    // whose instance this build lacks sends that bucket to the manifest order. Dropping it instead would hand the
    // bucket's calls to the next row, one measured for other lengths. A user's row naming an instance this build
    // does not have is stale and said so; the embedded table names only default-build instances
    // (tests/cpu/test_codegen.py checks it), which a build filtered with FP8ATTN_KERNELS leaves out on purpose.
    std::vector<TuningEntry> kept = user;
    for (TuningEntry const& e : user) {
      if (!compiled(e)) {
        warnings.push_back("tuning entry for " + e.gpu + " names " + e.kernel +
                           ", which this build does not have (stale); its bucket runs the manifest order");
      }
    }
    kept.insert(kept.end(), embedded.begin(), embedded.end());
    for (std::string const& w : warnings) std::fprintf(stderr, "fp8attn: tuning table: %s\n", w.c_str());
    return kept;
  }();
  return table;
}

}  // namespace fp8attn::fmha::detail
