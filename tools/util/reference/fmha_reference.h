#pragma once
// References for attention forward, kept independent of the library under test:
//
//   * fmha_host:    float64 on the host, packed BSHD inputs already dequantized; for small problems and CPU tests.
//   * fmha_device:  float32 on the device, reading the SAME strided tensors and descales the library reads;
//                   for problems too large for the host.
//   * input generators, NaN poisoning and output comparison on the device, for the profiler and GPU tests.
//
// Targets: fmha_host, compare_host and judge are in fp8attn_host_reference (plain C++, runs on CPU-only machines);
// everything else is in fp8attn_reference (CUDA), which links the former. This header includes no CUDA header.
// Like CUTLASS's tools/util/include/cutlass/util/reference, these are tools of this project (profiler, tests),
// not part of the installed API: include as "reference/fmha_reference.h" with tools/util on the include path.
//
// Semantics shared by both references (the library's, see fmha_fwd.h and docs/CONVENTIONS.md, "Attention
// arguments and semantics"):
//   * causal is bottom-right aligned: query row i sees keys j <= i + (seqlen_k - seqlen_q);
//   * a row that sees no key gets O = 0 and LSE = -inf;
//   * GQA: query head h reads kv head h / (heads_q / heads_kv);
//   * softmax_scale == 0 selects 1/sqrt(head_dim); LSE is the natural log of the row's sum of exp(scores).

#include <cstdint>
#include <string>
#include <vector>

#include "fp8attn/fmha/device/fmha_fwd.h"
#include "fp8attn/status.h"
#include "fp8attn/types.h"

namespace fp8attn::reference {

// ---- Host, float64 (fp8attn_host_reference) -------------------------------------------------------

/// Attention in float64. q: [B, S_q, H_q, D], k and v: [B, S_k, H_kv, D], packed, already dequantized.
/// Writes o: [B, S_q, H_q, D] packed and, when lse is not null, lse: [B, H_q, S_q]. Only the shape fields of
/// `problem` are read (the data types are irrelevant here).
Status fmha_host(fmha::FmhaProblem const& problem, std::vector<double> const& q, std::vector<double> const& k,
                 std::vector<double> const& v, double softmax_scale, std::vector<double>* o, std::vector<double>* lse);

/// How far an output is from its reference. Non-finite output elements are counted, not summed.
///
/// A row is the head_dim elements of one (b, s, h) of a [B, S, H, D] output; row index (b * S + s) * H + h,
/// i.e. packed BSHD order. Its error is ||out_row - ref_row||_2 / max(||ref_row||_2, DBL_MIN), +inf when the
/// row holds a non-finite element. The global rel_l2 alone cannot see a wrong tile: one zeroed 128-row tile of
/// 262144 rows moves it by sqrt(128 / 262144) = 2.2e-2; the row error of each of those rows is 1.
struct ErrorStats {
  double rel_l2 = 0.0;          ///< ||out - ref||_2 / ||ref||_2 over the finite elements of out (0/0 reads as 0)
  double max_abs = 0.0;         ///< max |out - ref| over the finite elements of out
  double max_row_rel_l2 = 0.0;  ///< the largest row error (see above)
  int64_t max_row = -1;         ///< index of the row with that error (the lowest on ties); -1: no row compared
  int64_t nonfinite = 0;        ///< elements of out that are NaN or +-inf
  int64_t count = 0;            ///< elements compared
  int64_t rows = 0;             ///< rows compared
};

/// Compares two host tensors of equal size element by element (out against ref), in rows of `row_length`
/// elements (head_dim for an attention output; a last, shorter row is a row too). row_length < 1: the whole
/// tensor is one row.
ErrorStats compare_host(std::vector<double> const& out, std::vector<double> const& ref, int64_t row_length);

/// The relative-L2 errors an output may have: over the whole tensor, and in every row (see ErrorStats).
struct Tolerance {
  double rel_l2 = 0.0;
  double row_rel_l2 = 0.0;
};

/// The verification verdict on `stats`: correct when no element is non-finite, rel_l2 <= tolerance.rel_l2 and
/// max_row_rel_l2 <= tolerance.row_rel_l2.
struct Verdict {
  bool correct = true;
  std::string why;  ///< every limit exceeded, "; "-separated; rows named as (b=, s=, h=) of the problem
};

/// Judges `stats` of an output of `problem` ([batch, seqlen_q, heads_q, head_dim]) against `tolerance`.
Verdict judge(ErrorStats const& stats, Tolerance const& tolerance, fmha::FmhaProblem const& problem);

/// "(b=0, s=128, h=0)": the coordinates of row `row` of a [batch, seqlen, heads, head_dim] tensor.
std::string row_coordinates(int64_t row, int64_t seqlen, int64_t heads);

// ---- Device (fp8attn_reference) ---------------------------------------------------------------------

/// fill_random writes e4m3 values x * kE4M3FillScale, so this per-tensor descale recovers x ~ N(0,1).
inline constexpr float kE4M3FillScale = 448.0f / 6.0f;
inline constexpr float kE4M3FillDescale = 6.0f / 448.0f;

/// Fills `count` contiguous elements at `ptr` with deterministic N(0,1)-like values that depend only on
/// (seed, element index). e4m3: x * 448/6 rounded to e4m3 and clipped to +-448; bf16, f16, f32: x.
Status fill_random(void* ptr, DataType type, int64_t count, uint64_t seed, StreamHandle stream = nullptr);

/// Fills `count` contiguous elements at `ptr` with NaN (any type), so that unwritten outputs show up.
Status fill_nan(void* ptr, DataType type, int64_t count, StreamHandle stream = nullptr);

/// Float32 attention over args.q/k/v (e4m3, e5m2, bf16, f16 or f32, with their strides) and args' descales and
/// softmax_scale; args.o, args.lse and args.kernel_name are ignored. Writes o_ref: [B, S_q, H_q, D] packed
/// float32 and, when lse_ref is not null, lse_ref: [B, H_q, S_q] float32. head_dim: a multiple of 32 up to 256.
/// Asynchronous on `stream`.
Status fmha_device(fmha::device::FmhaFwd::Arguments const& args, float* o_ref, float* lse_ref,
                   StreamHandle stream = nullptr);

/// Compares args.o (problem.output_type: bf16, f16 or f32, with args.o's strides) with o_ref ([B, S_q, H_q, D]
/// packed float32) on the device, globally and row by row (rows of head_dim elements, see ErrorStats); the same
/// statistics as compare_host. Deterministic: no floating-point atomics. Synchronizes `stream`.
Status compare_device(fmha::device::FmhaFwd::Arguments const& args, float const* o_ref, ErrorStats* stats,
                      StreamHandle stream = nullptr);

/// One of the attention operands held by FmhaFwd::Arguments.
enum class Operand { kQ, kK, kV, kO };

/// Copies an operand of `args` to the host as packed [B, S, H, D] float64 with its descale applied (none for O),
/// i.e. the dequantized values fmha_host takes. Synchronizes `stream`.
Status download_operand(fmha::device::FmhaFwd::Arguments const& args, Operand operand, std::vector<double>* out,
                        StreamHandle stream = nullptr);

}  // namespace fp8attn::reference
