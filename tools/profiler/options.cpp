// Command-line parsing for fp8attn_profiler. Every error names the flag and the offending value.

#include "options.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string_view>
#include <utility>

namespace fp8attn::profiler {
namespace {

std::vector<std::string> split(std::string const& s, char sep) {
  std::vector<std::string> parts;
  std::string part;
  std::istringstream in(s);
  while (std::getline(in, part, sep)) parts.push_back(part);
  if (!s.empty() && s.back() == sep) parts.push_back("");
  return parts;
}

[[noreturn]] void bad_value(std::string const& flag, std::string const& value, std::string const& why) {
  throw UsageError("--" + flag + "=" + value + ": " + why);
}

// The items of a comma list. An empty value, or an empty item (",4", "1,", "1,,2"), is an error naming the item's
// position: every later step may then assume an item has at least one character.
std::vector<std::string> split_list(std::string const& flag, std::string const& value) {
  if (value.empty()) bad_value(flag, value, "expected a value");
  std::vector<std::string> items = split(value, ',');
  for (size_t i = 0; i < items.size(); ++i) {
    if (items[i].empty()) bad_value(flag, value, "item " + std::to_string(i + 1) + " of the list is empty");
  }
  return items;
}

int64_t parse_int(std::string const& flag, std::string const& text, std::string const& whole) {
  if (text.empty()) bad_value(flag, whole, "empty number");
  errno = 0;
  char* end = nullptr;
  long long const v = std::strtoll(text.c_str(), &end, 10);
  if (errno != 0 || end != text.c_str() + text.size()) bad_value(flag, whole, "'" + text + "' is not an integer");
  return v;
}

// "1024", "1024,4096", "1024:8192:1024" (end inclusive; step defaults to 1), or a mix of these.
std::vector<int> parse_int_list(std::string const& flag, std::string const& value, int min_value) {
  std::vector<int> out;
  for (std::string const& item : split_list(flag, value)) {
    std::vector<std::string> const range = split(item, ':');
    if (range.size() > 3) bad_value(flag, value, "'" + item + "' is not start:end[:step]");
    static char const* const kField[] = {"start", "end", "step"};
    for (size_t f = 0; f < range.size(); ++f) {
      if (range[f].empty()) {
        bad_value(flag, value, std::string("the ") + kField[f] + " of '" + item + "' (start:end:step) is empty");
      }
    }
    int64_t const start = parse_int(flag, range[0], value);
    int64_t const end = range.size() > 1 ? parse_int(flag, range[1], value) : start;
    int64_t const step = range.size() > 2 ? parse_int(flag, range[2], value) : 1;
    if (step < 1) bad_value(flag, value, "step " + std::to_string(step) + " must be >= 1");
    if (end < start) bad_value(flag, value, "range end " + std::to_string(end) + " is below its start");
    for (int64_t v = start; v <= end; v += step) {
      if (v < min_value || v > (int64_t{1} << 30)) {
        bad_value(flag, value, std::to_string(v) + " is out of range [" + std::to_string(min_value) + ", 2^30]");
      }
      out.push_back(static_cast<int>(v));
      if (out.size() > 100000) bad_value(flag, value, "expands to more than 100000 values");
    }
  }
  return out;
}

std::vector<bool> parse_bool_list(std::string const& flag, std::string const& value) {
  std::vector<bool> out;
  for (std::string const& item : split_list(flag, value)) {
    if (item == "1" || item == "true") {
      out.push_back(true);
    } else if (item == "0" || item == "false") {
      out.push_back(false);
    } else {
      bad_value(flag, value, "'" + item + "' is not one of 0, 1, true, false");
    }
  }
  return out;
}

std::vector<DataType> parse_dtype_list(std::string const& flag, std::string const& value) {
  std::vector<DataType> out;
  for (std::string const& item : split_list(flag, value)) {
    std::optional<DataType> t = parse_data_type(item);
    if (!t || *t == DataType::kF32) bad_value(flag, value, "'" + item + "' is not an input type (e4m3, bf16)");
    out.push_back(*t);
  }
  return out;
}

std::vector<Layout> parse_layout_list(std::string const& flag, std::string const& value) {
  std::vector<Layout> out;
  for (std::string const& item : split_list(flag, value)) {
    std::optional<Layout> l = parse_layout(item);
    if (!l) bad_value(flag, value, "'" + item + "' is not a layout (bshd, bhsd)");
    out.push_back(*l);
  }
  return out;
}

int parse_count(std::string const& flag, std::string const& value, int min_value) {
  int64_t const v = parse_int(flag, value, value);
  if (v < min_value || v > 1000000) {
    bad_value(flag, value, "must be in [" + std::to_string(min_value) + ", 1000000]");
  }
  return static_cast<int>(v);
}

void parse_verification_providers(std::string const& flag, std::string const& value, Options* o) {
  o->verify_device = o->verify_host = false;
  bool none = false;
  for (std::string const& item : split_list(flag, value)) {
    if (item == "device") {
      o->verify_device = true;
    } else if (item == "host") {
      o->verify_host = true;
    } else if (item == "none") {
      none = true;
    } else {
      bad_value(flag, value, "'" + item + "' is not one of device, host, none");
    }
  }
  if (none && (o->verify_device || o->verify_host)) bad_value(flag, value, "'none' cannot be combined");
}

void parse_providers(std::string const& flag, std::string const& value, Options* o) {
  o->profile_heuristic = o->profile_instances = false;
  for (std::string const& item : split_list(flag, value)) {
    if (item == "fp8attn") {
      o->profile_heuristic = true;
    } else if (item == "instance") {
      o->profile_instances = true;
    } else {
      bad_value(flag, value, "'" + item + "' is not one of fp8attn, instance");
    }
  }
}

// Flags are matched with '_' and '-' treated alike: --heads_q and --heads-q, --warmup-iterations and
// --warmup_iterations are the same flag.
std::string normalize(std::string name) {
  std::replace(name.begin(), name.end(), '_', '-');
  return name;
}

// "%.0f" up to 2^53 (exact), else "%.3g": the size of a cartesian product, for a message.
std::string count_text(double count) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), count < 9007199254740992.0 ? "%.0f" : "%.3g", count);
  return buf;
}

// The number of problems the axes expand to (before heads_q/heads_kv pairs that do not divide are skipped);
// a UsageError naming the count and the axes when it exceeds kMaxProblems. Computed in double: each axis
// holds at most 100000 values, so the exact product of nine of them can exceed int64.
void check_problem_count(ProblemAxes const& a) {
  std::pair<char const*, size_t> const axes[] = {
      {"batch", a.batch.size()},       {"heads_q", a.heads_q.size()},   {"heads_kv", a.heads_kv.size()},
      {"seqlen_q", a.seqlen_q.size()}, {"seqlen_k", a.seqlen_k.size()}, {"head_dim", a.head_dim.size()},
      {"causal", a.causal.size()},     {"dtype", a.dtype.size()},       {"layout", a.layout.size()}};
  double count = 1.0;
  std::string factors;
  for (auto const& [name, size] : axes) {
    count *= static_cast<double>(std::max<size_t>(size, 1));  // an empty heads_kv / seqlen_k follows the query side
    if (size > 1) factors += std::string(factors.empty() ? "" : " x ") + name + " " + std::to_string(size);
  }
  if (count <= static_cast<double>(kMaxProblems)) return;
  throw UsageError("the problem axes expand to " + count_text(count) + " problems (" + factors +
                   "), more than the limit of " + std::to_string(kMaxProblems) + " per run; narrow the ranges");
}

}  // namespace

Options parse_options(int argc, char const* const* argv) {
  Options o;
  std::vector<std::string> problem_flags_given;
  for (int i = 1; i < argc; ++i) {
    std::string const arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      o.help = true;
      continue;
    }
    if (arg == "--list") {
      o.list = true;
      continue;
    }
    if (arg.rfind("--", 0) != 0) throw UsageError("unexpected argument '" + arg + "' (flags look like --name=value)");
    std::string name, value;
    size_t const eq = arg.find('=');
    if (eq != std::string::npos) {
      name = arg.substr(2, eq - 2);
      value = arg.substr(eq + 1);
    } else {
      name = arg.substr(2);
      // "--flag value" is accepted as well as "--flag=value".
      if (i + 1 >= argc || std::string_view(argv[i + 1]).rfind("--", 0) == 0) {
        throw UsageError("--" + name + " needs a value (--" + name + "=VALUE)");
      }
      value = argv[++i];
    }
    std::string const key = normalize(name);

    if (key == "operation") {
      if (value == "fmha_fwd" || value == "fmha") {
        o.operation = "fmha_fwd";
      } else if (value == "transpose_v" || value == "quantize" || value == "paged" || value == "all") {
        o.operation = value;
      } else {
        bad_value(name, value, "unknown operation (supported: fmha_fwd (alias fmha), transpose_v, quantize, paged, all)");
      }
      o.operation_given = true;
    } else if (key == "kernels") {
      o.kernels = value;
    } else if (key == "suite") {
      if (value != "standard") bad_value(name, value, "unknown suite (supported: standard)");
      o.suite = value;
    } else if (key == "providers") {
      parse_providers(name, value, &o);
    } else if (key == "batch") {
      o.axes.batch = parse_int_list(name, value, 1);
      problem_flags_given.push_back(name);
    } else if (key == "heads-q") {
      o.axes.heads_q = parse_int_list(name, value, 1);
      problem_flags_given.push_back(name);
    } else if (key == "heads-kv") {
      o.axes.heads_kv = parse_int_list(name, value, 1);
      problem_flags_given.push_back(name);
    } else if (key == "seqlen-q") {
      o.axes.seqlen_q = parse_int_list(name, value, 1);
      problem_flags_given.push_back(name);
    } else if (key == "seqlen-k") {
      o.axes.seqlen_k = parse_int_list(name, value, 1);
      problem_flags_given.push_back(name);
    } else if (key == "head-dim") {
      o.axes.head_dim = parse_int_list(name, value, 1);
      problem_flags_given.push_back(name);
    } else if (key == "causal") {
      o.axes.causal = parse_bool_list(name, value);
      problem_flags_given.push_back(name);
    } else if (key == "dtype") {
      o.axes.dtype = parse_dtype_list(name, value);
    } else if (key == "layout") {
      o.axes.layout = parse_layout_list(name, value);
    } else if (key == "warmup-iterations") {
      o.warmup_iterations = parse_count(name, value, 0);
    } else if (key == "profiling-iterations") {
      o.profiling_iterations = parse_count(name, value, 1);
    } else if (key == "verification-providers") {
      parse_verification_providers(name, value, &o);
    } else if (key == "verification-tolerance") {
      char* end = nullptr;
      double const t = std::strtod(value.c_str(), &end);
      if (value.empty() || end != value.c_str() + value.size() || !(t > 0.0)) {
        bad_value(name, value, "must be a positive number");
      }
      o.tolerance = t;
    } else if (key == "verification-row-tolerance") {
      char* end = nullptr;
      double const t = std::strtod(value.c_str(), &end);
      if (value.empty() || end != value.c_str() + value.size() || !(t > 0.0)) {
        bad_value(name, value, "must be a positive number");
      }
      o.row_tolerance = t;
    } else if (key == "inject-fault") {
      if (value == "zero-tile") {
        o.inject_fault = Fault::kZeroTile;
      } else if (value == "none") {
        o.inject_fault = Fault::kNone;
      } else {
        bad_value(name, value, "unknown fault (supported: zero-tile, none)");
      }
    } else if (key == "host-verification-limit") {
      o.host_verification_limit = parse_int(name, value, value);
      if (o.host_verification_limit < 0) bad_value(name, value, "must be >= 0");
    } else if (key == "output") {
      if (value.empty()) bad_value(name, value, "expected a file name");
      o.output = value;
    } else if (key == "write-tuning") {
      if (value.empty()) bad_value(name, value, "expected a file name");
      o.write_tuning = value;
    } else if (key == "seed") {
      errno = 0;
      char* end = nullptr;
      unsigned long long const s = std::strtoull(value.c_str(), &end, 10);
      if (value.empty() || errno != 0 || end != value.c_str() + value.size() || value[0] == '-') {
        bad_value(name, value, "must be a non-negative integer");
      }
      o.seed = s;
    } else {
      throw UsageError("unknown flag --" + name + " (see --help)");
    }
  }
  if (!o.suite.empty() && !problem_flags_given.empty()) {
    throw UsageError("--suite=" + o.suite + " fixes the problem shapes; it cannot be combined with --" +
                     problem_flags_given.front() + " (only --dtype and --layout apply to a suite)");
  }
  if (o.suite.empty()) check_problem_count(o.axes);
  if (o.inject_fault != Fault::kNone) {
    std::string const flag = std::string("--inject-fault=") + to_string(o.inject_fault);
    if (o.operation == "transpose_v" || o.operation == "quantize" || o.operation == "paged") {
      throw UsageError(flag + " applies to fmha_fwd only (--operation=" + o.operation + ")");
    }
    if (!o.verify_device && !o.verify_host) {
      throw UsageError(flag + " checks the verifier, which --verification-providers=none turns off");
    }
  }
  return o;
}

double tolerance_for(Options const& options, DataType dtype) {
  if (options.tolerance) return *options.tolerance;
  bool const fp8 = is_fp8(dtype);
  return fp8 ? 5e-2 : 1e-2;
}

double row_tolerance_for(Options const& options, DataType dtype) {
  if (options.row_tolerance) return *options.row_tolerance;
  return 2.0 * tolerance_for(options, dtype);
}

char const* to_string(Fault fault) {
  switch (fault) {
    case Fault::kNone:
      return "none";
    case Fault::kZeroTile:
      return "zero-tile";
  }
  return "unknown";
}

std::string usage() {
  return R"(fp8attn_profiler: verify and time every fp8attn operation (attention, V transpose) on the current GPU.

Usage: fp8attn_profiler [--operation=fmha_fwd] [problem flags | --suite=standard] [options]

Operations:
  --operation=fmha_fwd        fmha_fwd (attention forward; alias: fmha), transpose_v (V -> V^T for the FP8
                              kernels, through fmha::device::TransposeV; byte-exact against a host copy, GB/s
                              counts bytes read + written), quantize (bf16 -> e4m3/int8 with descales, through
                              quant::device::Quantize: each accuracy mode's recipe, against a float64 host
                              reference; GB/s counts bf16 read + bytes written), or all. transpose_v and quantize
                              take the K/V operand of each attention problem: [batch, seqlen_k, heads_kv,
                              head_dim]; transpose_v one-byte types only, quantize a bf16 copy. paged: decode
                              over a paged FP8 cache (paged::device::PagedDecode) of seqlen_k tokens per
                              sequence, q_len = seqlen_q when 1..8 (else 1), pages of 16 and 64; float64
                              reference on two heads per sequence; GB/s counts K and V bytes read.

Problem flags (comma lists and start:end:step ranges, end inclusive; the cartesian product is profiled, at most
1000000 problems):
  --batch=4                   batch size
  --heads_q=32                query heads
  --heads_kv=H                key/value heads (default: heads_q; heads_q must be a multiple)
  --seqlen_q=8192             query length
  --seqlen_k=S                key length (default: seqlen_q)
  --head_dim=128              head dimension
  --causal=0,1                0/1 or false/true; causal is bottom-right aligned
  --dtype=e4m3                input type: e4m3, bf16 (output is bf16)
  --layout=bshd               bshd or bhsd, for Q, K, V and O
  --suite=standard            the standard prefill suite, bench/suites/standard.csv (embedded at build time;
                              bench/bench_vs_cudnn.py reads the same file): 32768 tokens per problem, H_q*D =
                              4096; D=128 at S=512..16k, D=64 and D=256 at S=2k and 8k, each causal and not;
                              GQA 64/8 heads D=128 S=8k causal. Only --dtype and --layout combine with it.

Kernels and providers:
  --list                      print the compiled operations of every kind (of --operation's kind when given)
                              that match --kernels, and exit; needs no GPU
  --kernels=FILTER            only operations whose names match (',' = OR, '*' = ordered substrings); a filter
                              that matches no compiled operation is an error. With a filter, every matching
                              instance gets a row (not_supported when can_implement refuses); without one,
                              only instances that can run the problem.
  --providers=fp8attn,instance
                              fp8attn: the library's own pick (for fmha_fwd the heuristic's kernel is named in
                              the operation column); instance: each compiled instance, forced by name.

Measurement:
  --warmup-iterations=10      untimed runs first
  --profiling-iterations=50   each run timed with CUDA events; the median is reported
  --verification-providers=device
                              device (float32 reference on the GPU), host (float64 on the CPU, only when
                              B*H_q*S_q*S_k*D <= --host-verification-limit, default 2^28), or none
  --verification-tolerance=T  relative L2 error of the whole output (default 5e-2 for e4m3, 1e-2 for bf16)
  --verification-row-tolerance=T
                              relative L2 error of each output row, the head_dim elements of one (b, s, h):
                              ||o_row - ref_row|| / ||ref_row||; default twice the tolerance (1e-1 for e4m3,
                              2e-2 for bf16). The global error alone cannot see one wrong 128-row tile of a
                              large output. Column row_err: the largest row error (its row is named in the
                              notes when over the row tolerance).
  --inject-fault=zero-tile    self-test of the verifier: after each fmha_fwd run and before verification,
                              zero rows [128, 256) of O of (batch 0, head 0), i.e. one 128-row tile (needs
                              seqlen_q > 128). Every such row must then be reported incorrect (exit code 3).
  --output=FILE.csv           also write the rows as CSV
  --write-tuning=FILE         write a tuning table from this run (both providers, the default): per attention
                              problem, the fastest verified instance where it beats the library's pick by >2%;
                              FP8ATTN_TUNING_FILE=FILE makes the runtime use it
  --seed=2024                 seed of the input generator

Dispositions: passed, incorrect (non-finite outputs, error over the tolerance, or a row over the row
tolerance; for transpose_v any byte that differs), failed (an error; see notes), not_supported (can_implement
refused; see notes), not_verified (--verification-providers=none).
Exit code: 0 all rows passed or not supported, 1 no usable GPU (no NVIDIA driver, no device) or a fatal CUDA
error, 2 bad arguments (found before the GPU is opened), 3 some row failed or was incorrect.
)";
}

}  // namespace fp8attn::profiler
