// FmhaFwd in several CUDA contexts of one device (driver API), interleaved:
//
//   context A, context B, A again; destroy A; create C (the driver may hand C the very CUcontext handle A had)
//   and run there; B once more after A is gone.
//
// The library loads its modules lazily, once per context (src/runtime/module_cache.cpp, keyed by the
// context's unique ID): C must get modules of its own, never A's, which died with A. Each run is a small FP8
// problem (GQA, S_q != S_k, LSE, causal and not; the V transpose runs too), with inputs copied from the host.
// Every context must produce the same bits, and those must match the float64 host reference.
//
// Exit code: 0 passed, 1 failed, 77 skipped (no driver, no device or not sm_90; ctest's SKIP_RETURN_CODE).

#include <cuda.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "fp8attn/fmha/device/fmha_fwd.h"
#include "reference/fmha_reference.h"  // tools/util/reference (target fp8attn_host_reference)

namespace {

using fp8attn::fmha::DescaleRef;
using fp8attn::fmha::FmhaProblem;
using fp8attn::fmha::TensorRef;
using fp8attn::fmha::device::FmhaFwd;

constexpr int kExitSkip = 77;
// The profiler's default tolerances for e4m3 (relative L2 error of O against float64, over the whole tensor
// and per row of head_dim elements), and tests/gpu's LSE tolerance.
constexpr double kMaxRelError = 5e-2;
constexpr double kMaxRowRelError = 1e-1;
constexpr double kLseAtol = 2e-2;
constexpr double kLseRtol = 1e-3;

int g_failures = 0;

void fail(std::string const& what) {
  std::fprintf(stderr, "FAILED: %s\n", what.c_str());
  ++g_failures;
}

bool cu_ok(CUresult r, std::string const& what) {
  if (r == CUDA_SUCCESS) return true;
  char const* name = nullptr;
  cuGetErrorName(r, &name);
  fail(what + ": " + (name ? name : "unknown CUresult " + std::to_string(static_cast<int>(r))));
  return false;
}

// ---- Host data ------------------------------------------------------------------------------------------

double e4m3_value(uint8_t bits) {
  int const sign = bits >> 7, exponent = (bits >> 3) & 0xF, mantissa = bits & 0x7;
  if (exponent == 0xF && mantissa == 0x7) return NAN;
  double const magnitude =
      exponent == 0 ? std::ldexp(mantissa / 8.0, -6) : std::ldexp(1.0 + mantissa / 8.0, exponent - 7);
  return sign ? -magnitude : magnitude;
}

double bf16_value(uint16_t bits) {
  uint32_t const word = static_cast<uint32_t>(bits) << 16;
  float f;
  std::memcpy(&f, &word, sizeof f);
  return f;
}

// A finite e4m3 value: random sign and mantissa, exponent 2^-3 .. 2^2 (never the NaN encoding).
uint8_t random_e4m3(std::mt19937& rng) {
  std::uniform_int_distribution<int> sign(0, 1), exponent(4, 9), mantissa(0, 7);
  return static_cast<uint8_t>(sign(rng) << 7 | exponent(rng) << 3 | mantissa(rng));
}

struct Case {
  std::string name;
  FmhaProblem problem;
  std::vector<uint8_t> q, k, v;                     // e4m3, packed [B, S, H, D]
  float q_descale = 0.5f, k_descale = 0.25f, v_descale = 1.5f;  // exact in binary
  std::vector<double> ref_o, ref_lse;               // float64 host reference
};

Case make_case(bool causal, uint32_t seed) {
  Case c;
  c.name = causal ? "causal" : "full";
  FmhaProblem& p = c.problem;
  p.batch = 2;
  p.heads_q = 4;
  p.heads_kv = 2;
  p.seqlen_q = 77;   // one partial query block
  p.seqlen_k = 200;  // a full and a partial KV tile; causal offset 123: every row sees a key
  p.head_dim = 128;
  p.causal = causal;
  p.input_type = fp8attn::DataType::kE4M3;
  p.output_type = fp8attn::DataType::kBF16;
  std::mt19937 rng(seed);
  auto fill = [&rng](std::vector<uint8_t>* x, size_t n) {
    x->resize(n);
    for (uint8_t& b : *x) b = random_e4m3(rng);
  };
  size_t const nq = size_t(p.batch) * p.seqlen_q * p.heads_q * p.head_dim;
  size_t const nkv = size_t(p.batch) * p.seqlen_k * p.heads_kv * p.head_dim;
  fill(&c.q, nq);
  fill(&c.k, nkv);
  fill(&c.v, nkv);
  auto dequantize = [](std::vector<uint8_t> const& x, float descale) {
    std::vector<double> out(x.size());
    for (size_t i = 0; i < x.size(); ++i) out[i] = e4m3_value(x[i]) * descale;
    return out;
  };
  fp8attn::Status s = fp8attn::reference::fmha_host(p, dequantize(c.q, c.q_descale), dequantize(c.k, c.k_descale),
                                                    dequantize(c.v, c.v_descale), 0.0, &c.ref_o, &c.ref_lse);
  if (!s) fail("fmha_host: " + s.to_string());
  return c;
}

// ---- One run in one context ------------------------------------------------------------------------------

struct Result {
  std::vector<uint16_t> o;  // bf16 bits, packed [B, S_q, H_q, D]
  std::vector<float> lse;   // [B, H_q, S_q]
  std::string kernel;
  bool ok = false;
};

// Device memory of the current context, freed (in that context) when it goes out of scope.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(DeviceBuffer const&) = delete;
  DeviceBuffer& operator=(DeviceBuffer const&) = delete;
  ~DeviceBuffer() {
    if (ptr_) cuMemFree(ptr_);
  }
  bool allocate(size_t bytes, std::string const& what) {
    return bytes == 0 || cu_ok(cuMemAlloc(&ptr_, bytes), "cuMemAlloc(" + what + ")");
  }
  CUdeviceptr get() const { return ptr_; }
  void* ptr() const { return reinterpret_cast<void*>(static_cast<uintptr_t>(ptr_)); }

 private:
  CUdeviceptr ptr_ = 0;
};

Result run_in_context(CUcontext context, Case const& c, std::string const& label) {
  Result result;
  std::string const what = label + " " + c.name;
  if (!cu_ok(cuCtxSetCurrent(context), what + ": cuCtxSetCurrent")) return result;
  FmhaProblem const& p = c.problem;
  size_t const o_elems = size_t(p.batch) * p.seqlen_q * p.heads_q * p.head_dim;
  size_t const lse_elems = size_t(p.batch) * p.heads_q * p.seqlen_q;
  float const descales[3] = {c.q_descale, c.k_descale, c.v_descale};

  CUstream stream = nullptr;
  if (!cu_ok(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), what + ": cuStreamCreate")) return result;
  {
    DeviceBuffer q, k, v, o, lse, scales, workspace;
    bool ok = q.allocate(c.q.size(), "q") && k.allocate(c.k.size(), "k") && v.allocate(c.v.size(), "v") &&
              o.allocate(o_elems * 2, "o") && lse.allocate(lse_elems * 4, "lse") &&
              scales.allocate(sizeof descales, "descales") &&
              cu_ok(cuMemcpyHtoD(q.get(), c.q.data(), c.q.size()), what + ": copy q") &&
              cu_ok(cuMemcpyHtoD(k.get(), c.k.data(), c.k.size()), what + ": copy k") &&
              cu_ok(cuMemcpyHtoD(v.get(), c.v.data(), c.v.size()), what + ": copy v") &&
              cu_ok(cuMemcpyHtoD(scales.get(), descales, sizeof descales), what + ": copy descales") &&
              // All bytes 0xFF: NaN in bf16 and float32, so an element the kernel does not write shows up.
              cu_ok(cuMemsetD8(o.get(), 0xFF, o_elems * 2), what + ": poison o") &&
              cu_ok(cuMemsetD8(lse.get(), 0xFF, lse_elems * 4), what + ": poison lse");
    if (ok) {
      FmhaFwd::Arguments args;
      args.problem = p;
      args.q = TensorRef::packed(q.ptr(), fp8attn::Layout::kBSHD, p.seqlen_q, p.heads_q, p.head_dim);
      args.k = TensorRef::packed(k.ptr(), fp8attn::Layout::kBSHD, p.seqlen_k, p.heads_kv, p.head_dim);
      args.v = TensorRef::packed(v.ptr(), fp8attn::Layout::kBSHD, p.seqlen_k, p.heads_kv, p.head_dim);
      args.o = TensorRef::packed(o.ptr(), fp8attn::Layout::kBSHD, p.seqlen_q, p.heads_q, p.head_dim);
      args.lse = static_cast<float*>(lse.ptr());
      float const* d = static_cast<float const*>(scales.ptr());
      args.q_descale = DescaleRef::per_tensor(d);
      args.k_descale = DescaleRef::per_tensor(d + 1);
      args.v_descale = DescaleRef::per_tensor(d + 2);
      auto const handle = reinterpret_cast<fp8attn::StreamHandle>(stream);
      FmhaFwd op;
      fp8attn::Status s = FmhaFwd::can_implement(args);
      if (!s) {
        fail(what + ": can_implement: " + s.to_string());
      } else if (!workspace.allocate(FmhaFwd::get_workspace_size(args), "workspace")) {
        // reported by allocate
      } else if (!(s = op.initialize(args, workspace.ptr(), handle))) {
        fail(what + ": initialize: " + s.to_string());
      } else if (!(s = op.run(handle))) {
        fail(what + ": run: " + s.to_string());
      } else if (cu_ok(cuStreamSynchronize(stream), what + ": cuStreamSynchronize after run")) {
        result.o.resize(o_elems);
        result.lse.resize(lse_elems);
        result.kernel = op.kernel_name();
        result.ok = cu_ok(cuMemcpyDtoH(result.o.data(), o.get(), o_elems * 2), what + ": copy o back") &&
                    cu_ok(cuMemcpyDtoH(result.lse.data(), lse.get(), lse_elems * 4), what + ": copy lse back");
      }
    }
  }  // buffers freed here, with `context` still current
  cu_ok(cuStreamDestroy(stream), what + ": cuStreamDestroy");
  return result;
}

// ---- Checks ----------------------------------------------------------------------------------------------

void check_reference(Case const& c, Result const& r, std::string const& what) {
  std::vector<double> o(r.o.size());
  for (size_t i = 0; i < o.size(); ++i) o[i] = bf16_value(r.o[i]);
  fp8attn::reference::ErrorStats const e = fp8attn::reference::compare_host(o, c.ref_o, c.problem.head_dim);
  fp8attn::reference::Verdict const verdict =
      fp8attn::reference::judge(e, {kMaxRelError, kMaxRowRelError}, c.problem);
  if (!verdict.correct) fail(what + ": O against the float64 reference: " + verdict.why);
  int64_t bad_lse = 0;
  double worst = 0.0;
  for (size_t i = 0; i < r.lse.size(); ++i) {
    double const diff = std::fabs(r.lse[i] - c.ref_lse[i]);
    if (!(diff <= kLseAtol + kLseRtol * std::fabs(c.ref_lse[i]))) ++bad_lse;
    if (std::isfinite(diff) && diff > worst) worst = diff;
  }
  if (bad_lse > 0) {
    fail(what + ": " + std::to_string(bad_lse) + " LSE values differ from the float64 logsumexp (worst finite " +
         "difference " + std::to_string(worst) + ")");
  }
  std::printf("  %-28s %s  rel_error %.3e  row_error %.3e  max |lse - ref| %.3e\n", what.c_str(),
              r.kernel.c_str(), e.rel_l2, e.max_row_rel_l2, worst);
}

void check_same_bits(Result const& first, Result const& r, std::string const& what) {
  if (r.kernel != first.kernel) fail(what + ": ran " + r.kernel + ", the first context ran " + first.kernel);
  if (r.o != first.o) fail(what + ": O differs from the first context's run of the same problem");
  if (std::memcmp(r.lse.data(), first.lse.data(), r.lse.size() * sizeof(float)) != 0 ||
      r.lse.size() != first.lse.size()) {
    fail(what + ": LSE differs from the first context's run of the same problem");
  }
}

CUresult create_context(CUcontext* context, CUdevice device) {
#if CUDA_VERSION >= 13000
  return cuCtxCreate(context, nullptr, 0, device);  // CUDA 13: cuCtxCreate_v4 (creation parameters)
#else
  return cuCtxCreate(context, 0, device);
#endif
}

}  // namespace

int main() {
  if (CUresult r = cuInit(0); r != CUDA_SUCCESS) {
    std::printf("SKIPPED: cuInit failed (%d): no usable NVIDIA driver\n", static_cast<int>(r));
    return kExitSkip;
  }
  int count = 0;
  if (cuDeviceGetCount(&count) != CUDA_SUCCESS || count == 0) {
    std::printf("SKIPPED: no CUDA device\n");
    return kExitSkip;
  }
  CUdevice device;
  int major = 0, minor = 0;
  cuDeviceGet(&device, 0);
  cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device);
  cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device);
  if (major != 9 || minor != 0) {
    std::printf("SKIPPED: device 0 is sm_%d%d; fp8attn kernels are built for sm_90\n", major, minor);
    return kExitSkip;
  }

  std::vector<Case> const cases = {make_case(false, 2024), make_case(true, 2025)};
  if (g_failures) return 1;

  CUcontext a = nullptr, b = nullptr, c = nullptr;
  if (!cu_ok(create_context(&a, device), "cuCtxCreate(A)") || !cu_ok(create_context(&b, device), "cuCtxCreate(B)")) {
    return 1;
  }
  std::printf("contexts on device 0: A=%p B=%p\n", static_cast<void*>(a), static_cast<void*>(b));

  // first[i]: the first run of case i (in A); every later run of it must give the same bits.
  std::vector<Result> first;
  auto run_all = [&](CUcontext context, std::string const& label) {
    for (size_t i = 0; i < cases.size(); ++i) {
      std::string const what = label + " " + cases[i].name;
      Result r = run_in_context(context, cases[i], label);
      if (!r.ok) continue;  // reported
      check_reference(cases[i], r, what);
      if (first.size() <= i) {
        first.push_back(std::move(r));
      } else {
        check_same_bits(first[i], r, what);
      }
    }
  };

  run_all(a, "A");
  if (first.size() != cases.size()) {
    std::fprintf(stderr, "the first context could not run every case; stopping\n");
    return 1;
  }
  run_all(b, "B");
  run_all(a, "A again");

  void* const a_handle = static_cast<void*>(a);
  cu_ok(cuCtxDestroy(a), "cuCtxDestroy(A)");
  if (cu_ok(create_context(&c, device), "cuCtxCreate(C)")) {
    std::printf("context C=%p (%s A's handle)\n", static_cast<void*>(c),
                static_cast<void*>(c) == a_handle ? "reuses" : "differs from");
    run_all(c, "C after A destroyed");
  }
  run_all(b, "B after A destroyed");

  if (c) cu_ok(cuCtxDestroy(c), "cuCtxDestroy(C)");
  cu_ok(cuCtxDestroy(b), "cuCtxDestroy(B)");
  if (g_failures) {
    std::printf("test_two_contexts: %d failure(s)\n", g_failures);
    return 1;
  }
  std::printf("test_two_contexts: passed\n");
  return 0;
}
