#pragma once
// The invariants the argument fuzzer checks on what FmhaFwd did with one argument set. Written independently
// of src/fmha/fmha_validate.cpp (own overlap test, own 128-bit offset arithmetic) so that a bug there is not copied
// here. Pure: it judges an Observation, so --self-test can feed it deliberately wrong observations and
// prove that each check can fail.

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdint>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include "fp8attn/fmha/device/fmha_fwd.h"
#include "fp8attn/library/operation.h"

namespace fuzz {

using Args = fp8attn::fmha::device::FmhaFwd::Arguments;
using fp8attn::DataType;
using fp8attn::Status;
using fp8attn::StatusCode;
using fp8attn::fmha::DescaleRef;
using fp8attn::fmha::TensorRef;
using i128 = __int128;  // products of an int64 stride and an int extent never overflow it

constexpr i128 kInt64Max = std::numeric_limits<int64_t>::max();
constexpr i128 kInt64Min = std::numeric_limits<int64_t>::min();
constexpr size_t kWorkspaceLimit = size_t(1) << 50;  // 1 PiB: no device has it; more means an overflow
constexpr int64_t kVtSeqAlign = 32;                   // V^T rows are padded to 32 elements (docs/ARCHITECTURE.md)

/// What the library answered for one argument set.
struct Observation {
  Status status;                  ///< can_implement(args)
  size_t workspace = 0;           ///< get_workspace_size(args)
  bool selected_run = false;      ///< select_kernel was called (accepted sets only)
  Status select_status;
  std::string selected;
  bool initialize_run = false;    ///< initialize(args, nullptr) was called (accepted sets with workspace > 0)
  Status initialize_status;
};

enum Invariant {
  kStatusConsistent,       ///< ok() <=> code kSuccess <=> empty message
  kRefusalNamesArgument,   ///< a refusal's message names an argument ("q.", "head_dim=", "lse ", ...)
  kRefusedWorkspaceZero,   ///< get_workspace_size of a refused set is 0
  kOutputNoOverlap,        ///< accepted: no two elements of o share an address
  kOffsetsFitInt64,        ///< accepted: every operand's byte offsets (q, k, v, o, lse, descales) fit int64
  kWorkspaceNoOverflow,    ///< accepted: get_workspace_size < 2^50
  kWorkspaceHoldsVt,       ///< accepted, FP8 V head_dim-contiguous: workspace >= B*Hkv*D*round_up(Sk,16)
  kNullWorkspaceRefused,   ///< accepted, workspace > 0: initialize(args, nullptr) is kErrorWorkspaceNull
  kSelectAgrees,           ///< accepted: select_kernel succeeds, and returns kernel_name when one is forced
  kNumInvariants
};

inline char const* invariant_name(int i) {
  static char const* const names[kNumInvariants] = {
      "status_consistent",   "refusal_names_argument", "refused_workspace_zero",
      "output_no_overlap",   "offsets_fit_int64",      "workspace_no_overflow",
      "workspace_holds_vt",  "null_workspace_refused", "select_agrees"};
  return names[i];
}

struct Violation {
  Invariant which;
  std::string detail;
};

/// How often each invariant was checked and failed.
struct Tally {
  std::array<long, kNumInvariants> checked{};
  std::array<long, kNumInvariants> failed{};
};

inline std::string to_text(i128 v) {
  if (v == 0) return "0";
  bool negative = v < 0;
  unsigned __int128 u = negative ? -static_cast<unsigned __int128>(v) : static_cast<unsigned __int128>(v);
  std::string digits;
  while (u) {
    digits.insert(digits.begin(), char('0' + int(u % 10)));
    u /= 10;
  }
  return negative ? "-" + digits : digits;
}

/// Argument names a message may cite. A name counts when it stands alone (not inside a longer word: "to "
/// does not cite o) and is followed by '.', '=' or ' ' ("q.ptr", "head_dim=96", "lse has").
inline std::vector<std::string> const& argument_names() {
  static std::vector<std::string> const names = {
      "batch",     "heads_q",   "heads_kv",  "seqlen_q",      "seqlen_k",    "head_dim",  "causal",
      "input_type", "output_type", "q",     "k",             "v",           "o",         "lse",
      "q_descale", "k_descale", "v_descale", "softmax_scale", "kernel_name", "workspace"};
  return names;
}

inline bool names_argument(std::string const& message) {
  auto ident = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  for (std::string const& name : argument_names()) {
    for (size_t pos = message.find(name); pos != std::string::npos; pos = message.find(name, pos + 1)) {
      size_t end = pos + name.size();
      bool starts_word = pos == 0 || !ident(message[pos - 1]);
      bool followed = end < message.size() && (message[end] == '.' || message[end] == '=' || message[end] == ' ');
      if (starts_word && followed) return true;
    }
  }
  return false;
}

struct Dim {
  char const* field;
  int64_t stride;
  int64_t extent;
};

inline std::array<Dim, 4> dims_of(TensorRef const& t, int64_t batch, int64_t seqlen, int64_t heads, int64_t head_dim) {
  return {{{"stride_b", t.stride_b, batch}, {"stride_s", t.stride_s, seqlen}, {"stride_h", t.stride_h, heads},
           {"stride_d", t.stride_d, head_dim}}};
}

/// Whether two elements of the tensor share an address: sort the dimensions of extent > 1 by |stride|; each
/// must start at or past the end of the previous one (|stride| >= previous |stride| * previous extent), the
/// first at >= 1. An empty tensor (an extent <= 0) has no elements to overlap.
inline bool overlaps(TensorRef const& t, int64_t batch, int64_t seqlen, int64_t heads, int64_t head_dim, std::string* why) {
  std::vector<Dim> dims;
  for (Dim const& d : dims_of(t, batch, seqlen, heads, head_dim)) {
    if (d.extent <= 0) return false;
    if (d.extent > 1) dims.push_back(d);
  }
  auto magnitude = [](int64_t s) { return s < 0 ? -static_cast<i128>(s) : static_cast<i128>(s); };
  std::stable_sort(dims.begin(), dims.end(), [&](Dim const& a, Dim const& b) { return magnitude(a.stride) < magnitude(b.stride); });
  // Proof of disjointness, mixed-radix style: sorted by stride, each stride must exceed the largest offset the
  // smaller dimensions reach together (then the highest dimension in which two indices differ decides their
  // offsets apart). Anything this cannot prove disjoint counts as overlapping.
  i128 reach = 0;
  for (Dim const& d : dims) {
    if (magnitude(d.stride) <= reach || d.stride == 0) {
      *why = std::string(d.field) + "=" + std::to_string(d.stride) + " (extent " + std::to_string(d.extent) +
             ") <= " + to_text(reach) + ", the offset the smaller strides reach";
      return true;
    }
    reach += magnitude(d.stride) * (d.extent - 1);
  }
  return false;
}

/// Lowest and highest byte offset of any element from ptr, in 128 bits; false if the tensor is empty.
inline bool byte_range(std::vector<Dim> const& dims, int64_t element_bytes, i128* low, i128* high) {
  i128 lo = 0, hi = 0;
  for (Dim const& d : dims) {
    if (d.extent <= 0) return false;
    i128 reach = static_cast<i128>(d.stride) * (d.extent - 1);
    (reach < 0 ? lo : hi) += reach;
  }
  *low = lo * element_bytes;
  *high = hi * element_bytes;
  return true;
}

inline int64_t bytes_of(DataType t) { return std::max(1, fp8attn::size_of(t)); }

inline bool fp8_input(DataType t) { return t == DataType::kE4M3 || t == DataType::kE5M2; }

/// Checks every invariant that applies to (args, obs); counts them in *tally and returns the violations.
inline std::vector<Violation> check(Args const& a, Observation const& obs, Tally* tally) {
  std::vector<Violation> out;
  auto verify = [&](Invariant which, bool holds, std::string const& detail) {
    ++tally->checked[which];
    if (!holds) {
      ++tally->failed[which];
      out.push_back({which, detail});
    }
  };
  Status const& s = obs.status;
  bool accepted = s.ok();
  verify(kStatusConsistent, accepted == (s.code() == StatusCode::kSuccess) && accepted == s.message().empty(),
         "status " + s.to_string() + " with message '" + s.message() + "'");

  if (!accepted) {
    verify(kRefusalNamesArgument, s.code() != StatusCode::kSuccess && names_argument(s.message()),
           s.to_string() + " names no argument");
    verify(kRefusedWorkspaceZero, obs.workspace == 0,
           "refused (" + s.to_string() + ") but get_workspace_size=" + std::to_string(obs.workspace));
    return out;
  }

  auto const& p = a.problem;
  int64_t b = p.batch, hq = p.heads_q, hkv = p.heads_kv, sq = p.seqlen_q, sk = p.seqlen_k, d = p.head_dim;

  std::string why;
  bool o_overlaps = overlaps(a.o, b, sq, hq, d, &why);  // before the message is built from why
  verify(kOutputNoOverlap, !o_overlaps, "o overlaps itself: o." + why);

  // Byte offsets of every operand that is read or written.
  struct Operand {
    char const* name;
    std::vector<Dim> dims;
    int64_t bytes;
    bool present;
  };
  auto dims4 = [](TensorRef const& t, int64_t bb, int64_t ss, int64_t hh, int64_t dd) {
    auto a4 = dims_of(t, bb, ss, hh, dd);
    return std::vector<Dim>(a4.begin(), a4.end());
  };
  std::vector<Operand> operands = {
      {"q", dims4(a.q, b, sq, hq, d), bytes_of(p.input_type), true},
      {"k", dims4(a.k, b, sk, hkv, d), bytes_of(p.input_type), true},
      {"v", dims4(a.v, b, sk, hkv, d), bytes_of(p.input_type), true},
      {"o", dims4(a.o, b, sq, hq, d), bytes_of(p.output_type), true},
      // LSE is a packed [batch, heads_q, seqlen_q] float32 array.
      {"lse", {{"stride_b", hq * sq, b}, {"stride_h", sq, hq}, {"stride_s", 1, sq}}, 4, a.lse != nullptr},
  };
  for (auto [name, ref, seqlen] : {std::tuple<char const*, DescaleRef const*, int64_t>{"q_descale", &a.q_descale, sq},
                                   {"k_descale", &a.k_descale, sk}, {"v_descale", &a.v_descale, sk}}) {
    int64_t const blocks = (seqlen + 63) / 64;  // per-block descales: one per 64 query rows (q) or keys (k)
    operands.push_back({name,
                        {{"stride_b", ref->stride_b, b}, {"stride_h", ref->stride_h, hkv},
                         {"stride_head_q", ref->stride_head_q, hq}, {"stride_block", ref->stride_block, blocks}},
                        4, ref->ptr != nullptr});
  }
  for (Operand const& op : operands) {
    if (!op.present) continue;
    i128 lo = 0, hi = 0;
    if (!byte_range(op.dims, op.bytes, &lo, &hi)) continue;
    verify(kOffsetsFitInt64, lo >= kInt64Min && hi <= kInt64Max,
           std::string(op.name) + " byte offsets [" + to_text(lo) + ", " + to_text(hi) + "] overflow int64");
  }

  verify(kWorkspaceNoOverflow, obs.workspace < kWorkspaceLimit,
         "get_workspace_size=" + std::to_string(obs.workspace) + " >= 2^50");
  // An instance that transposes V on chip ("vnat", FmhaDescription::v_transposed false) needs no V^T.
  auto const* chosen = obs.selected_run && obs.select_status.ok() ? fp8attn::library::find_fmha_operation(obs.selected)
                                                                  : nullptr;
  bool const reads_vt = chosen == nullptr || chosen->v_transposed;
  if (fp8_input(p.input_type) && reads_vt && a.v.stride_d == 1 && b > 0 && sk > 0) {
    i128 padded = (static_cast<i128>(sk) + kVtSeqAlign - 1) / kVtSeqAlign * kVtSeqAlign;
    i128 vt = static_cast<i128>(b) * hkv * d * padded * bytes_of(p.input_type);
    verify(kWorkspaceHoldsVt, static_cast<i128>(obs.workspace) >= vt,
           "get_workspace_size=" + std::to_string(obs.workspace) + " < V^T bytes " + to_text(vt));
  }
  if (obs.initialize_run) {
    verify(kNullWorkspaceRefused, obs.initialize_status.code() == StatusCode::kErrorWorkspaceNull,
           "initialize(args, nullptr) with get_workspace_size=" + std::to_string(obs.workspace) + " gave " +
               obs.initialize_status.to_string());
  }
  if (obs.selected_run) {
    verify(kSelectAgrees, obs.select_status.ok() && (a.kernel_name.empty() || obs.selected == a.kernel_name),
           "select_kernel: " + (obs.select_status.ok() ? obs.selected : obs.select_status.to_string()) +
               " (kernel_name='" + a.kernel_name.substr(0, 120) + "')");
  }
  return out;
}

}  // namespace fuzz
