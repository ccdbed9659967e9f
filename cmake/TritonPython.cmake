# Finds an interpreter with triton==${FP8ATTN_TRITON_VERSION} for the ahead-of-time kernel compile, and sets
# FP8ATTN_PYTHON. Order: -DFP8ATTN_PYTHON=..., then python3 on PATH (the GPU machine has the pinned Triton
# and nothing can be installed there), then a project-local virtual environment <source>/.venv, created and
# filled with pip on first use (pip's cache makes later clean builds fast).

function(_fp8attn_triton_version python out)
  execute_process(COMMAND ${python} -c "import triton; print(triton.__version__)"
                  OUTPUT_VARIABLE version OUTPUT_STRIP_TRAILING_WHITESPACE
                  RESULT_VARIABLE rc ERROR_QUIET)
  if(rc EQUAL 0)
    set(${out} "${version}" PARENT_SCOPE)
  else()
    set(${out} "" PARENT_SCOPE)
  endif()
endfunction()

# A wheel build (scikit-build-core) runs in an environment whose interpreter has the pinned Triton as a build
# requirement (pyproject.toml): use it.
if(NOT FP8ATTN_PYTHON AND SKBUILD AND Python_EXECUTABLE)
  _fp8attn_triton_version(${Python_EXECUTABLE} _version)
  if(_version STREQUAL FP8ATTN_TRITON_VERSION)
    set(FP8ATTN_PYTHON ${Python_EXECUTABLE})
  endif()
endif()

if(NOT FP8ATTN_PYTHON)
  find_program(_fp8attn_system_python NAMES python3 python REQUIRED)
  _fp8attn_triton_version(${_fp8attn_system_python} _version)
  if(_version STREQUAL FP8ATTN_TRITON_VERSION)
    set(FP8ATTN_PYTHON ${_fp8attn_system_python})
  else()
    set(_venv ${PROJECT_SOURCE_DIR}/.venv)
    set(_venv_python ${_venv}/bin/python)
    if(EXISTS ${_venv_python})
      _fp8attn_triton_version(${_venv_python} _version)
    else()
      set(_version "")
    endif()
    if(NOT _version STREQUAL FP8ATTN_TRITON_VERSION)
      message(STATUS "fp8attn: installing triton==${FP8ATTN_TRITON_VERSION} into ${_venv}")
      execute_process(COMMAND ${_fp8attn_system_python} -m venv ${_venv} RESULT_VARIABLE rc)
      if(NOT rc EQUAL 0)
        message(FATAL_ERROR "fp8attn: '${_fp8attn_system_python} -m venv ${_venv}' failed")
      endif()
      execute_process(COMMAND ${_venv_python} -m pip install --quiet --disable-pip-version-check
                              triton==${FP8ATTN_TRITON_VERSION}
                      RESULT_VARIABLE rc)
      if(NOT rc EQUAL 0)
        message(FATAL_ERROR "fp8attn: pip install triton==${FP8ATTN_TRITON_VERSION} failed; pass "
                            "-DFP8ATTN_PYTHON=<python with triton ${FP8ATTN_TRITON_VERSION}>")
      endif()
    endif()
    set(FP8ATTN_PYTHON ${_venv_python})
  endif()
endif()

_fp8attn_triton_version(${FP8ATTN_PYTHON} _version)
if(NOT _version STREQUAL FP8ATTN_TRITON_VERSION)
  message(FATAL_ERROR "fp8attn: ${FP8ATTN_PYTHON} has triton '${_version}', need ${FP8ATTN_TRITON_VERSION}")
endif()
set(FP8ATTN_PYTHON ${FP8ATTN_PYTHON} CACHE FILEPATH "Interpreter with the pinned Triton" FORCE)
message(STATUS "fp8attn: compiling kernels with ${FP8ATTN_PYTHON} (triton ${_version})")
