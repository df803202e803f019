#include "noderuntime/stage/token_data.h"

#include <array>
#include <cmath>
#include <fstream>
#include <iterator>

#include "noderuntime/stage/gpt_config.h"
#include "placement/limits.h"
#include "placement/rng.h"

namespace tessel::stage {
namespace {

constexpr int kByteVocab = 256;

void require_byte_vocab(int vocab, const std::string& source) {
  if (vocab < kByteVocab) {
    throw ConfigError(source + ": byte-level tokens need model.vocab >= 256, got " +
                      std::to_string(vocab));
  }
}

// The synthetic grammar. Each word list is walked by a biased random step (mostly the
// neighbour of the previous choice), so word choice depends on context as well as frequency.
class SentenceWriter {
 public:
  explicit SentenceWriter(uint64_t seed) : rng_(seed) {}

  void append_sentence(std::string& out) {
    if (rng_.below(5) == 0) {
      append_counting(out);
      return;
    }
    out += pick(kSubjects, subject_);
    out += ' ';
    out += pick(kVerbs, verb_);
    out += ' ';
    out += pick(kObjects, object_);
    if (rng_.below(2) == 0) {
      out += ' ';
      out += pick(kPlaces, place_);
    }
    if (rng_.below(3) == 0) {
      out += ' ';
      out += pick(kTimes, time_);
    }
    out += rng_.below(4) == 0 ? ".\n" : ". ";
  }

 private:
  static constexpr std::array<const char*, 8> kSubjects = {
      "the cat", "a small dog", "my old friend", "the farmer",
      "alice",   "bob",         "the teacher",   "a tired bird"};
  static constexpr std::array<const char*, 8> kVerbs = {
      "sees", "likes", "chases", "finds", "carries", "paints", "follows", "remembers"};
  static constexpr std::array<const char*, 8> kObjects = {
      "the red ball",  "a green apple",  "the long river", "an empty box",
      "the blue door", "a wooden chair", "the quiet moon", "a paper boat"};
  static constexpr std::array<const char*, 5> kPlaces = {
      "in the garden", "near the house", "under the bridge", "by the sea", "on the hill"};
  static constexpr std::array<const char*, 4> kTimes = {"at night", "every day", "in spring",
                                                        "after lunch"};
  static constexpr std::array<const char*, 12> kNumbers = {"one",  "two", "three",  "four",
                                                           "five", "six", "seven",  "eight",
                                                           "nine", "ten", "eleven", "twelve"};

  template <size_t N>
  const char* pick(const std::array<const char*, N>& words, int& state) {
    const int step = rng_.below(4);  // 0, 1: stay; 2: next; 3: jump anywhere
    if (step == 2) state = (state + 1) % static_cast<int>(N);
    if (step == 3) state = rng_.below(static_cast<int>(N));
    return words[state];
  }

  void append_counting(std::string& out) {
    const int start = rng_.below(8);
    const int length = 3 + rng_.below(4);
    for (int i = 0; i < length && start + i < static_cast<int>(kNumbers.size()); ++i) {
      if (i > 0) out += ' ';
      out += kNumbers[start + i];
    }
    out += ". ";
  }

  placement::Rng rng_;
  int subject_ = 0, verb_ = 0, object_ = 0, place_ = 0, time_ = 0;
};

}  // namespace

TokenCorpus TokenCorpus::from_file(const std::string& path, int vocab) {
  const std::string source = "data file '" + path + "'";
  require_byte_vocab(vocab, source);
  // A regular file of at most kMaxTextBytes, read no further than that: not /dev/zero, a FIFO
  // or a file that grows while it is read.
  std::string error;
  const std::optional<std::string> text =
      placement::read_file_bounded(path, placement::kMaxTextBytes, &error);
  if (!text) throw ConfigError(source + ": " + error);
  return TokenCorpus(std::vector<uint8_t>(text->begin(), text->end()), source);
}

TokenCorpus TokenCorpus::synthetic(uint64_t seed, int64_t bytes, int vocab) {
  const std::string source = "synthetic corpus (seed " + std::to_string(seed) + ")";
  require_byte_vocab(vocab, source);
  if (bytes < 2 || static_cast<uint64_t>(bytes) > placement::kMaxTextBytes) {
    throw ConfigError(source + ": bytes must be in [2, " +
                      std::to_string(placement::kMaxTextBytes) + "], got " + std::to_string(bytes));
  }
  SentenceWriter writer(seed);
  std::string text;
  text.reserve(bytes + 128);
  while (static_cast<int64_t>(text.size()) < bytes) writer.append_sentence(text);
  text.resize(bytes);
  return TokenCorpus(std::vector<uint8_t>(text.begin(), text.end()), source);
}

int64_t TokenCorpus::sequences(int T) const {
  const int64_t n = static_cast<int64_t>(tokens_.size());
  if (T < 1 || n < int64_t{T} + 1) {
    throw ConfigError(source_ + ": " + std::to_string(n) + " tokens, fewer than one sequence of " +
                      std::to_string(T) + " + 1");
  }
  return (n - 1) / T;
}

void TokenCorpus::read(int64_t first, int rows, int T, int* inputs, int* targets) const {
  const int64_t count = sequences(T);
  for (int row = 0; row < rows; ++row) {
    const int64_t start = ((first + row) % count) * T;
    for (int t = 0; t < T; ++t) {
      inputs[int64_t{row} * T + t] = tokens_[start + t];
      targets[int64_t{row} * T + t] = tokens_[start + t + 1];
    }
  }
}

double TokenCorpus::unigram_entropy() const {
  std::array<int64_t, kByteVocab> counts{};
  for (uint8_t b : tokens_) ++counts[b];
  double entropy = 0;
  const double n = static_cast<double>(tokens_.size());
  for (int64_t c : counts) {
    if (c > 0) entropy -= (c / n) * std::log(c / n);
  }
  return entropy;
}

}  // namespace tessel::stage
