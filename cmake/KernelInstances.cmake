# The kernel instances of this build: selected from the manifest at configure time, each compiled to a
# cubin and embedded in a generated .cpp by its own build step (parallel and incremental; the compiler also
# skips an instance whose cache key is unchanged). Sets FP8ATTN_KERNEL_SOURCES.

# FP8ATTN_KERNEL_DIR: where cubins and their generated .cpp live. A second build tree (the sanitizer build in CI)
# can point at the first one's folder: instances whose cache key is unchanged are not recompiled.
set(FP8ATTN_KERNEL_DIR "${PROJECT_BINARY_DIR}/kernels" CACHE PATH "Folder of the compiled kernel instances")
set(FP8ATTN_GENERATED_DIR ${FP8ATTN_KERNEL_DIR})
set(_list_args "--filter=${FP8ATTN_KERNELS}")
if(FP8ATTN_ALL_KERNELS)
  list(APPEND _list_args --all)
endif()
execute_process(COMMAND ${FP8ATTN_PYTHON} ${PROJECT_SOURCE_DIR}/codegen/list_instances.py ${_list_args}
                OUTPUT_VARIABLE _names ERROR_VARIABLE _error RESULT_VARIABLE rc
                OUTPUT_STRIP_TRAILING_WHITESPACE)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "fp8attn: selecting kernels failed: ${_error}")
endif()
string(REPLACE "\n" ";" FP8ATTN_KERNEL_NAMES "${_names}")
list(LENGTH FP8ATTN_KERNEL_NAMES _count)
message(STATUS "fp8attn: ${_count} kernel instances selected (FP8ATTN_KERNELS='${FP8ATTN_KERNELS}')")

# Reconfigure when the manifest or an operation module changes, so the instance list stays the manifest's.
file(GLOB _operation_sources CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/codegen/operations/*.py)
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS
             ${PROJECT_SOURCE_DIR}/codegen/manifest.py ${_operation_sources})

# Every step depends on every kernel and codegen source; aot_compile.py's per-instance cache key (its own
# kernel module and imports) decides what is actually recompiled.
file(GLOB_RECURSE _kernel_sources CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/kernels/*.py)
file(GLOB_RECURSE _codegen_sources CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/codegen/*.py)
set(FP8ATTN_KERNEL_SOURCES)
foreach(name IN LISTS FP8ATTN_KERNEL_NAMES)
  set(_cpp ${FP8ATTN_GENERATED_DIR}/${name}.cpp)
  add_custom_command(
    OUTPUT ${_cpp}
    COMMAND ${CMAKE_COMMAND} -E env CUDA_VISIBLE_DEVICES= PYTHONDONTWRITEBYTECODE=1
            ${FP8ATTN_PYTHON} ${PROJECT_SOURCE_DIR}/codegen/aot_compile.py --name ${name} --out ${FP8ATTN_GENERATED_DIR}
    DEPENDS ${_kernel_sources} ${_codegen_sources}
    COMMENT "Triton AOT: ${name}"
    VERBATIM)
  list(APPEND FP8ATTN_KERNEL_SOURCES ${_cpp})
endforeach()

# The launch-parameter structs of every kernel (codegen/params.py), included by src/ as
# "generated/kernel_params.h".
set(FP8ATTN_GENERATED_INCLUDE_DIR ${PROJECT_BINARY_DIR}/include_generated)
set(_params_header ${FP8ATTN_GENERATED_INCLUDE_DIR}/generated/kernel_params.h)
add_custom_command(
  OUTPUT ${_params_header}
  COMMAND ${FP8ATTN_PYTHON} ${PROJECT_SOURCE_DIR}/codegen/emit_params.py --out ${_params_header}
  DEPENDS ${_codegen_sources}
  COMMENT "fp8attn kernel parameter structs"
  VERBATIM)
list(APPEND FP8ATTN_KERNEL_SOURCES ${_params_header})  # a header: listed so that it is generated first

# The kernels' numerical constants (kernels/common/numerics.py) for C++ references: "generated/numerics.h".
set(_numerics_header ${FP8ATTN_GENERATED_INCLUDE_DIR}/generated/numerics.h)
add_custom_command(
  OUTPUT ${_numerics_header}
  COMMAND ${FP8ATTN_PYTHON} ${PROJECT_SOURCE_DIR}/codegen/emit_numerics.py --out ${_numerics_header}
  DEPENDS ${PROJECT_SOURCE_DIR}/codegen/emit_numerics.py ${PROJECT_SOURCE_DIR}/kernels/common/numerics.py
  COMMENT "fp8attn numerical constants"
  VERBATIM)
list(APPEND FP8ATTN_KERNEL_SOURCES ${_numerics_header})

# The registry is this build tree's own (its filter), not the shared kernel folder's.
set(_registry ${PROJECT_BINARY_DIR}/generated/registry.cpp)
add_custom_command(
  OUTPUT ${_registry}
  COMMAND ${FP8ATTN_PYTHON} ${PROJECT_SOURCE_DIR}/codegen/emit_registry.py --out ${_registry}
          --triton-version ${FP8ATTN_TRITON_VERSION} ${FP8ATTN_KERNEL_NAMES}
  DEPENDS ${PROJECT_SOURCE_DIR}/codegen/emit_registry.py
  COMMENT "fp8attn kernel registry"
  VERBATIM)
list(APPEND FP8ATTN_KERNEL_SOURCES ${_registry})

# The generated .cpp files only hold bytes: no warnings, no optimization needed.
set_source_files_properties(${FP8ATTN_KERNEL_SOURCES} PROPERTIES GENERATED TRUE COMPILE_OPTIONS "-O0;-w")
