// Which compiled instance runs a problem. Rule: the first instance in manifest order that supports the
// problem. The manifest lists its specialized fast paths (the warp-specialized "evenn" instance) before
// the general ones, and the default set before the extra instances of a full build, so the order is the
// preference (codegen/manifest.py records the measurements behind it). One exception: FP8 calls too small to
// matter on the GPU prefer the instances that transpose V on chip, which need one launch instead of two.

#include <string>
#include <unordered_map>

#include "fmha_internal.h"
#include "fmha_tuning.h"
#include "fp8attn/library/operation.h"
#include "runtime/cuda_driver.h"
#include "runtime/module_cache.h"

namespace fp8attn::fmha::detail {

using fp8attn::detail::kKernelInstances;
using fp8attn::detail::kNumKernelInstances;
using library::OperationKind;

bool takes_varlen(KernelInstance const& instance) {
  FmhaKernelConfig const& k = fmha_config(instance);
  // Gluon: the "_varlen" instances (up to head_dim 128), so that the dense ones carry no per-sequence code.
  if (instance.family == library::KernelFamily::kGluon) return k.varlen;
  return !k.even_n && !k.warp_specialized;
}

bool instance_supports(KernelInstance const& instance, Arguments const& args, std::string* why) {
  FmhaProblem const& p = args.problem;
  bool const wants_lse = args.lse != nullptr;
  // The message is built only when asked for (why != nullptr): the heuristic calls this on every run.
  auto fail = [&](auto make_text) {
    if (why) *why = make_text();
    return false;
  };
  if (instance.kind != OperationKind::kFmhaFwd) return fail([] { return std::string("it is not an attention kernel"); });
  FmhaKernelConfig const& k = fmha_config(instance);
  if (k.head_dim != p.head_dim) {
    return fail([&] {
      return "head_dim=" + std::to_string(p.head_dim) + " but the instance has head_dim=" + std::to_string(k.head_dim);
    });
  }
  if (k.qk_type != p.input_type) {
    return fail([&] {
      return std::string("input_type=") + to_string(p.input_type) + " but the instance reads " + to_string(k.qk_type);
    });
  }
  if (k.out_type != p.output_type) {
    return fail([&] {
      return std::string("output_type=") + to_string(p.output_type) + " but the instance writes " + to_string(k.out_type);
    });
  }
  if (k.causal != p.causal) {
    return fail([&] {
      return std::string("causal=") + (p.causal ? "true" : "false") + " but the instance is " +
             (k.causal ? "causal" : "non-causal");
    });
  }
  if (wants_lse && k.warp_specialized) {
    // Triton 3.6's warp-specialized loop hands back a wrong softmax frame (O is right, LSE is not).
    return fail([] { return std::string("lse was requested but warp-specialized instances do not write LSE"); });
  }
  if (k.even_n && p.seqlen_k % k.block_n != 0) {
    return fail([&] {
      return "seqlen_k=" + std::to_string(p.seqlen_k) + " is not a multiple of the instance's block_n=" +
             std::to_string(k.block_n) + " (evenn instances have no masked tail)";
    });
  }
  if (instance.family == library::KernelFamily::kGluon && p.seqlen_k == 0) {
    // Its K and V arrive as TMA descriptors, which cannot describe an empty (possibly null) tensor.
    return fail([] { return std::string("seqlen_k=0: the gluon instance takes K and V through TMA descriptors"); });
  }
  if (args.v_key_permuted && !k.v_key_permuted && p.batch > 0 && p.seqlen_k > 0) {
    return fail([] { return std::string("v_key_permuted=true but the instance reads V in key order (not vkperm)"); });
  }
  if (k.v_key_permuted && args.v.stride_d != 1 && !args.v_key_permuted) {
    return fail([&] {
      return "v.stride_d=" + std::to_string(args.v.stride_d) +
             " (V given sequence-contiguous) but the instance reads the key-permuted V^T that only fp8attn's own "
             "transpose writes (vkperm)";
    });
  }
  bool const gluon = instance.family == library::KernelFamily::kGluon;
  if (args.varlen() && !takes_varlen(instance)) {
    return fail([&] {
      return std::string("varlen (cu_seqlens) but the instance has no per-sequence offsets (") +
             (gluon ? "a gluon instance without _varlen" : k.even_n ? "evenn" : "warp-specialized") + ")";
    });
  }
  if (!args.varlen() && gluon && k.varlen) {
    return fail([] { return std::string("no cu_seqlens but the instance runs packed sequences only (_varlen)"); });
  }
  if (args.varlen() && needs_v_transpose(args, instance) &&
      varlen_vt_row(args.total_k, p.batch, varlen_vt_align(instance)) > INT32_MAX) {
    return fail([&] {
      return "total_k=" + std::to_string(args.total_k) + " keys of batch=" + std::to_string(p.batch) +
             " sequences: the varlen V^T row, " + std::to_string(varlen_vt_align(instance)) +
             "-column aligned per sequence for this instance, passes 2^31 elements";
    });
  }
  if (args.varlen() && gluon && args.total_k == 0) {
    // Its K and V arrive as TMA descriptors over the packed tensors, which cannot describe an empty one.
    return fail([] { return std::string("total_k=0 (no packed keys): the gluon instance takes K through TMA"); });
  }
  bool const window = args.window_left >= 0 || args.window_right >= 0;
  if (window && k.even_n) {
    return fail([&] {
      return "a sliding window (window_left=" + std::to_string(args.window_left) + ", window_right=" +
             std::to_string(args.window_right) + ") but the instance has no masked window path (evenn)";
    });
  }
  if ((args.softcap > 0.0f) != k.softcap) {
    return fail([&] {
      return args.softcap > 0.0f ? "softcap=" + std::to_string(args.softcap) + " but the instance does not soft-cap"
                                 : std::string("the instance soft-caps (softcap) but softcap=0");
    });
  }
  if ((args.q_descale.stride_block != 0 || args.k_descale.stride_block != 0) && !k.block_descale) {
    return fail([&] {
      return "per-block descales (q_descale.stride_block=" + std::to_string(args.q_descale.stride_block) +
             ", k_descale.stride_block=" + std::to_string(args.k_descale.stride_block) +
             ") but the instance reads one q and one k descale per program (not bdesc)";
    });
  }
  // One key block needs no stride (the kernel reads block 0; block 1 lies past seqlen_k and is masked).
  // (No pointer test: validate() refuses INT8 without k descales, and a substituted per-tensor 1.0 would be one
  // float, which these instances would read past.)
  if (k.k_descale_unit_stride && args.k_descale.stride_block != 1 && args.problem.seqlen_k > kDescaleBlockTokens) {
    return fail([&] {
      return "k_descale.stride_block=" + std::to_string(args.k_descale.stride_block) +
             " but the instance reads the k descales of consecutive 64-key blocks at stride 1 (as fp8attn's "
             "quantize(granularity=\"block\") writes them); other k descale layouts run on the Triton INT8 "
             "instances, which do not read a key-permuted V^T";
    });
  }
  if (k.k_descale_paired && !args.k_descale_paired) {
    return fail([] {
      return std::string("the instance reads one k descale per 128-key tile (kpair) but k_descale_paired=false "
                         "(set it when the k descales come in equal pairs, as the int8_qk quantization writes them)");
    });
  }
  if (k.v_fp8() && !k.v_transposed && args.v.stride_d != 1) {
    return fail([&] {
      return "v.stride_d=" + std::to_string(args.v.stride_d) +
             " but the instance reads V head_dim-contiguous (vnat); give V with stride_d=1";
    });
  }
  return true;
}

bool prefers_single_launch(Arguments const& args) {
  // At most 2^28 FLOPs (a few microseconds of GPU time even at vnat's rate): the separate V transpose's
  // launch (3-4 us of host time on the H200) would cost more than the on-chip transposition.
  constexpr double kTinyFlops = double(1 << 28);
  return is_fp8(args.problem.input_type) && args.v.stride_d == 1 && args.problem.flops() <= kTinyFlops;
}

KernelInstance const* find_transpose_instance(int head_dim, bool key_permuted, std::string const& name) {
  for (size_t i = 0; i < kNumKernelInstances; ++i) {
    KernelInstance const& k = *kKernelInstances[i];
    if (k.kind != OperationKind::kTransposeV) continue;
    TransposeVKernelConfig const& c = transpose_config(k);
    if (name.empty() ? c.head_dim == head_dim && c.key_permuted == key_permuted : name == k.name) return &k;
  }
  return nullptr;
}

KernelInstance const* tuned_instance(Arguments const& args, std::vector<TuningEntry> const& table,
                                    std::string_view gpu) {
  // Only the first matching entry (the smallest bucket holding seqlen_k): when its instance cannot run this
  // call (LSE asked for, a length the instance excludes), the manifest order decides, never an entry measured
  // for other lengths.
  for (TuningEntry const& e : table) {
    if (!entry_matches(e, gpu, args.problem, args.varlen())) continue;
    for (size_t i = 0; i < kNumKernelInstances; ++i) {
      KernelInstance const& k = *kKernelInstances[i];
      if (k.kind == OperationKind::kFmhaFwd && e.kernel == k.name) {
        return instance_supports(k, args, nullptr) ? &k : nullptr;
      }
    }
    return nullptr;
  }
  return nullptr;
}

KernelInstance const* paired_twin(KernelInstance const& instance) {
  // Built once: each per-block-descale instance -> the instance named like it with "_kpair" after "_bdesc" (the
  // name codegen gives its twin), when the build has one.
  static std::unordered_map<KernelInstance const*, KernelInstance const*> const twins = [] {
    std::unordered_map<std::string, KernelInstance const*> by_name;
    for (size_t i = 0; i < kNumKernelInstances; ++i) by_name.emplace(kKernelInstances[i]->name, kKernelInstances[i]);
    std::unordered_map<KernelInstance const*, KernelInstance const*> out;
    for (size_t i = 0; i < kNumKernelInstances; ++i) {
      KernelInstance const& k = *kKernelInstances[i];
      if (k.kind != OperationKind::kFmhaFwd || !fmha_config(k).block_descale || fmha_config(k).k_descale_paired) {
        continue;
      }
      std::string name = k.name;
      size_t const at = name.find("_bdesc");
      if (at == std::string::npos) continue;
      name.insert(at + 6, "_kpair");
      if (auto it = by_name.find(name); it != by_name.end()) out.emplace(&k, it->second);
    }
    return out;
  }();
  auto it = twins.find(&instance);
  return it == twins.end() ? nullptr : it->second;
}

namespace {

// The pick, or its kpair twin when the caller's k descales pair and the twin runs this call.
KernelInstance const* with_paired_twin(KernelInstance const* pick, Arguments const& args) {
  if (!args.k_descale_paired) return pick;
  KernelInstance const* twin = paired_twin(*pick);
  return twin && instance_supports(*twin, args, nullptr) ? twin : pick;
}

}  // namespace

Status select_instance(Arguments const& args, KernelInstance const** instance) {
  *instance = nullptr;
  if (!args.kernel_name.empty()) {
    for (size_t i = 0; i < kNumKernelInstances; ++i) {
      KernelInstance const& k = *kKernelInstances[i];
      if (k.kind == OperationKind::kFmhaFwd && args.kernel_name == k.name) {
        std::string why;
        if (!instance_supports(k, args, &why)) {
          return Status(StatusCode::kErrorNotSupported, "kernel_name=" + args.kernel_name + " cannot run this problem: " + why);
        }
        *instance = &k;
        return Status::success();
      }
    }
    return Status(StatusCode::kErrorKernelNotFound,
                  "kernel_name=" + args.kernel_name + " is not compiled in this build (list: fp8attn_profiler --list)");
  }
  // The tuning table first, when it has entries and a driver says which GPU this is (nothing otherwise: an
  // empty table costs one branch), except for calls small enough that one launch beats two (the pass below). A
  // GPU without rows of its own takes the reference GPU's (rows_gpu).
  // Packed sequences take only the rows naming "_varlen" instances, dense calls only the others (entry_matches):
  // a dense row's pick could send a varlen call to a Triton instance, the slow path for varlen.
  bool const tiny = prefers_single_launch(args);
  if (std::vector<TuningEntry> const& table = tuning_table(); !table.empty() && !tiny) {
    fp8attn::detail::CudaDriver const* driver = nullptr;
    std::string gpu;
    if (fp8attn::detail::cuda_driver(&driver) && fp8attn::detail::device_name(*driver, &gpu)) {
      if (KernelInstance const* tuned = tuned_instance(args, table, rows_gpu(table, gpu))) {
        *instance = with_paired_twin(tuned, args);
        return Status::success();
      }
    }
  }
  // Two passes in manifest order: the single-launch "vnat" instances (V transposed on chip) only for calls
  // small enough to be bound by launch latency, everything else otherwise (vnat's throughput is 2.4-3x lower;
  // codegen/manifest.py has the numbers).
  for (int pass = 0; pass < 2; ++pass) {
    for (size_t i = 0; i < kNumKernelInstances; ++i) {
      KernelInstance const& k = *kKernelInstances[i];
      if (k.kind != OperationKind::kFmhaFwd) continue;
      bool const vnat = fmha_config(k).fp8() && !fmha_config(k).v_transposed;
      if (vnat != (tiny && pass == 0)) continue;
      if (instance_supports(k, args, nullptr)) {
        *instance = with_paired_twin(&k, args);
        return Status::success();
      }
    }
  }
  FmhaProblem const& p = args.problem;
  return Status(StatusCode::kErrorNotSupported,
                std::string("no compiled instance for input_type=") + to_string(p.input_type) +
                    " output_type=" + to_string(p.output_type) + " head_dim=" + std::to_string(p.head_dim) +
                    " causal=" + (p.causal ? "true" : "false") +
                    (args.v_key_permuted ? " v_key_permuted=true (only the vkperm instances read it)" : "") +
                    (args.q_descale.stride_block || args.k_descale.stride_block
                         ? " with per-block q/k descales (only the bdesc instances apply them: INT8 Q.K^T)"
                         : "") +
                    (args.softcap > 0.0f ? " with softcap (only the softcap instances apply it)" : "") +
                    (p.input_type == DataType::kI8 && args.v_key_permuted && args.k_descale.stride_block != 1 &&
                             p.seqlen_k > kDescaleBlockTokens
                         ? " (INT8 with a key-permuted V^T runs on the Gluon instances only, which read k descales "
                           "per 64-key block at stride 1; k_descale.stride_block=" +
                               std::to_string(args.k_descale.stride_block) + ")"
                         : "") +
                    " (FP8ATTN_KERNELS filtered it out of this build?)");
}

}  // namespace fp8attn::fmha::detail
