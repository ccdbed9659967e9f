// PagedDecode and PagedAppend: validation, instance choice, split planning, launch plans.

#include "fp8attn/paged/device/paged.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstdio>
#include <string>
#include <tuple>
#include <utility>

#include "generated/kernel_params.h"
#include "paged/decode_grid.h"
#include "paged/paged_kernel_config.h"
#include "runtime/argument_checks.h"
#include "runtime/cuda_driver.h"
#include "runtime/kernel_instance.h"
#include "runtime/launcher.h"
#include "runtime/module_cache.h"
#include "runtime/param_pack.h"
#include "runtime/tensor_map.h"

namespace fp8attn::paged {
namespace {

// Whether the combine is launched as a programmatic dependent of the decode: yes unless FP8ATTN_NO_PDL=1
// (profilers, or comparing the two). Read once: initialize() runs on every Python decode call.
bool combine_under_decode() {
  static bool const under = [] {
    char const* no_pdl = std::getenv("FP8ATTN_NO_PDL");
    return !(no_pdl && no_pdl[0] == '1' && no_pdl[1] == '\0');
  }();
  return under;
}

using detail::PagedKernelConfig;
using detail::PagedStage;
using fp8attn::detail::KernelInstance;
using fmha::TensorRef;

/// The automatic split choice: a launch of fewer programs than an H200 has SMs (132) is split into as many programs
/// as fit at once, two per SM (the decode instances' registers allow two), never more: a second, partial wave
/// costs more than the splits gain (measured at batch 8, 128k: 5 splits, 320 programs, 1.30 TB/s; 4 splits, 256
/// programs, 1.78). The split count changes speed and the order of the final sums, nothing else.
constexpr int64_t kSplitBelowPrograms = 132;
constexpr int64_t kTargetPrograms = 264;
/// A split reads at least this many pages (fewer makes the combine cost more than the split saves).
constexpr int64_t kMinPagesPerSplit = 4;
/// The head-pair decode (two kv heads per work item) is the pick from this many pair items, splits counted (pairs x
/// splits): about two per SM, where its 2-stage ring keeps as many bytes in flight per SM as the one-head instance's
/// two CTAs of 4 stages. H200 (2026-12-04, sweep_decode.py, TB/s, pairs / one head): 256 items (64, 8k) 4.36 / 4.25,
/// 512 (128, 4k) 4.34 / 4.19, 1024 (256, 2k) 4.08 / 3.95; 128 items of one split (32, 32k) 3.21 / 4.38. An instance
/// whose record has pair_splits splits fewer pairs than kSplitBelowPrograms over the keys like one-head items (each
/// head's rows into its own partials): (32, 32k) would run 128 pairs x 2 splits, (8, 128k) 32 pairs x 8; the others
/// run one split, so only from kPairMinItems pairs.
constexpr int64_t kPairMinItems = 256;
/// New tokens per sequence: 1-8 is decode (speculative tokens); more is chunked prefill (a chunk of new queries
/// over the cache, its own keys appended first), correct at any size here but each program of 64 query rows
/// reads the sequence's pages again, so long chunks cost that many passes over the cache.
constexpr int kMaxQueryTokens = 4096;

std::string num(int64_t v) { return std::to_string(v); }
PagedKernelConfig const& config(KernelInstance const& k) { return k.config_as<PagedKernelConfig>(); }

Status invalid(std::string text) { return Status(StatusCode::kErrorInvalidProblem, std::move(text)); }

using fp8attn::detail::check_aligned;
using fp8attn::detail::check_strides;

/// Shapes and pointers of the cache (what the host knows).
Status check_cache(PagedCache const& c) {
  if (c.num_pages < 1) return invalid("cache.num_pages=" + num(c.num_pages) + " must be >= 1");
  if (c.max_pages < 1) return invalid("cache.max_pages=" + num(c.max_pages) + " must be >= 1");
  if (c.heads_kv < 1) return invalid("cache.heads_kv=" + num(c.heads_kv) + " must be >= 1");
  if (int64_t{c.max_pages} * std::max(c.page_size, 1) > INT32_MAX) {
    // The kernels compare token positions with max_pages * page_size in 32 bits.
    return invalid("cache.max_pages=" + num(c.max_pages) + " x cache.page_size=" + num(c.page_size) +
                   " tokens per sequence must be < 2^31");
  }
  if (c.descale_stride_page < 0 || c.descale_stride_head < 0) {
    return invalid("cache descale strides (page=" + num(c.descale_stride_page) + ", head=" +
                   num(c.descale_stride_head) + ") must be >= 0");
  }
  if (static_cast<__int128>(c.num_pages) * c.page_size * c.heads_kv * c.head_dim > (int64_t{1} << 46)) {
    return invalid("cache of " + num(c.num_pages) + " pages is larger than 2^46 bytes");
  }
  for (auto [field, ptr, align] : {std::tuple<char const*, void const*, uintptr_t>{"cache.k_pages", c.k_pages, 16},
                                   {"cache.v_pages", c.v_pages, 16}, {"cache.k_descale", c.k_descale, 4},
                                   {"cache.v_descale", c.v_descale, 4}, {"cache.block_table", c.block_table, 4}}) {
    if (Status s = check_aligned(field, ptr, align); !s) return s;
  }
  return Status::success();
}

bool is_gluon(KernelInstance const& k) { return k.family == library::KernelFamily::kGluon; }

/// The instance of `stage` for pages of `page` tokens at `head_dim` (decode: for `rows` query rows per kv head),
/// or the one named `name`. with_gluon: whether the Gluon decode may be picked (it has no soft-capping);
/// head_pairs: among the head-pair decode instances (two kv heads per work item) instead of the others.
KernelInstance const* find(PagedStage stage, int page, int head_dim, int rows, std::string const& name,
                           bool with_gluon = true, bool head_pairs = false) {
  KernelInstance const* best = nullptr;
  for (size_t i = 0; i < fp8attn::detail::kNumKernelInstances; ++i) {
    KernelInstance const& k = *fp8attn::detail::kKernelInstances[i];
    if (k.kind != library::OperationKind::kPaged) continue;
    PagedKernelConfig const& c = config(k);
    if (!name.empty()) {
      if (name == k.name) return &k;
      continue;
    }
    if (c.stage != stage || c.head_dim != head_dim || (stage != PagedStage::kCombine && c.page != page)) continue;
    if (is_gluon(k) && !with_gluon) continue;
    // Head-pair instances: the calls that name them, or find_head_pairs's choice.
    if (c.head_pairs != head_pairs) continue;
    if (stage == PagedStage::kAppend) return &k;
    if (stage == PagedStage::kCombine) {
      if (c.rows == rows) return &k;
      continue;
    }
    // Decode: the fewest rows that hold them all, else the most rows (the rows then come in chunks); between a
    // Triton and a Gluon instance of the same rows the Gluon one (MQA's 32 rows at pages of 64: 2.31 against 1.69
    // TB/s, H100, docs/perf/NOTES.md 2026-12-05).
    bool const fits = c.rows >= rows;
    bool const gluon_tie = best && c.rows == config(*best).rows && is_gluon(k) && !is_gluon(*best);
    if (!best || (fits && (config(*best).rows < rows || c.rows < config(*best).rows || gluon_tie)) ||
        (!fits && config(*best).rows < rows && (c.rows > config(*best).rows || gluon_tie))) {
      best = &k;
    }
  }
  return best;
}

int64_t rows_of(PagedDecodeArguments const& a) { return int64_t{a.q_len} * (a.heads_q / std::max(1, a.cache.heads_kv)); }

Status validate(PagedDecodeArguments const& a) {
  if (a.batch < 0) return invalid("batch=" + num(a.batch) + " must be >= 0");
  if (a.q_len < 1 || a.q_len > kMaxQueryTokens) {
    return invalid("q_len=" + num(a.q_len) + " must be in [1, " + num(kMaxQueryTokens) + "]");
  }
  if (Status s = check_cache(a.cache); !s) return s;
  if (a.heads_q < 1 || a.heads_q % a.cache.heads_kv != 0) {
    return invalid("heads_q=" + num(a.heads_q) + " is not a multiple of cache.heads_kv=" + num(a.cache.heads_kv));
  }
  if (a.max_seqlen < 0 || int64_t{a.max_seqlen} > int64_t{a.cache.max_pages} * a.cache.page_size) {
    return invalid("max_seqlen=" + num(a.max_seqlen) + " must be in [0, cache.max_pages * cache.page_size = " +
                   num(int64_t{a.cache.max_pages} * a.cache.page_size) + "]");
  }
  if (a.num_splits < 0) return invalid("num_splits=" + num(a.num_splits) + " must be >= 0 (0: automatic)");
  if (a.window_left < -1) return invalid("window_left=" + num(a.window_left) + " must be >= 0, or -1 for unlimited");
  if (!(a.softcap >= 0.0f) || a.softcap > 3.0e38f) {
    return invalid("softcap=" + std::to_string(a.softcap) + " must be finite and >= 0 (0: none)");
  }
  if (!(a.softmax_scale >= 0.0f) || a.softmax_scale > 3.0e38f) {
    return invalid("softmax_scale=" + std::to_string(a.softmax_scale) + " must be finite and >= 0");
  }
  if (a.batch == 0) return Status::success();
  if (Status s = check_aligned("cache.seqlens", a.cache.seqlens, 4); !s) return s;
  if (Status s = check_aligned("q.ptr", a.q.ptr, 16); !s) return s;
  if (Status s = check_aligned("o.ptr", a.o.ptr, 16); !s) return s;
  if (Status s = check_strides("q", a.q); !s) return s;
  return check_strides("o", a.o);
}

/// Whether the Gluon decode can run this call: it has no soft-capping, and its TMA coordinates are 32-bit (row
/// (page * heads_kv + kv head) * head_dim of the V^T pages, one page past the cache included).
bool gluon_fits(PagedDecodeArguments const& a) {
  return a.softcap == 0.0f &&
         (int64_t{a.cache.num_pages} + 1) * a.cache.heads_kv * a.cache.head_dim <= int64_t{INT32_MAX};
}

struct DecodeInstances {
  KernelInstance const* decode = nullptr;
  KernelInstance const* combine = nullptr;
};

int splits_for(PagedDecodeArguments const& a, KernelInstance const& decode);

/// The head-pair decode instance for this call when the heuristic should take it, else null: kv heads in pairs
/// (even heads_kv), each head's rows in half of the instance's, at least kPairMinItems work items (pairs x the split
/// count, the caller's or automatic; fewer leave SMs with one CTA's ring in flight; more than one split only where
/// the instance splits pairs), the Gluon decode allowed.
KernelInstance const* find_head_pairs(PagedDecodeArguments const& a) {
  if (!a.kernel_name.empty() || !gluon_fits(a) || a.cache.heads_kv % 2 != 0 || 2 * rows_of(a) > INT32_MAX) {
    return nullptr;
  }
  // An instance takes a pair's rows, twice one head's, only if they fit it (find falls back to fewer rows).
  int const pair_rows = static_cast<int>(2 * rows_of(a));
  KernelInstance const* k = find(PagedStage::kDecode, a.cache.page_size, a.cache.head_dim, pair_rows, {},
                                 /*with_gluon=*/true, /*head_pairs=*/true);
  if (!k || config(*k).rows < pair_rows) return nullptr;
  int64_t const splits = splits_for(a, *k);
  if (splits > 1 && !config(*k).pair_splits) return nullptr;
  return int64_t{a.batch} * (a.cache.heads_kv / 2) * splits >= kPairMinItems ? k : nullptr;
}

/// The decode instance this call runs before any check of it (select): the one named, or the heuristic's pick.
KernelInstance const* find_decode(PagedDecodeArguments const& a) {
  if (KernelInstance const* pairs = find_head_pairs(a)) return pairs;
  return find(PagedStage::kDecode, a.cache.page_size, a.cache.head_dim,
              static_cast<int>(std::min<int64_t>(rows_of(a), INT32_MAX)), a.kernel_name, gluon_fits(a));
}

Status select(PagedDecodeArguments const& a, DecodeInstances* out) {
  out->decode = find_decode(a);
  if (!out->decode) {
    if (!a.kernel_name.empty()) {
      return Status(StatusCode::kErrorKernelNotFound, "kernel_name=" + a.kernel_name + " is not a compiled paged instance");
    }
    return Status(StatusCode::kErrorNotSupported, "no compiled paged decode instance for cache.page_size=" +
                                                      num(a.cache.page_size) + ", cache.head_dim=" +
                                                      num(a.cache.head_dim) + " (compiled pages: 16, 64; head dims 64, 128)");
  }
  PagedKernelConfig const& c = config(*out->decode);
  if (c.stage != PagedStage::kDecode || c.page != a.cache.page_size || c.head_dim != a.cache.head_dim) {
    return Status(StatusCode::kErrorNotSupported,
                  "kernel_name=" + a.kernel_name + " does not decode pages of " + num(a.cache.page_size) +
                      " tokens at head_dim=" + num(a.cache.head_dim));
  }
  if (is_gluon(*out->decode) && !gluon_fits(a)) {
    return Status(StatusCode::kErrorNotSupported,
                  "kernel_name=" + a.kernel_name + " (the Gluon decode) takes no soft-capping (softcap=" +
                      std::to_string(a.softcap) + ") and caches of fewer than 2^31 / (heads_kv * head_dim) pages "
                      "(cache.num_pages=" + num(a.cache.num_pages) + "): a Triton decode instance runs those");
  }
  if (c.head_pairs) {
    // Two kv heads per work item (kernels/paged/paged_decode_gluon.py HEAD_PAIRS): each head's rows in half of the
    // instance's, heads in pairs; split (pair_splits), each head's rows go to its own partials.
    if (a.cache.heads_kv % 2 != 0) {
      return Status(StatusCode::kErrorNotSupported, "kernel_name=" + a.kernel_name + " decodes kv heads in pairs: " +
                                                        "cache.heads_kv=" + num(a.cache.heads_kv) + " is odd");
    }
    if (2 * rows_of(a) > c.rows) {
      return Status(StatusCode::kErrorNotSupported,
                    "kernel_name=" + a.kernel_name + " takes at most " + num(c.rows / 2) + " query rows per kv head (" +
                        "q_len=" + num(a.q_len) + " x heads_q / cache.heads_kv=" + num(a.heads_q / a.cache.heads_kv) +
                        " = " + num(rows_of(a)) + ")");
    }
    // Without pair_splits automatic splits plan one for it (automatic_splits); only a caller's count can ask more.
    if (a.num_splits > 1 && !c.pair_splits) {
      return Status(StatusCode::kErrorNotSupported,
                    "kernel_name=" + a.kernel_name + " runs one split (num_splits=" + num(a.num_splits) +
                        "); pass num_splits=0 or 1, or another instance");
    }
  }
  out->combine = find(PagedStage::kCombine, 0, c.head_dim, c.rows, {});
  if (!out->combine) return Status(StatusCode::kErrorNotSupported, "no compiled combine for " + std::string(out->decode->name));
  return Status::success();
}

int64_t row_chunks(PagedDecodeArguments const& a, int rows) { return (rows_of(a) + rows - 1) / rows; }

/// The decode's work items (the Triton kernel's programs): (sequence, kv head, chunk of rows, split), or with a
/// head-pair instance (sequence, pair of kv heads, split), one chunk (select checks).
int64_t work_items(PagedDecodeArguments const& a, KernelInstance const& decode, int64_t splits) {
  PagedKernelConfig const& c = config(decode);
  int64_t const items = int64_t{a.batch} * a.cache.heads_kv * row_chunks(a, c.rows) * splits;
  return c.head_pairs ? items / 2 : items;
}

/// The keys the splits must cover per sequence: all of max_seqlen, or with a window the keys some row can see
/// plus the kernel's alignment of the window's start down to a whole iteration (block_n - 1 at most).
int64_t planned_keys(PagedDecodeArguments const& a, int block_n) {
  if (a.window_left < 0) return a.max_seqlen;
  return std::min<int64_t>(a.max_seqlen, int64_t{a.window_left} + a.q_len + block_n - 1);
}

/// No compiled decode iteration is longer than this: the split plan's key count allows for a window's alignment to
/// the longest iteration, whatever the instance (the same count for every instance keeps the plan simple).
constexpr int kMaxBlockN = 256;

/// The decode parameters both kernels share (the Triton and the Gluon decode take the same arguments after their
/// cache operands).
template <class Params>
void fill_decode_params(PagedDecodeArguments const& a, void* partial_o, void* partial_ml, void* scratch,
                        int32_t pages_per_split, int splits, int64_t chunks, Params* p) {
  p->Q = a.q.ptr;
  p->KDescale = a.cache.k_descale;
  p->VDescale = a.cache.v_descale;
  p->BlockTable = a.cache.block_table;
  p->Seqlens = a.cache.seqlens;
  p->O = a.o.ptr;
  p->PartialO = partial_o;
  p->PartialML = partial_ml;
  p->global_scratch = scratch;
  p->softmax_scale = a.softmax_scale > 0 ? a.softmax_scale : 1.0f / std::sqrt(static_cast<float>(a.cache.head_dim));
  p->q_len = a.q_len;
  p->heads_q = a.heads_q;
  p->heads_kv = a.cache.heads_kv;
  p->num_pages = a.cache.num_pages;
  p->max_pages = a.cache.max_pages;
  p->pages_per_split = pages_per_split;
  p->num_splits = splits;
  p->row_chunks = static_cast<int32_t>(chunks);
  p->stride_qb = a.q.stride_b;
  p->stride_qs = a.q.stride_s;
  p->stride_qh = a.q.stride_h;
  p->stride_ob = a.o.stride_b;
  p->stride_os = a.o.stride_s;
  p->stride_oh = a.o.stride_h;
  p->descale_stride_page = a.cache.descale_stride_page;
  p->descale_stride_head = a.cache.descale_stride_head;
  p->window_left = a.window_left;
  p->softcap = a.softcap;
}

}  // namespace

namespace {

/// The automatic split count for a call that runs `decode` (null: none fits; its rows then count as chunks of 16).
/// A launch of fewer programs than kSplitBelowPrograms is split into about kTargetPrograms. The programs before
/// splitting are the instance's: one per row chunk of its rows (32 query rows are one program on a 32-row instance,
/// MQA's case; counting chunks of 16 whatever the instance gave MQA half the splits that fill the GPU: 128
/// programs for 264 slots, H200 1.31 TB/s against 1.64-1.70 in the sweep with 8 splits).
int automatic_splits(PagedDecodeArguments const& a, KernelInstance const* decode) {
  int64_t const pages =
      (planned_keys(a, kMaxBlockN) + std::max(1, a.cache.page_size) - 1) / std::max(1, a.cache.page_size);
  bool const is_decode = decode && config(*decode).stage == PagedStage::kDecode;
  int const rows = is_decode ? config(*decode).rows : 16;
  int64_t programs = std::max<int64_t>(1, int64_t{a.batch} * std::max(1, a.cache.heads_kv) *
                                              std::max<int64_t>(1, (rows_of(a) + rows - 1) / rows));
  if (is_decode && config(*decode).head_pairs) {
    // One split only without pair_splits (select refuses more); with it, the programs are pairs of kv heads (each
    // one chunk: select checks the rows fit).
    if (!config(*decode).pair_splits) return 1;
    programs = std::max<int64_t>(1, programs / 2);
  }
  if (programs >= kSplitBelowPrograms) return 1;
  int64_t const wanted = kTargetPrograms / programs;
  return static_cast<int>(std::clamp<int64_t>(std::min(wanted, pages / kMinPagesPerSplit), 1, 256));
}

/// The split count of a call whose decode instance is chosen (select): the caller's, or the automatic one.
int splits_for(PagedDecodeArguments const& a, KernelInstance const& decode) {
  return a.num_splits > 0 ? a.num_splits : automatic_splits(a, &decode);
}

}  // namespace

namespace device {

int PagedDecode::splits_of(Arguments const& a) {
  if (a.num_splits > 0) return a.num_splits;
  return automatic_splits(a, find_decode(a));
}

char const* PagedDecode::instance_of(Arguments const& a) {
  KernelInstance const* decode = find_decode(a);
  return decode ? decode->name : nullptr;
}

struct PagedDecode::Plan {
  bool empty = true;
  char const* name = "";
  CUfunction decode = nullptr, combine = nullptr;
  runtime::LaunchConfig decode_launch, combine_launch;
  runtime::ParamPack decode_params, combine_params;
  bool split = false;
};

Status PagedDecode::can_implement(Arguments const& a) {
  if (Status s = validate(a); !s) return s;
  DecodeInstances instances;
  return select(a, &instances);
}

namespace {

/// The decode's workspace: the split-KV partials (none with one split: the decode writes O itself), O's then the
/// (max, sum) pairs, and the per-program global scratch an instrumented build's decode asks for (ConSan's
/// bookkeeping; 0 bytes in a normal build), sized for one program per work item (the grid is never larger).
struct DecodeWorkspace {
  int64_t splits = 1, programs = 0;  ///< the call's split count and work items (one program per item)
  size_t ml_offset = 0, ml_bytes = 0, scratch_offset = 0, scratch_bytes = 0, total = 0;
};

DecodeWorkspace decode_workspace(PagedDecodeArguments const& a, KernelInstance const& decode) {
  auto align = [](size_t x) { return (x + 255) / 256 * 256; };
  int const rows = config(decode).rows;
  int64_t const splits = splits_for(a, decode);
  int64_t const programs = work_items(a, decode, splits);
  DecodeWorkspace w;
  w.splits = splits;
  w.programs = programs;
  if (splits > 1) {
    // The partials are laid out per (sequence, kv head, row chunk, split) whatever the instance (the combine's
    // layout; a head-pair item writes two heads' slots).
    auto const slots = static_cast<size_t>(int64_t{a.batch} * a.cache.heads_kv * row_chunks(a, rows) * splits);
    w.ml_offset = align(slots * rows * a.cache.head_dim * sizeof(float));
    w.ml_bytes = slots * rows * 2 * sizeof(float);
    w.total = align(w.ml_offset + w.ml_bytes);
  }
  if (decode.global_scratch_bytes > 0) {
    w.scratch_offset = w.total;
    w.scratch_bytes = static_cast<size_t>(programs) * static_cast<size_t>(decode.global_scratch_bytes);
    w.total = align(w.scratch_offset + w.scratch_bytes);
  }
  return w;
}

}  // namespace

size_t PagedDecode::get_workspace_size(Arguments const& a) {
  if (!can_implement(a) || a.batch == 0) return 0;
  DecodeInstances instances;
  select(a, &instances);
  return decode_workspace(a, *instances.decode).total;
}

Status PagedDecode::initialize(Arguments const& a, void* workspace, StreamHandle) {
  plan_.reset();
  if (Status s = validate(a); !s) return s;
  DecodeInstances instances;
  if (Status s = select(a, &instances); !s) return s;
  auto plan = std::make_shared<Plan>();
  plan->name = instances.decode->name;
  if (a.batch == 0) {
    plan_ = std::move(plan);
    return Status::success();
  }
  DecodeWorkspace const w = decode_workspace(a, *instances.decode);
  size_t const ws = w.total;
  if (ws > 0 && !workspace) {
    return Status(StatusCode::kErrorNullPointer,
                  "workspace is null; this call needs " + std::to_string(ws) + " bytes (get_workspace_size) for " +
                      (w.ml_bytes ? (w.scratch_bytes ? "the split-KV partials and the decode's global scratch"
                                                     : "the split-KV partials")
                                  : "the decode's global scratch"));
  }
  if (ws > 0) {
    // The scratch starts on a 256-byte offset; its kernel may ask more of the base than the partials' 16 bytes.
    uintptr_t const align = w.scratch_bytes ? std::max<uintptr_t>(16, instances.decode->global_scratch_align) : 16;
    if (Status s = check_aligned("workspace", workspace, align); !s) return s;
  }
  fp8attn::detail::CudaDriver const* driver = nullptr;
  if (Status s = fp8attn::detail::cuda_driver(&driver); !s) return s;
  if (Status s = fp8attn::detail::get_function(*driver, *instances.decode, &plan->decode); !s) return s;
  int const rows = config(*instances.decode).rows;
  int64_t const chunks = row_chunks(a, rows);
  int const splits = static_cast<int>(w.splits);
  int const block_n = config(*instances.decode).block_n;
  int64_t const pages = (planned_keys(a, block_n) + a.cache.page_size - 1) / a.cache.page_size;
  int64_t const programs = w.programs;
  if (programs > INT32_MAX) return Status(StatusCode::kErrorNotSupported, "more than 2^31-1 decode programs");
  auto* const ws_bytes = static_cast<char*>(workspace);
  // Every split covers the same number of pages of the longest sequence; shorter sequences leave late splits empty.
  // A split starts on a whole iteration of the kernel's BLOCK_N keys (BLOCK_N / page pages when pages are small).
  int64_t const pages_per_iteration = std::max(1, block_n / a.cache.page_size);
  int64_t const per_split = std::max<int64_t>(1, (pages + splits - 1) / splits);
  auto const pages_per_split =
      static_cast<int32_t>((per_split + pages_per_iteration - 1) / pages_per_iteration * pages_per_iteration);
  // The split-KV partials (the workspace), none with one split: the decode writes O itself.
  void* const partial_o_arg = splits > 1 ? ws_bytes : nullptr;
  void* const partial_ml = splits > 1 ? ws_bytes + w.ml_offset : nullptr;
  void* const scratch = w.scratch_bytes > 0 ? ws_bytes + w.scratch_offset : nullptr;
  int64_t launch_programs = programs;
  if (is_gluon(*instances.decode)) {
    // The cache through two TMA descriptors: K pages as [num_pages * page, heads_kv * head_dim], V^T pages as
    // [num_pages * heads_kv * head_dim, page], or at pages of 16 in rows of 128 bytes (below; kernels/paged/
    // paged_decode_gluon.py).
    if (instances.decode->num_tensor_descs != 2) {
      return Status(StatusCode::kErrorInternal, "paged decode (Gluon): expected 2 descriptors");
    }
    PagedCache const& c = a.cache;
    generated::PagedDecodeGluonParams p;
    if (Status s = runtime::make_tensor_map_param(*driver, instances.decode->tensor_descs[0], c.k_pages,
                                                  {int64_t{c.num_pages} * c.page_size, int64_t{c.heads_kv} * c.head_dim},
                                                  {int64_t{c.heads_kv} * c.head_dim, 1}, &p.k_desc);
        !s) {
      return s;
    }
    // An unswizzled V^T box (pages of 16) reads a page's slice as rows of the box's width (128 bytes: 16 TMA rows
    // for 2 KB, not 128 rows of 16 bytes; codegen/operations/paged.py: gluon_vt_box): the same bytes viewed so.
    fp8attn::detail::TensorDescMeta const& vt_meta = instances.decode->tensor_descs[1];
    int64_t const vt_row = vt_meta.swizzle == 0 ? int64_t{vt_meta.block[1]} : c.page_size;
    if (Status s = runtime::make_tensor_map_param(*driver, instances.decode->tensor_descs[1], c.v_pages,
                                                  {int64_t{c.num_pages} * c.heads_kv * c.head_dim * c.page_size / vt_row,
                                                   vt_row},
                                                  {vt_row, 1}, &p.vt_desc);
        !s) {
      return s;
    }
    fill_decode_params(a, partial_o_arg, partial_ml, scratch, pages_per_split, splits, chunks, &p);
    // Persistent: each program walks work items program_id, program_id + grid, ... with its K/V ring running on
    // from one item into the next; the grid is gluon_decode_grid's.
    p.num_items = static_cast<int32_t>(programs);
    int sms = 0;
    if (Status s = fp8attn::detail::multiprocessor_count(*driver, &sms); !s) return s;
    launch_programs = detail::gluon_decode_grid(programs, instances.decode->shared_bytes,
                                                int64_t{32} * instances.decode->launch_warps,
                                                config(*instances.decode).max_registers, sms);
    p.pack(plan->decode_params);
  } else {
    generated::PagedDecodeTritonParams p;
    p.KPages = a.cache.k_pages;
    p.VPages = a.cache.v_pages;
    fill_decode_params(a, partial_o_arg, partial_ml, scratch, pages_per_split, splits, chunks, &p);
    p.pack(plan->decode_params);
  }
  plan->decode_launch = runtime::LaunchConfig::for_instance(*instances.decode, static_cast<unsigned>(launch_programs));
  if (splits > 1) {
    if (Status s = fp8attn::detail::get_function(*driver, *instances.combine, &plan->combine); !s) return s;
    generated::PagedCombineTritonParams c;
    c.PartialO = partial_o_arg;
    c.PartialML = partial_ml;
    c.O = a.o.ptr;
    c.q_len = a.q_len;
    c.heads_q = a.heads_q;
    c.heads_kv = a.cache.heads_kv;
    c.num_splits = splits;
    c.row_chunks = static_cast<int32_t>(chunks);
    c.stride_ob = a.o.stride_b;
    c.stride_os = a.o.stride_s;
    c.stride_oh = a.o.stride_h;
    c.pack(plan->combine_params);
    // One combine program per query row (kernels/paged/paged_decode_triton.py: paged_combine_kernel).
    int64_t const combine_programs = int64_t{a.batch} * a.cache.heads_kv * chunks * rows;
    if (combine_programs > INT32_MAX) {
      return Status(StatusCode::kErrorNotSupported,
                    "batch=" + num(a.batch) + " x cache.heads_kv=" + num(a.cache.heads_kv) + " x " + num(chunks * rows) +
                        " query rows per kv head need more than 2^31-1 combine programs");
    }
    plan->combine_launch = runtime::LaunchConfig::for_instance(*instances.combine,
                                                               static_cast<unsigned>(combine_programs));
    // Launched under the decode's tail; the combine waits for the decode's partials itself (gdc_wait).
    plan->combine_launch.after_previous_kernel = combine_under_decode();
    plan->split = true;
  }
  plan->empty = false;
  plan_ = std::move(plan);
  return Status::success();
}

Status PagedDecode::run(StreamHandle stream) {
  if (!plan_) return Status(StatusCode::kErrorNotInitialized, "run() called before a successful initialize()");
  if (plan_->empty) return Status::success();
  fp8attn::detail::CudaDriver const* driver = nullptr;
  if (Status s = fp8attn::detail::cuda_driver(&driver); !s) return s;
  auto const st = reinterpret_cast<CUstream>(stream);
  if (Status s = runtime::launch(*driver, plan_->decode, plan_->decode_launch, plan_->decode_params, st, "paged decode");
      !s) {
    return s;
  }
  if (!plan_->split) return Status::success();
  return runtime::launch(*driver, plan_->combine, plan_->combine_launch, plan_->combine_params, st, "paged combine");
}

Status PagedDecode::operator()(Arguments const& a, void* workspace, StreamHandle stream) {
  if (Status s = initialize(a, workspace, stream); !s) return s;
  return run(stream);
}

char const* PagedDecode::kernel_name() const { return plan_ ? plan_->name : ""; }

// ---- append ---------------------------------------------------------------------------------------------------

struct PagedAppend::Plan {
  bool empty = true;
  CUfunction function = nullptr;
  runtime::LaunchConfig launch;
  runtime::ParamPack params;
};

namespace {

Status validate_append(PagedAppendArguments const& a, KernelInstance const** instance) {
  if (a.batch < 0) return invalid("batch=" + num(a.batch) + " must be >= 0");
  if (a.new_tokens < 0) return invalid("new_tokens=" + num(a.new_tokens) + " must be >= 0");
  if (Status s = check_cache(a.cache); !s) return s;
  *instance = find(PagedStage::kAppend, a.cache.page_size, a.cache.head_dim, 0, a.kernel_name);
  if (!*instance || config(**instance).stage != PagedStage::kAppend || config(**instance).page != a.cache.page_size ||
      config(**instance).head_dim != a.cache.head_dim) {
    if (!a.kernel_name.empty() && !*instance) {
      return Status(StatusCode::kErrorKernelNotFound, "kernel_name=" + a.kernel_name + " is not a compiled paged instance");
    }
    return Status(StatusCode::kErrorNotSupported, "no compiled paged append instance for cache.page_size=" +
                                                      num(a.cache.page_size) + ", cache.head_dim=" +
                                                      num(a.cache.head_dim));
  }
  if (a.batch == 0 || a.new_tokens == 0) return Status::success();
  if (Status s = check_aligned("positions", a.positions, 4); !s) return s;
  for (auto [name, t] : {std::pair<char const*, TensorRef const*>{"k", &a.k}, {"v", &a.v}}) {
    if (Status s = check_aligned(name == std::string("k") ? "k.ptr" : "v.ptr", t->ptr, 16); !s) return s;
    if (Status s = check_strides(name, *t); !s) return s;
  }
  if (static_cast<int64_t>(a.batch) * a.new_tokens * a.cache.heads_kv > INT32_MAX) {
    return Status(StatusCode::kErrorNotSupported, "batch * new_tokens * heads_kv exceeds 2^31-1 programs");
  }
  return Status::success();
}

}  // namespace

Status PagedAppend::can_implement(Arguments const& a) {
  KernelInstance const* instance = nullptr;
  return validate_append(a, &instance);
}

Status PagedAppend::initialize(Arguments const& a, StreamHandle) {
  plan_.reset();
  KernelInstance const* instance = nullptr;
  if (Status s = validate_append(a, &instance); !s) return s;
  auto plan = std::make_shared<Plan>();
  if (a.batch > 0 && a.new_tokens > 0) {
    fp8attn::detail::CudaDriver const* driver = nullptr;
    if (Status s = fp8attn::detail::cuda_driver(&driver); !s) return s;
    if (Status s = fp8attn::detail::get_function(*driver, *instance, &plan->function); !s) return s;
    generated::PagedAppendTritonParams p;
    p.K = a.k.ptr;
    p.V = a.v.ptr;
    p.KPages = a.cache.k_pages;
    p.VPages = a.cache.v_pages;
    p.KDescale = a.cache.k_descale;
    p.VDescale = a.cache.v_descale;
    p.BlockTable = a.cache.block_table;
    p.Positions = a.positions;
    p.new_tokens = a.new_tokens;
    p.heads_kv = a.cache.heads_kv;
    p.num_pages = a.cache.num_pages;
    p.max_pages = a.cache.max_pages;
    p.stride_kb = a.k.stride_b;
    p.stride_ks = a.k.stride_s;
    p.stride_kh = a.k.stride_h;
    p.stride_vb = a.v.stride_b;
    p.stride_vs = a.v.stride_s;
    p.stride_vh = a.v.stride_h;
    p.descale_stride_page = a.cache.descale_stride_page;
    p.descale_stride_head = a.cache.descale_stride_head;
    p.pack(plan->params);
    plan->launch = runtime::LaunchConfig::for_instance(
        *instance, static_cast<unsigned>(int64_t{a.batch} * a.new_tokens * a.cache.heads_kv));
    plan->empty = false;
  }
  plan_ = std::move(plan);
  return Status::success();
}

Status PagedAppend::run(StreamHandle stream) {
  if (!plan_) return Status(StatusCode::kErrorNotInitialized, "run() called before a successful initialize()");
  if (plan_->empty) return Status::success();
  fp8attn::detail::CudaDriver const* driver = nullptr;
  if (Status s = fp8attn::detail::cuda_driver(&driver); !s) return s;
  return runtime::launch(*driver, plan_->function, plan_->launch, plan_->params, reinterpret_cast<CUstream>(stream),
                         "paged append");
}

Status PagedAppend::operator()(Arguments const& a, StreamHandle stream) {
  if (Status s = initialize(a, stream); !s) return s;
  return run(stream);
}

}  // namespace device
}  // namespace fp8attn::paged
