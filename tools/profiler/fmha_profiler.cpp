// Attention forward profiling: candidates, references, verification and timing of each row.

#include "fmha_profiler.h"

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

using fmha::device::FmhaFwd;

Status sync(StreamHandle stream, char const* what) {
  cudaError_t const err = cudaStreamSynchronize(stream);
  if (err == cudaSuccess) return Status::success();
  return Status(StatusCode::kErrorCudaDriver,
                std::string(what) + ": " + cudaGetErrorName(err) + " (" + cudaGetErrorString(err) + ")");
}

}  // namespace

std::vector<FmhaProfiler::Candidate> FmhaProfiler::candidates(ProblemSpec const& spec,
                                                              FmhaFwd::Arguments const& args) const {
  std::vector<Candidate> out;
  std::string const& filter = options_.kernels;
  if (options_.profile_heuristic) {
    std::string name;
    Status const selected = FmhaFwd::select_kernel(args, &name);
    if (!selected) {
      out.push_back({"fp8attn", "", "-", selected});
    } else if (filter.empty() || library::matches_filter(name, filter)) {
      out.push_back({"fp8attn", "", name, FmhaFwd::can_implement(args)});
    }
  }
  if (options_.profile_instances) {
    for (library::FmhaDescription const& desc : library::fmha_operations()) {
      if (desc.qk_type != spec.dtype || !library::matches_filter(desc.name, filter)) continue;
      FmhaFwd::Arguments forced = args;
      forced.kernel_name = desc.name;
      Status ok = FmhaFwd::can_implement(forced);
      // Without a filter only what can run is listed; with one, every named instance gets its verdict.
      if (!ok && filter.empty()) continue;
      out.push_back({"instance", desc.name, desc.name, std::move(ok)});
    }
  }
  if (out.empty()) {
    std::string why = std::string("no compiled ") + to_string(spec.dtype) + " instance";
    if (!filter.empty()) why += " matching --kernels=" + filter;
    why += options_.profile_instances && filter.empty() ? " implements this problem" : " was selected";
    out.push_back(
        {options_.profile_instances ? "instance" : "fp8attn", "", "-", Status(StatusCode::kErrorNotSupported, why)});
  }
  return out;
}

FmhaProfiler::References FmhaProfiler::compute_references(ProblemSpec const& spec, ProblemTensors& tensors) const {
  References refs;
  FmhaFwd::Arguments const args = tensors.arguments();
  if (options_.verify_device) {
    refs.status = reference::fmha_device(args, tensors.o_ref(), nullptr, stream_);
    if (refs.status) refs.status = sync(stream_, "device reference");
    if (!refs.status) return refs;
    refs.device = true;
  }
  if (options_.verify_host) {
    if (spec.reference_work() > options_.host_verification_limit) {
      refs.notes = "host reference skipped (B*H*Sq*Sk*D=" + std::to_string(spec.reference_work()) + " > " +
                   std::to_string(options_.host_verification_limit) + ")";
    } else {
      std::vector<double> q, k, v;
      for (auto [operand, out] : {std::pair{reference::Operand::kQ, &q}, std::pair{reference::Operand::kK, &k},
                                  std::pair{reference::Operand::kV, &v}}) {
        refs.status = reference::download_operand(args, operand, out, stream_);
        if (!refs.status) return refs;
      }
      refs.status = reference::fmha_host(args.problem, q, k, v, args.softmax_scale, &refs.host_o, nullptr);
      if (!refs.status) return refs;
      refs.host = true;
    }
  }
  return refs;
}

void FmhaProfiler::verify(ProblemSpec const& spec, ProblemTensors& tensors, References const& refs, Row* row) const {
  if (!refs.status) {
    row->disposition = "failed";
    row->notes = "reference: " + refs.status.to_string();
    return;
  }
  if (!refs.device && !refs.host) {
    row->disposition = "not_verified";
    row->notes = refs.notes;
    return;
  }
  FmhaFwd::Arguments const args = tensors.arguments();
  reference::ErrorStats worst;
  // The row reports the worse of the two references, each compared on its own.
  auto merge = [&worst](reference::ErrorStats const& e) {
    worst.rel_l2 = std::max(worst.rel_l2, e.rel_l2);
    worst.max_abs = std::max(worst.max_abs, e.max_abs);
    worst.nonfinite = std::max(worst.nonfinite, e.nonfinite);
    worst.count = std::max(worst.count, e.count);
  };
  if (refs.device) {
    reference::ErrorStats e;
    if (Status s = reference::compare_device(args, tensors.o_ref(), &e, stream_); !s) {
      row->disposition = "failed";
      row->notes = "compare_device: " + s.to_string();
      return;
    }
    merge(e);
  }
  if (refs.host) {
    std::vector<double> o;
    if (Status s = reference::download_operand(args, reference::Operand::kO, &o, stream_); !s) {
      row->disposition = "failed";
      row->notes = "download of O: " + s.to_string();
      return;
    }
    merge(reference::compare_host(o, refs.host_o, spec.head_dim));
  }
  row->rel_error = worst.rel_l2;
  row->max_abs_error = worst.max_abs;
  double const tolerance = tolerance_for(options_, spec.dtype);
  char buf[160];
  if (worst.nonfinite > 0) {
    row->disposition = "incorrect";
    std::snprintf(buf, sizeof(buf), "%lld of %lld output elements are not finite", (long long)worst.nonfinite,
                  (long long)worst.count);
    row->notes = buf;
  } else if (!(worst.rel_l2 <= tolerance)) {
    row->disposition = "incorrect";
    std::snprintf(buf, sizeof(buf), "rel_error %.3e > tolerance %.1e", worst.rel_l2, tolerance);
    row->notes = buf;
  } else {
    row->disposition = "passed";
    row->notes = refs.notes;
  }
}

Row FmhaProfiler::run_candidate(ProblemSpec const& spec, Candidate const& candidate, ProblemTensors& tensors,
                                References const& refs) const {
  Row row;
  row.problem = spec;
  row.provider = candidate.provider;
  row.operation = candidate.operation;
  if (!candidate.implementable) {
    row.disposition = "not_supported";
    row.notes = candidate.implementable.message();
    return row;
  }
  auto fail = [&row](std::string what, Status const& s) {
    row.disposition = "failed";
    row.notes = what + ": " + s.to_string();
    return row;
  };

  FmhaFwd::Arguments args = tensors.arguments();
  args.kernel_name = candidate.kernel_name;
  void* workspace = nullptr;
  if (Status s = tensors.reserve_workspace(FmhaFwd::get_workspace_size(args), &workspace); !s) {
    return fail("workspace", s);
  }

  // Verification run on an output full of NaN, so that any element the kernel leaves unwritten shows.
  if (Status s = reference::fill_nan(tensors.o(), args.problem.output_type, tensors.o_elements(), stream_); !s) {
    return fail("fill_nan", s);
  }
  FmhaFwd op;
  if (Status s = op.initialize(args, workspace, stream_); !s) return fail("initialize", s);
  row.operation = op.kernel_name();
  if (Status s = op.run(stream_); !s) return fail("run", s);
  if (Status s = sync(stream_, "run"); !s) return fail("run", s);
  verify(spec, tensors, refs, &row);
  if (row.disposition == "failed") return row;

  // Timed even when incorrect, as cutlass_profiler does: a wrong kernel's speed still tells something.
  double ms = 0.0;
  Status const timed = time_median_ms([&op, this] { return op.run(stream_); }, options_.warmup_iterations,
                                      options_.profiling_iterations, stream_, &ms);
  if (!timed) return fail("timing", timed);
  row.runtime_ms = ms;
  row.tflops = spec.problem().flops() / (ms * 1e-3) / 1e12;
  row.gbps = tensors.compulsory_bytes() / (ms * 1e-3) / 1e9;
  return row;
}

bool FmhaProfiler::device_usable() const {
  cudaGetLastError();  // clears an error that is not sticky
  return cudaDeviceSynchronize() == cudaSuccess;
}

bool FmhaProfiler::profile(ProblemSpec const& spec) {
  ProblemTensors tensors;
  if (Status s = tensors.initialize(spec, options_.seed, stream_); !s) {
    Row row;
    row.problem = spec;
    row.provider = "-";
    row.operation = "-";
    row.disposition = "failed";
    row.notes = "inputs: " + s.to_string();
    report_->add(row);
    return device_usable();
  }

  std::vector<Candidate> const list = candidates(spec, tensors.arguments());
  bool const any_runs = std::any_of(list.begin(), list.end(), [](Candidate const& c) { return c.implementable.ok(); });
  References const refs = any_runs ? compute_references(spec, tensors) : References{};

  for (Candidate const& candidate : list) {
    Row const row = run_candidate(spec, candidate, tensors, refs);
    report_->add(row);
    if (row.disposition == "failed" && !device_usable()) {
      std::fprintf(stderr, "fp8attn_profiler: the GPU context is broken after %s (%s); stopping\n",
                   row.operation.c_str(), row.notes.c_str());
      return false;
    }
  }
  return true;
}

}  // namespace fp8attn::profiler
