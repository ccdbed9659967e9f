#pragma once
// Random FmhaFwd::Arguments for the fuzzer: a valid set built around an instance of this build, then a few
// random mutations toward the edges (0, negative, 2^31-1, 2^40 and INT64_MAX strides, odd strides,
// null and misaligned pointers, NaN scales, junk kernel names, wrong GQA ratios, overlapping outputs).
// Every case has its own generator state derived from (seed, case index), so one case replays alone.

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "fmha_argument_invariants.h"
#include "fp8attn/library/operation.h"

namespace fuzz {

using fp8attn::Layout;
using fp8attn::library::FmhaDescription;

/// splitmix64: tiny, fast, and good enough to spread mutations.
class Rng {
 public:
  Rng(uint64_t seed, uint64_t index) : state_(seed ^ (index * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull)) { next(); }
  uint64_t next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  uint64_t below(uint64_t n) { return n ? next() % n : 0; }
  /// Uniform in [lo, hi]; lo when hi < lo (computed unsigned: no overflow for any bounds).
  int64_t range(int64_t lo, int64_t hi) {
    if (hi <= lo) return lo;
    uint64_t span = static_cast<uint64_t>(hi) - static_cast<uint64_t>(lo);
    uint64_t offset = span == ~uint64_t(0) ? next() : below(span + 1);
    return static_cast<int64_t>(static_cast<uint64_t>(lo) + offset);
  }
  bool chance(double p) { return (next() >> 11) * 0x1.0p-53 < p; }
  template <class T>
  T const& pick(std::vector<T> const& v) { return v[below(v.size())]; }

 private:
  uint64_t state_;
};

/// int64 arithmetic that wraps instead of overflowing (signed overflow would be UB in the fuzzer itself,
/// and the sanitizer build would stop there); the library must refuse whatever wrapped.
inline int64_t wrap_mul(int64_t x, int64_t y) { return static_cast<int64_t>(static_cast<uint64_t>(x) * static_cast<uint64_t>(y)); }
inline int64_t wrap_add(int64_t x, int64_t y) { return static_cast<int64_t>(static_cast<uint64_t>(x) + static_cast<uint64_t>(y)); }

/// Packed strides of a [batch, seqlen, heads, head_dim] tensor in `layout` order; rows padded by pad_s.
inline TensorRef pack(void const* ptr, Layout layout, int64_t seqlen, int64_t heads, int64_t head_dim, int64_t pad_s = 0) {
  TensorRef t;
  t.ptr = ptr;
  t.stride_d = 1;
  if (layout == Layout::kBSHD) {
    t.stride_h = head_dim;
    t.stride_s = wrap_add(wrap_mul(heads, head_dim), pad_s);
    t.stride_b = wrap_mul(seqlen, t.stride_s);
  } else {
    t.stride_s = wrap_add(head_dim, pad_s);
    t.stride_h = wrap_mul(seqlen, t.stride_s);
    t.stride_b = wrap_mul(heads, t.stride_h);
  }
  return t;
}

/// V stored [b, h, d, s] (sequence-contiguous), rows padded to 16: FP8 takes it without a transpose.
inline TensorRef pack_sequence_contiguous(void const* ptr, int64_t seqlen, int64_t heads, int64_t head_dim) {
  int64_t row = wrap_add(seqlen, 15) / 16 * 16;
  TensorRef t;
  t.ptr = ptr;
  t.stride_s = 1;
  t.stride_d = row;
  t.stride_h = wrap_mul(head_dim, row);
  t.stride_b = wrap_mul(heads, t.stride_h);
  return t;
}

inline void* address(uint64_t a) { return reinterpret_cast<void*>(static_cast<uintptr_t>(a)); }

class Generator {
 public:
  explicit Generator(std::vector<FmhaDescription> const& ops) : ops_(ops) {}

  /// A set the library should accept (or refuse only for a reason of the build), then 0..6 mutations.
  Args make(Rng& r, int* mutations) const {
    Args a = valid(r);
    int n = r.chance(0.2) ? 0 : r.chance(0.5) ? 1 : static_cast<int>(r.range(2, 6));
    for (int i = 0; i < n; ++i) mutate(r, a);
    *mutations = n;
    return a;
  }

 private:
  std::vector<FmhaDescription> const& ops_;

  Args valid(Rng& r) const {
    Args a;
    auto& p = a.problem;
    FmhaDescription const* op = ops_.empty() ? nullptr : &ops_[r.below(ops_.size())];
    p.input_type = op ? op->qk_type : DataType::kE4M3;
    p.output_type = op ? op->out_type : DataType::kBF16;
    p.head_dim = op ? op->head_dim : 128;
    p.causal = op ? op->causal : false;
    p.heads_kv = static_cast<int>(r.pick<int64_t>({1, 1, 2, 4, 8, 16, 32}));
    p.heads_q = p.heads_kv * static_cast<int>(r.pick<int64_t>({1, 1, 2, 4, 8}));
    p.batch = static_cast<int>(r.chance(0.05) ? 0 : r.pick<int64_t>({1, 1, 2, 3, 4, 8, r.range(1, 64)}));
    auto seqlen = [&] {
      switch (r.below(6)) {
        case 0: return r.chance(0.2) ? int64_t(0) : int64_t(1);
        case 1: return r.range(1, 300);
        case 2: return r.range(1, 20000);
        case 3: return 128 * r.range(1, 128);
        case 4: return int64_t(1) << r.range(4, 16);
        default: return r.range(1, 4096);
      }
    };
    p.seqlen_q = static_cast<int>(seqlen());
    p.seqlen_k = r.chance(0.5) ? p.seqlen_q : static_cast<int>(seqlen());
    if (op && op->even_n) p.seqlen_k = static_cast<int>(op->block_n * r.range(0, 64));
    if (r.chance(0.03)) {  // the shapes the int64 work exists for
      if (r.chance(0.5)) {
        p.batch = 1, p.heads_q = p.heads_kv = 32, p.seqlen_q = p.seqlen_k = 1 << 20;  // BSHD stride_b = 2^32
      } else {
        p.batch = 4096, p.heads_q = 32, p.heads_kv = 8, p.seqlen_q = p.seqlen_k = 128;  // B*H > 65535
      }
    }
    int64_t d = p.head_dim;
    auto layout = [&] { return r.chance(0.5) ? Layout::kBSHD : Layout::kBHSD; };
    auto pad = [&] { return r.chance(0.8) ? int64_t(0) : 16 * r.range(1, 8); };
    a.q = pack(address(0x10000000), layout(), p.seqlen_q, p.heads_q, d, pad());
    a.k = pack(address(0x20000000), layout(), p.seqlen_k, p.heads_kv, d, pad());
    a.v = pack(address(0x30000000), layout(), p.seqlen_k, p.heads_kv, d, pad());
    if (fp8_input(p.input_type) && r.chance(0.2)) {
      a.v = pack_sequence_contiguous(address(0x30000000), p.seqlen_k, p.heads_kv, d);
    }
    a.o = pack(address(0x40000000), layout(), p.seqlen_q, p.heads_q, d, pad());
    float const* scales = reinterpret_cast<float const*>(address(0x50000000));
    if (fp8_input(p.input_type) || r.chance(0.2)) {
      a.q_descale = r.chance(0.5) ? DescaleRef::per_tensor(scales) : DescaleRef::per_head(scales, p.heads_kv);
      a.k_descale = r.chance(0.5) ? DescaleRef::per_tensor(scales + 1024) : DescaleRef::per_head(scales + 1024, p.heads_kv);
      a.v_descale = r.chance(0.5) ? DescaleRef::per_tensor(scales + 2048) : DescaleRef::per_head(scales + 2048, p.heads_kv);
    }
    if (r.chance(0.3)) a.lse = reinterpret_cast<float*>(address(0x60000000));
    if (r.chance(0.4)) a.softmax_scale = static_cast<float>(r.range(1, 1000)) / 256.0f;
    if (op && r.chance(0.2)) a.kernel_name = op->name;
    return a;
  }

  int interesting_int(Rng& r) const {
    constexpr int kMax = std::numeric_limits<int>::max();
    constexpr int kMin = std::numeric_limits<int>::min();
    return static_cast<int>(r.pick<int64_t>({0, 1, 2, -1, -2, 15, 16, 17, 64, 96, 128, 256, 300, 65535, 65536,
                                             1 << 20, kMax, kMax - 1, kMin, kMin + 1, r.range(-1000, 1000),
                                             r.range(0, kMax), r.range(kMin, -1)}));
  }

  int64_t interesting_stride(Rng& r, int64_t head_dim) const {
    constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
    constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
    return r.pick<int64_t>({0, 1, -1, 2, 15, 16, 17, -16, head_dim, head_dim - 16, head_dim / 2, 2 * head_dim + 1,
                            (int64_t(1) << 31) - 1, int64_t(1) << 31, (int64_t(1) << 31) + 16, int64_t(1) << 32,
                            int64_t(1) << 33, int64_t(1) << 40, (int64_t(1) << 40) + 16, int64_t(1) << 47,
                            int64_t(1) << 62, kMax, kMax - 15, kMin, kMin + 16, 16 * r.range(0, int64_t(1) << 20),
                            16 * r.range(0, int64_t(1) << 46), r.range(-(int64_t(1) << 40), int64_t(1) << 40)});
  }

  void mutate_tensor(Rng& r, Args& a, TensorRef& t) const {
    int64_t d = a.problem.head_dim;
    switch (r.below(7)) {
      case 0: t.ptr = nullptr; break;
      case 1: t.ptr = address(reinterpret_cast<uintptr_t>(t.ptr) + r.pick<uint64_t>({1, 2, 4, 8})); break;
      case 2: t.ptr = address(r.pick<uint64_t>({0x10, ~uint64_t(0xF), uint64_t(1) << 47, 0x7FFFFFFFFFF0ull})); break;
      case 3: t.stride_b = interesting_stride(r, d); break;
      case 4: t.stride_s = interesting_stride(r, d); break;
      case 5: t.stride_h = interesting_stride(r, d); break;
      default: t.stride_d = r.chance(0.5) ? interesting_stride(r, d) : r.pick<int64_t>({0, 1, 2, 16}); break;
    }
  }

  /// Forms of an overlapping (or, as controls, a legal but unusual) output layout.
  void mutate_output_layout(Rng& r, Args& a) const {
    auto const& p = a.problem;
    int64_t d = p.head_dim, row = wrap_mul(p.heads_q, d);
    int64_t below_d = 16 * r.range(0, (d - 1) / 16);  // a 16-aligned stride shorter than a head (0 if d <= 16)
    switch (r.below(7)) {
      case 0: a.o.stride_s = below_d; break;  // rows overlap inside one head
      case 1: a.o.stride_h = below_d; break;  // heads overlap
      case 2: a.o.stride_b = a.o.stride_s; break;                                // batch b+1 = row 1 of batch b
      case 3: a.o.stride_h = a.o.stride_s; break;                                // heads and rows alias
      case 4: a.o.stride_s = row, a.o.stride_h = d, a.o.stride_b = wrap_mul(row, p.seqlen_q); break;  // BSHD (legal)
      case 5:  // [s, b, h, d] (legal): batches interleaved between rows
        a.o.stride_d = 1, a.o.stride_h = d, a.o.stride_b = row, a.o.stride_s = wrap_mul(row, p.batch);
        break;
      default: std::swap(a.o.stride_b, a.o.stride_h); break;
    }
  }

  void mutate_descale(Rng& r, Args& a, DescaleRef& ds) const {
    switch (r.below(7)) {
      case 0: ds.ptr = nullptr; break;
      case 5: ds.stride_head_q = interesting_stride(r, a.problem.head_dim); break;  // refused for k and v
      case 6: ds.stride_block = interesting_stride(r, a.problem.head_dim); break;   // refused for v
      case 1: ds.ptr = reinterpret_cast<float const*>(reinterpret_cast<uintptr_t>(ds.ptr ? ds.ptr : address(0x50000000)) + r.pick<int64_t>({1, 2, 3, 4})); break;
      case 2: ds.stride_b = interesting_stride(r, a.problem.head_dim); break;
      case 3: ds.stride_h = interesting_stride(r, a.problem.head_dim); break;
      default: ds = DescaleRef::per_head(reinterpret_cast<float const*>(address(0x50000000)), a.problem.heads_kv); break;
    }
  }

  void mutate(Rng& r, Args& a) const {
    auto& p = a.problem;
    switch (r.below(17)) {
      case 0: p.batch = interesting_int(r); break;
      case 1: p.heads_q = interesting_int(r); break;
      case 2: p.heads_kv = interesting_int(r); break;
      case 3: p.seqlen_q = interesting_int(r); break;
      case 4: p.seqlen_k = interesting_int(r); break;
      case 5: p.head_dim = r.chance(0.7) ? static_cast<int>(r.range(0, 300)) : interesting_int(r); break;
      case 6: {  // a new size with strides that follow it (valid-looking huge problems)
        int* field = r.pick<int*>({&p.batch, &p.heads_q, &p.seqlen_q, &p.seqlen_k});
        *field = r.chance(0.5) ? interesting_int(r) : static_cast<int>(r.range(1, 1 << 22));
        if (field == &p.heads_q && p.heads_kv > 0) p.heads_q = std::max(1, p.heads_q / p.heads_kv) * p.heads_kv;
        repack(r, a);
        break;
      }
      case 7: {  // GQA ratios, right and wrong
        int64_t hkv = r.pick<int64_t>({1, 2, 3, 5, 8}), ratio = r.pick<int64_t>({1, 2, 3, 16});
        p.heads_kv = static_cast<int>(hkv);
        p.heads_q = static_cast<int>(hkv * ratio + (r.chance(0.3) ? 1 : 0));
        if (r.chance(0.7)) repack(r, a);
        break;
      }
      case 8: p.causal = !p.causal; break;
      case 9: {
        DataType types[] = {DataType::kE4M3, DataType::kE5M2, DataType::kBF16, DataType::kF16, DataType::kF32,
                            static_cast<DataType>(5), static_cast<DataType>(-1), static_cast<DataType>(255)};
        (r.chance(0.5) ? p.input_type : p.output_type) = types[r.below(8)];
        break;
      }
      case 10: mutate_tensor(r, a, *r.pick<TensorRef*>({&a.q, &a.k, &a.v, &a.o})); break;
      case 11: mutate_output_layout(r, a); break;
      case 12: mutate_descale(r, a, *r.pick<DescaleRef*>({&a.q_descale, &a.k_descale, &a.v_descale})); break;
      case 13:
        a.lse = reinterpret_cast<float*>(address(r.pick<uint64_t>({0, 0x60000000, 0x60000004, 0x60000008, 0x60000001})));
        break;
      case 14: {
        float inf = std::numeric_limits<float>::infinity();
        a.softmax_scale = r.pick<float>({std::nanf(""), inf, -inf, -1.0f, -0.0f, 0.0f, 1e-30f,
                                         std::numeric_limits<float>::denorm_min(), std::numeric_limits<float>::max(),
                                         1.0f, -std::nanf("")});
        break;
      }
      case 15: {
        std::string real = ops_.empty() ? std::string("x") : r.pick(ops_).name;
        a.kernel_name = r.pick<std::string>({"", "nope", real, real + "x", real.substr(0, real.size() / 2),
                                             "fp8attn_sm90_transpose_v_u8_128x128_w4", std::string(4096, 'k'),
                                             std::string("fp8\0attn", 8), "fp8attn_sm90_fmha_fwd_"});
        break;
      }
      default: {  // V sequence-contiguous, or back to head_dim-contiguous
        if (r.chance(0.5)) a.v = pack_sequence_contiguous(a.v.ptr, p.seqlen_k, p.heads_kv, p.head_dim);
        else a.v = pack(a.v.ptr, Layout::kBSHD, p.seqlen_k, p.heads_kv, p.head_dim);
        break;
      }
    }
  }

  void repack(Rng& r, Args& a) const {
    auto const& p = a.problem;
    Layout l = r.chance(0.5) ? Layout::kBSHD : Layout::kBHSD;
    a.q = pack(a.q.ptr, l, p.seqlen_q, p.heads_q, p.head_dim);
    a.k = pack(a.k.ptr, l, p.seqlen_k, p.heads_kv, p.head_dim);
    a.v = pack(a.v.ptr, l, p.seqlen_k, p.heads_kv, p.head_dim);
    a.o = pack(a.o.ptr, l, p.seqlen_q, p.heads_q, p.head_dim);
  }
};

/// One line that says everything about an argument set (for failure reports).
inline std::string describe(Args const& a) {
  auto const& p = a.problem;
  auto tensor = [](char const* n, TensorRef const& t) {
    char buffer[200];
    std::snprintf(buffer, sizeof(buffer), " %s={%p b=%lld s=%lld h=%lld d=%lld}", n, t.ptr, (long long)t.stride_b,
                  (long long)t.stride_s, (long long)t.stride_h, (long long)t.stride_d);
    return std::string(buffer);
  };
  auto descale = [](char const* n, DescaleRef const& d) {
    char buffer[120];
    std::snprintf(buffer, sizeof(buffer), " %s={%p b=%lld h=%lld hq=%lld blk=%lld}", n, static_cast<void const*>(d.ptr),
                  (long long)d.stride_b, (long long)d.stride_h, (long long)d.stride_head_q, (long long)d.stride_block);
    return std::string(buffer);
  };
  char head[300];
  std::snprintf(head, sizeof(head), "batch=%d heads_q=%d heads_kv=%d seqlen_q=%d seqlen_k=%d head_dim=%d causal=%d %s->%s",
                p.batch, p.heads_q, p.heads_kv, p.seqlen_q, p.seqlen_k, p.head_dim, int(p.causal),
                fp8attn::to_string(p.input_type), fp8attn::to_string(p.output_type));
  char tail[200];
  std::snprintf(tail, sizeof(tail), " lse=%p softmax_scale=%g kernel_name='%.60s'%s", static_cast<void*>(a.lse),
                double(a.softmax_scale), a.kernel_name.c_str(), a.kernel_name.size() > 60 ? "..." : "");
  return head + tensor("q", a.q) + tensor("k", a.k) + tensor("v", a.v) + tensor("o", a.o) +
         descale("q_descale", a.q_descale) + descale("k_descale", a.k_descale) + descale("v_descale", a.v_descale) + tail;
}

}  // namespace fuzz
