// zero_tokenize --tokenizer PATH: stand-in for `pmtrain tokenize` until the CLI wires run_tokenize.
#include <cstring>
#include <iostream>
#include <string>

#include "data/tokenize_tool.h"

int main(int argc, char** argv) {
  std::string path;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--tokenizer") == 0 && i + 1 < argc) {
      path = argv[++i];
    } else {
      std::cerr << "usage: zero_tokenize --tokenizer PATH/tokenizer.json < in.jsonl > out.jsonl\n";
      return 2;
    }
  }
  if (path.empty()) {
    std::cerr << "zero_tokenize: --tokenizer PATH is required\n";
    return 2;
  }
  std::ios::sync_with_stdio(false);
  return zero::data::run_tokenize(path, std::cin, std::cout);
}
