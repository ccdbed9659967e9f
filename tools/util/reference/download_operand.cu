// download_operand: a strided device operand, dequantized, as packed BSHD float64 on the host (fmha_host's input).

#include <cstdint>
#include <string>
#include <vector>

#include "element_io.cuh"
#include "reference/fmha_reference.h"
#include "strided_index.cuh"

namespace fp8attn::reference {
namespace {

constexpr int kThreads = 256;

// The element times its descale, in float64 so the product is exact (e4m3 and a float descale each have few
// enough mantissa bits).
template <typename T>
__global__ void gather_kernel(fmha::TensorRef src, fmha::DescaleRef descale, int64_t group, int64_t count, int64_t S,
                              int64_t H, int64_t D, double* out) {
  T const* in = static_cast<T const*>(src.ptr);
  int64_t const stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride) {
    detail::Bshd const c = detail::unpack_bshd(i, S, H, D);
    double const scale = detail::load_descale(descale.ptr, descale.stride_b, descale.stride_h, c.b, c.h / group);
    out[i] = static_cast<double>(detail::to_float(in[detail::offset_of(src, c)])) * scale;
  }
}

}  // namespace

Status download_operand(fmha::device::FmhaFwd::Arguments const& args, Operand operand, std::vector<double>* out,
                        StreamHandle stream) {
  if (out == nullptr) return Status(StatusCode::kErrorNullPointer, "out is null");
  fmha::FmhaProblem const& p = args.problem;
  if (p.heads_kv < 1 || p.heads_q % p.heads_kv != 0) {
    return Status(
        StatusCode::kErrorInvalidProblem,
        "heads_kv=" + std::to_string(p.heads_kv) + " must be >= 1 and divide heads_q=" + std::to_string(p.heads_q));
  }

  // Per operand: tensor, shape, descale and how a head maps to its descale's kv head.
  fmha::TensorRef t;
  fmha::DescaleRef descale;  // null: 1.0
  int64_t S = 0, H = 0, group = 1;
  DataType type = p.input_type;
  char const* name = "";
  switch (operand) {
    case Operand::kQ:  // a query head's descale is its kv head's (FlashAttention-3 convention)
      t = args.q;
      descale = args.q_descale;
      S = p.seqlen_q;
      H = p.heads_q;
      group = p.heads_q / p.heads_kv;
      name = "q";
      break;
    case Operand::kK:
      t = args.k;
      descale = args.k_descale;
      S = p.seqlen_k;
      H = p.heads_kv;
      name = "k";
      break;
    case Operand::kV:
      t = args.v;
      descale = args.v_descale;
      S = p.seqlen_k;
      H = p.heads_kv;
      name = "v";
      break;
    case Operand::kO:  // the output carries no descale
      t = args.o;
      S = p.seqlen_q;
      H = p.heads_q;
      type = p.output_type;
      name = "o";
      break;
  }
  int64_t const count = static_cast<int64_t>(p.batch) * S * H * p.head_dim;
  if (p.batch < 0 || S < 0 || p.head_dim < 0) {
    return Status(StatusCode::kErrorInvalidProblem, std::string(name) + ": problem shape has a negative extent");
  }
  out->assign(static_cast<size_t>(count), 0.0);
  if (count == 0) return Status::success();
  if (t.ptr == nullptr) return Status(StatusCode::kErrorNullPointer, std::string(name) + ".ptr is null");

  cudaStream_t const s = detail::to_cuda(stream);
  double* staging = nullptr;
  if (Status st = detail::cuda_status(cudaMallocAsync(&staging, count * sizeof(double), s),
                                      "cudaMallocAsync (download_operand)");
      !st) {
    return st;
  }
  unsigned const blocks = detail::grid_for(count, kThreads);
  Status result = detail::dispatch_type(type, "type", [&](auto tag) {
    using T = typename decltype(tag)::type;
    gather_kernel<T><<<blocks, kThreads, 0, s>>>(t, descale, group, count, S, H, p.head_dim, staging);
    return detail::cuda_status(cudaGetLastError(), "download_operand launch");
  });
  if (result) {
    result =
        detail::cuda_status(cudaMemcpyAsync(out->data(), staging, count * sizeof(double), cudaMemcpyDeviceToHost, s),
                            "cudaMemcpyAsync (download_operand)");
  }
  cudaFreeAsync(staging, s);
  Status synced = detail::cuda_status(cudaStreamSynchronize(s), "cudaStreamSynchronize (download_operand)");
  return result ? synced : result;
}

}  // namespace fp8attn::reference
