// The training data: byte-level tokens (token = byte value, vocab >= 256) from a text file, or
// a synthetic corpus generated from a seed. The corpus is cut into sequences of T + 1 tokens
// overlapping by one (inputs are tokens [s, s + T), targets [s + 1, s + T + 1), s = k T for
// sequence k); sequence numbers past the end wrap around (another epoch).
//
// Sharding: a step's global batch is sequences [position, position + D m B) in replica-major
// order, so replica r's micro-batch j holds sequences position + (r m + j) B ... + B - 1, and
// one process with D m micro-batches reads exactly the same sequences in the same order. The
// position (the next global sequence) is saved in checkpoints.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tessel::stage {

class TokenCorpus {
 public:
  // Every byte of the file is a token. Throws ConfigError naming the file when it cannot be
  // read or vocab < 256.
  static TokenCorpus from_file(const std::string& path, int vocab);

  // `bytes` tokens of generated English-like text: sentences from a small grammar (subject,
  // verb, object, optional place and time) whose word choices follow a seeded random walk, and
  // counting runs ("three four five six"). Spelling, word order and counting are learnable, so
  // a model's loss falls well below the corpus's unigram entropy. Throws ConfigError when
  // vocab < 256 or bytes < 2.
  static TokenCorpus synthetic(uint64_t seed, int64_t bytes, int vocab);

  const std::vector<uint8_t>& tokens() const { return tokens_; }
  const std::string& source() const { return source_; }  // "file x.txt", "synthetic seed 7"

  // Distinct sequences of length T before the numbering wraps: (N - 1) / T. Throws
  // ConfigError naming the source when the corpus is shorter than T + 1 tokens.
  int64_t sequences(int T) const;

  // Sequences first .. first + rows - 1 (numbering wrapped) into inputs and targets, (rows, T)
  // each.
  void read(int64_t first, int rows, int T, int* inputs, int* targets) const;

  // Entropy in nats of the corpus's byte frequencies: the loss of the best model that ignores
  // context.
  double unigram_entropy() const;

 private:
  TokenCorpus(std::vector<uint8_t> tokens, std::string source)
      : tokens_(std::move(tokens)), source_(std::move(source)) {}

  std::vector<uint8_t> tokens_;
  std::string source_;
};

}  // namespace tessel::stage
