// Attention forward profiling: candidates, references, verification and timing of each row.

#include "fmha_fwd_profiler.h"

#include <algorithm>
#include <cstdio>
#include <string>
#include <utility>

#include "device_tensors.h"
#include "fault_injection.h"
#include "fp8attn/library/operation.h"
#include "reference/fmha_reference.h"
#include "timing.h"

namespace fp8attn::profiler {
namespace {

using fmha::device::FmhaFwd;

// The worse of two comparisons, field by field (the row error with its row).
void merge_worst(reference::ErrorStats const& e, reference::ErrorStats* worst) {
  worst->rel_l2 = std::max(worst->rel_l2, e.rel_l2);
  worst->max_abs = std::max(worst->max_abs, e.max_abs);
  worst->nonfinite = std::max(worst->nonfinite, e.nonfinite);
  worst->count = std::max(worst->count, e.count);
  worst->rows = std::max(worst->rows, e.rows);
  if (worst->max_row < 0 || e.max_row_rel_l2 > worst->max_row_rel_l2) {
    worst->max_row_rel_l2 = e.max_row_rel_l2;
    worst->max_row = e.max_row;
  }
}

}  // namespace

std::vector<std::string> FmhaFwdProfiler::operation_names() const {
  std::vector<std::string> names;
  for (library::FmhaDescription const& d : library::fmha_operations()) names.push_back(d.name);
  return names;
}

std::vector<ProblemSpec> FmhaFwdProfiler::problems() const {
  std::vector<ProblemSpec> out = enumerate_problems(options_);
  if (options_.inject_fault == Fault::kZeroTile) {
    for (ProblemSpec const& p : out) {
      if (p.seqlen_q > kZeroTileBegin) continue;
      throw UsageError(std::string("--inject-fault=zero-tile zeroes rows [") + std::to_string(kZeroTileBegin) + ", " +
                       std::to_string(kZeroTileEnd) + ") of O; the problem " + p.to_string() +
                       " has seqlen_q=" + std::to_string(p.seqlen_q) + ", it needs seqlen_q > " +
                       std::to_string(kZeroTileBegin));
    }
  }
  return out;
}

std::vector<FmhaFwdProfiler::Candidate> FmhaFwdProfiler::candidates(ProblemSpec const& spec,
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

FmhaFwdProfiler::References FmhaFwdProfiler::compute_references(ProblemSpec const& spec, ProblemTensors& tensors,
                                                                StreamHandle stream) const {
  References refs;
  FmhaFwd::Arguments const args = tensors.arguments();
  if (options_.verify_device) {
    refs.status = reference::fmha_device(args, tensors.o_ref(), nullptr, stream);
    if (refs.status) refs.status = sync_stream(stream, "device reference");
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
        refs.status = reference::download_operand(args, operand, out, stream);
        if (!refs.status) return refs;
      }
      refs.status = reference::fmha_host(args.problem, q, k, v, args.softmax_scale, &refs.host_o, nullptr);
      if (!refs.status) return refs;
      refs.host = true;
    }
  }
  return refs;
}

void FmhaFwdProfiler::verify(ProblemSpec const& spec, ProblemTensors& tensors, References const& refs,
                             StreamHandle stream, Row* row) const {
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
  // The row reports the worse of the two references, each compared on its own.
  reference::ErrorStats worst;
  if (refs.device) {
    reference::ErrorStats e;
    if (Status s = reference::compare_device(args, tensors.o_ref(), &e, stream); !s) {
      row->disposition = "failed";
      row->notes = "compare_device: " + s.to_string();
      return;
    }
    merge_worst(e, &worst);
  }
  if (refs.host) {
    std::vector<double> o;
    if (Status s = reference::download_operand(args, reference::Operand::kO, &o, stream); !s) {
      row->disposition = "failed";
      row->notes = "download of O: " + s.to_string();
      return;
    }
    merge_worst(reference::compare_host(o, refs.host_o, spec.head_dim), &worst);
  }
  row->rel_error = worst.rel_l2;
  row->max_row_error = worst.max_row_rel_l2;
  row->max_abs_error = worst.max_abs;
  reference::Tolerance const tolerance{tolerance_for(options_, spec.dtype), row_tolerance_for(options_, spec.dtype)};
  reference::Verdict const verdict = reference::judge(worst, tolerance, args.problem);
  row->disposition = verdict.correct ? "passed" : "incorrect";
  row->notes = verdict.correct ? refs.notes : verdict.why;
}

Row FmhaFwdProfiler::run_candidate(ProblemSpec const& spec, Candidate const& candidate, ProblemTensors& tensors,
                                   References const& refs, StreamHandle stream) const {
  Row row = first_row(spec, candidate);
  if (!candidate.implementable) return row;
  auto fail = [&row](std::string const& what, Status const& s) { return failed(row, what, s); };

  FmhaFwd::Arguments args = tensors.arguments();
  args.kernel_name = candidate.kernel_name;
  void* workspace = nullptr;
  if (Status s = tensors.reserve_workspace(FmhaFwd::get_workspace_size(args), &workspace); !s) {
    return fail("workspace", s);
  }

  // Verification run on an output full of NaN, so that any element the kernel leaves unwritten shows.
  if (Status s = reference::fill_nan(tensors.o(), args.problem.output_type, tensors.o_elements(), stream); !s) {
    return fail("fill_nan", s);
  }
  FmhaFwd op;
  if (Status s = op.initialize(args, workspace, stream); !s) return fail("initialize", s);
  row.operation = op.kernel_name();
  if (Status s = op.run(stream); !s) return fail("run", s);
  if (Status s = sync_stream(stream, "run"); !s) return fail("run", s);
  std::string fault_note;
  if (options_.inject_fault == Fault::kZeroTile) {
    // The verifier's self-test: one 128-row tile of the output zeroed, which verification must report.
    if (Status s = zero_tile(args.o, args.problem.output_type, spec.seqlen_q, spec.head_dim, stream); !s) {
      return fail("inject-fault", s);
    }
    if (Status s = sync_stream(stream, "inject-fault"); !s) return fail("inject-fault", s);
    fault_note = "fault injected (zero-tile): rows [" + std::to_string(kZeroTileBegin) + ", " +
                 std::to_string(kZeroTileEnd) + ") of (b=0, h=0) zeroed; ";
  }
  verify(spec, tensors, refs, stream, &row);
  row.notes = fault_note + row.notes;
  if (row.disposition == "failed") return row;

  // Timed even when incorrect, as cutlass_profiler does: a wrong kernel's speed still tells something.
  double ms = 0.0;
  Status const timed = time_median_ms([&op, stream] { return op.run(stream); }, options_.warmup_iterations,
                                      options_.profiling_iterations, stream, &ms);
  if (!timed) return fail("timing", timed);
  row.runtime_ms = ms;
  row.tflops = spec.problem().flops() / (ms * 1e-3) / 1e12;
  row.gbps = tensors.compulsory_bytes() / (ms * 1e-3) / 1e9;
  return row;
}

bool FmhaFwdProfiler::profile(ProblemSpec const& spec, StreamHandle stream, Report* report) {
  ProblemTensors tensors;
  if (Status s = tensors.initialize(spec, options_.seed, stream); !s) {
    report->add(problem_failed(spec, "inputs: " + s.to_string()));
    return device_usable();
  }

  std::vector<Candidate> const list = candidates(spec, tensors.arguments());
  bool const any_runs = std::any_of(list.begin(), list.end(), [](Candidate const& c) { return c.implementable.ok(); });
  References const refs = any_runs ? compute_references(spec, tensors, stream) : References{};

  for (Candidate const& candidate : list) {
    Row const row = run_candidate(spec, candidate, tensors, refs, stream);
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
