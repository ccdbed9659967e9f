// FmhaFwdQuantized (BF16 in, quantized per accuracy mode, then attention) on a CPU machine: every mode composes
// for the default build's instances, its workspace holds the quantized operands, and what cannot run is refused
// with the piece and argument named. Pointers are fake but aligned: nothing dereferences them.

#include <cstdint>
#include <cstdio>
#include <string>

#include "check.h"
#include "fp8attn/fmha/device/fmha_fwd_quantized.h"
#include "fp8attn/library/operation.h"

using fp8attn::DataType;
using fp8attn::Layout;
using fp8attn::StatusCode;
using fp8attn::fmha::AccuracyMode;
using fp8attn::fmha::TensorRef;
using Op = fp8attn::fmha::device::FmhaFwdQuantized;

namespace {

Op::Arguments valid(AccuracyMode mode, int head_dim = 128, int seqlen = 1000) {
  Op::Arguments a;
  a.problem = {2, 8, 2, seqlen, seqlen, head_dim, true, DataType::kBF16, DataType::kBF16};
  a.q = TensorRef::packed(reinterpret_cast<void const*>(0x10000000), Layout::kBSHD, seqlen, 8, head_dim);
  a.k = TensorRef::packed(reinterpret_cast<void const*>(0x20000000), Layout::kBSHD, seqlen, 2, head_dim);
  a.v = TensorRef::packed(reinterpret_cast<void const*>(0x30000000), Layout::kBSHD, seqlen, 2, head_dim);
  a.o = TensorRef::packed(reinterpret_cast<void const*>(0x40000000), Layout::kBSHD, seqlen, 8, head_dim);
  a.mode = mode;
  return a;
}

bool has(std::string const& part) {
  for (auto const& op : fp8attn::library::operations()) {
    if (op->description().name.find(part) != std::string::npos) return true;
  }
  return false;
}

}  // namespace

int main() {
  if (!has("_quantize_apply_bf16_e4m3_64x128_") || !has("fmha_fwd_e4m3_e4m3_f32_bf16_128x128x128")) {
    std::printf("not applicable in this build: no bf16 -> e4m3 quantize or e4m3 attention instance at D=128\n");
    return fp8attn_test::finish("test_fmha_quantized_arguments");
  }
  size_t const operands = 2 * 1000 * 8 * 128 + 2 * 1000 * 2 * 128 + 2 * 2 * 128 * 1024;  // q8, k8, V^T
  for (AccuracyMode mode : {AccuracyMode::kFp8, AccuracyMode::kFp8PerHead, AccuracyMode::kFp8SmoothRotate,
                            AccuracyMode::kInt8QK, AccuracyMode::kBf16}) {
    std::string const name = fp8attn::fmha::to_string(mode);
    if (mode == AccuracyMode::kInt8QK && !has("fmha_fwd_i8_e4m3_f32_bf16_128x128x128")) {
      std::printf("not applicable in this build: %s (no INT8 Q.K^T instance at D=128)\n", name.c_str());
      continue;
    }
    auto a = valid(mode);
    fp8attn::Status s = Op::can_implement(a);
    CHECK(s.ok(), name + ": " + s.to_string());
    size_t const ws = Op::get_workspace_size(a);
    if (mode == AccuracyMode::kBf16) {
      CHECK(ws < operands, name + ": no quantized operands in the workspace (" + std::to_string(ws) + ")");
    } else {
      CHECK(ws >= operands, name + ": the workspace holds q8, k8 and V^T: " + std::to_string(ws));
    }
  }
  {
    auto a = valid(AccuracyMode::kFp8SmoothRotate);
    a.lse = reinterpret_cast<float*>(0x50000000);
    fp8attn::Status s = Op::can_implement(a);
    CHECK(s.code() == StatusCode::kErrorNotSupported && s.message().find("lse with mode=fp8_smooth_rotate") == 0,
          "lse with smoothing: " + s.to_string());
    a.mode = AccuracyMode::kFp8;
    CHECK(Op::can_implement(a).ok(), "lse with fp8: " + Op::can_implement(a).to_string());
  }
  {
    auto a = valid(AccuracyMode::kBf16);
    a.problem.input_type = DataType::kF16;
    fp8attn::Status s = Op::can_implement(a);
    CHECK(s.code() == StatusCode::kErrorNotSupported && s.message().find("mode=bf16 takes bf16") != std::string::npos,
          "f16 in bf16 mode: " + s.to_string());
  }
  {
    auto a = valid(AccuracyMode::kFp8, 96);
    fp8attn::Status s = Op::can_implement(a);
    CHECK(!s.ok() && s.message().find("quantizing q: ") == 0 && s.message().find("head_dim=96") != std::string::npos,
          "head_dim 96: " + s.to_string());
    CHECK(Op::get_workspace_size(a) == 0, "refused: no workspace");
  }
  {
    auto a = valid(AccuracyMode::kFp8);
    a.q.stride_s = 8 * 128 + 3;  // not a multiple of 16 elements: the quantization refuses it
    fp8attn::Status s = Op::can_implement(a);
    CHECK(!s.ok() && s.message().find("quantizing q: input.stride_s=1027") != std::string::npos,
          "q stride: " + s.to_string());
  }
  if (has("fmha_fwd_i8_e4m3_f32_bf16_128x128x64")) {
    auto a = valid(AccuracyMode::kInt8QK, 256);  // no INT8 instance at D=256
    fp8attn::Status s = Op::can_implement(a);
    CHECK(!s.ok() && s.message().find("attention over the quantized operands: ") == 0,
          "int8 at D=256: " + s.to_string());
  }
  {
    auto a = valid(AccuracyMode::kFp8);
    Op op;
    fp8attn::Status s = op.initialize(a, nullptr);
    CHECK(s.code() == StatusCode::kErrorNullPointer && s.message().find("workspace is null") != std::string::npos,
          "null workspace: " + s.to_string());
    CHECK(op.run().code() == StatusCode::kErrorNotInitialized, "run before initialize");
  }
  return fp8attn_test::finish("test_fmha_quantized_arguments");
}
