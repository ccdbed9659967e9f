// fp8attn_profiler: verifies and times the operations of this build (cutlass_profiler style).
//
//   fp8attn_profiler                                 attention, B=4 H=32 S=8192 D=128 e4m3, causal and not
//   fp8attn_profiler --suite=standard --output=standard.csv
//   fp8attn_profiler --kernels='*causal*' --seqlen_q=1000 --seqlen_k=4097 --verification-providers=device,host
//   fp8attn_profiler --operation=transpose_v --head_dim=64,128,256
//   fp8attn_profiler --inject-fault=zero-tile --seqlen_q=4096      (self-test of the verifier: exit code 3)
//
// Every check of the command line (values, problem count, --kernels, --output, fault injection) comes first and
// exits with code 2; only then is the GPU opened (code 1 when there is none).

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "device.h"
#include "fp8attn/library/operation.h"
#include "operation_list.h"
#include "operation_profiler.h"
#include "options.h"
#include "problem_space.h"
#include "report.h"
#include "tuning_writer.h"

namespace {

using namespace fp8attn::profiler;

constexpr int kExitOk = 0;
constexpr int kExitNoDevice = 1;
constexpr int kExitUsage = 2;
constexpr int kExitBadRows = 3;

/// A profiler with the problems it will run.
struct Plan {
  std::unique_ptr<OperationProfiler> profiler;
  std::vector<ProblemSpec> problems;
};

// The profilers --operation selects, each with its problems; --kernels must match at least one compiled operation
// of a selected kind (a kind it matches nothing of is dropped, with a note). Throws UsageError. Allocates nothing
// on the device.
std::vector<Plan> plan_run(Options const& options) {
  std::vector<Plan> plans;
  std::string kinds;
  for (std::unique_ptr<OperationProfiler>& profiler : make_profilers(options)) {
    kinds += std::string(kinds.empty() ? "" : ", ") + profiler->name();
    std::vector<std::string> const names = profiler->operation_names();
    bool const matched = std::any_of(names.begin(), names.end(), [&options](std::string const& name) {
      return fp8attn::library::matches_filter(name, options.kernels);
    });
    if (!matched) {
      if (!options.kernels.empty() && options.operation == "all") {
        std::fprintf(stderr, "note: --kernels=%s matches no compiled %s operation; %s is not profiled\n",
                     options.kernels.c_str(), profiler->name(), profiler->name());
      }
      continue;
    }
    std::vector<ProblemSpec> problems = profiler->problems();
    if (problems.empty()) {
      throw UsageError(std::string("the options select no ") + profiler->name() + " problem" +
                       (profiler->kind() == fp8attn::library::OperationKind::kTransposeV
                            ? " (transpose_v moves one-byte types: --dtype=e4m3)"
                            : ""));
    }
    plans.push_back({std::move(profiler), std::move(problems)});
  }
  if (plans.empty()) {
    if (!options.kernels.empty()) {
      throw UsageError("--kernels=" + options.kernels + ": matches no compiled " + kinds + " operation (see --list)");
    }
    throw UsageError("this build has no compiled " + kinds + " operation");
  }
  return plans;
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  std::vector<Plan> plans;
  Report report;
  try {
    options = parse_options(argc, argv);
    if (options.help) {
      std::fputs(usage().c_str(), stdout);
      return kExitOk;
    }
    if (options.list) {
      print_operations(options);
      return kExitOk;
    }
    plans = plan_run(options);
    // Opened (truncated) before the device, so that an unwritable path is a usage error like any other.
    if (!options.output.empty()) {
      if (fp8attn::Status s = report.open_csv(options.output); !s) throw UsageError(s.message());
    }
    // Checked now too, so that an unwritable path does not cost a whole run (written at the end).
    if (!options.write_tuning.empty()) {
      std::FILE* f = std::fopen(options.write_tuning.c_str(), "w");
      if (!f) throw UsageError("--write-tuning=" + options.write_tuning + ": cannot open for writing");
      std::fclose(f);
    }
  } catch (UsageError const& e) {
    std::fprintf(stderr, "fp8attn_profiler: %s\n", e.what());
    return kExitUsage;
  }

  cudaDeviceProp prop{};
  if (!open_device(&prop)) return kExitNoDevice;
  cudaStream_t stream = nullptr;
  if (cudaError_t err = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking); err != cudaSuccess) {
    std::fprintf(stderr, "fp8attn_profiler: cudaStreamCreate failed: %s\n", cudaGetErrorString(err));
    return kExitNoDevice;
  }

  size_t problems = 0, width = 24;
  std::string kinds;
  for (Plan const& plan : plans) {
    problems += plan.problems.size();
    kinds += std::string(kinds.empty() ? "" : ", ") + plan.profiler->name();
    for (std::string const& name : plan.profiler->operation_names()) width = std::max(width, name.size());
  }
  std::printf("# device 0: %s (sm_%d%d, %d SMs); triton %s; %s; %zu problems%s\n", prop.name, prop.major, prop.minor,
              prop.multiProcessorCount, fp8attn::library::triton_version(), kinds.c_str(), problems,
              options.inject_fault == Fault::kNone ? "" : "; FAULT INJECTED (--inject-fault): rows must be incorrect");
  report.print_header(static_cast<int>(width));

  bool usable = true;
  for (Plan& plan : plans) {
    for (ProblemSpec const& spec : plan.problems) {
      if (!(usable = plan.profiler->profile(spec, stream, &report))) break;
    }
    if (!usable) break;
  }
  cudaStreamDestroy(stream);

  std::printf("# %d rows, %d failed or incorrect%s\n", report.rows(), report.bad_rows(),
              options.output.empty() ? "" : ("; CSV: " + options.output).c_str());
  if (!options.write_tuning.empty()) {
    std::FILE* f = std::fopen(options.write_tuning.c_str(), "w");
    std::string const text = fp8attn::profiler::tuning_table_text(report.attention_rows(), prop.name);
    if (!f || std::fputs(text.c_str(), f) < 0) {
      std::fprintf(stderr, "fp8attn_profiler: cannot write --write-tuning=%s\n", options.write_tuning.c_str());
      if (f) std::fclose(f);
      return kExitUsage;
    }
    std::fclose(f);
    std::printf("# tuning table: %s\n", options.write_tuning.c_str());
  }
  if (!usable) return kExitNoDevice;
  return report.bad_rows() > 0 ? kExitBadRows : kExitOk;
}
