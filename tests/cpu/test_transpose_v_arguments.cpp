// TransposeV::can_implement on a CPU machine: every refusal has its status code and names the argument and its
// value; valid arguments (including the empty ones) are accepted. Pointers are fake but aligned: nothing here
// dereferences them.

#include <cstdint>
#include <cstdio>
#include <string>

#include "check.h"
#include "fp8attn/fmha/device/transpose_v.h"
#include "fp8attn/library/operation.h"

using fp8attn::DataType;
using fp8attn::Layout;
using fp8attn::Status;
using fp8attn::StatusCode;
using fp8attn::fmha::TensorRef;
using fp8attn::fmha::TransposeVArguments;
using fp8attn::fmha::device::TransposeV;

namespace {

TransposeVArguments valid(int head_dim) {
  TransposeVArguments a;
  a.batch = 2;
  a.heads = 4;
  a.seqlen = 1000;
  a.head_dim = head_dim;
  a.v = TensorRef::packed(reinterpret_cast<void const*>(0x100000), Layout::kBSHD, 1000, 4, head_dim);
  a.vt = reinterpret_cast<void*>(0x800000);
  return a;
}

void expect_error(TransposeVArguments const& a, StatusCode code, std::string const& fragment, std::string const& what) {
  Status s = TransposeV::can_implement(a);
  CHECK(s.code() == code, what + ": got " + s.to_string());
  CHECK(s.message().find(fragment) != std::string::npos, what + ": '" + s.message() + "' does not name '" + fragment + "'");
}

}  // namespace

int main() {
  int compiled = -1;  // a head dim with a compiled transpose in this build
  for (fp8attn::library::Operation const* op : fp8attn::library::operations(fp8attn::library::OperationKind::kTransposeV)) {
    for (int d : {64, 128, 256}) {
      if (op->description().name.find("x" + std::to_string(d) + "_") != std::string::npos) compiled = d;
    }
  }
  if (compiled < 0) {
    std::printf("not applicable in this build: no V transpose compiled\n");
    return fp8attn_test::finish("test_transpose_v_arguments");
  }
  CHECK(TransposeV::can_implement(valid(compiled)).ok(), TransposeV::can_implement(valid(compiled)).to_string());
  CHECK(TransposeV::output_bytes(valid(compiled)) == size_t(2) * 4 * compiled * 1024, "V^T rows padded to 32");
  {
    auto a = valid(compiled);
    a.seqlen = 0;
    a.v.ptr = nullptr;
    a.vt = nullptr;
    CHECK(TransposeV::can_implement(a).ok(), "seqlen 0 is a no-op: " + TransposeV::can_implement(a).to_string());
  }
  { auto a = valid(compiled); a.batch = -1; expect_error(a, StatusCode::kErrorInvalidProblem, "batch=-1", "negative batch"); }
  { auto a = valid(compiled); a.heads = 0; expect_error(a, StatusCode::kErrorInvalidProblem, "heads=0", "no heads"); }
  { auto a = valid(compiled); a.head_dim = 96; expect_error(a, StatusCode::kErrorNotSupported, "head_dim=96", "head dim"); }
  { auto a = valid(compiled); a.type = DataType::kBF16; expect_error(a, StatusCode::kErrorNotSupported, "type=bf16", "two-byte type"); }
  { auto a = valid(compiled); a.kernel_name = "nope"; expect_error(a, StatusCode::kErrorKernelNotFound, "kernel_name=nope", "unknown name"); }
  { auto a = valid(compiled); a.v.ptr = nullptr; expect_error(a, StatusCode::kErrorNullPointer, "v.ptr", "null v"); }
  { auto a = valid(compiled); a.vt = nullptr; expect_error(a, StatusCode::kErrorNullPointer, "vt", "null vt"); }
  {
    auto a = valid(compiled);
    a.v.ptr = reinterpret_cast<void const*>(0x100008);
    expect_error(a, StatusCode::kErrorMisalignedOperand, "v.ptr=0x100008", "misaligned v");
    a = valid(compiled);
    a.vt = reinterpret_cast<void*>(0x800004);
    expect_error(a, StatusCode::kErrorMisalignedOperand, "vt=0x800004", "misaligned vt");
  }
  { auto a = valid(compiled); a.v.stride_d = 2; expect_error(a, StatusCode::kErrorInvalidProblem, "v.stride_d=2", "stride_d"); }
  { auto a = valid(compiled); a.v.stride_s = 8; expect_error(a, StatusCode::kErrorMisalignedOperand, "v.stride_s=8", "stride_s"); }
  return fp8attn_test::finish("test_transpose_v_arguments");
}
