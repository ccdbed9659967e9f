# CPU test of the float64 host reference. Included from tests/CMakeLists.txt; needs only fp8attn_host_reference
# (plain C++, defined by tools/util/reference/host_reference.cmake), so it builds and runs on machines without a GPU.

add_executable(test_host_reference ${CMAKE_CURRENT_LIST_DIR}/test_host_reference.cpp)
target_link_libraries(test_host_reference PRIVATE fp8attn_host_reference)
target_compile_options(test_host_reference PRIVATE -Wall -Wextra)
add_test(NAME host_reference COMMAND test_host_reference)
set_tests_properties(host_reference PROPERTIES LABELS cpu)
