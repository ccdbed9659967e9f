// fmha_device: float32 attention forward on the device, the reference for problems too large for the host.
//
// Simple on purpose: CUDA cores only, float32 throughout, one online softmax. It reads the caller's strided
// tensors and descales exactly as the library does, so a disagreement points at the library, not at a copy.
//
// Work split: a block of kWarps warps owns kRowsPerBlock query rows of one (batch, head_q); each warp owns
// kRowsPerWarp of them. Keys go through shared memory in chunks of 32, converted to float once per block:
//   S = Q K^T:  lane l scores key (j0 + l) against the warp's rows (q broadcast from shared memory);
//   softmax:    one warp max per row and chunk, each lane keeps its own partial row sum;
//   O += P V:   each lane owns head_dim / 32 output columns and receives each key's p by shuffle.

#include <cmath>
#include <cstdint>
#include <string>

#include "element_io.cuh"
#include "reference/fmha_reference.h"

namespace fp8attn::reference {
namespace {

using detail::load_descale;
using detail::to_float;
using fmha::device::FmhaFwd;

constexpr int kWarps = 8;
constexpr int kRowsPerWarp = 4;
constexpr int kRowsPerBlock = kWarps * kRowsPerWarp;
constexpr int kKeysPerChunk = 32;  // one key per lane while scoring
constexpr int kMaxHeadDim = 256;
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;
constexpr unsigned kFullMask = 0xffffffffu;

struct Params {
  fmha::TensorRef q, k, v;
  fmha::DescaleRef q_descale, k_descale, v_descale;
  int heads_q, heads_kv, seqlen_q, seqlen_k;
  bool causal;
  float scale_log2;  // softmax_scale * log2(e): scores live in the exp2 domain
  float* o_ref;
  float* lse_ref;
};

__device__ __forceinline__ float warp_max(float x) {
  for (int offset = 16; offset > 0; offset /= 2) x = fmaxf(x, __shfl_xor_sync(kFullMask, x, offset));
  return x;
}

__device__ __forceinline__ float warp_sum(float x) {
  for (int offset = 16; offset > 0; offset /= 2) x += __shfl_xor_sync(kFullMask, x, offset);
  return x;
}

// Shared memory: q [kRowsPerBlock][D] (pre-scaled), k [32][D + 1], v [32][D], all float. The +1 pads K's rows
// so that lanes reading the same column of 32 different keys hit 32 different banks.
constexpr size_t shared_bytes(int head_dim) {
  return sizeof(float) *
         (static_cast<size_t>(kRowsPerBlock) * head_dim + static_cast<size_t>(kKeysPerChunk) * (head_dim + 1) +
          static_cast<size_t>(kKeysPerChunk) * head_dim);
}

template <typename Element, int kCols>
__global__ void __launch_bounds__(kWarps * 32) fmha_reference_kernel(Params p) {
  constexpr int D = 32 * kCols;
  constexpr int kStrideK = D + 1;
  extern __shared__ float smem[];
  float* q_s = smem;
  float* k_s = q_s + kRowsPerBlock * D;
  float* v_s = k_s + kKeysPerChunk * kStrideK;

  int const warp = threadIdx.x / 32;
  int const lane = threadIdx.x % 32;
  int64_t const b = blockIdx.z;
  int const h = blockIdx.y;
  int const h_kv = h / (p.heads_q / p.heads_kv);
  int const row0 = blockIdx.x * kRowsPerBlock;

  // The Q and K descales fold into the score scale; the V descale applies to the finished row.
  float const qk_scale = p.scale_log2 *
                         load_descale(p.q_descale.ptr, p.q_descale.stride_b, p.q_descale.stride_h, b, h_kv) *
                         load_descale(p.k_descale.ptr, p.k_descale.stride_b, p.k_descale.stride_h, b, h_kv);
  float const v_scale = load_descale(p.v_descale.ptr, p.v_descale.stride_b, p.v_descale.stride_h, b, h_kv);

  Element const* q = static_cast<Element const*>(p.q.ptr) + b * p.q.stride_b + h * p.q.stride_h;
  Element const* k = static_cast<Element const*>(p.k.ptr) + b * p.k.stride_b + h_kv * p.k.stride_h;
  Element const* v = static_cast<Element const*>(p.v.ptr) + b * p.v.stride_b + h_kv * p.v.stride_h;

  for (int idx = threadIdx.x; idx < kRowsPerBlock * D; idx += blockDim.x) {
    int const i = row0 + idx / D, d = idx % D;
    q_s[idx] = i < p.seqlen_q ? to_float(q[i * p.q.stride_s + d * p.q.stride_d]) * qk_scale : 0.0f;
  }

  // Bottom-right causal alignment: row i sees keys j <= i + diagonal. The block's last row bounds the keys read.
  int const diagonal = p.seqlen_k - p.seqlen_q;
  int key_end = p.seqlen_k;
  if (p.causal) key_end = max(0, min(p.seqlen_k, row0 + kRowsPerBlock + diagonal));

  int rows[kRowsPerWarp];
  float m[kRowsPerWarp], l_part[kRowsPerWarp], acc[kRowsPerWarp][kCols];
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
    rows[r] = row0 + warp * kRowsPerWarp + r;
    m[r] = -INFINITY;
    l_part[r] = 0.0f;
#pragma unroll
    for (int c = 0; c < kCols; ++c) acc[r][c] = 0.0f;
  }
  float const* q_warp = q_s + warp * kRowsPerWarp * D;

  for (int j0 = 0; j0 < key_end; j0 += kKeysPerChunk) {
    __syncthreads();  // q_s is written (first chunk) and the previous chunk is consumed
    for (int idx = threadIdx.x; idx < kKeysPerChunk * D; idx += blockDim.x) {
      int const jj = idx / D, d = idx % D, j = j0 + jj;
      bool const in = j < p.seqlen_k;
      k_s[jj * kStrideK + d] = in ? to_float(k[j * p.k.stride_s + d * p.k.stride_d]) : 0.0f;
      v_s[idx] = in ? to_float(v[j * p.v.stride_s + d * p.v.stride_d]) : 0.0f;
    }
    __syncthreads();

    // S = Q K^T for key j, one key per lane.
    int const j = j0 + lane;
    float s[kRowsPerWarp] = {};
    float const* k_lane = k_s + lane * kStrideK;
#pragma unroll 8
    for (int d = 0; d < D; ++d) {
      float const kd = k_lane[d];
#pragma unroll
      for (int r = 0; r < kRowsPerWarp; ++r) s[r] += q_warp[r * D + d] * kd;
    }

    // Online softmax over the chunk. While a row has seen no visible key its maximum is -inf; keep p = 0 and
    // leave the accumulators alone rather than compute exp2(-inf - -inf) = NaN.
    float pr[kRowsPerWarp];
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r) {
      bool const visible = j < p.seqlen_k && rows[r] < p.seqlen_q && (!p.causal || j <= rows[r] + diagonal);
      float const sr = visible ? s[r] : -INFINITY;
      float const m_new = fmaxf(m[r], warp_max(sr));
      bool const none_yet = m_new == -INFINITY;
      float const correction = none_yet ? 1.0f : exp2f(m[r] - m_new);
      pr[r] = none_yet ? 0.0f : exp2f(sr - m_new);
      l_part[r] = l_part[r] * correction + pr[r];
#pragma unroll
      for (int c = 0; c < kCols; ++c) acc[r][c] *= correction;
      m[r] = m_new;
    }

    // O += P V: key jj's probability comes from lane jj; lane owns columns lane, lane + 32, ...
#pragma unroll 4
    for (int jj = 0; jj < kKeysPerChunk; ++jj) {
      float pj[kRowsPerWarp];
#pragma unroll
      for (int r = 0; r < kRowsPerWarp; ++r) pj[r] = __shfl_sync(kFullMask, pr[r], jj);
#pragma unroll
      for (int c = 0; c < kCols; ++c) {
        float const vv = v_s[jj * D + c * 32 + lane];
#pragma unroll
        for (int r = 0; r < kRowsPerWarp; ++r) acc[r][c] += pj[r] * vv;
      }
    }
  }

#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
    float const l = warp_sum(l_part[r]);
    int const i = rows[r];
    if (i >= p.seqlen_q) continue;
    // l == 0 exactly when the row saw no key: O = 0, LSE = -inf.
    float const inv = l > 0.0f ? v_scale / l : 0.0f;
    float* o = p.o_ref + ((b * p.seqlen_q + i) * p.heads_q + h) * D;
#pragma unroll
    for (int c = 0; c < kCols; ++c) o[c * 32 + lane] = acc[r][c] * inv;
    if (p.lse_ref != nullptr && lane == 0) {
      p.lse_ref[(b * p.heads_q + h) * p.seqlen_q + i] = l > 0.0f ? (m[r] + log2f(l)) * kLn2 : -INFINITY;
    }
  }
}

template <typename Element, int kCols>
Status launch(Params const& params, int batch, StreamHandle stream) {
  constexpr int D = 32 * kCols;
  size_t const smem = shared_bytes(D);
  auto kernel = fmha_reference_kernel<Element, kCols>;
  // Above 48 KB of dynamic shared memory a kernel must opt in (D = 256 needs about 96 KB).
  if (Status s = detail::cuda_status(
          cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)),
          "cudaFuncSetAttribute (fmha_device)");
      !s) {
    return s;
  }
  dim3 const grid((params.seqlen_q + kRowsPerBlock - 1) / kRowsPerBlock, params.heads_q, batch);
  kernel<<<grid, kWarps * 32, smem, detail::to_cuda(stream)>>>(params);
  return detail::cuda_status(cudaGetLastError(), "fmha_device launch");
}

template <typename Element>
Status launch_for_head_dim(Params const& params, int batch, int head_dim, StreamHandle stream) {
  switch (head_dim / 32) {
    case 1:
      return launch<Element, 1>(params, batch, stream);
    case 2:
      return launch<Element, 2>(params, batch, stream);
    case 3:
      return launch<Element, 3>(params, batch, stream);
    case 4:
      return launch<Element, 4>(params, batch, stream);
    case 5:
      return launch<Element, 5>(params, batch, stream);
    case 6:
      return launch<Element, 6>(params, batch, stream);
    case 7:
      return launch<Element, 7>(params, batch, stream);
    case 8:
      return launch<Element, 8>(params, batch, stream);
  }
  return Status(StatusCode::kErrorInternal, "head_dim=" + std::to_string(head_dim) + " slipped through validation");
}

Status invalid(std::string message) { return Status(StatusCode::kErrorInvalidProblem, std::move(message)); }

Status check_arguments(FmhaFwd::Arguments const& args, float const* o_ref) {
  fmha::FmhaProblem const& p = args.problem;
  if (p.batch < 1 || p.batch > 65535) return invalid("batch=" + std::to_string(p.batch) + " must be in [1, 65535]");
  if (p.heads_q < 1 || p.heads_q > 65535) {
    return invalid("heads_q=" + std::to_string(p.heads_q) + " must be in [1, 65535]");
  }
  if (p.heads_kv < 1 || p.heads_q % p.heads_kv != 0) {
    return invalid("heads_kv=" + std::to_string(p.heads_kv) +
                   " must be >= 1 and divide heads_q=" + std::to_string(p.heads_q));
  }
  if (p.seqlen_q < 0) return invalid("seqlen_q=" + std::to_string(p.seqlen_q) + " must be >= 0");
  if (p.seqlen_k < 0) return invalid("seqlen_k=" + std::to_string(p.seqlen_k) + " must be >= 0");
  if (p.head_dim < 32 || p.head_dim > kMaxHeadDim || p.head_dim % 32 != 0) {
    return invalid("head_dim=" + std::to_string(p.head_dim) +
                   " is not supported by the device reference (a multiple of 32 up to " + std::to_string(kMaxHeadDim) +
                   ")");
  }
  if (p.seqlen_q > 0 && args.q.ptr == nullptr) return Status(StatusCode::kErrorNullPointer, "q.ptr is null");
  if (p.seqlen_k > 0 && args.k.ptr == nullptr) return Status(StatusCode::kErrorNullPointer, "k.ptr is null");
  if (p.seqlen_k > 0 && args.v.ptr == nullptr) return Status(StatusCode::kErrorNullPointer, "v.ptr is null");
  if (p.seqlen_q > 0 && o_ref == nullptr) return Status(StatusCode::kErrorNullPointer, "o_ref is null");
  if (!std::isfinite(args.softmax_scale)) {
    return invalid("softmax_scale=" + std::to_string(args.softmax_scale) + " must be finite");
  }
  return Status::success();
}

}  // namespace

Status fmha_device(FmhaFwd::Arguments const& args, float* o_ref, float* lse_ref, StreamHandle stream) {
  if (Status s = check_arguments(args, o_ref); !s) return s;
  fmha::FmhaProblem const& problem = args.problem;
  if (problem.seqlen_q == 0) return Status::success();

  float const softmax_scale =
      args.softmax_scale != 0.0f ? args.softmax_scale : 1.0f / std::sqrt(static_cast<float>(problem.head_dim));
  Params params{
      args.q,          args.k,           args.v,           args.q_descale,   args.k_descale, args.v_descale,
      problem.heads_q, problem.heads_kv, problem.seqlen_q, problem.seqlen_k, problem.causal, softmax_scale * kLog2e,
      o_ref,           lse_ref};
  return detail::dispatch_type(problem.input_type, "input_type", [&](auto tag) {
    using Element = typename decltype(tag)::type;
    return launch_for_head_dim<Element>(params, problem.batch, problem.head_dim, stream);
  });
}

}  // namespace fp8attn::reference
