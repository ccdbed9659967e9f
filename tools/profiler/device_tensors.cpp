// Device memory of one profiled problem.

#include "device_tensors.h"

#include <cuda_runtime.h>

#include <string>
#include <utility>

#include "reference/fmha_reference.h"

namespace fp8attn::profiler {

DeviceBuffer::~DeviceBuffer() {
  if (ptr_ != nullptr) cudaFree(ptr_);
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : ptr_(std::exchange(other.ptr_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    if (ptr_ != nullptr) cudaFree(ptr_);
    ptr_ = std::exchange(other.ptr_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

Status DeviceBuffer::allocate(size_t bytes, char const* what) {
  if (ptr_ != nullptr) cudaFree(ptr_);
  ptr_ = nullptr;
  bytes_ = 0;
  if (bytes == 0) return Status::success();
  cudaError_t const err = cudaMalloc(&ptr_, bytes);
  if (err != cudaSuccess) {
    ptr_ = nullptr;
    return Status(StatusCode::kErrorCudaDriver, std::string("cudaMalloc of ") + std::to_string(bytes) + " bytes for " +
                                                    what + " failed: " + cudaGetErrorString(err));
  }
  bytes_ = bytes;
  return Status::success();
}

Status ProblemTensors::initialize(ProblemSpec const& spec, uint64_t seed, StreamHandle stream) {
  int64_t const q_elems = int64_t{spec.batch} * spec.seqlen_q * spec.heads_q * spec.head_dim;
  int64_t const kv_elems = int64_t{spec.batch} * spec.seqlen_k * spec.heads_kv * spec.head_dim;
  DataType const out_type = DataType::kBF16;
  size_t const in_bytes = static_cast<size_t>(size_of(spec.dtype));
  size_t const out_bytes = static_cast<size_t>(size_of(out_type));
  o_elements_ = q_elems;
  compulsory_bytes_ = double(in_bytes) * double(q_elems + 2 * kv_elems) + double(out_bytes) * double(q_elems);

  if (Status s = q_.allocate(q_elems * in_bytes, "Q"); !s) return s;
  if (Status s = k_.allocate(kv_elems * in_bytes, "K"); !s) return s;
  if (Status s = v_.allocate(kv_elems * in_bytes, "V"); !s) return s;
  if (Status s = o_.allocate(q_elems * out_bytes, "O"); !s) return s;
  if (Status s = o_ref_.allocate(q_elems * sizeof(float), "the reference output"); !s) return s;

  // Distinct seeds per operand so that Q, K and V are not the same tensor.
  if (Status s = reference::fill_random(q_.get(), spec.dtype, q_elems, seed * 3 + 0, stream); !s) return s;
  if (Status s = reference::fill_random(k_.get(), spec.dtype, kv_elems, seed * 3 + 1, stream); !s) return s;
  if (Status s = reference::fill_random(v_.get(), spec.dtype, kv_elems, seed * 3 + 2, stream); !s) return s;

  fmha::device::FmhaFwd::Arguments& a = args_;
  a = fmha::device::FmhaFwd::Arguments{};
  a.problem = spec.problem();
  a.q = fmha::TensorRef::packed(q_.get(), spec.layout, spec.seqlen_q, spec.heads_q, spec.head_dim);
  a.k = fmha::TensorRef::packed(k_.get(), spec.layout, spec.seqlen_k, spec.heads_kv, spec.head_dim);
  a.v = fmha::TensorRef::packed(v_.get(), spec.layout, spec.seqlen_k, spec.heads_kv, spec.head_dim);
  a.o = fmha::TensorRef::packed(o_.get(), spec.layout, spec.seqlen_q, spec.heads_q, spec.head_dim);

  // FP8 inputs carry x * 448/6 (see fill_random): one per-tensor descale of 6/448 recovers N(0,1) for all three.
  if (spec.dtype == DataType::kE4M3) {
    if (Status s = descale_.allocate(sizeof(float), "the descale"); !s) return s;
    float const descale = reference::kE4M3FillDescale;
    cudaError_t const err = cudaMemcpyAsync(descale_.get(), &descale, sizeof(float), cudaMemcpyHostToDevice, stream);
    if (err != cudaSuccess) {
      return Status(StatusCode::kErrorCudaDriver,
                    std::string("cudaMemcpyAsync of the descale failed: ") + cudaGetErrorString(err));
    }
    auto const* d = static_cast<float const*>(descale_.get());
    a.q_descale = a.k_descale = a.v_descale = fmha::DescaleRef::per_tensor(d);
  }
  cudaError_t const err = cudaStreamSynchronize(stream);  // the descale's host source goes out of scope
  if (err != cudaSuccess) {
    return Status(StatusCode::kErrorCudaDriver, std::string("filling the inputs failed: ") + cudaGetErrorString(err));
  }
  return Status::success();
}

Status ProblemTensors::reserve_workspace(size_t bytes, void** workspace) {
  if (bytes > workspace_.size()) {
    if (Status s = workspace_.allocate(bytes, "the workspace"); !s) return s;
  }
  *workspace = workspace_.get();
  return Status::success();
}

}  // namespace fp8attn::profiler
