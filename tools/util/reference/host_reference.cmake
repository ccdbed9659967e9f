# fp8attn_host_reference: the float64 host reference, plain C++ so CPU-only machines (CI) build and test it.
# Included unconditionally from the top-level CMakeLists.txt; the CUDA reference (CMakeLists.txt here) links it.
# It deliberately does not link fp8attn: a reference must not depend on the library it checks.
# Like CUTLASS's tools/util, the references are tools, not part of the installed API: consumers inside this
# project include them as "reference/fmha_reference.h" (include directory tools/util); nothing is installed.
# Guarded, so that tools/util/reference/CMakeLists.txt can include it too whatever the top level's order.
include_guard(GLOBAL)

add_library(fp8attn_host_reference STATIC
  ${CMAKE_CURRENT_LIST_DIR}/fmha_host_reference.cpp
  ${CMAKE_CURRENT_LIST_DIR}/error_stats_host.cpp
  ${CMAKE_CURRENT_LIST_DIR}/verdict.cpp
)
target_include_directories(fp8attn_host_reference PUBLIC ${PROJECT_SOURCE_DIR}/include ${PROJECT_SOURCE_DIR}/tools/util)
target_compile_features(fp8attn_host_reference PUBLIC cxx_std_17)
target_compile_options(fp8attn_host_reference PRIVATE -Wall -Wextra)
