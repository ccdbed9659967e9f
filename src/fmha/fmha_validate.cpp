// FmhaFwd argument validation: every check that does not depend on which instance runs. Messages name the
// argument and its value. The success path builds no string (it runs on every call).

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>
#include <utility>

#include "fmha_internal.h"
#include "fp8attn/fmha/device/transpose_v.h"

namespace fp8attn::fmha::detail {
namespace {

constexpr int64_t kStrideAlign = 16;  // elements; the kernels are compiled with tt.divisibility=16 on strides
constexpr uintptr_t kPointerAlign = 16;
constexpr int64_t kMaxTmaStrideBytes = int64_t{1} << 40;  // TMA descriptors: strides below 2^40 bytes

Status invalid(std::string text) { return Status(StatusCode::kErrorInvalidProblem, std::move(text)); }
Status misaligned(std::string text) { return Status(StatusCode::kErrorMisalignedOperand, std::move(text)); }

// snprintf, not an ostream: the library also runs inside processes (Python, torch) whose iostream locale
// facets may come from another libstdc++ than the one it was built with.
std::string ptr_text(void const* p) {
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%p", p);
  return buffer;
}

std::string num(int64_t v) { return std::to_string(v); }

/// What this build compiled, computed once: input/output types and head dims per input type.
struct Catalog {
  unsigned in_types = 0, out_types = 0;  // bit per DataType
  unsigned dims_by_type[8] = {};         // bit 0: 64, bit 1: 128, bit 2: 256, bit 3: other
  static unsigned dim_bit(int d) { return d == 64 ? 1u : d == 128 ? 2u : d == 256 ? 4u : 8u; }
  std::string in_list, out_list, dims_list[8];

  Catalog() {
    for (size_t i = 0; i < fp8attn::detail::kNumKernelInstances; ++i) {
      KernelInstance const& k = *fp8attn::detail::kKernelInstances[i];
      if (k.kind != library::OperationKind::kFmhaFwd) continue;
      FmhaKernelConfig const& c = fmha_config(k);
      unsigned const t = static_cast<unsigned>(c.qk_type);
      if (!(in_types & (1u << t))) in_list += (in_list.empty() ? "" : ",") + std::string(to_string(c.qk_type));
      in_types |= 1u << t;
      if (!(out_types & (1u << static_cast<unsigned>(c.out_type)))) {
        out_list += (out_list.empty() ? "" : ",") + std::string(to_string(c.out_type));
      }
      out_types |= 1u << static_cast<unsigned>(c.out_type);
      dims_by_type[t] |= dim_bit(c.head_dim);
    }
    for (unsigned t = 0; t < 8; ++t) {
      for (int d : {64, 128, 256}) {
        if (dims_by_type[t] & dim_bit(d)) dims_list[t] += (dims_list[t].empty() ? "" : ",") + std::to_string(d);
      }
    }
  }
};

Catalog const& catalog() {
  static Catalog const c;
  return c;
}

Status check_problem(FmhaProblem const& p) {
  if (p.batch < 0) return invalid("batch=" + num(p.batch) + " must be >= 0");
  if (p.heads_q < 1) return invalid("heads_q=" + num(p.heads_q) + " must be >= 1");
  if (p.heads_kv < 1) return invalid("heads_kv=" + num(p.heads_kv) + " must be >= 1");
  if (p.heads_q % p.heads_kv != 0) {
    return invalid("heads_q=" + num(p.heads_q) + " is not a multiple of heads_kv=" + num(p.heads_kv));
  }
  if (p.seqlen_q < 0) return invalid("seqlen_q=" + num(p.seqlen_q) + " must be >= 0");
  if (p.seqlen_k < 0) return invalid("seqlen_k=" + num(p.seqlen_k) + " must be >= 0");
  Catalog const& c = catalog();
  unsigned const in = static_cast<unsigned>(p.input_type), out = static_cast<unsigned>(p.output_type);
  if (in >= 8 || !(c.in_types & (1u << in))) {
    return Status(StatusCode::kErrorNotSupported, std::string("input_type=") + to_string(p.input_type) +
                                                      " is not compiled in this build; compiled: " + c.in_list);
  }
  if (out >= 8 || !(c.out_types & (1u << out))) {
    return Status(StatusCode::kErrorNotSupported, std::string("output_type=") + to_string(p.output_type) +
                                                      " is not compiled in this build; compiled: " + c.out_list);
  }
  if (!(c.dims_by_type[in] & Catalog::dim_bit(p.head_dim)) || Catalog::dim_bit(p.head_dim) == 8u) {
    return Status(StatusCode::kErrorNotSupported, "head_dim=" + num(p.head_dim) + " is not compiled in this build for " +
                                                      to_string(p.input_type) + "; compiled: " + c.dims_list[in]);
  }
  return Status::success();
}

/// a * b + c without overflow, or false.
bool mul_add(int64_t a, int64_t b, int64_t c, int64_t* out) {
  int64_t m;
  return !__builtin_mul_overflow(a, b, &m) && !__builtin_add_overflow(m, c, out);
}

/// Pointer, alignment and strides of one [batch, seqlen, heads, head_dim] operand.
Status check_tensor(char const* name, TensorRef const& t, int64_t seqlen, int64_t heads, int64_t head_dim,
                    int64_t batch, int element_bytes, bool allow_sequence_contiguous) {
  bool const empty = batch == 0 || seqlen == 0;
  if (!t.ptr) {
    if (empty) return Status::success();
    return Status(StatusCode::kErrorNullPointer, std::string(name) + ".ptr is null");
  }
  if (reinterpret_cast<uintptr_t>(t.ptr) % kPointerAlign != 0) {
    return misaligned(std::string(name) + ".ptr=" + ptr_text(t.ptr) + " is not 16-byte aligned");
  }
  bool const s_contiguous = allow_sequence_contiguous && t.stride_s == 1 && t.stride_d != 1;
  if (t.stride_d != 1 && !s_contiguous) {
    return invalid(std::string(name) + ".stride_d=" + num(t.stride_d) + " must be 1 (head_dim contiguous)" +
                   (allow_sequence_contiguous ? std::string(" or ") + name + ".stride_s must be 1 (sequence contiguous)"
                                              : std::string()));
  }
  struct Stride {
    char const* field;
    int64_t value;
    int64_t extent;
    bool unit;  // the contiguous dimension: stride 1
  };
  Stride const strides[] = {{"stride_b", t.stride_b, batch, false},
                            {"stride_h", t.stride_h, heads, false},
                            {"stride_s", t.stride_s, seqlen, s_contiguous},
                            {"stride_d", t.stride_d, head_dim, !s_contiguous}};
  int64_t span = 0;  // largest element offset: must not overflow the kernels' 64-bit address arithmetic
  for (Stride const& s : strides) {
    if (s.value < 0) return invalid(std::string(name) + "." + s.field + "=" + num(s.value) + " must be >= 0");
    if (!s.unit && s.value % kStrideAlign != 0) {
      return misaligned(std::string(name) + "." + s.field + "=" + num(s.value) + " is not a multiple of " +
                        num(kStrideAlign) + " elements");
    }
    if (s.extent > 0 && !mul_add(s.value, s.extent - 1, span, &span)) {
      return invalid(std::string(name) + "." + s.field + "=" + num(s.value) + " overflows 64-bit offsets");
    }
  }
  // The kernels address rows through TMA descriptors, whose strides must stay below 2^40 bytes.
  int64_t const row_stride = s_contiguous ? t.stride_d : t.stride_s;
  if (row_stride > kMaxTmaStrideBytes / element_bytes) {
    return invalid(std::string(name) + "." + (s_contiguous ? "stride_d=" : "stride_s=") + num(row_stride) +
                   " exceeds the TMA limit of 2^40 bytes");
  }
  if (span > std::numeric_limits<int64_t>::max() / element_bytes) {
    return invalid(std::string(name) + " strides (stride_b=" + num(t.stride_b) + ", stride_s=" + num(t.stride_s) +
                   ", stride_h=" + num(t.stride_h) + "): the largest offset, " + num(span) +
                   " elements, overflows 64-bit byte offsets");
  }
  return Status::success();
}

/// O must not overlap itself: sorted by stride, each dimension (extent > 1) must step past the previous one.
Status check_output_overlap(TensorRef const& o, FmhaProblem const& p) {
  struct Dim {
    char const* field;
    int64_t stride, extent;
  };
  Dim dims[4] = {{"stride_b", o.stride_b, p.batch},
                 {"stride_s", o.stride_s, p.seqlen_q},
                 {"stride_h", o.stride_h, p.heads_q},
                 {"stride_d", o.stride_d, p.head_dim}};
  // Insertion sort by stride (4 elements), extent-1 dimensions ignored.
  for (int i = 1; i < 4; ++i) {
    for (int j = i; j > 0 && dims[j].stride < dims[j - 1].stride; --j) std::swap(dims[j], dims[j - 1]);
  }
  int64_t reach = 0;  // elements spanned by the dimensions checked so far: they occupy [0, reach]
  Dim const* previous = nullptr;
  for (Dim const& d : dims) {
    if (d.extent <= 1) continue;
    if (previous && d.stride <= reach) {
      return invalid("o." + std::string(d.field) + "=" + num(d.stride) + " overlaps o." + previous->field + "=" +
                     num(previous->stride) + " (extent " + num(previous->extent) +
                     "): output elements would alias");
    }
    if (!previous && d.stride == 0) {
      return invalid("o." + std::string(d.field) + "=0 over an extent of " + num(d.extent) +
                     ": output elements would alias");
    }
    reach += d.stride * (d.extent - 1);  // no overflow: check_tensor bounded the span
    previous = &d;
  }
  return Status::success();
}

/// heads_q: 0 where the operand has no query-head index (k, v); blocks: 0 where it has no per-block index (v).
Status check_descale(char const* name, DescaleRef const& d, bool required, int64_t batch, int64_t heads_kv,
                     int64_t heads_q, int64_t blocks) {
  if (!d.ptr) {
    if (required) {
      return Status(StatusCode::kErrorNullPointer,
                    std::string(name) + ".ptr is null; FP8 and INT8 inputs need float32 descales on the device");
    }
    return Status::success();
  }
  if (reinterpret_cast<uintptr_t>(d.ptr) % alignof(float) != 0) {
    return misaligned(std::string(name) + ".ptr=" + ptr_text(d.ptr) + " is not 4-byte aligned");
  }
  if (heads_q == 0 && d.stride_head_q != 0) {
    return invalid(std::string(name) + ".stride_head_q=" + num(d.stride_head_q) +
                   " must be 0: only q's descales can be indexed by query head");
  }
  if (blocks == 0 && d.stride_block != 0) {
    return invalid(std::string(name) + ".stride_block=" + num(d.stride_block) +
                   " must be 0: per-block descales are for q and k (v's scale the output)");
  }
  int64_t reach = 0;
  if (d.stride_b < 0 || d.stride_h < 0 || d.stride_head_q < 0 || d.stride_block < 0 ||
      (batch > 0 && !mul_add(d.stride_b, batch - 1, 0, &reach)) || !mul_add(d.stride_h, heads_kv - 1, reach, &reach) ||
      (heads_q > 0 && !mul_add(d.stride_head_q, heads_q - 1, reach, &reach)) ||
      (blocks > 0 && !mul_add(d.stride_block, blocks - 1, reach, &reach)) ||
      reach > std::numeric_limits<int64_t>::max() / 4) {
    return invalid(std::string(name) + " strides (stride_b=" + num(d.stride_b) + ", stride_h=" + num(d.stride_h) +
                   ", stride_head_q=" + num(d.stride_head_q) + ", stride_block=" + num(d.stride_block) +
                   ") must be >= 0 and address within 64 bits");
  }
  return Status::success();
}

}  // namespace

Status validate(Arguments const& args) {
  FmhaProblem const& p = args.problem;
  if (Status s = check_problem(p); !s) return s;
  int64_t const b = p.batch, hq = p.heads_q, hkv = p.heads_kv, d = p.head_dim;
  // INT8 Q.K^T (input_type i8) reads an e4m3 V: V is FP8 (read as V^T) and every operand needs descales.
  bool const fp8 = is_fp8(p.input_type) || p.input_type == DataType::kI8;
  int const in_bytes = size_of(p.input_type), out_bytes = size_of(p.output_type);
  if (args.v_key_permuted && !fp8) {
    return invalid("v_key_permuted=true but input_type=" + std::string(to_string(p.input_type)) +
                   " (FP8 V only)");
  }
  bool const varlen = args.varlen();
  if (varlen) {
    if (!args.cu_seqlens_q || !args.cu_seqlens_k) {
      return Status(StatusCode::kErrorNullPointer, std::string("varlen needs both offsets: cu_seqlens_") +
                                                       (args.cu_seqlens_q ? "k" : "q") + " is null");
    }
    for (auto [field, ptr] : {std::pair<char const*, void const*>{"cu_seqlens_q", args.cu_seqlens_q},
                              {"cu_seqlens_k", args.cu_seqlens_k}}) {
      if (reinterpret_cast<uintptr_t>(ptr) % 4 != 0) return misaligned(std::string(field) + "=" + ptr_text(ptr) + " is not 4-byte aligned");
    }
    for (auto [field, total] : {std::pair<char const*, int64_t>{"total_q", args.total_q}, {"total_k", args.total_k}}) {
      if (total < 0 || total > INT32_MAX) return invalid(std::string(field) + "=" + num(total) + " must be in [0, 2^31)");
    }
    if (args.v_key_permuted) return invalid("v_key_permuted=true with varlen: give V in key order (the library transposes it)");
    if (b > 0 && args.total_q > 0 && p.seqlen_q == 0) {
      return invalid("seqlen_q=0 (the longest sequence's bound) with total_q=" + num(args.total_q) +
                     " packed rows: nothing would run and o would stay unwritten");
    }
    // With the smallest alignment (a Triton instance's): past it, no instance can hold the V^T row. A wider one
    // (a Gluon instance's 128 or 256) is checked per instance (instance_supports), so a call that fits only the
    // narrower alignment runs on an instance that has it.
    if (varlen_vt_row(args.total_k, b, kVarlenVtAlignTriton) > INT32_MAX) {
      return invalid("total_k=" + num(args.total_k) + " keys of batch=" + num(b) + " sequences: the varlen V^T row (" +
                     num(kVarlenVtAlignTriton) + "-column aligned per sequence) passes 2^31 elements");
    }
    if (args.q_descale.stride_block != 0 || args.k_descale.stride_block != 0) {
      return invalid("per-block descales (stride_block) with varlen: blocks would straddle sequences");
    }
  }
  // Varlen tensors are one packed sequence each: checked as batch 1 over the total length.
  int64_t const tb = varlen ? 1 : b, tsq = varlen ? args.total_q : p.seqlen_q, tsk = varlen ? args.total_k : p.seqlen_k;
  if (Status s = check_tensor("q", args.q, tsq, hq, d, tb, in_bytes, false); !s) return s;
  if (Status s = check_tensor("k", args.k, tsk, hkv, d, tb, in_bytes, false); !s) return s;
  if (Status s = check_tensor("v", args.v, tsk, hkv, d, tb, in_bytes, fp8 && !varlen); !s) return s;
  if (Status s = check_tensor("o", args.o, tsq, hq, d, tb, out_bytes, false); !s) return s;
  if (args.v_key_permuted && b > 0 && p.seqlen_k > 0) {
    if (args.v.stride_s != 1 || args.v.stride_d == 1) {
      return invalid("v_key_permuted=true needs v sequence-contiguous (stride_s=1), got v.stride_s=" +
                     num(args.v.stride_s) + ", v.stride_d=" + num(args.v.stride_d));
    }
    if (args.v.stride_d < padded_seqlen(p.seqlen_k)) {
      return invalid("v_key_permuted=true needs rows of padded_seqlen(seqlen_k)=" + num(padded_seqlen(p.seqlen_k)) +
                     " elements (whole 32-key blocks), but v.stride_d=" + num(args.v.stride_d));
    }
  }
  if (b > 0 && p.seqlen_q > 0) {
    FmhaProblem packed = p;
    if (varlen) {
      packed.batch = 1;
      packed.seqlen_q = static_cast<int>(args.total_q);
    }
    if (Status s = check_output_overlap(args.o, packed); !s) return s;
  }
  if (args.lse && reinterpret_cast<uintptr_t>(args.lse) % kPointerAlign != 0) {
    return misaligned("lse=" + ptr_text(args.lse) + " is not 16-byte aligned");
  }
  int64_t const q_blocks = (int64_t{p.seqlen_q} + kDescaleBlockTokens - 1) / kDescaleBlockTokens;
  int64_t const k_blocks = (int64_t{p.seqlen_k} + kDescaleBlockTokens - 1) / kDescaleBlockTokens;
  if (Status s = check_descale("q_descale", args.q_descale, fp8, b, hkv, hq, q_blocks); !s) return s;
  if (Status s = check_descale("k_descale", args.k_descale, fp8, b, hkv, 0, k_blocks); !s) return s;
  if (Status s = check_descale("v_descale", args.v_descale, fp8, b, hkv, 0, 0); !s) return s;
  // (One key block needs no stride: a [batch, heads, 1] descale has stride_block 0, paired or not.)
  if (args.k_descale_paired && (p.input_type != DataType::kI8 || (args.k_descale.stride_block == 0 && k_blocks > 1))) {
    return invalid("k_descale_paired=true describes per-block INT8 k descales (input_type=i8, "
                   "k_descale.stride_block != 0), not input_type=" + std::string(to_string(p.input_type)) +
                   " with k_descale.stride_block=" + num(args.k_descale.stride_block));
  }
  if (args.window_left < -1 || args.window_right < -1) {
    return invalid("window (window_left=" + num(args.window_left) + ", window_right=" + num(args.window_right) +
                   ") must be >= -1 on each side (-1: unlimited)");
  }
  if (!std::isfinite(args.softcap) || args.softcap < 0.0f) {
    return invalid("softcap=" + std::to_string(args.softcap) + " must be finite and >= 0 (0: off)");
  }
  if (!std::isfinite(args.softmax_scale) || args.softmax_scale < 0.0f) {
    return invalid("softmax_scale=" + std::to_string(args.softmax_scale) +
                   " must be finite and > 0 (0 selects 1/sqrt(head_dim))");
  }
  return Status::success();
}

}  // namespace fp8attn::fmha::detail
