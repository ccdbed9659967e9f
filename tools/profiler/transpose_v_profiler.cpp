// V transpose profiling: candidates, byte-exact verification against a host copy, timing of each row.

#include "transpose_v_profiler.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <utility>

#include "device_tensors.h"
#include "fp8attn/library/operation.h"
#include "reference/fmha_reference.h"
#include "timing.h"

namespace fp8attn::profiler {
namespace {

using fmha::TransposeVArguments;
using fmha::device::TransposeV;

// The host copy of V^T: vt[((b * H + h) * D + d) * S_pad + s] = v[b, s, h, d]; the padding s >= S is zero.
// `v` holds the bytes of V as the device does, at a.v's strides (a.v.ptr is not read).
std::vector<uint8_t> transpose_on_host(std::vector<uint8_t> const& v, TransposeVArguments const& a) {
  int64_t const B = a.batch, S = a.seqlen, H = a.heads, D = a.head_dim, S_pad = fmha::padded_seqlen(a.seqlen);
  std::vector<uint8_t> vt(static_cast<size_t>(B * H * D * S_pad), 0);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t s = 0; s < S; ++s)
      for (int64_t h = 0; h < H; ++h) {
        uint8_t const* src = v.data() + b * a.v.stride_b + s * a.v.stride_s + h * a.v.stride_h;
        uint8_t* dst = vt.data() + (b * H + h) * D * S_pad + s;
        for (int64_t d = 0; d < D; ++d) dst[d * S_pad] = src[d];
      }
  return vt;
}

// The key-permuted V^T (TransposeVArguments::key_permuted) from the plain one: in each 32-key block of a row,
// position 16h + 4t + 2j + e holds key 16h + 8j + 2t + e. Rows are padded to whole 32-key blocks.
std::vector<uint8_t> permute_keys(std::vector<uint8_t> const& vt, TransposeVArguments const& a) {
  int64_t const S_pad = fmha::padded_seqlen(a.seqlen);
  std::vector<uint8_t> out(vt.size());
  for (size_t row = 0; row < vt.size() / static_cast<size_t>(S_pad); ++row) {
    uint8_t const* src = vt.data() + row * S_pad;
    uint8_t* dst = out.data() + row * S_pad;
    for (int64_t pos = 0; pos < S_pad; ++pos) {
      int64_t const r = pos % 32;
      int64_t const key = pos - r + (r / 16) * 16 + ((r / 2) % 2) * 8 + ((r / 4) % 4) * 2 + r % 2;
      dst[pos] = src[key];
    }
  }
  return out;
}

// Whether the named instance writes the key-permuted order: it implements the arguments only with key_permuted
// set (the handle refuses an instance whose key order differs from the arguments').
bool permutes_keys(TransposeVArguments args, std::string const& name) {
  args.kernel_name = name;
  args.key_permuted = false;
  if (TransposeV::can_implement(args)) return false;
  args.key_permuted = true;
  return static_cast<bool>(TransposeV::can_implement(args));
}

// "(b=0, h=1, d=3, s=17)": the coordinates of byte `index` of V^T (s: the position in the row).
std::string vt_coordinates(int64_t index, TransposeVArguments const& a) {
  int64_t const S_pad = fmha::padded_seqlen(a.seqlen);
  int64_t const s = index % S_pad;
  int64_t const d = (index / S_pad) % a.head_dim;
  int64_t const h = (index / S_pad / a.head_dim) % a.heads;
  int64_t const b = index / S_pad / a.head_dim / a.heads;
  char buf[128];
  std::snprintf(buf, sizeof(buf), "(b=%lld, h=%lld, d=%lld, s=%lld%s)", static_cast<long long>(b),
                static_cast<long long>(h), static_cast<long long>(d), static_cast<long long>(s),
                s >= a.seqlen ? ", padding" : "");
  return buf;
}

}  // namespace

std::vector<ProblemSpec> TransposeVProfiler::problems() const {
  return kv_operand_problems([](DataType t) { return size_of(t) == 1; }, std::nullopt);
}

std::vector<TransposeVProfiler::Candidate> TransposeVProfiler::candidates(TransposeVArguments const& args) const {
  std::vector<Candidate> out;
  std::string const& filter = options_.kernels;
  // The library's own pick has no name to filter on: it is profiled only without --kernels.
  if (options_.profile_heuristic && filter.empty()) {
    out.push_back({"fp8attn", "", "-", TransposeV::can_implement(args)});
  }
  if (options_.profile_instances) {
    for (library::Operation const* op : library::operations(library::OperationKind::kTransposeV)) {
      std::string const& name = op->description().name;
      if (!library::matches_filter(name, filter)) continue;
      TransposeVArguments forced = args;
      forced.kernel_name = name;
      forced.key_permuted = permutes_keys(args, name);
      Status ok = TransposeV::can_implement(forced);
      // Without a filter only what can run is listed; with one, every named instance gets its verdict.
      if (!ok && filter.empty()) continue;
      out.push_back({"instance", name, name, std::move(ok)});
    }
  }
  if (out.empty()) {
    std::string why = "no compiled transpose_v instance";
    if (!filter.empty()) why += " matching --kernels=" + filter;
    why += " implements this problem";
    out.push_back({options_.profile_instances ? "instance" : "fp8attn", "", "-",
                   Status(StatusCode::kErrorNotSupported, why)});
  }
  return out;
}

Row TransposeVProfiler::run_candidate(ProblemSpec const& spec, Candidate const& candidate, TransposeVArguments args,
                                      std::vector<uint8_t> const& expected, size_t vt_bytes,
                                      StreamHandle stream) const {
  Row row = first_row(spec, candidate);
  if (!candidate.implementable) return row;
  auto fail = [&row](std::string const& what, Status const& s) { return failed(row, what, s); };
  args.kernel_name = candidate.kernel_name;
  args.key_permuted = !candidate.kernel_name.empty() && permutes_keys(args, candidate.kernel_name);

  // Verification run into V^T full of 0xFF (NaN in e4m3 and e5m2, never produced by the generator), so that any
  // byte the kernel leaves unwritten, the zero padding included, shows.
  if (cudaError_t err = cudaMemsetAsync(args.vt, 0xFF, vt_bytes, stream); err != cudaSuccess) {
    return fail("poisoning V^T", cuda_error(err, "cudaMemsetAsync"));
  }
  TransposeV op;
  if (Status s = op.initialize(args, stream); !s) return fail("initialize", s);
  if (Status s = op.run(stream); !s) return fail("run", s);
  if (Status s = sync_stream(stream, "run"); !s) return fail("run", s);

  std::vector<uint8_t> const permuted = args.key_permuted && !expected.empty() ? permute_keys(expected, args)
                                                                               : std::vector<uint8_t>{};
  std::vector<uint8_t> const& want = args.key_permuted ? permuted : expected;
  if (want.empty()) {
    row.disposition = "not_verified";
  } else {
    std::vector<uint8_t> vt(vt_bytes);
    if (cudaError_t err = cudaMemcpy(vt.data(), args.vt, vt_bytes, cudaMemcpyDeviceToHost); err != cudaSuccess) {
      return fail("download of V^T", cuda_error(err, "cudaMemcpy"));
    }
    int64_t differ = 0, first = -1;
    for (size_t i = 0; i < vt_bytes; ++i) {
      if (vt[i] == want[i]) continue;
      if (differ++ == 0) first = static_cast<int64_t>(i);
    }
    if (differ == 0) {
      row.disposition = "passed";
    } else {
      char buf[192];
      std::snprintf(buf, sizeof(buf), "; the first at %s: 0x%02x, expected 0x%02x", vt_coordinates(first, args).c_str(),
                    vt[static_cast<size_t>(first)], want[static_cast<size_t>(first)]);
      row.disposition = "incorrect";
      row.notes = std::to_string(differ) + " of " + std::to_string(vt_bytes) +
                  " bytes of V^T differ from the host copy" + buf;
    }
  }
  if (candidate.kernel_name.empty()) {
    row.notes += std::string(row.notes.empty() ? "" : "; ") + "the instance TransposeV picks for head_dim=" +
                 std::to_string(spec.head_dim);
  }

  // Timed even when incorrect, as cutlass_profiler does.
  double ms = 0.0;
  Status const timed = time_median_ms([&op, stream] { return op.run(stream); }, options_.warmup_iterations,
                                      options_.profiling_iterations, stream, &ms);
  if (!timed) return fail("timing", timed);
  row.runtime_ms = ms;
  // Every byte of V read once, every byte of V^T (padding included) written once.
  double const bytes = double(spec.batch) * spec.seqlen_k * spec.heads_kv * spec.head_dim + double(vt_bytes);
  row.gbps = bytes / (ms * 1e-3) / 1e9;
  return row;
}

bool TransposeVProfiler::profile(ProblemSpec const& spec, StreamHandle stream, Report* report) {
  auto fail = [&](std::string const& notes) {
    report->add(problem_failed(spec, notes));
    return device_usable();
  };
  int64_t const v_bytes = int64_t{spec.batch} * spec.seqlen_k * spec.heads_kv * spec.head_dim;
  DeviceBuffer v, vt;
  if (Status s = v.allocate(static_cast<size_t>(v_bytes), "V"); !s) return fail("inputs: " + s.to_string());
  if (Status s = reference::fill_random(v.get(), spec.dtype, v_bytes, options_.seed * 3 + 2, stream); !s) {
    return fail("inputs: " + s.to_string());
  }
  TransposeVArguments args;
  args.batch = spec.batch;
  args.heads = spec.heads_kv;
  args.seqlen = spec.seqlen_k;
  args.head_dim = spec.head_dim;
  args.type = spec.dtype;
  args.v = fmha::TensorRef::packed(v.get(), spec.layout, spec.seqlen_k, spec.heads_kv, spec.head_dim);
  size_t const vt_bytes = TransposeV::output_bytes(args);
  if (Status s = vt.allocate(vt_bytes, "V^T"); !s) return fail("output: " + s.to_string());
  args.vt = vt.get();

  // Verification is exact and on the host: the bytes of V, moved.
  std::vector<uint8_t> expected;
  if (options_.verify_device || options_.verify_host) {
    std::vector<uint8_t> host_v(static_cast<size_t>(v_bytes));
    if (Status s = sync_stream(stream, "filling V"); !s) return fail("inputs: " + s.to_string());
    if (cudaError_t err = cudaMemcpy(host_v.data(), v.get(), host_v.size(), cudaMemcpyDeviceToHost);
        err != cudaSuccess) {
      return fail("download of V: " + cuda_error(err, "cudaMemcpy").to_string());
    }
    expected = transpose_on_host(host_v, args);
  }

  for (Candidate const& candidate : candidates(args)) {
    Row const row = run_candidate(spec, candidate, args, expected, vt_bytes, stream);
    report->add(row);
    if (row.disposition == "failed" && !device_usable()) {
      std::fprintf(stderr, "fp8attn_profiler: the GPU context is broken after %s (%s); stopping\n",
                   row.operation.c_str(), row.notes.c_str());
      return false;
    }
  }
  return true;
}

}  // namespace fp8attn::profiler
