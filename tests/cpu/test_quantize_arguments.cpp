// Quantize::can_implement and its sizes on a CPU machine: every refusal has its status code and names the
// argument and its value; valid arguments (including the empty ones) are accepted; the descale, output and
// workspace sizes follow the granularity and options. Pointers are fake but aligned: nothing dereferences them.

#include <cstdint>
#include <cstdio>
#include <string>

#include "check.h"
#include "fp8attn/library/operation.h"
#include "fp8attn/quant/device/quantize.h"
#include "quant/smooth_sample.h"

using fp8attn::DataType;
using fp8attn::Layout;
using fp8attn::Status;
using fp8attn::StatusCode;
using fp8attn::fmha::TensorRef;
using fp8attn::quant::Granularity;
using fp8attn::quant::OutputLayout;
using fp8attn::quant::QuantizeArguments;
using fp8attn::quant::device::Quantize;

namespace {

float* fake_float(uintptr_t address) { return reinterpret_cast<float*>(address); }

QuantizeArguments valid(int head_dim) {
  QuantizeArguments a;
  a.batch = 2;
  a.heads = 4;
  a.seqlen = 1000;
  a.head_dim = head_dim;
  a.input = TensorRef::packed(reinterpret_cast<void const*>(0x10000000), Layout::kBSHD, 1000, 4, head_dim);
  a.output = TensorRef::packed(reinterpret_cast<void const*>(0x20000000), Layout::kBSHD, 1000, 4, head_dim);
  a.descale = fake_float(0x30000000);
  return a;
}

void expect_error(QuantizeArguments const& a, StatusCode code, std::string const& fragment, std::string const& what) {
  Status s = Quantize::can_implement(a);
  CHECK(s.code() == code, what + ": got " + s.to_string());
  CHECK(s.message().find(fragment) != std::string::npos, what + ": '" + s.message() + "' does not name '" + fragment + "'");
  CHECK(Quantize::get_workspace_size(a) == 0, what + ": refused arguments need no workspace");
}

}  // namespace

int main() {
  bool compiled = false;  // the default build's bf16 -> e4m3 / i8 instances at D=128
  bool gluon_compiled = false;  // and the Gluon apply's
  for (fp8attn::library::Operation const* op : fp8attn::library::operations(fp8attn::library::OperationKind::kQuantize)) {
    if (op->description().name == "fp8attn_sm90_quantize_apply_bf16_e4m3_64x128_w4") compiled = true;
    if (op->description().name == "fp8attn_sm90_quantize_apply_bf16_e4m3_64x128_w4_gluon") gluon_compiled = true;
  }
  if (!compiled) {
    std::printf("not applicable in this build: no bf16 -> e4m3 quantize instance at D=128\n");
    return fp8attn_test::finish("test_quantize_arguments");
  }
  CHECK(Quantize::can_implement(valid(128)).ok(), Quantize::can_implement(valid(128)).to_string());

  // Sizes: descales per granularity, workspace per option.
  {
    auto a = valid(128);
    CHECK(Quantize::descale_count(a) == 1, "per tensor: one descale");
    CHECK(Quantize::get_workspace_size(a) == 512, "per tensor: the partial amax of 2 * 4 * 16 blocks");
    a.granularity = Granularity::kPerHead;
    a.heads_kv = 2;
    CHECK(Quantize::descale_count(a) == 4, "per head: batch * heads_kv");
    a.granularity = Granularity::kPerBlock;
    CHECK(Quantize::descale_count(a) == 2 * 4 * 16, "per block: batch * heads * ceil(1000 / 64)");
    CHECK(Quantize::get_workspace_size(a) == 0, "per block without smoothing: no statistics");
    a.smooth = true;
    // mean [2, 4, 128] floats = 4096 B, then partial sums [2, 4, 16, 128] floats = 65536 B.
    CHECK(Quantize::get_workspace_size(a) == 4096 + 65536, "smoothing: mean and partial sums, got " +
                                                              std::to_string(Quantize::get_workspace_size(a)));
    a.granularity = Granularity::kPerTensor;
    a.descale = nullptr;
    a.static_descale = fake_float(0x30000000);
    CHECK(Quantize::can_implement(a).ok(), "static descale: " + Quantize::can_implement(a).to_string());
    CHECK(Quantize::descale_count(a) == 0, "static descale: nothing written");
    CHECK(Quantize::get_workspace_size(a) == 4096 + 65536, "static descale with smoothing: the mean only");
    // The rotation matrix [128, 128] of bf16 = 32768 B comes first.
    a.rotate = true;
    CHECK(Quantize::get_workspace_size(a) == 32768 + 4096 + 65536, "rotation: the matrix, then the mean, got " +
                                                                      std::to_string(Quantize::get_workspace_size(a)));
  }
  {
    // The rotation alone (per block, no smoothing): only the matrix, in the input type, at head dims <= 128;
    // D=256 factors the matrix in the kernel and needs none.
    auto a = valid(64);
    a.granularity = Granularity::kPerBlock;
    a.rotate = true;
    CHECK(Quantize::get_workspace_size(a) == 64 * 64 * 2, "rotation at D=64: 8192 B, got " +
                                                               std::to_string(Quantize::get_workspace_size(a)));
    a.input_type = DataType::kF16;
    if (Quantize::can_implement(a).ok()) {  // a build with f16 instances
      CHECK(Quantize::get_workspace_size(a) == 64 * 64 * 2, "rotation of f16 at D=64: 8192 B");
    }
    auto b = valid(256);
    b.granularity = Granularity::kPerBlock;
    b.rotate = true;
    if (Quantize::can_implement(b).ok()) {
      CHECK(Quantize::get_workspace_size(b) == 0, "rotation at D=256: no matrix, got " +
                                                      std::to_string(Quantize::get_workspace_size(b)));
    }
  }
  {
    auto a = valid(128);
    a.layout = OutputLayout::kVtKeyPermuted;
    CHECK(Quantize::can_implement(a).ok(), "V^T key-permuted at D=128: " + Quantize::can_implement(a).to_string());
    CHECK(Quantize::output_bytes(a) == size_t(2) * 4 * 128 * 1024, "V^T rows padded to 32 keys");
    a.output_type = DataType::kI8;
    expect_error(a, StatusCode::kErrorNotSupported, "output_type must be e4m3", "int8 V^T");
  }
  {
    auto a = valid(128);
    a.seqlen = 0;
    a.input.ptr = nullptr;
    a.output.ptr = nullptr;
    a.descale = nullptr;
    CHECK(Quantize::can_implement(a).ok(), "seqlen 0 is a no-op: " + Quantize::can_implement(a).to_string());
    CHECK(Quantize::get_workspace_size(a) == 0, "seqlen 0: no workspace");
  }
  // Refusals, each naming its argument.
  { auto a = valid(128); a.batch = -1; expect_error(a, StatusCode::kErrorInvalidProblem, "batch=-1", "batch"); }
  // The smoothing sample stride: negative refused; > 1 only with smooth; 0 and 1 always taken; the rule's values
  // (every n-th 64-token block, n = max(1, min(8, blocks / 4))).
  {
    auto a = valid(128);
    a.smooth = true;
    a.smooth_sample_stride = -1;
    expect_error(a, StatusCode::kErrorInvalidProblem, "smooth_sample_stride=-1 must be >= 0", "negative stride");
    a.smooth = false;
    a.smooth_sample_stride = 4;
    expect_error(a, StatusCode::kErrorInvalidProblem, "smooth_sample_stride=4 samples the smoothing mean",
                 "a stride without smoothing");
    for (int stride : {0, 1}) {
      a.smooth_sample_stride = stride;
      CHECK(Quantize::can_implement(a).ok(), "stride " + std::to_string(stride) + " without smoothing: " +
                                                 Quantize::can_implement(a).to_string());
    }
    a.smooth = true;
    for (int stride : {0, 1, 3, 16, 1000}) {  // 1000 > the 16 blocks: the first block alone
      a.smooth_sample_stride = stride;
      CHECK(Quantize::can_implement(a).ok(), "stride " + std::to_string(stride) + ": " +
                                                 Quantize::can_implement(a).to_string());
    }
    using fp8attn::quant::smooth_sample_stride_for;
    int const seqlens[] = {0, 1, 64, 256, 511, 512, 1000, 1024, 1536, 2048, 2049, 131072};
    int const strides[] = {1, 1, 1, 1, 2, 2, 4, 4, 6, 8, 8, 8};
    for (int i = 0; i < 12; ++i) {
      CHECK(smooth_sample_stride_for(seqlens[i]) == strides[i],
            "the rule at seqlen " + std::to_string(seqlens[i]) + ": " + std::to_string(smooth_sample_stride_for(seqlens[i])));
    }
    // The mean's divisor against counting the sampled tokens one by one (ragged last blocks, sampled or not;
    // strides past the block count: the first block alone).
    int checked = 0;
    for (int64_t seqlen = 1; seqlen <= 1300; ++seqlen) {
      for (int64_t stride : {1, 2, 3, 5, 8, 21, 1000}) {
        int64_t count = 0;
        for (int64_t s = 0; s < seqlen; ++s) count += (s / fp8attn::quant::kQuantizeBlockTokens) % stride == 0;
        int64_t const got = fp8attn::quant::detail::sampled_tokens(seqlen, stride);
        if (got != count) {
          CHECK(false, "sampled_tokens(" + std::to_string(seqlen) + ", " + std::to_string(stride) + ") = " +
                           std::to_string(got) + ", counted " + std::to_string(count));
        }
        ++checked;
      }
    }
    CHECK(checked == 1300 * 7, "divisor cases");
  }
  { auto a = valid(128); a.heads = 0; expect_error(a, StatusCode::kErrorInvalidProblem, "heads=0", "heads"); }
  { auto a = valid(128); a.heads_kv = 3; expect_error(a, StatusCode::kErrorInvalidProblem, "heads_kv=3", "heads_kv"); }
  { auto a = valid(96); expect_error(a, StatusCode::kErrorNotSupported, "head_dim=96", "head_dim"); }
  { auto a = valid(128); a.input_type = DataType::kE4M3; expect_error(a, StatusCode::kErrorNotSupported, "input_type=e4m3", "input type"); }
  { auto a = valid(128); a.output_type = DataType::kBF16; expect_error(a, StatusCode::kErrorNotSupported, "output_type=bf16", "output type"); }
  { auto a = valid(128); a.input.ptr = nullptr; expect_error(a, StatusCode::kErrorNullPointer, "input.ptr", "null input"); }
  { auto a = valid(128); a.output.ptr = nullptr; expect_error(a, StatusCode::kErrorNullPointer, "output.ptr", "null output"); }
  { auto a = valid(128); a.descale = nullptr; expect_error(a, StatusCode::kErrorNullPointer, "descale is null", "null descale"); }
  {
    auto a = valid(128);
    a.input.ptr = reinterpret_cast<void const*>(0x10000008);
    expect_error(a, StatusCode::kErrorMisalignedOperand, "input.ptr=0x10000008", "misaligned input");
  }
  { auto a = valid(128); a.descale = fake_float(0x30000002); expect_error(a, StatusCode::kErrorMisalignedOperand, "descale=", "misaligned descale"); }
  { auto a = valid(128); a.input.stride_s = 136; expect_error(a, StatusCode::kErrorMisalignedOperand, "input.stride_s=136", "input stride"); }
  { auto a = valid(128); a.input.stride_d = 2; expect_error(a, StatusCode::kErrorInvalidProblem, "input.stride_d=2", "input stride_d"); }
  { auto a = valid(128); a.output.stride_h = -128; expect_error(a, StatusCode::kErrorMisalignedOperand, "output.stride_h=-128", "output stride"); }
  {
    auto a = valid(128);
    a.output.ptr = reinterpret_cast<void const*>(0x10000000 + 4096);  // inside the 2 MB bf16 input
    expect_error(a, StatusCode::kErrorInvalidProblem, "output overlaps input", "output over input");
  }
  {
    auto a = valid(128);
    a.descale = fake_float(0x20000000 + 512);  // inside the output
    expect_error(a, StatusCode::kErrorInvalidProblem, "descale overlaps output", "descale over output");
  }
  {
    auto a = valid(128);
    a.granularity = Granularity::kPerBlock;
    a.descale = nullptr;
    a.static_descale = fake_float(0x30000000);
    expect_error(a, StatusCode::kErrorInvalidProblem, "granularity=block", "static per-block descale");
  }
  {
    auto a = valid(128);
    a.static_descale = fake_float(0x30000000);
    expect_error(a, StatusCode::kErrorInvalidProblem, "descale must be null", "static and computed descale");
  }
  {
    auto a = valid(128);
    a.kernel_name = "fp8attn_sm90_quantize_reduce_f32_w4";
    expect_error(a, StatusCode::kErrorNotSupported, "internal stage", "a stage forced by name");
    a.kernel_name = "fp8attn_sm90_quantize_apply_bf16_i8_64x128_w4";
    expect_error(a, StatusCode::kErrorNotSupported, "does not quantize bf16 -> e4m3", "wrong instance forced");
    a.kernel_name = "no_such_kernel";
    expect_error(a, StatusCode::kErrorKernelNotFound, "kernel_name=no_such_kernel", "unknown instance");
  }
  {
    auto a = valid(128);
    a.kernel_name = "fp8attn_sm90_quantize_rotation_bf16_w4";
    expect_error(a, StatusCode::kErrorNotSupported, "internal stage", "the rotation stage forced by name");
  }
  {
    // block_pair: INT8 K in 128-token blocks, each descale in both of its 64-token entries (the per-block layout),
    // through a 128-token apply: the Gluon one for int8_qk's smoothed and rotated K (as for 64-token blocks:
    // gluon_apply_preferred), the Triton one forced by name or where no Gluon pair apply is compiled; [b, s, h, d]
    // only.
    std::string const paired_apply = "fp8attn_sm90_quantize_apply_bf16_i8_128x128_w8";
    std::string const paired_gluon = "fp8attn_sm90_quantize_apply_bf16_i8_128x128_w4_gluon";
    auto a = valid(128);
    a.output_type = DataType::kI8;
    a.granularity = Granularity::kPerBlockPair;
    a.smooth = a.rotate = true;  // int8_qk's K recipe
    if (fp8attn::library::find_operation(paired_apply) != nullptr) {
      std::string pick;
      bool const gluon_pairs = fp8attn::library::find_operation(paired_gluon) != nullptr;
      CHECK(Quantize::select_kernel(a, &pick).ok() && pick == (gluon_pairs ? paired_gluon : paired_apply),
            "the block_pair pick: " + pick);
      auto unrotated = a;
      unrotated.rotate = unrotated.smooth = false;  // not a recipe the Gluon apply is preferred for
      CHECK(Quantize::select_kernel(unrotated, &pick).ok() && pick == paired_apply,
            "the unrotated block_pair pick: " + pick);
      CHECK(Quantize::descale_count(a) == 2 * 4 * 16, "block_pair: the per-block layout, ceil(1000 / 64) entries");
      auto b = a;
      b.kernel_name = "fp8attn_sm90_quantize_apply_bf16_i8_64x128_w4";  // a 64-token apply cannot write pairs
      expect_error(b, StatusCode::kErrorNotSupported, "blocks of 64 tokens, granularity=block_pair blocks of 128",
                   "a 64-token apply forced with block_pair");
      b = a;
      b.granularity = Granularity::kPerBlock;
      b.kernel_name = paired_apply;  // and the 128-token apply cannot write single blocks
      expect_error(b, StatusCode::kErrorNotSupported, "blocks of 128 tokens, granularity=block blocks of 64",
                   "the paired apply forced with block");
      b = a;
      b.kernel_name = paired_apply + "_gluon";  // the Gluon pair apply has 4 warps, not 8
      expect_error(b, StatusCode::kErrorKernelNotFound, "kernel_name=" + paired_apply + "_gluon", "no such name");
      if (gluon_pairs) {
        b = a;
        b.kernel_name = paired_apply;  // the Triton pair apply forced by name over the Gluon pick
        CHECK(Quantize::select_kernel(b, &pick).ok() && pick == paired_apply, "the Triton pairs by name: " + pick);
        b = a;
        b.granularity = Granularity::kPerBlock;
        b.kernel_name = paired_gluon;  // the Gluon pair apply cannot write single blocks either
        expect_error(b, StatusCode::kErrorNotSupported, "blocks of 128 tokens, granularity=block blocks of 64",
                     "the Gluon pair apply forced with block");
        b = a;
        b.input.stride_b = 0;  // a stride TMA cannot take: the pick is the Triton pair apply
        CHECK(Quantize::select_kernel(b, &pick).ok() && pick == paired_apply, "the pairs' pick, stride 0: " + pick);
        b.kernel_name = paired_gluon;  // and the Gluon pair apply forced onto it is refused
        expect_error(b, StatusCode::kErrorNotSupported, "cannot take input.stride_b=0", "the Gluon pairs, stride 0");
      }
    }
    auto vt = a;
    vt.output_type = DataType::kE4M3;
    vt.layout = OutputLayout::kVtKeyPermuted;
    expect_error(vt, StatusCode::kErrorNotSupported, "granularity=block_pair", "block_pair on V^T");
    auto fixed = a;
    fixed.descale = nullptr;
    fixed.static_descale = fake_float(0x30000000);
    expect_error(fixed, StatusCode::kErrorInvalidProblem, "granularity=block_pair", "static block_pair descale");
    auto e4m3 = a;
    e4m3.output_type = DataType::kE4M3;  // no e4m3 pairs are compiled
    expect_error(e4m3, StatusCode::kErrorNotSupported, "granularity=block_pair", "e4m3 block_pair");
  }
  if (gluon_compiled) {
    // The Gluon apply writes [b, s, h, d] through TMA: forced onto a V^T layout or a stride TMA cannot take, it is
    // refused with the reason. The library picks it for rotated recipes (unsmoothed ones at D=128 only) where it
    // applies (codegen/manifest.py lists it first; src/quant/quantize.cpp gluon_apply_preferred) and the Triton
    // apply everywhere else.
    auto a = valid(128);
    std::string pick;
    std::string const triton = "fp8attn_sm90_quantize_apply_bf16_e4m3_64x128_w4";
    CHECK(Quantize::select_kernel(a, &pick).ok() && pick == triton, "the pick unrotated: " + pick);
    {
      auto b = valid(128);
      b.rotate = true;
      CHECK(Quantize::select_kernel(b, &pick).ok() && pick == triton + "_gluon", "the pick rotated: " + pick);
      b.input.stride_b = 0;  // a stride TMA cannot take: the Triton apply
      CHECK(Quantize::select_kernel(b, &pick).ok() && pick == triton, "the pick on a zero stride: " + pick);
      b = valid(128);
      b.rotate = true;
      b.layout = OutputLayout::kVt;  // V^T: the Triton apply
      CHECK(Quantize::select_kernel(b, &pick).ok() && pick == triton, "the pick on V^T: " + pick);
      b = valid(128);
      b.rotate = true;
      b.kernel_name = triton;  // a name overrides the preference
      CHECK(Quantize::select_kernel(b, &pick).ok() && pick == triton, "the Triton apply by name: " + pick);
      CHECK(Quantize::can_implement(b).ok(), "the Triton apply by name: " + Quantize::can_implement(b).to_string());
      // At D=64 the Gluon apply is preferred for smoothed rotated recipes only (a rotated Q measured slower there).
      std::string const triton64 = "fp8attn_sm90_quantize_apply_bf16_e4m3_64x64_w4";
      b = valid(64);
      b.rotate = true;
      CHECK(Quantize::select_kernel(b, &pick).ok() && pick == triton64, "the pick rotated at D=64: " + pick);
      b.smooth = true;
      CHECK(Quantize::select_kernel(b, &pick).ok() && pick == triton64 + "_gluon",
            "the pick smoothed and rotated at D=64: " + pick);
    }
    a.kernel_name = "fp8attn_sm90_quantize_apply_bf16_e4m3_64x128_w4_gluon";
    CHECK(Quantize::can_implement(a).ok(), Quantize::can_implement(a).to_string());
    a.layout = OutputLayout::kVt;
    expect_error(a, StatusCode::kErrorNotSupported, "cannot take layout=vt", "the Gluon apply on V^T");
    a = valid(128);
    a.kernel_name = "fp8attn_sm90_quantize_apply_bf16_e4m3_64x128_w4_gluon";
    a.input.stride_b = 0;  // valid (a broadcast batch), but not a TMA stride
    expect_error(a, StatusCode::kErrorNotSupported, "input.stride_b=0", "the Gluon apply on a zero stride");
    a.batch = 1;  // a dimension of extent 1 is never stepped: its zero stride is replaced, not refused
    CHECK(Quantize::can_implement(a).ok(), "zero stride of a single batch: " + Quantize::can_implement(a).to_string());
    a.batch = 0;  // an empty problem launches nothing
    CHECK(Quantize::can_implement(a).ok(), "empty problem: " + Quantize::can_implement(a).to_string());
    a.batch = 2;
    a.kernel_name.clear();
    CHECK(Quantize::can_implement(a).ok(), "the Triton apply takes the zero stride: " + Quantize::can_implement(a).to_string());
  }
  // The registry: every quantize instance is listed; a stage refuses to run alone, an apply instance accepts.
  for (fp8attn::library::Operation const* op : fp8attn::library::operations(fp8attn::library::OperationKind::kQuantize)) {
    auto a = valid(128);
    std::string const& name = op->description().name;
    Status s = op->can_implement(&a);
    if (name.find("_apply_bf16_e4m3_64x128_w4") != std::string::npos && name.find("kperm") == std::string::npos) {
      CHECK(s.ok(), name + ": " + s.to_string());
    } else if (name.find("_stats_") != std::string::npos || name.find("_reduce_") != std::string::npos ||
               name.find("_rotation_") != std::string::npos) {
      CHECK(s.code() == StatusCode::kErrorNotSupported && s.message().find("internal stage") != std::string::npos,
            name + ": " + s.to_string());
    }
  }
  return fp8attn_test::finish("test_quantize_arguments");
}
