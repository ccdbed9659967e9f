// library::matches_filter against the shared cases in filter_cases.txt (also read by test_codegen.py).
#include <fstream>
#include <sstream>
#include <string>

#include "check.h"
#include "fp8attn/library/operation.h"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << "usage: test_filter <filter_cases.txt>" << std::endl;
    return 2;
  }
  std::ifstream in(argv[1]);
  CHECK(in.good(), std::string("cannot open ") + argv[1]);
  std::string line;
  int cases = 0;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    size_t a = line.find('|'), b = line.rfind('|');
    std::string filter = line.substr(0, a), name = line.substr(a + 1, b - a - 1);
    bool expected = line.substr(b + 1) == "1";
    CHECK(fp8attn::library::matches_filter(name, filter) == expected, "filter '" + filter + "' on " + name);
    ++cases;
  }
  CHECK(cases >= 10, "too few filter cases read: " + std::to_string(cases));
  return fp8attn_test::finish("test_filter");
}
