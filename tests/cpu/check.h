#pragma once
// A minimal check macro for the CPU tests: counts failures, prints each with its location, and the test's
// main() returns the count (ctest fails on non-zero). No test framework is needed on any machine.

#include <iostream>
#include <string>

namespace fp8attn_test {
inline int& failures() {
  static int count = 0;
  return count;
}
inline int& checks() {
  static int count = 0;
  return count;
}
inline int finish(char const* suite) {
  std::cout << suite << ": " << (checks() - failures()) << " passed, " << failures() << " failed" << std::endl;
  return failures() == 0 ? 0 : 1;
}
}  // namespace fp8attn_test

#define CHECK(cond, what)                                                                        \
  do {                                                                                           \
    ++fp8attn_test::checks();                                                                    \
    if (!(cond)) {                                                                               \
      ++fp8attn_test::failures();                                                                \
      std::cerr << __FILE__ << ":" << __LINE__ << ": FAILED " << #cond << " -- " << (what) << std::endl; \
    }                                                                                            \
  } while (0)
