# FP8ATTN_SANITIZE (top-level option): compile and link all HOST code with the named sanitizers, e.g.
# "address,undefined"; empty = off. CI builds a second tree with it (.ci/run) and runs the CPU tests there,
# so that a memory error or undefined behaviour in argument checking (signed overflow in a size product,
# a read past a string) aborts the test instead of passing by luck.
#
# -fno-sanitize-recover=all: UBSan otherwise prints and continues, and the test still passes.
# -fno-omit-frame-pointer -g: readable stack traces in the reports.
#
# CUDA sources (tools/util/reference/*.cu, the profiler's device reference): their host side is sanitized through
# -Xcompiler, one flag per -Xcompiler because nvcc splits its argument at commas (and a sanitizer list has
# commas). Device code is never instrumented (-Xcompiler reaches only the host compiler; use
# compute-sanitizer for device code). Every executable links with the host C++ compiler (nothing links
# through nvcc), which pulls in the sanitizer runtimes.

if(NOT FP8ATTN_SANITIZE)
  return()
endif()

string(REPLACE "," ";" _fp8attn_sanitizers "${FP8ATTN_SANITIZE}")
set(_fp8attn_sanitize_flags -fno-omit-frame-pointer -fno-sanitize-recover=all -g)
foreach(_s IN LISTS _fp8attn_sanitizers)
  list(APPEND _fp8attn_sanitize_flags -fsanitize=${_s})
endforeach()

# Fail at configure time, with the reason, when the compiler lacks one (rather than at the first link).
include(CheckCXXSourceCompiles)
string(REPLACE ";" " " CMAKE_REQUIRED_FLAGS "${_fp8attn_sanitize_flags}")
set(CMAKE_REQUIRED_LINK_OPTIONS ${_fp8attn_sanitize_flags})
string(MAKE_C_IDENTIFIER "${FP8ATTN_SANITIZE}" _fp8attn_sanitize_id)  # one cached answer per sanitizer list
check_cxx_source_compiles("int main() { return 0; }" FP8ATTN_SANITIZE_WORKS_${_fp8attn_sanitize_id})
unset(CMAKE_REQUIRED_FLAGS)
unset(CMAKE_REQUIRED_LINK_OPTIONS)
if(NOT FP8ATTN_SANITIZE_WORKS_${_fp8attn_sanitize_id})
  message(FATAL_ERROR "fp8attn: FP8ATTN_SANITIZE=${FP8ATTN_SANITIZE}: ${CMAKE_CXX_COMPILER} cannot compile and link "
                      "with ${_fp8attn_sanitize_flags} (sanitizer runtime missing?)")
endif()

set(_fp8attn_cuda_host_flags)
foreach(_f IN LISTS _fp8attn_sanitize_flags)
  list(APPEND _fp8attn_cuda_host_flags -Xcompiler=${_f})
endforeach()

# For tests that build other projects against this one (tests/install_test.cmake): the installed static
# library holds sanitizer calls, so the consumer must link the runtime too. Read by tests/CMakeLists.txt.
string(REPLACE ";" " " FP8ATTN_SANITIZE_FLAGS_STRING "${_fp8attn_sanitize_flags}")

add_compile_options("$<$<COMPILE_LANGUAGE:C,CXX>:${_fp8attn_sanitize_flags}>"
                    "$<$<COMPILE_LANGUAGE:CUDA>:${_fp8attn_cuda_host_flags}>")
add_link_options("$<$<LINK_LANGUAGE:C,CXX>:${_fp8attn_sanitize_flags}>")
message(STATUS "fp8attn: sanitizers on for host code (C, C++, CUDA host side): ${FP8ATTN_SANITIZE_FLAGS_STRING}")

if(FP8ATTN_BUILD_PYTHON STREQUAL "ON")
  message(WARNING "fp8attn: FP8ATTN_SANITIZE with the Python module: importing it needs the sanitizer runtime "
                  "preloaded (LD_PRELOAD=$(${CMAKE_CXX_COMPILER} -print-file-name=libasan.so)); CI builds it OFF")
endif()

