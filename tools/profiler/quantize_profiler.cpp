// Quantize profiling: recipes, float64 host reference (rotation by a fast Walsh-Hadamard transform, smoothing,
// descales, e4m3 / int8 rounding, the V^T layouts), byte-level verification, timing.

#include "quantize_profiler.h"

#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "device_tensors.h"
#include "fp8attn/fmha/device/transpose_v.h"
#include "generated/numerics.h"
#include "reference/fmha_reference.h"
#include "timing.h"

namespace fp8attn::profiler {
namespace {

using quant::Granularity;
using quant::OutputLayout;
using quant::QuantizeArguments;
using quant::device::Quantize;
namespace num = fp8attn::generated::numerics;

/// What each accuracy mode asks of the quantization (fmha::AccuracyMode), applied to the K operand.
struct Recipe {
  char const* name;
  DataType out;
  Granularity granularity;
  bool smooth, rotate;
  OutputLayout layout;
  int smooth_sample_stride = 1;  ///< as the mode sets it (int8_qk: 0, the library's rule)
};

constexpr Recipe kRecipes[] = {
    {"fp8: e4m3 per tensor", DataType::kE4M3, Granularity::kPerTensor, false, false, OutputLayout::kBSHD},
    {"fp8_per_head: e4m3 per (batch, head)", DataType::kE4M3, Granularity::kPerHead, false, false, OutputLayout::kBSHD},
    {"fp8_smooth_rotate (K): e4m3, smoothed, rotated", DataType::kE4M3, Granularity::kPerTensor, true, true,
     OutputLayout::kBSHD},
    {"int8_qk (K): int8 per 64-token block, smoothed (sampled mean), rotated", DataType::kI8, Granularity::kPerBlock,
     true, true, OutputLayout::kBSHD, 0},
    {"int8_qk (K), kpair: int8 per 128 tokens in pairs of 64-token entries, smoothed (sampled mean), rotated",
     DataType::kI8, Granularity::kPerBlockPair, true, true, OutputLayout::kBSHD, 0},
    {"V^T in the vkperm key order: e4m3 per tensor", DataType::kE4M3, Granularity::kPerTensor, false, false,
     OutputLayout::kVtKeyPermuted},
};

/// kernels/common/numerics.py hadamard_sign, with its constants.
int hadamard_sign(uint32_t seed, uint32_t i) {
  uint32_t h = seed * num::HASH_SEED_MUL + i * num::HASH_INDEX_MUL;
  h ^= h >> 15;
  h *= num::HASH_MIX_MUL;
  h ^= h >> 12;
  return (h & 1u) ? -1 : 1;
}

/// y = x diag(signs) H / sqrt(D) in place (H Sylvester's; a fast Walsh-Hadamard transform), D a power of two.
void rotate_row(double* y, int d, uint32_t seed) {
  for (int i = 0; i < d; ++i) y[i] *= hadamard_sign(seed, static_cast<uint32_t>(i));
  for (int len = 1; len < d; len <<= 1) {
    for (int i = 0; i < d; i += 2 * len) {
      for (int j = i; j < i + len; ++j) {
        double const a = y[j], b = y[j + len];
        y[j] = a + b;
        y[j + len] = a - b;
      }
    }
  }
  double const scale = 1.0 / std::sqrt(static_cast<double>(d));
  for (int i = 0; i < d; ++i) y[i] *= scale;
}

/// The host reference of one recipe: y [b][h][s][d] (transformed), its descales as the library lays them out.
struct Reference {
  std::vector<double> y;
  std::vector<double> descale;
  /// Bounds on the float32 error of the device's sums (they run in float32, in another order), in y's units: the
  /// rotation's per row [b][h][s], the smoothing mean's per column [b][h][d]; each empty without its transform.
  std::vector<double> row_slack, column_slack;

  /// The bound for element (b, h, s, d) of y; 0 when the device computes it exactly.
  double slack(int64_t b, int64_t h, int64_t s, int64_t d, int64_t H, int64_t S, int64_t D) const {
    double out = 0;
    if (!row_slack.empty()) out += row_slack[static_cast<size_t>((b * H + h) * S + s)];
    if (!column_slack.empty()) out += column_slack[static_cast<size_t>((b * H + h) * D + d)];
    return out;
  }
};

/// float32's unit roundoff.
constexpr double kEps32 = 1.0 / 16777216.0;

Reference reference(std::vector<uint16_t> const& x, QuantizeArguments const& a) {
  int64_t const B = a.batch, S = a.seqlen, H = a.heads, D = a.head_dim;
  Reference r;
  r.y.resize(static_cast<size_t>(B * H * S * D));
  auto at = [&](int64_t b, int64_t h, int64_t s) { return r.y.data() + ((b * H + h) * S + s) * D; };
  // The float32 error bounds (slack): a rotated value is a sum of D exact products (+-x_i / sqrt(D)), within
  // D * eps * sum|x_i| / sqrt(D) = sqrt(D) * eps * sum|x_i| of the exact sum in any summation order; the smoothing
  // mean sums S values in 64-token blocks, then over the blocks (the quantize operation's stats and reduce stages):
  // within (64 + S / 64) * eps * mean|y| of the exact mean. Elements with much cancellation (a small value out of
  // large terms) can round to the other e4m3 or int8 neighbour than the float64 value does (seen on the H200: 2-3
  // of each fp8_smooth_rotate problem's millions of values before this slack existed).
  if (a.rotate) r.row_slack.assign(static_cast<size_t>(B * H * S), 0.0);
  if (a.smooth) r.column_slack.assign(static_cast<size_t>(B * H * D), 0.0);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h) {
      for (int64_t s = 0; s < S; ++s) {
        uint16_t const* src = x.data() + b * a.input.stride_b + s * a.input.stride_s + h * a.input.stride_h;
        double* y = at(b, h, s);
        double l1 = 0;
        for (int64_t d = 0; d < D; ++d) {
          y[d] = bf16_to_float(src[d]);
          l1 += std::fabs(y[d]);
        }
        if (a.rotate) {
          rotate_row(y, static_cast<int>(D), a.rotation_seed);
          r.row_slack[static_cast<size_t>((b * H + h) * S + s)] = std::sqrt(static_cast<double>(D)) * kEps32 * l1;
        }
      }
      if (a.smooth) {
        // The mean over the sampled blocks (every stride-th 64-token block from the first), as the stats stage
        // reads them; subtracted from every token.
        int64_t const block = quant::kQuantizeBlockTokens;
        int64_t const stride = a.smooth_sample_stride == 0 ? quant::smooth_sample_stride_for(a.seqlen)
                                                           : a.smooth_sample_stride;
        std::vector<double> mean(static_cast<size_t>(D), 0.0), mean_abs(static_cast<size_t>(D), 0.0);
        int64_t count = 0;
        for (int64_t s = 0; s < S; ++s) {
          if ((s / block) % stride != 0) continue;
          ++count;
          for (int64_t d = 0; d < D; ++d) {
            mean[d] += at(b, h, s)[d];
            mean_abs[d] += std::fabs(at(b, h, s)[d]);
          }
        }
        double const terms = static_cast<double>(block) + static_cast<double>(count) / static_cast<double>(block);
        for (int64_t s = 0; s < S; ++s)
          for (int64_t d = 0; d < D; ++d) at(b, h, s)[d] -= mean[d] / static_cast<double>(count);
        double* column_slack = r.column_slack.data() + (b * H + h) * D;
        for (int64_t d = 0; d < D; ++d) column_slack[d] = terms * kEps32 * mean_abs[d] / static_cast<double>(count);
      }
    }
  double const qmax = a.output_type == DataType::kI8 ? num::INT8_QMAX : num::E4M3_MAX;
  auto descale_of = [qmax](double amax) { return amax > 0 ? amax / qmax : 1.0; };
  auto amax_of = [&](int64_t b, int64_t h, int64_t s0, int64_t s1) {
    double m = 0;
    for (int64_t s = s0; s < s1; ++s)
      for (int64_t d = 0; d < D; ++d) {
        double const v = std::fabs(at(b, h, s)[d]);
        if (std::isfinite(v)) m = std::max(m, v);
      }
    return m;
  };
  int64_t const block = quant::kQuantizeBlockTokens;
  int64_t const tokens = a.layout == OutputLayout::kBSHD ? S : fmha::padded_seqlen(S);
  int64_t const blocks = (tokens + block - 1) / block;
  int64_t const hkv = a.heads_kv ? a.heads_kv : H;
  switch (a.granularity) {
    case Granularity::kPerTensor: {
      double m = 0;
      for (int64_t b = 0; b < B; ++b)
        for (int64_t h = 0; h < H; ++h) m = std::max(m, amax_of(b, h, 0, S));
      r.descale = {descale_of(m)};
      break;
    }
    case Granularity::kPerHead:
      for (int64_t b = 0; b < B; ++b)
        for (int64_t g = 0; g < hkv; ++g) {
          double m = 0;
          for (int64_t h = g * (H / hkv); h < (g + 1) * (H / hkv); ++h) m = std::max(m, amax_of(b, h, 0, S));
          r.descale.push_back(descale_of(m));
        }
      break;
    case Granularity::kPerBlock:
      for (int64_t b = 0; b < B; ++b)
        for (int64_t h = 0; h < H; ++h)
          for (int64_t k = 0; k < blocks; ++k) {
            r.descale.push_back(descale_of(amax_of(b, h, k * block, std::min(S, (k + 1) * block))));
          }
      break;
    case Granularity::kPerBlockPair:  // each entry the amax of its 128-token span (both entries of a pair alike)
      for (int64_t b = 0; b < B; ++b)
        for (int64_t h = 0; h < H; ++h)
          for (int64_t k = 0; k < blocks; ++k) {
            int64_t const span = k / 2 * 2 * block;
            r.descale.push_back(descale_of(amax_of(b, h, span, std::min(S, span + 2 * block))));
          }
      break;
  }
  return r;
}

/// Where a float32 computation and this float64 one may round z to different neighbours: z within 1e-4 of a step
/// of the midpoint of the two values, or within the computation's error bound `slack` (in z's units) of it. Two
/// values that are not neighbours have a midpoint far from z, so this never accepts a wrong code beyond them.
bool near_midpoint(double z, double a, double b, double slack) {
  double const lo = std::min(std::fabs(a), std::fabs(b)), hi = std::max(std::fabs(a), std::fabs(b));
  return std::fabs(std::fabs(z) - (lo + hi) / 2) <= std::max(1e-4 * std::max(hi - lo, 1e-12), slack);
}

double decode(uint8_t byte, DataType type) {
  if (type == DataType::kI8) return static_cast<int8_t>(byte);
  __nv_fp8_e4m3 v;
  v.__x = byte;
  return static_cast<float>(v);
}

/// Compares the device's bytes and descales with the reference; "" when they agree, else what differs.
std::string verify(QuantizeArguments const& a, Reference const& ref, std::vector<uint8_t> const& out,
                   std::vector<float> const& descale) {
  if (descale.size() != ref.descale.size()) return "descale count differs";
  for (size_t i = 0; i < descale.size(); ++i) {
    if (!(std::fabs(descale[i] - ref.descale[i]) <= 1e-5 * ref.descale[i])) {
      char buf[160];
      std::snprintf(buf, sizeof(buf), "descale[%zu] = %.9g, expected %.9g", i, double(descale[i]), ref.descale[i]);
      return buf;
    }
  }
  int64_t const B = a.batch, S = a.seqlen, H = a.heads, D = a.head_dim;
  int64_t const pad = fmha::padded_seqlen(S), block = quant::kQuantizeBlockTokens;
  int64_t const hkv = a.heads_kv ? a.heads_kv : H;
  bool const vt = a.layout != OutputLayout::kBSHD, kperm = a.layout == OutputLayout::kVtKeyPermuted;
  int64_t const positions = vt ? pad : S;
  int64_t differ = 0;
  std::string first;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t pos = 0; pos < positions; ++pos) {
        int64_t const r = pos % 32;
        int64_t const s = kperm ? pos - r + (r / 16) * 16 + ((r / 2) % 2) * 8 + ((r / 4) % 4) * 2 + r % 2 : pos;
        double scale = 1.0;
        switch (a.granularity) {
          case Granularity::kPerTensor: scale = descale[0]; break;
          case Granularity::kPerHead: scale = descale[static_cast<size_t>(b * hkv + h / (H / hkv))]; break;
          case Granularity::kPerBlock:
          case Granularity::kPerBlockPair: {  // the same per-block layout
            int64_t const blocks = (positions + block - 1) / block;
            scale = descale[static_cast<size_t>((b * H + h) * blocks + pos / block)];
            break;
          }
        }
        for (int64_t d = 0; d < D; ++d) {
          size_t const index = vt ? static_cast<size_t>(((b * H + h) * D + d) * pad + pos)
                                  : static_cast<size_t>(b * a.output.stride_b + pos * a.output.stride_s +
                                                        h * a.output.stride_h + d);
          size_t const at = static_cast<size_t>(((b * H + h) * S + s) * D + d);
          double const z = s < S ? ref.y[at] / scale : 0.0;
          double const slack = s < S ? ref.slack(b, h, s, d, H, S, D) / scale : 0.0;
          double want;
          if (a.output_type == DataType::kI8) {
            want = std::clamp(std::nearbyint(z), -127.0, 127.0);
          } else {
            double const c = std::clamp(z, -num::E4M3_MAX, num::E4M3_MAX);
            want = static_cast<float>(__nv_fp8_e4m3(static_cast<float>(c)));
          }
          double const got = decode(out[index], a.output_type);
          bool const int8_tie =
              std::fabs(got - want) == 1 && std::fabs(z - std::floor(z) - 0.5) < std::max(1e-4, slack);
          bool const ok =
              got == want || (a.output_type == DataType::kI8 ? int8_tie : near_midpoint(z, got, want, slack));
          if (ok) continue;
          if (differ++ == 0) {
            char buf[200];
            std::snprintf(buf, sizeof(buf), "; the first at (b=%lld, h=%lld, %s=%lld, d=%lld): %g, expected %g",
                          (long long)b, (long long)h, vt ? "position" : "s", (long long)pos, (long long)d, got, want);
            first = buf;
          }
        }
      }
  if (differ == 0) return "";
  return std::to_string(differ) + " values differ from the float64 reference" + first;
}

}  // namespace

std::vector<ProblemSpec> QuantizeProfiler::problems() const {
  return kv_operand_problems([](DataType) { return true; }, DataType::kBF16);
}

bool QuantizeProfiler::profile(ProblemSpec const& spec, StreamHandle stream, Report* report) {
  int64_t const elements = int64_t{spec.batch} * spec.seqlen_k * spec.heads_kv * spec.head_dim;
  auto fail_problem = [&](std::string const& notes) {
    report->add(problem_failed(spec, notes));
    return device_usable();
  };
  DeviceBuffer x;
  if (Status s = x.allocate(static_cast<size_t>(elements) * 2, "K (bf16)"); !s) return fail_problem("inputs: " + s.to_string());
  if (Status s = reference::fill_random(x.get(), DataType::kBF16, elements, options_.seed * 3 + 1, stream); !s) {
    return fail_problem("inputs: " + s.to_string());
  }
  bool const verify_on = options_.verify_device || options_.verify_host;
  std::vector<uint16_t> host_x;
  if (verify_on) {
    host_x.resize(static_cast<size_t>(elements));
    if (Status s = sync_stream(stream, "filling K"); !s) return fail_problem("inputs: " + s.to_string());
    if (cudaError_t err = cudaMemcpy(host_x.data(), x.get(), host_x.size() * 2, cudaMemcpyDeviceToHost); err != cudaSuccess) {
      return fail_problem("download of K: " + cuda_error(err, "cudaMemcpy").to_string());
    }
  }
  for (Recipe const& recipe : kRecipes) {
    QuantizeArguments a;
    a.batch = spec.batch;
    a.seqlen = spec.seqlen_k;
    a.heads = spec.heads_kv;
    a.head_dim = spec.head_dim;
    a.input_type = DataType::kBF16;
    a.output_type = recipe.out;
    a.granularity = recipe.granularity;
    a.layout = recipe.layout;
    a.smooth = recipe.smooth;
    a.smooth_sample_stride = recipe.smooth_sample_stride;
    a.rotate = recipe.rotate;
    a.input = fmha::TensorRef::packed(x.get(), spec.layout, spec.seqlen_k, spec.heads_kv, spec.head_dim);
    // The apply instance the handle would pick, named in the row (and what --kernels filters).
    std::string instance;
    Status const selected = Quantize::select_kernel(a, &instance);
    if (selected && !library::matches_filter(instance, options_.kernels)) continue;
    Candidate const candidate{"fp8attn", "", selected ? instance : "-", selected};
    Row row = first_row(spec, candidate);
    row.notes = recipe.name;
    if (!candidate.implementable) {
      row.notes += ": " + candidate.implementable.message();
      report->add(row);
      continue;
    }
    auto fail = [&](std::string const& what, Status const& s) {
      report->add(failed(row, what, s));
      return device_usable();
    };
    DeviceBuffer out, descale, workspace;
    a.output = fmha::TensorRef::packed(nullptr, Layout::kBSHD, spec.seqlen_k, spec.heads_kv, spec.head_dim);
    size_t const out_bytes = recipe.layout == OutputLayout::kBSHD ? static_cast<size_t>(elements)
                                                                   : size_t(spec.batch) * spec.heads_kv * spec.head_dim *
                                                                         fmha::padded_seqlen(spec.seqlen_k);
    size_t const descales = Quantize::descale_count(a);
    if (Status s = out.allocate(out_bytes, "quantized K"); !s) {
      if (!fail("output", s)) return false;
      continue;
    }
    if (Status s = descale.allocate(descales * sizeof(float), "descales"); !s) {
      if (!fail("descales", s)) return false;
      continue;
    }
    a.output.ptr = out.get();
    a.descale = static_cast<float*>(descale.get());
    if (Status s = workspace.allocate(std::max<size_t>(Quantize::get_workspace_size(a), 256), "workspace"); !s) {
      if (!fail("workspace", s)) return false;
      continue;
    }
    // Poisoned: 0xFF is NaN in e4m3 and -1 in int8, so unwritten bytes (the V^T padding too) show.
    if (cudaError_t err = cudaMemsetAsync(out.get(), 0xFF, out_bytes, stream); err != cudaSuccess) {
      if (!fail("poisoning", cuda_error(err, "cudaMemsetAsync"))) return false;
      continue;
    }
    Quantize op;
    if (Status s = op.initialize(a, workspace.get(), stream); !s) {
      if (!fail("initialize", s)) return false;
      continue;
    }
    if (Status s = op.run(stream); !s) {
      if (!fail("run", s)) return false;
      continue;
    }
    if (Status s = sync_stream(stream, "run"); !s) {
      if (!fail("run", s)) return false;
      continue;
    }
    if (!verify_on) {
      row.disposition = "not_verified";
    } else {
      std::vector<uint8_t> host_out(out_bytes);
      std::vector<float> host_descale(descales);
      cudaError_t err = cudaMemcpy(host_out.data(), out.get(), out_bytes, cudaMemcpyDeviceToHost);
      if (err == cudaSuccess) {
        err = cudaMemcpy(host_descale.data(), descale.get(), descales * sizeof(float), cudaMemcpyDeviceToHost);
      }
      if (err != cudaSuccess) {
        if (!fail("download", cuda_error(err, "cudaMemcpy"))) return false;
        continue;
      }
      std::string const why = verify(a, reference(host_x, a), host_out, host_descale);
      row.disposition = why.empty() ? "passed" : "incorrect";
      if (!why.empty()) row.notes += "; " + why;
    }
    double ms = 0.0;
    if (Status s = time_median_ms([&op, stream] { return op.run(stream); }, options_.warmup_iterations,
                                  options_.profiling_iterations, stream, &ms);
        !s) {
      if (!fail("timing", s)) return false;
      continue;
    }
    row.runtime_ms = ms;
    row.gbps = (double(elements) * 2 + double(out_bytes)) / (ms * 1e-3) / 1e9;  // bf16 read once, output written
    report->add(row);
  }
  return true;
}

}  // namespace fp8attn::profiler
