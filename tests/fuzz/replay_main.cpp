// The replay of a fuzz target in the normal build: every file of the folders on the command line
// (the target's committed corpus and its crash regressions) through LLVMFuzzerTestOneInput, in
// name order. A crash, a sanitizer report or an exception escaping the target fails the run (the
// process dies); a folder that does not exist is skipped (a target with no regressions yet).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  int replayed = 0;
  for (int i = 1; i < argc; ++i) {
    const fs::path folder = argv[i];
    if (!fs::is_directory(folder)) {
      std::printf("%s: no such folder, skipped\n", argv[i]);
      continue;
    }
    std::vector<fs::path> files;
    for (const fs::directory_entry& entry : fs::directory_iterator(folder)) {
      if (entry.is_regular_file()) files.push_back(entry.path());
    }
    std::sort(files.begin(), files.end());
    for (const fs::path& file : files) {
      std::ifstream in(file, std::ios::binary);
      if (!in) {
        std::fprintf(stderr, "%s: cannot read\n", file.c_str());
        return 1;
      }
      const std::vector<char> bytes((std::istreambuf_iterator<char>(in)),
                                    std::istreambuf_iterator<char>());
      // A copy of exactly the file's size, so that ASan sees a read past its end.
      std::vector<uint8_t> input(bytes.begin(), bytes.end());
      const uint8_t* data = input.empty() ? nullptr : input.data();
      LLVMFuzzerTestOneInput(data, input.size());
      ++replayed;
    }
    std::printf("%s: %zu inputs replayed\n", argv[i], files.size());
  }
  if (replayed == 0) {
    std::fprintf(stderr, "no input replayed: the corpus folder is missing or empty\n");
    return 1;
  }
  return 0;
}
