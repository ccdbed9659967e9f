#pragma once
// Kernel parameters as cuLaunchKernelEx takes them: values stored back to back (each at its natural
// alignment, a CUtensorMap at 64 bytes) and, at launch, an array of pointers to them. The generated
// <Kernel>Params structs (codegen/params.py) push their fields here in the kernel's order; nothing else
// decides the order. Fixed capacity, no allocation: a ParamPack lives inside an initialized handle and is
// copied with it (pointers are rebuilt at each launch from offsets, so copies stay valid).

#include <cuda.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace fp8attn::runtime {

/// A host TMA descriptor parameter: Triton 3.6 expands it into the 128-byte CUtensorMap (by value), then
/// its shape (i32 each) and its strides (i64 each, in elements).
template <int Rank>
struct TensorMapParam {
  CUtensorMap map;
  int32_t shape[Rank] = {};
  int64_t strides[Rank] = {};
};

class ParamPack {
 public:
  static constexpr int kMaxParams = 96;
  static constexpr size_t kMaxBytes = 2048;

  void ptr(void const* p) { push(&p, sizeof(p), alignof(void*)); }
  void i32(int32_t v) { push(&v, sizeof(v), alignof(int32_t)); }
  void i64(int64_t v) { push(&v, sizeof(v), alignof(int64_t)); }
  void f32(float v) { push(&v, sizeof(v), alignof(float)); }
  template <int Rank>
  void tensor_map(TensorMapParam<Rank> const& t) {
    push(&t.map, sizeof(CUtensorMap), 64);
    for (int i = 0; i < Rank; ++i) i32(t.shape[i]);
    for (int i = 0; i < Rank; ++i) i64(t.strides[i]);
  }

  void clear() {
    count_ = 0;
    used_ = 0;
    overflow_ = false;
  }
  int count() const { return count_; }
  /// False if more than kMaxParams values or kMaxBytes bytes were pushed (a generator bug; launch refuses).
  bool ok() const { return !overflow_; }
  /// Fills out[0, count()) with the address of each value.
  void pointers(void** out) const {
    for (int i = 0; i < count_; ++i) out[i] = const_cast<unsigned char*>(bytes_ + offsets_[i]);
  }

 private:
  void push(void const* value, size_t size, size_t align) {
    size_t const offset = (used_ + align - 1) / align * align;
    if (count_ >= kMaxParams || offset + size > kMaxBytes) {
      overflow_ = true;
      return;
    }
    std::memcpy(bytes_ + offset, value, size);
    offsets_[count_++] = static_cast<uint16_t>(offset);
    used_ = offset + size;
  }

  alignas(64) unsigned char bytes_[kMaxBytes];
  uint16_t offsets_[kMaxParams];
  int count_ = 0;
  size_t used_ = 0;
  bool overflow_ = false;
};

}  // namespace fp8attn::runtime
