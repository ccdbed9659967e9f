// fp8attn_bench_host_overhead: host time per call of the C++ API on a tiny problem (B=1, H=1, S=128, D=128,
// non-causal, no LSE), where the GPU's work is negligible and the host's share is what a decode step pays, and of
// a paged decode step (one sequence of 1000 cached tokens, GQA 32/8, D=128, pages of 64: split-KV, two launches).
// Targets: <= 5 us per FmhaFwd::initialize + run, <= 10 us per PagedDecode::run. A benchmark, never a test: it
// prints what it measured.
//
//   build/bench/fp8attn_bench_host_overhead [--calls=20000] [--burst=100] [--warmup=2000] [--csv=FILE]
//
// Rows per input configuration (e4m3 with V transposed by the library: two launches per run; e4m3 with V given
// sequence-contiguous: one launch; bf16: one launch and the descale-1.0 fill):
//   initialize+run   FmhaFwd::initialize then run on every call (a caller that builds Arguments per call)
//   run              run() of a handle initialized once (the launch path alone)
//   initialize       initialize() alone (validation, selection, parameter packing)
//   can_implement    FmhaFwd::can_implement alone
// the same four for PagedDecode (config "decode"), and the floor of any launch, an empty kernel through
// cudaLaunchKernel and through cuLaunchKernelEx (the driver call the library launches with).
//
// Each call is timed alone with steady_clock; calls come in bursts of --burst followed by an untimed stream
// synchronize, so the launch queue never fills and the GPU's time never shows in a host time. Reported: the
// median, 10th and 90th percentiles and the mean over --calls timed calls, in microseconds.

#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <tuple>
#include <vector>

#include "empty_kernel.h"
#include "fp8attn/fmha/device/fmha_fwd.h"
#include "fp8attn/paged/device/paged.h"

namespace {

using fp8attn::DataType;
using fp8attn::fmha::DescaleRef;
using fp8attn::fmha::TensorRef;
using fp8attn::fmha::device::FmhaFwd;

struct Options {
  int calls = 20000;
  int burst = 100;
  int warmup = 2000;
  std::string csv;
};

[[noreturn]] void die(std::string const& what) {
  std::fprintf(stderr, "fp8attn_bench_host_overhead: %s\n", what.c_str());
  std::exit(1);
}

void check(cudaError_t err, char const* what) {
  if (err != cudaSuccess) die(std::string(what) + ": " + cudaGetErrorString(err));
}

void check(fp8attn::Status const& s, char const* what) {
  if (!s) die(std::string(what) + ": " + s.to_string());
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string const arg = argv[i];
    auto value = [&](char const* flag) -> char const* {
      size_t const n = std::strlen(flag);
      return arg.compare(0, n, flag) == 0 && arg.size() > n && arg[n] == '=' ? arg.c_str() + n + 1 : nullptr;
    };
    if (char const* v = value("--calls")) {
      o.calls = std::atoi(v);
    } else if (char const* v = value("--burst")) {
      o.burst = std::atoi(v);
    } else if (char const* v = value("--warmup")) {
      o.warmup = std::atoi(v);
    } else if (char const* v = value("--csv")) {
      o.csv = v;
    } else {
      die("unknown argument '" + arg + "' (flags: --calls=N --burst=N --warmup=N --csv=FILE)");
    }
  }
  if (o.calls < 1 || o.burst < 1 || o.warmup < 0) die("--calls and --burst must be >= 1, --warmup >= 0");
  return o;
}

struct Stats {
  double median = 0, p10 = 0, p90 = 0, mean = 0;
};

// Host microseconds per call of `call`, which enqueues work on `stream` and returns false on failure.
Stats measure(std::function<bool()> const& call, cudaStream_t stream, Options const& o, char const* what) {
  for (int i = 0; i < o.warmup; ++i) {
    if (!call()) die(std::string(what) + " failed during warm-up");
    if ((i + 1) % o.burst == 0) check(cudaStreamSynchronize(stream), what);
  }
  check(cudaStreamSynchronize(stream), what);
  std::vector<double> us;
  us.reserve(o.calls);
  using clock = std::chrono::steady_clock;
  while (static_cast<int>(us.size()) < o.calls) {
    for (int i = 0; i < o.burst && static_cast<int>(us.size()) < o.calls; ++i) {
      auto const t0 = clock::now();
      bool const ok = call();
      auto const t1 = clock::now();
      if (!ok) die(std::string(what) + " failed");
      us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
    }
    check(cudaStreamSynchronize(stream), what);  // untimed: the queue drains between bursts
  }
  Stats s;
  for (double x : us) s.mean += x;
  s.mean /= us.size();
  std::sort(us.begin(), us.end());
  auto at = [&us](double q) { return us[static_cast<size_t>(q * (us.size() - 1))]; };
  s.median = at(0.5);
  s.p10 = at(0.1);
  s.p90 = at(0.9);
  return s;
}

// Device buffers a problem owns: zero-filled on allocation (zero is a valid value in every input type), or filled
// from host data; freed with the problem.
struct DeviceBuffers {
  std::vector<void*> allocations;

  DeviceBuffers() = default;
  DeviceBuffers(DeviceBuffers const&) = delete;
  DeviceBuffers& operator=(DeviceBuffers const&) = delete;
  ~DeviceBuffers() {
    for (void* p : allocations) cudaFree(p);
  }

  void* alloc(size_t bytes) {
    void* p = nullptr;
    check(cudaMalloc(&p, bytes), "cudaMalloc");
    check(cudaMemset(p, 0, bytes), "cudaMemset");
    allocations.push_back(p);
    return p;
  }

  template <typename T>
  T* upload(std::vector<T> const& host, char const* what) {
    auto* p = static_cast<T*>(alloc(sizeof(T) * host.size()));
    check(cudaMemcpy(p, host.data(), sizeof(T) * host.size(), cudaMemcpyHostToDevice), what);
    return p;
  }
};

// One tiny attention problem.
struct Problem {
  char const* name;
  DataType type;
  bool v_seq_contiguous;  // e4m3 only: V given as V^T [B, H, D, S] (no transpose launch)
  DeviceBuffers buffers;
  FmhaFwd::Arguments args;
  void* workspace = nullptr;

  void* alloc(size_t bytes) { return buffers.alloc(bytes); }

  void build() {
    int const b = 1, h = 1, s = 128, d = 128;
    args.problem = {b, h, h, s, s, d, /*causal=*/false, type, DataType::kBF16};
    size_t const elems = size_t(b) * s * h * d;
    size_t const in_bytes = elems * fp8attn::size_of(type);
    args.q = TensorRef::packed(alloc(in_bytes), fp8attn::Layout::kBSHD, s, h, d);
    args.k = TensorRef::packed(alloc(in_bytes), fp8attn::Layout::kBSHD, s, h, d);
    if (v_seq_contiguous) {
      // [B, H, D, S] storage seen as [B, S, H, D]: stride_s = 1, stride_d = S.
      args.v = {alloc(in_bytes), int64_t(h) * d * s, 1, int64_t(d) * s, s};
    } else {
      args.v = TensorRef::packed(alloc(in_bytes), fp8attn::Layout::kBSHD, s, h, d);
    }
    args.o = TensorRef::packed(alloc(elems * 2), fp8attn::Layout::kBSHD, s, h, d);
    if (type == DataType::kE4M3) {
      float const* descale = buffers.upload(std::vector<float>{1.0f}, "cudaMemcpy(descale)");
      args.q_descale = args.k_descale = args.v_descale = DescaleRef::per_tensor(descale);
    }
    check(FmhaFwd::can_implement(args), name);
    size_t const ws = FmhaFwd::get_workspace_size(args);
    workspace = ws ? alloc(ws) : nullptr;
  }
};

// A decode step's inputs: one sequence of 1000 tokens in a cache of 16 pages of 64 (GQA 32/8, D=128), zero bytes,
// descales 1.0 per kv head, the block table 0..15; one new query token.
struct DecodeProblem {
  DeviceBuffers buffers;
  fp8attn::paged::PagedDecodeArguments args;
  void* workspace = nullptr;

  void build() {
    int const pages = 16, page = 64, heads_kv = 8, heads_q = 32, d = 128, tokens = 1000;
    fp8attn::paged::PagedCache& c = args.cache;
    c.num_pages = pages;
    c.page_size = page;
    c.heads_kv = heads_kv;
    c.head_dim = d;
    c.max_pages = pages;
    c.k_pages = buffers.alloc(size_t(pages) * page * heads_kv * d);
    c.v_pages = buffers.alloc(size_t(pages) * page * heads_kv * d);
    c.k_descale = c.v_descale = buffers.upload(std::vector<float>(heads_kv, 1.0f), "cudaMemcpy(descale)");
    c.descale_stride_page = 0;
    c.descale_stride_head = 1;
    std::vector<int32_t> table(pages);
    for (int i = 0; i < pages; ++i) table[i] = i;
    c.block_table = buffers.upload(table, "cudaMemcpy(table)");
    c.seqlens = buffers.upload(std::vector<int32_t>{tokens}, "cudaMemcpy(seqlens)");
    args.batch = 1;
    args.q_len = 1;
    args.heads_q = heads_q;
    args.max_seqlen = pages * page;
    args.q = TensorRef::packed(buffers.alloc(size_t(heads_q) * d * 2), fp8attn::Layout::kBSHD, 1, heads_q, d);
    args.o = TensorRef::packed(buffers.alloc(size_t(heads_q) * d * 2), fp8attn::Layout::kBSHD, 1, heads_q, d);
    check(fp8attn::paged::device::PagedDecode::can_implement(args), "decode");
    size_t const ws = fp8attn::paged::device::PagedDecode::get_workspace_size(args);
    workspace = ws ? buffers.alloc(ws) : nullptr;
  }
};

struct Row {
  std::string config, call, kernel;
  Stats stats;
};

void print_row(Row const& r) {
  std::printf("%-10s %-18s %9.2f %8.2f %8.2f %8.2f   %s\n", r.config.c_str(), r.call.c_str(), r.stats.median,
              r.stats.p10, r.stats.p90, r.stats.mean, r.kernel.c_str());
  std::fflush(stdout);
}

/// The four rows of one device handle (FmhaFwd or PagedDecode, initialized on `args`): a fresh handle's
/// initialize + run, run, initialize, can_implement.
template <typename Op, typename Args>
void measure_handle(char const* config, std::string const& kernel, Op& op, Args const& args, void* workspace,
                    fp8attn::StreamHandle handle, cudaStream_t stream, Options const& o, std::vector<Row>* rows) {
  auto add = [&](char const* call, std::function<bool()> const& fn) {
    rows->push_back({config, call, kernel, measure(fn, stream, o, call)});
    print_row(rows->back());
  };
  add("initialize+run", [&] {
    Op fresh;
    return fresh.initialize(args, workspace, handle).ok() && fresh.run(handle).ok();
  });
  add("run", [&] { return op.run(handle).ok(); });
  add("initialize", [&] { return op.initialize(args, workspace, handle).ok(); });
  add("can_implement", [&] { return Op::can_implement(args).ok(); });
}

}  // namespace

int main(int argc, char** argv) {
  Options const o = parse(argc, argv);
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    std::fprintf(stderr, "fp8attn_bench_host_overhead: no CUDA device\n");
    return 1;
  }
  // The library launches in the current context: make the runtime's primary context current first.
  check(cudaSetDevice(0), "cudaSetDevice");
  check(cudaFree(nullptr), "cudaFree(0)");
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  cudaStream_t stream = nullptr;
  check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  auto const handle = reinterpret_cast<fp8attn::StreamHandle>(stream);

  std::printf("# fp8attn C++ host overhead on %s: B=1 H=1 S=128 D=128 non-causal, no LSE; host microseconds per\n"
              "# call over %d calls (bursts of %d, synchronized between bursts, untimed), after %d warm-up calls\n",
              prop.name, o.calls, o.burst, o.warmup);
  std::printf("%-10s %-18s %9s %8s %8s %8s   %s\n", "config", "call", "median_us", "p10_us", "p90_us", "mean_us",
              "kernel");
  std::vector<Row> rows;

  for (auto [name, type, vt] : {std::tuple{"e4m3", DataType::kE4M3, false}, std::tuple{"e4m3-vt", DataType::kE4M3, true},
                                std::tuple{"bf16", DataType::kBF16, false}}) {
    Problem p{name, type, vt, {}, {}, nullptr};
    p.build();
    FmhaFwd op;
    check(op.initialize(p.args, p.workspace, handle), "initialize");
    measure_handle(name, op.kernel_name(), op, p.args, p.workspace, handle, stream, o, &rows);
  }

  {
    using fp8attn::paged::device::PagedDecode;
    DecodeProblem p;
    p.build();
    PagedDecode op;
    check(op.initialize(p.args, p.workspace, handle), "decode initialize");
    std::string const kernel = op.kernel_name() + std::string(" x ") +
                               std::to_string(PagedDecode::splits_of(p.args)) + " splits";
    measure_handle("decode", kernel, op, p.args, p.workspace, handle, stream, o, &rows);
  }

  CUfunction empty = nullptr;
  check(empty_kernel_function(&empty), "cudaGetFuncBySymbol");
  auto add_floor = [&](char const* call, std::function<bool()> const& fn) {
    rows.push_back({"floor", call, "empty kernel", measure(fn, stream, o, call)});
    print_row(rows.back());
  };
  add_floor("cudaLaunchKernel", [&] { return launch_empty_kernel(stream) == cudaSuccess; });
  add_floor("cuLaunchKernelEx", [&] {
    CUlaunchConfig config = {};
    config.gridDimX = config.gridDimY = config.gridDimZ = 1;
    config.blockDimX = 32;
    config.blockDimY = config.blockDimZ = 1;
    config.hStream = reinterpret_cast<CUstream>(stream);
    return cuLaunchKernelEx(&config, empty, nullptr, nullptr) == CUDA_SUCCESS;
  });

  std::printf("# target: initialize+run <= 5 us per call; e4m3 runs two kernels (V transpose, attention) per call;\n"
              "# decode: run <= 10 us per call (split-KV: the decode and the combine kernel)\n");
  if (!o.csv.empty()) {
    FILE* f = std::fopen(o.csv.c_str(), "w");
    if (!f) die("cannot write " + o.csv);
    std::fprintf(f, "config,call,median_us,p10_us,p90_us,mean_us,kernel\n");
    for (Row const& r : rows) {
      std::fprintf(f, "%s,%s,%.3f,%.3f,%.3f,%.3f,%s\n", r.config.c_str(), r.call.c_str(), r.stats.median,
                   r.stats.p10, r.stats.p90, r.stats.mean, r.kernel.c_str());
    }
    std::fclose(f);
    std::printf("# CSV: %s\n", o.csv.c_str());
  }
  cudaStreamDestroy(stream);
  return 0;
}
