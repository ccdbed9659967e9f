// Quantize: the stages of a quantization (kernels/quantize/quantize_triton.py), planned once in initialize().
//
//   rotate, head_dim <= 128:    rotation(diag(signs) H into the workspace)     read by stats and apply
//   smooth:                     stats(sums of x) -> reduce(mean, then rotated)   the mean over the sequence
//   computed per tensor / head: stats(amax of y - mean) -> reduce(descale)       the descales
//   always:                     apply (per block: computes and writes its own descale)
//
// The apply is the Triton kernel (one program per block) or, for rotated recipes where it applies (not unsmoothed
// ones at D=64: gluon_apply_preferred), the Gluon one (the "_gluon" instances, kernels/quantize/quantize_apply_gluon.py:
// persistent, x and the output through TMA descriptors, [b, s, h, d] outputs only); both write the same bytes.

#include "fp8attn/quant/device/quantize.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "fp8attn/fmha/device/transpose_v.h"
#include "generated/kernel_params.h"
#include "generated/numerics.h"
#include "quant/quantize_kernel_config.h"
#include "quant/smooth_sample.h"
#include "runtime/argument_checks.h"
#include "runtime/cuda_driver.h"
#include "runtime/kernel_instance.h"
#include "runtime/launcher.h"
#include "runtime/module_cache.h"
#include "runtime/param_pack.h"
#include "runtime/tensor_map.h"

namespace fp8attn::quant {

char const* to_string(Granularity g) {
  switch (g) {
    case Granularity::kPerTensor: return "tensor";
    case Granularity::kPerHead: return "head";
    case Granularity::kPerBlock: return "block";
    case Granularity::kPerBlockPair: return "block_pair";
  }
  return "unknown";
}

char const* to_string(OutputLayout layout) {
  switch (layout) {
    case OutputLayout::kBSHD: return "bshd";
    case OutputLayout::kVt: return "vt";
    case OutputLayout::kVtKeyPermuted: return "vt_kperm";
  }
  return "unknown";
}

int smooth_sample_stride_for(int seqlen) {
  int const blocks = seqlen <= 0 ? 0 : (seqlen - 1) / kQuantizeBlockTokens + 1;
  return std::max(1, std::min(8, blocks / 4));
}

namespace {

using detail::QuantizeKernelConfig;
using detail::QuantizeStage;
using fp8attn::detail::KernelInstance;
using Arguments = QuantizeArguments;

std::string num(int64_t v) { return std::to_string(v); }
QuantizeKernelConfig const& config(KernelInstance const& k) { return k.config_as<QuantizeKernelConfig>(); }
bool vt_layout(Arguments const& a) { return a.layout != OutputLayout::kBSHD; }
int heads_kv_of(Arguments const& a) { return a.heads_kv == 0 ? a.heads : a.heads_kv; }
float qmax_of(DataType t) { return t == DataType::kI8 ? 127.0f : 448.0f; }

int64_t blocks_of(Arguments const& a) {
  int64_t const tokens = vt_layout(a) ? fmha::padded_seqlen(a.seqlen) : a.seqlen;
  return (tokens + kQuantizeBlockTokens - 1) / kQuantizeBlockTokens;
}

bool needs_mean(Arguments const& a) { return a.smooth; }

/// The smoothing mean's block stride (the rule's where smooth_sample_stride is 0).
int sample_stride(Arguments const& a) {
  return a.smooth_sample_stride == 0 ? smooth_sample_stride_for(a.seqlen) : a.smooth_sample_stride;
}

/// Up to this head dim the kernels read the rotation matrix from the workspace; beyond it they factor it.
constexpr int kRotationTableMaxDim = static_cast<int>(generated::numerics::ROTATION_TABLE_MAX_HEAD_DIM);
bool needs_rotation_table(Arguments const& a) { return a.rotate && a.head_dim <= kRotationTableMaxDim; }
bool per_block(Arguments const& a) {
  return a.granularity == Granularity::kPerBlock || a.granularity == Granularity::kPerBlockPair;
}
bool needs_amax(Arguments const& a) { return !per_block(a) && !a.static_descale; }
/// Tokens per apply program: the 64-token blocks, or 128 for block_pair (codegen/operations/quantize.py).
int apply_block_tokens(Arguments const& a) {
  return a.granularity == Granularity::kPerBlockPair ? 2 * kQuantizeBlockTokens : kQuantizeBlockTokens;
}
bool is_gluon(KernelInstance const& k) { return k.family == library::KernelFamily::kGluon; }

/// A dimension's stride as the Gluon apply's TMA descriptor gets it: a dimension of extent 1 is never stepped, so
/// any stride serves there, and a zero one (which TMA refuses) becomes 16 elements.
int64_t tma_stride(int64_t stride, int64_t extent) { return extent == 1 && stride == 0 ? 16 : stride; }

/// A [b, s, h, d] tensor's strides (elements) as the Gluon apply's TMA descriptor gets them.
struct TmaStrides {
  int64_t v[4];
};
TmaStrides tma_strides(fmha::TensorRef const& t, Arguments const& a) {
  return {{tma_stride(t.stride_b, a.batch), tma_stride(t.stride_s, a.seqlen), tma_stride(t.stride_h, a.heads), 1}};
}

/// Whether the library's own pick is the Gluon apply (where it can take the call): for rotated recipes, where its
/// rotation matrix, loaded once per program, pays, except an unsmoothed one at D=64. Measured side by side
/// (docs/perf/NOTES.md, 2026-12-05 fourteenth session, two runs; both write the same bytes), Gluon against Triton:
/// smoothed and rotated int8 K -17% at D=128, -10% at D=64; rotated int8 Q -17% at D=128, +9% at D=64; unrotated
/// per-tensor e4m3 Q or K +9% / +17%. A preference, not a limit: where no Triton apply is compiled for the recipe,
/// the Gluon one serves; forced by name either runs.
bool gluon_apply_preferred(Arguments const& a) { return a.rotate && (a.smooth || a.head_dim == 128); }

/// Why the Gluon apply cannot take this call ("" when it can): it writes [b, s, h, d] only, and TMA wants every
/// stride of x and the output positive (the validated ones are multiples of 16 elements) and below 2^40 bytes
/// (tma_stride's substitute where a dimension has extent 1). An empty problem launches nothing: "".
std::string gluon_apply_refusal(Arguments const& a) {
  if (vt_layout(a)) return std::string("layout=") + to_string(a.layout) + " (it writes [b, s, h, d] only)";
  if (a.batch == 0 || a.seqlen == 0) return "";
  for (auto [tensor, t, bytes] : {std::tuple<char const*, fmha::TensorRef const*, int>{"input", &a.input,
                                                                                      size_of(a.input_type)},
                                  {"output", &a.output, 1}}) {
    TmaStrides const strides = tma_strides(*t, a);
    char const* const fields[3] = {"stride_b", "stride_s", "stride_h"};
    int64_t const given[3] = {t->stride_b, t->stride_s, t->stride_h};
    for (int i = 0; i < 3; ++i) {
      if (strides.v[i] <= 0 || static_cast<__int128>(strides.v[i]) * bytes >= (__int128{1} << 40)) {
        return std::string(tensor) + "." + fields[i] + "=" + num(given[i]) + " (TMA takes strides in (0, 2^40) bytes)";
      }
    }
  }
  return "";
}

/// The instance of a stage for these arguments: by name, or the first in manifest order that takes them (for the
/// apply with preferred_only, a Gluon apply only where gluon_apply_preferred says so).
KernelInstance const* find(QuantizeStage stage, Arguments const& a, std::string const& name = {},
                           bool preferred_only = false) {
  for (size_t i = 0; i < fp8attn::detail::kNumKernelInstances; ++i) {
    KernelInstance const& k = *fp8attn::detail::kKernelInstances[i];
    if (k.kind != library::OperationKind::kQuantize) continue;
    QuantizeKernelConfig const& c = config(k);
    if (!name.empty()) {
      if (name == k.name) return &k;
      continue;
    }
    if (c.stage != stage) continue;
    if (stage == QuantizeStage::kReduce) return &k;
    if (stage == QuantizeStage::kRotation) {
      if (c.in_type == a.input_type) return &k;
      continue;
    }
    if (c.in_type != a.input_type || c.head_dim != a.head_dim) continue;
    if (stage == QuantizeStage::kStats && c.block_s != kQuantizeBlockTokens) continue;
    if (stage == QuantizeStage::kApply &&
        (c.out_type != a.output_type || c.block_s != apply_block_tokens(a) ||
         c.key_permuted != (a.layout == OutputLayout::kVtKeyPermuted) ||
         (is_gluon(k) && ((preferred_only && !gluon_apply_preferred(a)) || !gluon_apply_refusal(a).empty())))) {
      continue;
    }
    return &k;
  }
  return nullptr;
}

/// The apply instance (forced or chosen) and the stats / reduce / rotation instances its options need.
struct Instances {
  KernelInstance const* apply = nullptr;
  KernelInstance const* stats = nullptr;
  KernelInstance const* reduce = nullptr;
  KernelInstance const* rotation = nullptr;
};

Status select(Arguments const& a, Instances* out) {
  std::string const what = std::string(to_string(a.input_type)) + " -> " + to_string(a.output_type) +
                           ", head_dim=" + num(a.head_dim) + ", layout=" + to_string(a.layout) +
                           (a.granularity == Granularity::kPerBlockPair ? ", granularity=block_pair" : "");
  if (!a.kernel_name.empty()) {
    out->apply = find(QuantizeStage::kApply, a, a.kernel_name);
    if (!out->apply) {
      return Status(StatusCode::kErrorKernelNotFound, "kernel_name=" + a.kernel_name + " is not a compiled quantize instance");
    }
    QuantizeKernelConfig const& c = config(*out->apply);
    if (c.stage != QuantizeStage::kApply) {
      return Status(StatusCode::kErrorNotSupported,
                    "kernel_name=" + a.kernel_name + " is an internal stage of quantize, not an apply instance");
    }
    if (c.in_type != a.input_type || c.out_type != a.output_type || c.head_dim != a.head_dim ||
        c.key_permuted != (a.layout == OutputLayout::kVtKeyPermuted)) {
      return Status(StatusCode::kErrorNotSupported, "kernel_name=" + a.kernel_name + " does not quantize " + what);
    }
    if (c.block_s != apply_block_tokens(a)) {
      return Status(StatusCode::kErrorNotSupported,
                    "kernel_name=" + a.kernel_name + " quantizes blocks of " + num(c.block_s) + " tokens, granularity=" +
                        to_string(a.granularity) + " blocks of " + num(apply_block_tokens(a)));
    }
    if (is_gluon(*out->apply)) {
      if (std::string const why = gluon_apply_refusal(a); !why.empty()) {
        return Status(StatusCode::kErrorNotSupported,
                      "kernel_name=" + a.kernel_name + " (the Gluon apply) cannot take " + why);
      }
    }
  } else {
    // The preferred apply first; any that takes the call where the preferred one is not compiled (a filtered build).
    out->apply = find(QuantizeStage::kApply, a, {}, /*preferred_only=*/true);
    if (!out->apply) out->apply = find(QuantizeStage::kApply, a);
    if (!out->apply) {
      return Status(StatusCode::kErrorNotSupported, "no compiled quantize instance for " + what + " in this build");
    }
  }
  if (needs_mean(a) || needs_amax(a)) {
    out->stats = find(QuantizeStage::kStats, a);
    out->reduce = find(QuantizeStage::kReduce, a);
    if (!out->stats || !out->reduce) {
      return Status(StatusCode::kErrorNotSupported, "no compiled quantize statistics stage for " + what);
    }
  }
  if (needs_rotation_table(a)) {
    out->rotation = find(QuantizeStage::kRotation, a);
    if (!out->rotation) {
      return Status(StatusCode::kErrorNotSupported, "no compiled quantize rotation stage for " + what);
    }
  }
  return Status::success();
}

/// Null pointers pass here: validate() refuses them first where they matter (an empty problem reads nothing).
Status check_aligned(char const* field, void const* ptr, uintptr_t alignment) {
  return fp8attn::detail::check_aligned(field, ptr, alignment, /*allow_null=*/true);
}

using fp8attn::detail::check_strides;

/// [first, last) byte range a [b, s, h, d] tensor with these strides touches.
std::pair<uintptr_t, uintptr_t> extent(fmha::TensorRef const& t, Arguments const& a, int element_bytes) {
  __int128 last = 0;
  last += static_cast<__int128>(a.batch - 1) * t.stride_b + static_cast<__int128>(a.seqlen - 1) * t.stride_s +
          static_cast<__int128>(a.heads - 1) * t.stride_h + (a.head_dim - 1);
  auto const first = reinterpret_cast<uintptr_t>(t.ptr);
  return {first, first + static_cast<uintptr_t>((last + 1) * element_bytes)};
}

bool overlap(std::pair<uintptr_t, uintptr_t> x, std::pair<uintptr_t, uintptr_t> y) {
  return x.first < y.second && y.first < x.second;
}

/// Every check of can_implement except the instance choice.
Status validate(Arguments const& a) {
  if (a.batch < 0) return Status(StatusCode::kErrorInvalidProblem, "batch=" + num(a.batch) + " must be >= 0");
  if (a.seqlen < 0) return Status(StatusCode::kErrorInvalidProblem, "seqlen=" + num(a.seqlen) + " must be >= 0");
  if (a.heads < 1) return Status(StatusCode::kErrorInvalidProblem, "heads=" + num(a.heads) + " must be >= 1");
  if (a.head_dim < 1) return Status(StatusCode::kErrorInvalidProblem, "head_dim=" + num(a.head_dim) + " must be >= 1");
  if (a.heads_kv < 0 || (a.heads_kv > 0 && a.heads % a.heads_kv != 0)) {
    return Status(StatusCode::kErrorInvalidProblem,
                  "heads_kv=" + num(a.heads_kv) + " must divide heads=" + num(a.heads) + " (or be 0)");
  }
  if (a.input_type != DataType::kBF16 && a.input_type != DataType::kF16) {
    return Status(StatusCode::kErrorNotSupported, std::string("input_type=") + to_string(a.input_type) +
                                                      " is not a quantize input (bf16, f16)");
  }
  if (a.output_type != DataType::kE4M3 && a.output_type != DataType::kI8) {
    return Status(StatusCode::kErrorNotSupported, std::string("output_type=") + to_string(a.output_type) +
                                                      " is not a quantize output (e4m3, i8)");
  }
  if (vt_layout(a) && a.output_type != DataType::kE4M3) {
    return Status(StatusCode::kErrorNotSupported, std::string("layout=") + to_string(a.layout) +
                                                      " is the FP8 P.V operand: output_type must be e4m3, not " +
                                                      to_string(a.output_type));
  }
  if (a.rotate && (a.head_dim & (a.head_dim - 1)) != 0) {
    return Status(StatusCode::kErrorNotSupported,
                  "rotate=true needs a power-of-two head_dim (the Hadamard matrix), not head_dim=" + num(a.head_dim));
  }
  if (a.smooth_sample_stride < 0 || (a.smooth_sample_stride > 1 && !a.smooth)) {
    return Status(StatusCode::kErrorInvalidProblem,
                  "smooth_sample_stride=" + num(a.smooth_sample_stride) +
                      (a.smooth_sample_stride < 0 ? " must be >= 0 (0: the library's rule, 1: every token)"
                                                  : " samples the smoothing mean: it needs smooth=true (or 0 / 1)"));
  }
  if (a.static_descale && per_block(a)) {
    return Status(StatusCode::kErrorInvalidProblem, std::string("static_descale is per tensor or per head; granularity=") +
                                                        to_string(a.granularity) + " computes every block's descale");
  }
  if (a.granularity == Granularity::kPerBlockPair && vt_layout(a)) {
    return Status(StatusCode::kErrorNotSupported, std::string("granularity=block_pair writes [b, s, h, d] (K), not "
                                                              "layout=") + to_string(a.layout));
  }
  if (a.static_descale && a.descale) {
    return Status(StatusCode::kErrorInvalidProblem, "descale must be null with a static_descale (nothing is computed)");
  }
  if (static_cast<__int128>(a.batch) * a.heads * blocks_of(a) > INT32_MAX) {
    return Status(StatusCode::kErrorNotSupported, "batch * heads * blocks of " + num(kQuantizeBlockTokens) +
                                                      " tokens exceeds 2^31-1 programs");
  }
  if (a.batch == 0 || a.seqlen == 0) return Status::success();
  if (!a.input.ptr) return Status(StatusCode::kErrorNullPointer, "input.ptr is null");
  if (!a.output.ptr) return Status(StatusCode::kErrorNullPointer, "output.ptr is null");
  if (!a.descale && !a.static_descale) {
    return Status(StatusCode::kErrorNullPointer, "descale is null (and no static_descale is given)");
  }
  if (Status s = check_aligned("input.ptr", a.input.ptr, 16); !s) return s;
  if (Status s = check_aligned("output.ptr", a.output.ptr, 16); !s) return s;
  if (Status s = check_aligned("descale", a.descale, 4); !s) return s;
  if (Status s = check_aligned("static_descale", a.static_descale, 4); !s) return s;
  if (Status s = check_strides("input", a.input); !s) return s;
  if (!vt_layout(a)) {
    if (Status s = check_strides("output", a.output); !s) return s;
  }
  // Refuse outputs that overlap the input or each other (the kernels read and write in parallel).
  auto const in = extent(a.input, a, size_of(a.input_type));
  std::pair<uintptr_t, uintptr_t> out;
  if (vt_layout(a)) {
    auto const first = reinterpret_cast<uintptr_t>(a.output.ptr);
    out = {first, first + device::Quantize::output_bytes(a)};
  } else {
    out = extent(a.output, a, 1);
  }
  if (overlap(in, out)) return Status(StatusCode::kErrorInvalidProblem, "output overlaps input");
  if (a.descale) {
    auto const first = reinterpret_cast<uintptr_t>(a.descale);
    std::pair<uintptr_t, uintptr_t> const d{first, first + device::Quantize::descale_count(a) * sizeof(float)};
    if (overlap(d, in)) return Status(StatusCode::kErrorInvalidProblem, "descale overlaps input");
    if (overlap(d, out)) return Status(StatusCode::kErrorInvalidProblem, "descale overlaps output");
  }
  return Status::success();
}

struct Workspace {
  size_t rotation_offset = 0, rotation_bytes = 0;  // [head_dim, head_dim] in the input type
  size_t mean_offset = 0, mean_bytes = 0;      // [batch, heads, head_dim]
  size_t sums_offset = 0, sums_bytes = 0;      // [batch, heads, blocks, head_dim]
  size_t amax_offset = 0, amax_bytes = 0;      // [batch, heads, blocks]
  size_t descale_offset = 0, descale_bytes = 0;  // computed per-tensor/per-head descales when a.descale is null
  size_t total = 0;
};

size_t align_up(size_t v) { return (v + 255) / 256 * 256; }

Workspace plan_workspace(Arguments const& a) {
  Workspace w;
  size_t const bh = static_cast<size_t>(a.batch) * a.heads;
  size_t const blocks = static_cast<size_t>(blocks_of(a));
  if (needs_rotation_table(a)) {
    w.rotation_bytes = static_cast<size_t>(a.head_dim) * a.head_dim * size_of(a.input_type);
    w.total = align_up(w.rotation_bytes);
  }
  if (needs_mean(a)) {
    w.mean_offset = w.total;
    w.mean_bytes = bh * a.head_dim * sizeof(float);
    w.sums_offset = w.mean_offset + align_up(w.mean_bytes);
    w.sums_bytes = bh * blocks * a.head_dim * sizeof(float);
    w.total = w.sums_offset + align_up(w.sums_bytes);
  }
  if (needs_amax(a)) {
    w.amax_offset = w.total;
    w.amax_bytes = bh * blocks * sizeof(float);
    w.total = w.amax_offset + align_up(w.amax_bytes);
  }
  return w;
}

}  // namespace

namespace device {

struct Quantize::Plan {
  struct Launch {
    CUfunction function = nullptr;
    runtime::LaunchConfig config;
    runtime::ParamPack params;
    char const* name = "";
  };
  std::vector<Launch> launches;
};

Status Quantize::can_implement(Arguments const& a) {
  if (Status s = validate(a); !s) return s;
  Instances instances;
  return select(a, &instances);
}

Status Quantize::select_kernel(Arguments const& a, std::string* name) {
  Instances instances;
  if (Status s = select(a, &instances); !s) return s;
  if (name) *name = instances.apply->name;
  return Status::success();
}

size_t Quantize::get_workspace_size(Arguments const& a) {
  if (!can_implement(a)) return 0;
  if (a.batch == 0 || a.seqlen == 0) return 0;
  return plan_workspace(a).total;
}

size_t Quantize::descale_count(Arguments const& a) {
  if (a.static_descale || a.batch < 0 || a.heads < 1 || a.seqlen < 0) return 0;
  switch (a.granularity) {
    case Granularity::kPerTensor: return 1;
    case Granularity::kPerHead: return static_cast<size_t>(a.batch) * heads_kv_of(a);
    case Granularity::kPerBlock:
    case Granularity::kPerBlockPair: return static_cast<size_t>(a.batch) * a.heads * blocks_of(a);
  }
  return 0;
}

size_t Quantize::output_bytes(Arguments const& a) {
  if (a.batch <= 0 || a.seqlen <= 0 || a.heads < 1 || a.head_dim < 1) return 0;
  if (vt_layout(a)) return static_cast<size_t>(a.batch) * a.heads * a.head_dim * fmha::padded_seqlen(a.seqlen);
  auto const [first, last] = extent(a.output, a, size_of(a.output_type));
  return last - first;
}

Status Quantize::initialize(Arguments const& a, void* workspace, StreamHandle) {
  plan_.reset();
  if (Status s = validate(a); !s) return s;
  Instances instances;
  if (Status s = select(a, &instances); !s) return s;
  auto plan = std::make_shared<Plan>();
  if (a.batch == 0 || a.seqlen == 0) {
    plan_ = std::move(plan);
    return Status::success();
  }
  Workspace const w = plan_workspace(a);
  if (w.total > 0 && !workspace) {
    return Status(StatusCode::kErrorNullPointer,
                  "workspace is null; these options need " + std::to_string(w.total) + " bytes (get_workspace_size)");
  }
  if (Status s = check_aligned("workspace", workspace, 256); !s) return s;
  fp8attn::detail::CudaDriver const* driver = nullptr;
  if (Status s = fp8attn::detail::cuda_driver(&driver); !s) return s;

  auto* const base = static_cast<char*>(workspace);
  void* const rotation = needs_rotation_table(a) ? base + w.rotation_offset : nullptr;
  float* const mean = needs_mean(a) ? reinterpret_cast<float*>(base + w.mean_offset) : nullptr;
  float* const sums = needs_mean(a) ? reinterpret_cast<float*>(base + w.sums_offset) : nullptr;
  float* const amax = needs_amax(a) ? reinterpret_cast<float*>(base + w.amax_offset) : nullptr;
  int64_t const blocks = blocks_of(a);
  int64_t const bh = int64_t{a.batch} * a.heads;
  int32_t const seed = static_cast<int32_t>(a.rotation_seed);  // the kernel reinterprets it as uint32

  auto add = [&](KernelInstance const& k, int64_t programs, char const* name, auto const& pack) -> Status {
    Plan::Launch l;
    if (Status s = fp8attn::detail::get_function(*driver, k, &l.function); !s) return s;
    l.config = runtime::LaunchConfig::for_instance(k, static_cast<unsigned>(programs));
    pack(l.params);
    l.name = name;
    plan->launches.push_back(std::move(l));
    return Status::success();
  };
  // One program per block read: what 0 (the smoothing sums) reads blocks 0, stride, 2 * stride, ... (blocks_read
  // of them a head), what 1 (the amax) every block.
  auto stats = [&](int what, int64_t stride, int64_t blocks_read) {
    return add(*instances.stats, bh * blocks_read, "quantize stats", [&](runtime::ParamPack& p) {
      generated::QuantizeStatsTritonParams sp;
      sp.X = a.input.ptr;
      sp.Mean = mean;
      sp.Rotation = rotation;
      sp.PartialSum = sums;
      sp.PartialAmax = amax;
      sp.seqlen = a.seqlen;
      sp.heads = a.heads;
      sp.num_blocks = static_cast<int32_t>(blocks_read);
      sp.seed = seed;
      sp.rotate = a.rotate;
      sp.smooth = a.smooth;
      sp.what = what;
      sp.sample_stride = static_cast<int32_t>(stride);
      sp.stride_xb = a.input.stride_b;
      sp.stride_xh = a.input.stride_h;
      sp.stride_xs = a.input.stride_s;
      sp.pack(p);
    });
  };
  // rotate: the mean's reduction rotates the mean of x (stats sums x unrotated; the rotation is linear).
  auto reduce = [&](float const* partial, float* out, int64_t groups, int64_t count, int width, float divisor,
                    bool rotate) {
    return add(*instances.reduce, groups, "quantize reduce", [&](runtime::ParamPack& p) {
      generated::QuantizeReduceTritonParams rp;
      rp.Partial = partial;
      rp.Out = out;
      rp.count = static_cast<int32_t>(count);
      rp.width = width;
      rp.divisor = divisor;
      rp.qmax = qmax_of(a.output_type);
      rp.seed = seed;
      rp.rotate = rotate;
      rp.pack(p);
    });
  };

  if (needs_rotation_table(a)) {
    if (Status s = add(*instances.rotation, 1, "quantize rotation",
                       [&](runtime::ParamPack& p) {
                         generated::QuantizeRotationTritonParams rp;
                         rp.Rotation = rotation;
                         rp.width = a.head_dim;
                         rp.seed = seed;
                         rp.pack(p);
                       });
        !s) {
      return s;
    }
  }
  if (needs_mean(a)) {
    int64_t const stride = sample_stride(a);
    int64_t const sampled = (blocks + stride - 1) / stride;
    if (Status s = stats(0, stride, sampled); !s) return s;
    if (Status s = reduce(sums, mean, bh, sampled, a.head_dim,
                          static_cast<float>(detail::sampled_tokens(a.seqlen, stride)), a.rotate);
        !s) {
      return s;
    }
  }
  int64_t group = 1;  // consecutive (batch, head) rows sharing one descale
  if (a.granularity == Granularity::kPerTensor) group = bh;
  if (a.granularity == Granularity::kPerHead) group = a.heads / heads_kv_of(a);
  if (needs_amax(a)) {
    if (group * blocks > INT32_MAX) {
      return Status(StatusCode::kErrorNotSupported, "granularity=tensor over " + num(group * blocks) +
                                                        " blocks exceeds the reduction's 2^31-1");
    }
    if (Status s = stats(1, 1, blocks); !s) return s;
    if (Status s = reduce(amax, a.descale, bh / group, group * blocks, 1, 0.0f, false); !s) return s;
  }
  float const* const descale = a.static_descale ? a.static_descale : a.descale;
  // The apply's blocks: the 64-token blocks, or (block_pair) 128-token ones, each writing its two descale entries.
  int64_t const apply_blocks =
      a.granularity == Granularity::kPerBlockPair ? (a.seqlen + apply_block_tokens(a) - 1) / apply_block_tokens(a)
                                                  : blocks;
  // A PERSISTENT apply (codegen's apply_programs_per_sm) walks the blocks from a grid of so many programs an SM.
  int64_t apply_programs = bh * apply_blocks;
  if (int const per_sm = config(*instances.apply).programs_per_sm; per_sm > 0) {
    int sms = 0;
    if (Status s = fp8attn::detail::multiprocessor_count(*driver, &sms); !s) return s;
    apply_programs = std::min<int64_t>(apply_programs, int64_t{per_sm} * sms);
    // The kernel's int32 item index steps by the grid past the last item once.
    if (bh * apply_blocks > INT32_MAX - apply_programs) {
      return Status(StatusCode::kErrorNotSupported,
                    "batch * heads * blocks of " + num(apply_block_tokens(a)) + " tokens (" + num(bh * apply_blocks) +
                        ") plus the persistent grid (" + num(apply_programs) + " programs) exceeds 2^31-1");
    }
  }
  // The scalars both apply kernels take, by field name.
  auto fill_apply = [&](auto& ap) {
    ap.Descale = descale;
    ap.Mean = mean;
    ap.Rotation = rotation;
    ap.seqlen = a.seqlen;
    ap.heads = a.heads;
    ap.num_blocks = static_cast<int32_t>(apply_blocks);
    ap.rotate = a.rotate;
    ap.smooth = a.smooth;
    ap.per_block = per_block(a);
    ap.group = static_cast<int32_t>(group);
    ap.num_items = static_cast<int32_t>(bh * apply_blocks);
  };
  if (is_gluon(*instances.apply)) {
    // x and the output through TMA descriptors ([b, s, h, d], a box of one block of one head; TMA zero-fills the
    // rows past seqlen and drops their stores).
    KernelInstance const& k = *instances.apply;
    if (k.num_tensor_descs != 2) return Status(StatusCode::kErrorInternal, "quantize apply (Gluon): expected 2 descriptors");
    generated::QuantizeApplyGluonParams gp;
    int64_t const shape[4] = {a.batch, a.seqlen, a.heads, a.head_dim};
    if (Status s = runtime::make_tensor_map_param(*driver, k.tensor_descs[0], a.input.ptr, shape,
                                                  tma_strides(a.input, a).v, &gp.x_desc);
        !s) {
      return s;
    }
    if (Status s = runtime::make_tensor_map_param(*driver, k.tensor_descs[1], a.output.ptr, shape,
                                                  tma_strides(a.output, a).v, &gp.out_desc);
        !s) {
      return s;
    }
    fill_apply(gp);
    if (Status s = add(k, apply_programs, "quantize apply", [&](runtime::ParamPack& p) { gp.pack(p); }); !s) return s;
  } else if (Status s = add(*instances.apply, apply_programs, "quantize apply",
                            [&](runtime::ParamPack& p) {
                              generated::QuantizeApplyTritonParams ap;
                              fill_apply(ap);
                              ap.X = a.input.ptr;
                              ap.Out = a.output.ptr;
                              ap.seed = seed;
                              // The apply kernel is compiled with seqlen_pad divisible by 16 (its V^T stores are
                              // 16 bytes wide; codegen/operations/quantize.py).
                              static_assert(fmha::kVtSeqAlign % 16 == 0, "quantize apply assumes 16 | seqlen_pad");
                              ap.seqlen_pad = static_cast<int32_t>(fmha::padded_seqlen(a.seqlen));
                              ap.vt = vt_layout(a);
                              ap.stride_xb = a.input.stride_b;
                              ap.stride_xh = a.input.stride_h;
                              ap.stride_xs = a.input.stride_s;
                              ap.stride_ob = a.output.stride_b;
                              ap.stride_oh = a.output.stride_h;
                              ap.stride_os = a.output.stride_s;
                              ap.pack(p);
                            });
             !s) {
    return s;
  }
  plan_ = std::move(plan);
  return Status::success();
}

Status Quantize::run(StreamHandle stream) {
  if (!plan_) return Status(StatusCode::kErrorNotInitialized, "run() called before a successful initialize()");
  if (plan_->launches.empty()) return Status::success();
  fp8attn::detail::CudaDriver const* driver = nullptr;
  if (Status s = fp8attn::detail::cuda_driver(&driver); !s) return s;
  for (Plan::Launch const& l : plan_->launches) {
    if (Status s = runtime::launch(*driver, l.function, l.config, l.params, reinterpret_cast<CUstream>(stream), l.name);
        !s) {
      return s;
    }
  }
  return Status::success();
}

Status Quantize::operator()(Arguments const& a, void* workspace, StreamHandle stream) {
  if (Status s = initialize(a, workspace, stream); !s) return s;
  return run(stream);
}

}  // namespace device
}  // namespace fp8attn::quant
