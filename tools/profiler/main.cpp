// fp8attn_profiler: verifies and times the attention kernels of this build (cutlass_profiler style).
//
//   fp8attn_profiler                                 B=4 H=32 S=8192 D=128 e4m3, causal and not
//   fp8attn_profiler --suite=standard --output=standard.csv
//   fp8attn_profiler --kernels='*causal*' --seqlen_q=1000 --seqlen_k=4097 --verification-providers=device,host

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <string>

#include "fmha_profiler.h"
#include "fp8attn/library/operation.h"
#include "options.h"
#include "problem_space.h"
#include "report.h"

namespace {

using namespace fp8attn::profiler;

constexpr int kExitOk = 0;
constexpr int kExitNoDevice = 1;
constexpr int kExitUsage = 2;
constexpr int kExitBadRows = 3;

// The library launches through the driver API in the CURRENT context, so the runtime's primary context must
// be made current before the first call into it (cudaFree(0) forces its creation).
bool open_device(cudaDeviceProp* prop) {
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count == 0) {
    std::fprintf(stderr, "fp8attn_profiler: no CUDA device available (%s)\n",
                 err != cudaSuccess ? cudaGetErrorString(err) : "cudaGetDeviceCount returned 0");
    return false;
  }
  if ((err = cudaSetDevice(0)) != cudaSuccess || (err = cudaFree(nullptr)) != cudaSuccess ||
      (err = cudaGetDeviceProperties(prop, 0)) != cudaSuccess) {
    std::fprintf(stderr, "fp8attn_profiler: cannot initialize CUDA device 0: %s\n", cudaGetErrorString(err));
    return false;
  }
  // Kernels and the device reference are built for sm_90a only; anything else cannot run a single row.
  if (prop->major != 9) {
    std::fprintf(stderr, "fp8attn_profiler: device 0 (%s) is sm_%d%d; fp8attn is built for Hopper (sm_90a)\n",
                 prop->name, prop->major, prop->minor);
    return false;
  }
  return true;
}

// --list needs no GPU: the registry is compiled into the library.
void print_operations(std::string const& filter) {
  std::printf("# %zu attention instances compiled with triton %s\n", fp8attn::library::fmha_operations().size(),
              fp8attn::library::triton_version());
  std::printf("%-84s %12s %13s %4s\n", "operation", "launch_warps", "shared_bytes", "lse");
  for (fp8attn::library::FmhaDescription const& d : fp8attn::library::fmha_operations()) {
    if (!fp8attn::library::matches_filter(d.name, filter)) continue;
    std::printf("%-84s %12d %13d %4s\n", d.name.c_str(), d.launch_warps, d.shared_bytes, d.writes_lse ? "yes" : "no");
  }
}

int operation_width() {
  size_t width = 24;
  for (fp8attn::library::FmhaDescription const& d : fp8attn::library::fmha_operations()) {
    width = std::max(width, d.name.size());
  }
  return static_cast<int>(width);
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  try {
    options = parse_options(argc, argv);
  } catch (UsageError const& e) {
    std::fprintf(stderr, "fp8attn_profiler: %s\n", e.what());
    return kExitUsage;
  }
  if (options.help) {
    std::fputs(usage().c_str(), stdout);
    return kExitOk;
  }
  if (options.list) {
    print_operations(options.kernels);
    return kExitOk;
  }
  std::vector<ProblemSpec> const problems = enumerate_problems(options);
  if (problems.empty()) {
    std::fprintf(stderr, "fp8attn_profiler: the options select no problem\n");
    return kExitUsage;
  }

  cudaDeviceProp prop{};
  if (!open_device(&prop)) return kExitNoDevice;

  Report report;
  if (!options.output.empty()) {
    if (fp8attn::Status s = report.open_csv(options.output); !s) {
      std::fprintf(stderr, "fp8attn_profiler: %s\n", s.message().c_str());
      return kExitUsage;
    }
  }
  cudaStream_t stream = nullptr;
  if (cudaError_t err = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking); err != cudaSuccess) {
    std::fprintf(stderr, "fp8attn_profiler: cudaStreamCreate failed: %s\n", cudaGetErrorString(err));
    return kExitNoDevice;
  }

  std::printf("# device 0: %s (sm_%d%d, %d SMs); %zu attention instances compiled with triton %s; %zu problems\n",
              prop.name, prop.major, prop.minor, prop.multiProcessorCount, fp8attn::library::fmha_operations().size(),
              fp8attn::library::triton_version(), problems.size());
  report.print_header(operation_width());

  FmhaProfiler profiler(options, &report, stream);
  bool usable = true;
  for (ProblemSpec const& spec : problems) {
    if (!(usable = profiler.profile(spec))) break;
  }
  cudaStreamDestroy(stream);

  std::printf("# %d rows, %d failed or incorrect%s\n", report.rows(), report.bad_rows(),
              options.output.empty() ? "" : ("; CSV: " + options.output).c_str());
  if (!usable) return kExitNoDevice;
  return report.bad_rows() > 0 ? kExitBadRows : kExitOk;
}
