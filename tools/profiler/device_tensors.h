#pragma once
// Device memory of one profiled problem: inputs filled by the reference generators, descales, output, the
// float32 reference output and the library's workspace.

#include <cstddef>
#include <cstdint>

#include "fp8attn/fmha/device/fmha_fwd.h"
#include "fp8attn/status.h"
#include "problem_space.h"

namespace fp8attn::profiler {

/// cudaMalloc'd bytes, freed on destruction; move-only.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(DeviceBuffer const&) = delete;
  DeviceBuffer& operator=(DeviceBuffer const&) = delete;

  /// Frees what is held and allocates `bytes` (nothing for 0); the message names `what` and the size.
  Status allocate(size_t bytes, char const* what);
  void* get() const { return ptr_; }
  size_t size() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

/// Everything one problem needs on the device.
class ProblemTensors {
 public:
  /// Allocates and fills Q, K, V (seeded by `seed`) and the descales; O is allocated, not written.
  Status initialize(ProblemSpec const& spec, uint64_t seed, StreamHandle stream);
  /// Arguments over these tensors, with packed strides in spec.layout and no kernel forced.
  fmha::device::FmhaFwd::Arguments arguments() const { return args_; }
  /// Grows the workspace to at least `bytes` and returns it (null when nothing was ever needed).
  Status reserve_workspace(size_t bytes, void** workspace);

  int64_t o_elements() const { return o_elements_; }
  float* o_ref() const { return static_cast<float*>(o_ref_.get()); }
  void* o() const { return o_.get(); }
  /// Bytes of Q, K and V read and O written once: the traffic a perfect kernel cannot avoid.
  double compulsory_bytes() const { return compulsory_bytes_; }

 private:
  DeviceBuffer q_, k_, v_, o_, o_ref_, descale_, workspace_;
  fmha::device::FmhaFwd::Arguments args_;
  int64_t o_elements_ = 0;
  double compulsory_bytes_ = 0.0;
};

}  // namespace fp8attn::profiler
