// zero_split_jsonl IN.jsonl[.gz] TRAIN.jsonl.gz TEST.jsonl.gz [--test-percent 10]: deterministic split
// by a hash of each line (XXH3-64 % 100 < percent -> test), so re-running gives byte-identical files.
// Used once to make data/assets/hh-rlhf/harmless-base/{train,test}.jsonl.gz from the upstream test file.
#include <zlib.h>
#include <xxhash.h>

#include <cstring>
#include <iostream>
#include <string>

#include "core/check.h"
#include "data/line_reader.h"

int main(int argc, char** argv) {
  if (argc != 4 && !(argc == 6 && std::strcmp(argv[4], "--test-percent") == 0)) {
    std::cerr << "usage: zero_split_jsonl IN TRAIN.jsonl.gz TEST.jsonl.gz [--test-percent 10]\n";
    return 2;
  }
  const int percent = argc == 6 ? std::stoi(argv[5]) : 10;
  try {
    zero::data::LineReader in(argv[1]);
    gzFile out[2] = {gzopen(argv[2], "wb9"), gzopen(argv[3], "wb9")};
    ZERO_REQUIRE(out[0] && out[1], zero::InputError, "cannot create {} or {}", argv[2], argv[3]);
    std::string line;
    long counts[2] = {0, 0};
    while (in.next(line)) {
      const int k = XXH3_64bits(line.data(), line.size()) % 100 < uint64_t(percent) ? 1 : 0;
      line.push_back('\n');
      ZERO_REQUIRE(gzwrite(out[k], line.data(), unsigned(line.size())) == int(line.size()), zero::InputError,
                   "write failed");
      ++counts[k];
    }
    gzclose(out[0]);
    gzclose(out[1]);
    std::cout << "train " << counts[0] << " lines, test " << counts[1] << " lines\n";
    return 0;
  } catch (const zero::Error& e) {
    std::cerr << "zero_split_jsonl: " << e.what() << "\n";
    return 1;
  }
}
