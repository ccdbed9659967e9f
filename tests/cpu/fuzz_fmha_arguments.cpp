// Randomized FmhaFwd::Arguments: can_implement, get_workspace_size, select_kernel and initialize(null
// workspace) on argument sets around valid ones (fmha_argument_generator.h), each answer judged by
// independent invariants (fmha_argument_invariants.h). Crashes and undefined behaviour are caught by the
// sanitizer build (CI's build-asan). No GPU: nothing is launched; pointers are fake.
//
//   fuzz_fmha_arguments [--seed=N] [--iterations=N] [--case=I] [--verbose]   (seed: random unless given)
//   fuzz_fmha_arguments --self-test    the invariant checks fail on deliberately wrong answers
//
// Exit status: 0 when every invariant held and each was checked at least once per 1000 sets (no vacuous
// pass), 1 otherwise (the first failures of each invariant are printed with the
// argument set and the command line that replays that one case).

#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <map>
#include <random>
#include <string>

#include "fmha_argument_generator.h"
#include "fmha_argument_invariants.h"

using Fmha = fp8attn::fmha::device::FmhaFwd;

namespace {

constexpr int kReportsPerInvariant = 5;

// The case in flight: when the process dies inside the library (a crash, or a sanitizer report, which
// aborts with abort_on_error=1 as .ci/run sets it), the signal handler names the case to replay alone.
volatile uint64_t in_flight_seed = 0, in_flight_index = 0;
volatile std::sig_atomic_t in_flight = 0;

extern "C" void report_case_in_flight(int signal) {
  if (in_flight) {
    char text[200];
    int n = std::snprintf(text, sizeof(text), "fuzz_fmha_arguments: died (signal %d) in case %llu; replay: "
                          "fuzz_fmha_arguments --seed=%llu --case=%llu --verbose\n", signal,
                          (unsigned long long)in_flight_index, (unsigned long long)in_flight_seed,
                          (unsigned long long)in_flight_index);
    if (n > 0) (void)!write(STDERR_FILENO, text, static_cast<size_t>(n));
  }
  std::signal(signal, SIG_DFL);
  std::raise(signal);
}

fuzz::Observation observe(fuzz::Args const& a) {
  fuzz::Observation o;
  o.status = Fmha::can_implement(a);
  o.workspace = Fmha::get_workspace_size(a);
  if (o.status.ok()) {
    o.selected_run = true;
    o.select_status = Fmha::select_kernel(a, &o.selected);
    if (o.workspace > 0) {  // with no workspace needed, initialize would go on to the driver: not here
      o.initialize_run = true;
      Fmha op;
      o.initialize_status = op.initialize(a, nullptr, nullptr);
    }
  }
  return o;
}

// ---- self-test: each check must fire on a wrong answer and stay quiet on a right one -------------------

fuzz::Args valid_fp8() {
  fuzz::Args a;
  a.problem = {2, 8, 8, 1024, 1024, 128, false, fuzz::DataType::kE4M3, fuzz::DataType::kBF16};
  a.q = fuzz::pack(fuzz::address(0x10000000), fuzz::Layout::kBSHD, 1024, 8, 128);
  a.k = fuzz::pack(fuzz::address(0x20000000), fuzz::Layout::kBSHD, 1024, 8, 128);
  a.v = fuzz::pack(fuzz::address(0x30000000), fuzz::Layout::kBSHD, 1024, 8, 128);
  a.o = fuzz::pack(fuzz::address(0x40000000), fuzz::Layout::kBSHD, 1024, 8, 128);
  float const* scale = reinterpret_cast<float const*>(0x50000000);
  a.q_descale = a.k_descale = a.v_descale = fuzz::DescaleRef::per_tensor(scale);
  return a;
}

constexpr size_t kVtBytes = size_t(2) * 8 * 128 * 1024;

fuzz::Observation accepted(size_t workspace) {
  fuzz::Observation o;
  o.workspace = workspace;
  o.initialize_run = workspace > 0;
  o.initialize_status = fuzz::Status(fuzz::StatusCode::kErrorWorkspaceNull, "workspace is null");
  o.selected_run = true;
  o.selected = "some_instance";
  return o;
}

fuzz::Observation refused(std::string message, size_t workspace = 0) {
  fuzz::Observation o;
  o.status = fuzz::Status(fuzz::StatusCode::kErrorInvalidProblem, std::move(message));
  o.workspace = workspace;
  return o;
}

int self_test() {
  struct Case {
    char const* what;
    fuzz::Args args;
    fuzz::Observation obs;
    int expected;  // the one invariant that must fail, or -1: none may
  };
  std::vector<Case> cases;
  cases.push_back({"valid set, right answers", valid_fp8(), accepted(kVtBytes + 4096), -1});
  cases.push_back({"refusal naming q", valid_fp8(), refused("q.ptr is null"), -1});
  cases.push_back({"refusal naming head_dim", valid_fp8(), refused("head_dim=96 is not compiled"), -1});
  cases.push_back({"refusal naming lse", valid_fp8(), refused("lse has 2^40 elements"), -1});
  {
    fuzz::Args a = valid_fp8();
    a.o.stride_s = 64;  // rows 64 elements apart, 128 long: row s+1 overwrites half of row s
    cases.push_back({"overlapping o (stride_s < head_dim) accepted", a, accepted(kVtBytes), fuzz::kOutputNoOverlap});
    a = valid_fp8();
    a.o.stride_h = 64;  // heads overlap
    cases.push_back({"overlapping o (stride_h < head_dim) accepted", a, accepted(kVtBytes), fuzz::kOutputNoOverlap});
    a = valid_fp8();
    a.o.stride_b = a.o.stride_s;  // batch 1 starts at row 1 of batch 0
    cases.push_back({"overlapping o (batches) accepted", a, accepted(kVtBytes), fuzz::kOutputNoOverlap});
    a = valid_fp8();
    a.o.stride_s = 0;
    cases.push_back({"aliasing o (stride_s=0) accepted", a, accepted(kVtBytes), fuzz::kOutputNoOverlap});
    a = valid_fp8();  // [s, b, h, d]: unusual but disjoint
    a.o.stride_h = 128, a.o.stride_b = 8 * 128, a.o.stride_s = 2 * 8 * 128;
    cases.push_back({"o in [s, b, h, d] order accepted", a, accepted(kVtBytes), -1});
  }
  cases.push_back({"refusal naming nothing", valid_fp8(), refused("something went wrong"), fuzz::kRefusalNamesArgument});
  cases.push_back({"'o' only inside a word", valid_fp8(), refused("to be or not to be"), fuzz::kRefusalNamesArgument});
  cases.push_back({"'q_descale' only as a prefix", valid_fp8(), refused("q_descales: bad"), fuzz::kRefusalNamesArgument});
  cases.push_back({"refused with a workspace", valid_fp8(), refused("batch=-1 must be >= 0", 4096),
                   fuzz::kRefusedWorkspaceZero});
  {
    fuzz::Observation o = accepted(kVtBytes);
    o.status = fuzz::Status(fuzz::StatusCode::kSuccess, "fine, but with a message");
    cases.push_back({"success with a message", valid_fp8(), o, fuzz::kStatusConsistent});
  }
  cases.push_back({"workspace of 2^51 bytes", valid_fp8(), accepted(size_t(1) << 51), fuzz::kWorkspaceNoOverflow});
  cases.push_back({"workspace without room for V^T", valid_fp8(), accepted(kVtBytes - 1), fuzz::kWorkspaceHoldsVt});
  {
    fuzz::Args a = valid_fp8();
    a.v = fuzz::pack_sequence_contiguous(a.v.ptr, 1024, 8, 128);
    cases.push_back({"sequence-contiguous V needs no V^T", a, accepted(256), -1});
  }
  {
    fuzz::Args a = valid_fp8();
    a.q.stride_b = int64_t(1) << 62;  // batch 1 lies 2^62 elements on: fits; for 3 batches it would not
    a.problem.batch = 3;
    cases.push_back({"q offsets beyond int64 accepted", a, accepted(size_t(3) * kVtBytes), fuzz::kOffsetsFitInt64});
    a = valid_fp8();
    a.k_descale.stride_b = int64_t(1) << 62;  // float32: 4 bytes per element on top
    cases.push_back({"k_descale byte offsets beyond int64 accepted", a, accepted(kVtBytes), fuzz::kOffsetsFitInt64});
    a = valid_fp8();
    a.k_descale.stride_b = int64_t(1) << 33;
    cases.push_back({"k_descale stride 2^33", a, accepted(kVtBytes), -1});
  }
  {
    fuzz::Observation o = accepted(kVtBytes);
    o.initialize_status = fuzz::Status();  // initialize with a null workspace "succeeded"
    cases.push_back({"initialize accepts a null workspace", valid_fp8(), o, fuzz::kNullWorkspaceRefused});
    o = accepted(kVtBytes);
    o.select_status = fuzz::Status(fuzz::StatusCode::kErrorNotSupported, "no instance for head_dim=128");
    cases.push_back({"select_kernel refuses what can_implement accepted", valid_fp8(), o, fuzz::kSelectAgrees});
    fuzz::Args a = valid_fp8();
    a.kernel_name = "forced_instance";
    cases.push_back({"select_kernel ignores kernel_name", a, accepted(kVtBytes), fuzz::kSelectAgrees});
  }

  int wrong = 0;
  for (Case const& c : cases) {
    fuzz::Tally tally;
    std::vector<fuzz::Violation> found = fuzz::check(c.args, c.obs, &tally);
    bool ok = c.expected < 0 ? found.empty() : (found.size() == 1 && found[0].which == c.expected);
    std::cout << (ok ? "ok      " : "WRONG   ") << c.what << ": expected "
              << (c.expected < 0 ? "no violation" : fuzz::invariant_name(c.expected)) << ", flagged";
    if (found.empty()) std::cout << " nothing";
    for (auto const& v : found) std::cout << " [" << fuzz::invariant_name(v.which) << ": " << v.detail << "]";
    std::cout << "\n";
    wrong += !ok;
  }
  std::cout << "fuzz_fmha_arguments --self-test: " << cases.size() - wrong << " of " << cases.size() << " right\n";
  return wrong == 0 ? 0 : 1;
}

bool parse_u64(char const* arg, char const* flag, uint64_t* value) {
  size_t n = std::strlen(flag);
  if (std::strncmp(arg, flag, n) != 0 || arg[n] != '=') return false;
  char* end = nullptr;
  *value = std::strtoull(arg + n + 1, &end, 0);
  if (!end || *end || end == arg + n + 1) {
    std::cerr << flag << "=" << (arg + n + 1) << " is not a number\n";
    std::exit(2);
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t seed = std::random_device{}() * 0x100000001ull ^ std::random_device{}();
  uint64_t iterations = 100000, only = ~uint64_t(0);
  bool verbose = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--self-test")) return self_test();
    if (!std::strcmp(argv[i], "--verbose")) { verbose = true; continue; }
    if (parse_u64(argv[i], "--seed", &seed) || parse_u64(argv[i], "--iterations", &iterations) ||
        parse_u64(argv[i], "--case", &only)) {
      continue;
    }
    std::cerr << "unknown argument '" << argv[i] << "' (--seed=N --iterations=N --case=I --verbose --self-test)\n";
    return 2;
  }
  std::cout << "fuzz_fmha_arguments: seed=" << seed << " iterations=" << iterations
            << " (replay: fuzz_fmha_arguments --seed=" << seed << ")" << std::endl;

  for (int sig : {SIGABRT, SIGSEGV, SIGBUS, SIGFPE, SIGILL}) std::signal(sig, report_case_in_flight);
  auto const& ops = fp8attn::library::fmha_operations();
  fuzz::Generator generator(ops);
  fuzz::Tally tally;
  std::map<std::string, long> accepted_by_code, refused_by_code;
  std::array<int, fuzz::kNumInvariants> reported{};
  long violations = 0;
  auto start = std::chrono::steady_clock::now();
  uint64_t first = only == ~uint64_t(0) ? 0 : only, last = only == ~uint64_t(0) ? iterations : only + 1;
  for (uint64_t index = first; index < last; ++index) {
    fuzz::Rng rng(seed, index);
    int mutations = 0;
    fuzz::Args args = generator.make(rng, &mutations);
    in_flight_seed = seed, in_flight_index = index, in_flight = 1;
    if (verbose) std::cout << "case " << index << " (" << mutations << " mutations): " << fuzz::describe(args) << std::endl;
    fuzz::Observation obs = observe(args);
    in_flight = 0;
    (obs.status.ok() ? accepted_by_code : refused_by_code)[fp8attn::to_string(obs.status.code())]++;
    std::vector<fuzz::Violation> found = fuzz::check(args, obs, &tally);
    violations += static_cast<long>(found.size());
    if (verbose) {
      std::cout << "  -> " << (obs.status.ok() ? "accepted" : obs.status.to_string()) << ", workspace " << obs.workspace << "\n";
    }
    for (fuzz::Violation const& v : found) {
      if (reported[v.which]++ >= kReportsPerInvariant) continue;
      std::cout << "VIOLATION " << fuzz::invariant_name(v.which) << ": " << v.detail << "\n  case " << index << ": "
                << fuzz::describe(args) << "\n  can_implement: " << (obs.status.ok() ? "accepted" : obs.status.to_string())
                << "\n  replay: fuzz_fmha_arguments --seed=" << seed << " --case=" << index << " --verbose" << std::endl;
    }
  }
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  long accepted_total = 0, refused_total = 0;
  std::cout << "argument sets: " << (last - first) << " in " << seconds << " s\n";
  for (auto const& [code, n] : accepted_by_code) std::cout << "  accepted " << code << ": " << n << "\n", accepted_total += n;
  for (auto const& [code, n] : refused_by_code) std::cout << "  refused  " << code << ": " << n << "\n", refused_total += n;
  std::cout << "  total accepted " << accepted_total << ", refused " << refused_total << "\n";
  std::cout << "invariants (checked / failed):\n";
  for (int i = 0; i < fuzz::kNumInvariants; ++i) {
    std::printf("  %-24s %9ld / %ld\n", fuzz::invariant_name(i), tally.checked[i], tally.failed[i]);
  }
  std::fflush(stdout);

  // A fuzzer whose sets are all refused (or all accepted) checks half its invariants vacuously: in a full run
  // each must have been checked at least once per 1000 sets. V^T only exists where FP8 instances do.
  bool fp8_compiled = false;
  for (auto const& op : ops) fp8_compiled = fp8_compiled || fuzz::fp8_input(op.qk_type);
  long minimum = only == ~uint64_t(0) ? static_cast<long>(iterations / 1000) : 0;
  bool vacuous = false;
  for (int i = 0; i < fuzz::kNumInvariants; ++i) {
    if (i == fuzz::kWorkspaceHoldsVt && !fp8_compiled) continue;
    if (tally.checked[i] < minimum) {
      std::cout << "fuzz_fmha_arguments: invariant " << fuzz::invariant_name(i) << " checked only " << tally.checked[i]
                << " times (minimum " << minimum << "): the generator no longer reaches it" << std::endl;
      vacuous = true;
    }
  }
  if (vacuous) return 1;
  if (violations) {
    std::cout << "fuzz_fmha_arguments: " << violations << " violations (seed=" << seed << ")" << std::endl;
    return 1;
  }
  std::cout << "fuzz_fmha_arguments: every invariant held (seed=" << seed << ")" << std::endl;
  return 0;
}
