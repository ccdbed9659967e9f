// Paged decode profiling: a shuffled cache per page size, float64 reference on sampled rows, effective GB/s.

#include "paged_profiler.h"

#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "device_tensors.h"
#include "reference/fmha_reference.h"
#include "timing.h"

namespace fp8attn::profiler {
namespace {

using paged::PagedDecodeArguments;
using paged::device::PagedDecode;

constexpr int kPageSizes[] = {16, 64};
constexpr int kSampledHeads = 2;  // query heads checked per sequence (the first and the middle one)

double e4m3_value(uint8_t byte) {
  __nv_fp8_e4m3 v;
  v.__x = byte;
  return static_cast<float>(v);
}

}  // namespace

std::vector<ProblemSpec> PagedProfiler::problems() const {
  std::vector<ProblemSpec> out;
  for (ProblemSpec const& p : enumerate_problems(options_, options_.operation == "all" ? nullptr : stderr)) {
    int const q_len = p.seqlen_q >= 1 && p.seqlen_q <= 8 ? p.seqlen_q : 1;
    ProblemSpec const d{p.batch, p.heads_q, p.heads_kv, q_len, p.seqlen_k, p.head_dim, false, DataType::kE4M3,
                        Layout::kBSHD};
    bool const seen = std::any_of(out.begin(), out.end(), [&d](ProblemSpec const& o) {
      return o.batch == d.batch && o.heads_q == d.heads_q && o.heads_kv == d.heads_kv && o.seqlen_q == d.seqlen_q &&
             o.seqlen_k == d.seqlen_k && o.head_dim == d.head_dim;
    });
    if (!seen) out.push_back(d);
  }
  return out;
}

bool PagedProfiler::profile(ProblemSpec const& spec, StreamHandle stream, Report* report) {
  int64_t const B = spec.batch, Hq = spec.heads_q, Hkv = spec.heads_kv, S = spec.seqlen_k, D = spec.head_dim;
  int64_t const T = spec.seqlen_q;  // new tokens per sequence
  for (int page : kPageSizes) {
    int64_t const pages_per_seq = std::max<int64_t>(1, (S + page - 1) / page);
    int64_t const num_pages = B * pages_per_seq;
    size_t const page_bytes = static_cast<size_t>(num_pages) * page * Hkv * D;
    PagedDecodeArguments a;
    a.batch = static_cast<int>(B);
    a.q_len = static_cast<int>(T);
    a.heads_q = static_cast<int>(Hq);
    a.max_seqlen = static_cast<int>(S);
    a.cache.num_pages = static_cast<int>(num_pages);
    a.cache.page_size = page;
    a.cache.heads_kv = static_cast<int>(Hkv);
    a.cache.head_dim = static_cast<int>(D);
    a.cache.max_pages = static_cast<int>(pages_per_seq);
    a.cache.descale_stride_page = 0;  // static per kv head
    a.cache.descale_stride_head = 1;
    // Placeholders with the right alignment for the instance check; replaced below.
    DeviceBuffer q, o, kp, vp, desc, table, lens, workspace;
    auto fail = [&](Row row, std::string const& what, Status const& s) {
      report->add(failed(std::move(row), what, s));
      return device_usable();
    };
    std::string name = "-";
    Candidate candidate{"fp8attn", "", "-", Status::success()};
    // Allocate and fill.
    Status s = q.allocate(static_cast<size_t>(B * T * Hq * D) * 2, "q");
    if (s) s = o.allocate(static_cast<size_t>(B * T * Hq * D) * 2, "o");
    if (s) s = kp.allocate(page_bytes, "k_pages");
    if (s) s = vp.allocate(page_bytes, "v_pages");
    if (s) s = desc.allocate(static_cast<size_t>(2 * Hkv) * sizeof(float), "descales");
    if (s) s = table.allocate(static_cast<size_t>(num_pages) * sizeof(int32_t), "block_table");
    if (s) s = lens.allocate(static_cast<size_t>(B) * sizeof(int32_t), "seqlens");
    if (s) s = reference::fill_random(q.get(), DataType::kBF16, B * T * Hq * D, options_.seed * 5 + 1, stream);
    if (s) s = reference::fill_random(kp.get(), DataType::kE4M3, static_cast<int64_t>(page_bytes), options_.seed * 5 + 2, stream);
    if (s) s = reference::fill_random(vp.get(), DataType::kE4M3, static_cast<int64_t>(page_bytes), options_.seed * 5 + 3, stream);
    std::vector<int32_t> host_table(static_cast<size_t>(num_pages));
    std::iota(host_table.begin(), host_table.end(), 0);
    std::shuffle(host_table.begin(), host_table.end(), std::mt19937(static_cast<unsigned>(options_.seed)));
    std::vector<int32_t> host_lens(static_cast<size_t>(B), static_cast<int32_t>(S));
    std::vector<float> host_desc(static_cast<size_t>(2 * Hkv), reference::kE4M3FillDescale);
    if (s) {
      cudaError_t err = cudaMemcpy(table.get(), host_table.data(), host_table.size() * 4, cudaMemcpyHostToDevice);
      if (err == cudaSuccess) err = cudaMemcpy(lens.get(), host_lens.data(), host_lens.size() * 4, cudaMemcpyHostToDevice);
      if (err == cudaSuccess) err = cudaMemcpy(desc.get(), host_desc.data(), host_desc.size() * 4, cudaMemcpyHostToDevice);
      if (err != cudaSuccess) s = cuda_error(err, "cudaMemcpy");
    }
    if (!s) {
      report->add(problem_failed(spec, "inputs (page " + std::to_string(page) + "): " + s.to_string()));
      if (!device_usable()) return false;
      continue;
    }
    a.q = fmha::TensorRef::packed(q.get(), Layout::kBSHD, T, Hq, D);
    a.o = fmha::TensorRef::packed(o.get(), Layout::kBSHD, T, Hq, D);
    a.cache.k_pages = kp.get();
    a.cache.v_pages = vp.get();
    a.cache.k_descale = static_cast<float const*>(desc.get());
    a.cache.v_descale = static_cast<float const*>(desc.get()) + Hkv;
    a.cache.block_table = static_cast<int32_t const*>(table.get());
    a.cache.seqlens = static_cast<int32_t const*>(lens.get());
    candidate.implementable = PagedDecode::can_implement(a);
    PagedDecode op;
    Row row = first_row(spec, candidate);
    row.notes = "page " + std::to_string(page) + ", q_len " + std::to_string(T);
    if (!candidate.implementable) {
      row.notes += ": " + candidate.implementable.message();
      report->add(row);
      continue;
    }
    if (Status w = workspace.allocate(std::max<size_t>(PagedDecode::get_workspace_size(a), 256), "workspace"); !w) {
      if (!fail(row, "workspace", w)) return false;
      continue;
    }
    if (Status i = op.initialize(a, workspace.get(), stream); !i) {
      if (!fail(row, "initialize", i)) return false;
      continue;
    }
    row.operation = op.kernel_name();
    if (!library::matches_filter(row.operation, options_.kernels)) continue;
    if (Status r = op.run(stream); !r) {
      if (!fail(row, "run", r)) return false;
      continue;
    }
    if (Status r = sync_stream(stream, "run"); !r) {
      if (!fail(row, "run", r)) return false;
      continue;
    }
    if (!(options_.verify_device || options_.verify_host)) {
      row.disposition = "not_verified";
    } else {
      // float64 reference for every sequence, two query heads, every new token.
      std::vector<uint16_t> hq(static_cast<size_t>(B * T * Hq * D)), ho(hq.size());
      std::vector<uint8_t> hk(page_bytes), hv(page_bytes);
      cudaError_t err = cudaMemcpy(hq.data(), q.get(), hq.size() * 2, cudaMemcpyDeviceToHost);
      if (err == cudaSuccess) err = cudaMemcpy(ho.data(), o.get(), ho.size() * 2, cudaMemcpyDeviceToHost);
      if (err == cudaSuccess) err = cudaMemcpy(hk.data(), kp.get(), page_bytes, cudaMemcpyDeviceToHost);
      if (err == cudaSuccess) err = cudaMemcpy(hv.data(), vp.get(), page_bytes, cudaMemcpyDeviceToHost);
      if (err != cudaSuccess) {
        if (!fail(row, "download", cuda_error(err, "cudaMemcpy"))) return false;
        continue;
      }
      double num = 0, den = 0;
      double const scale = 1.0 / std::sqrt(static_cast<double>(D)), kd = reference::kE4M3FillDescale;
      std::vector<double> sc(static_cast<size_t>(S)), acc(static_cast<size_t>(D));
      for (int64_t b = 0; b < B; ++b)
        for (int64_t h : {int64_t{0}, Hq / 2}) {
          int64_t const hk_ = h / (Hq / Hkv);
          for (int64_t t = 0; t < T; ++t) {
            int64_t const n = S - T + t + 1;
            if (n <= 0) continue;
            uint16_t const* qrow = hq.data() + ((b * T + t) * Hq + h) * D;
            // K token-major [page][slot][kv head][d]; V transposed inside the page [page][kv head][d][slot].
            auto kv = [&](std::vector<uint8_t> const& pages, int64_t key, int64_t d) {
              int64_t const pg = host_table[static_cast<size_t>(b * pages_per_seq + key / page)];
              int64_t const at = &pages == &hv ? ((pg * Hkv + hk_) * D + d) * page + key % page
                                               : ((pg * page + key % page) * Hkv + hk_) * D + d;
              return e4m3_value(pages[static_cast<size_t>(at)]) * kd;
            };
            double m = -INFINITY;
            for (int64_t j = 0; j < n; ++j) {
              double dot = 0;
              for (int64_t d = 0; d < D; ++d) dot += bf16_to_float(qrow[d]) * kv(hk, j, d);
              sc[static_cast<size_t>(j)] = dot * scale;
              m = std::max(m, sc[static_cast<size_t>(j)]);
            }
            double l = 0;
            std::fill(acc.begin(), acc.end(), 0.0);
            for (int64_t j = 0; j < n; ++j) {
              double const p = std::exp(sc[static_cast<size_t>(j)] - m);
              l += p;
              for (int64_t d = 0; d < D; ++d) acc[static_cast<size_t>(d)] += p * kv(hv, j, d);
            }
            uint16_t const* orow = ho.data() + ((b * T + t) * Hq + h) * D;
            for (int64_t d = 0; d < D; ++d) {
              double const want = acc[static_cast<size_t>(d)] / l, got = bf16_to_float(orow[d]);
              num += (got - want) * (got - want);
              den += want * want;
            }
          }
        }
      double const rel = den > 0 ? std::sqrt(num / den) : 0.0;
      row.rel_error = rel;
      row.disposition = rel < 5e-3 && std::isfinite(rel) ? "passed" : "incorrect";
    }
    double ms = 0;
    if (Status tm = time_median_ms([&op, stream] { return op.run(stream); }, options_.warmup_iterations,
                                   options_.profiling_iterations, stream, &ms);
        !tm) {
      if (!fail(row, "timing", tm)) return false;
      continue;
    }
    row.runtime_ms = ms;
    row.gbps = 2.0 * double(B) * S * Hkv * D / (ms * 1e-3) / 1e9;  // K and V bytes the call must read
    report->add(row);
  }
  return true;
}

}  // namespace fp8attn::profiler
