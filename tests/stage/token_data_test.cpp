// The training data: byte tokens, the synthetic corpus, and the sequence numbering that makes
// D replicas read exactly what one process reads.
#include "noderuntime/stage/token_data.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "noderuntime/stage/gpt_config.h"

namespace tessel::stage {
namespace {

TEST(TokenData, SyntheticCorpusIsDeterministicReadableText) {
  const TokenCorpus a = TokenCorpus::synthetic(3, 5000, 256);
  EXPECT_EQ(a.tokens(), TokenCorpus::synthetic(3, 5000, 256).tokens());
  EXPECT_NE(a.tokens(), TokenCorpus::synthetic(4, 5000, 256).tokens());
  EXPECT_EQ(a.tokens().size(), 5000u);
  const std::string text(a.tokens().begin(), a.tokens().end());
  EXPECT_NE(text.find(". "), std::string::npos);
  for (unsigned char c : text) EXPECT_TRUE(c == '\n' || (c >= ' ' && c < 127)) << int(c);
  // Around 2.9 nats per byte: letters and spaces, far from uniform (5.5) yet far above what
  // a model of the grammar can reach.
  EXPECT_GT(a.unigram_entropy(), 2.5);
  EXPECT_LT(a.unigram_entropy(), 3.3);
}

TEST(TokenData, SequencesOverlapByOneAndWrap) {
  const std::string text = "abcdefghij";  // 10 tokens: (10 - 1) / 3 = 3 sequences of 3
  const auto path = std::filesystem::temp_directory_path() /
                    ("tessel-tokens-" + std::to_string(::getpid()) + ".txt");
  std::ofstream(path) << text;
  const TokenCorpus corpus = TokenCorpus::from_file(path.string(), 256);
  std::filesystem::remove(path);
  EXPECT_EQ(corpus.sequences(3), 3);
  std::vector<int> in(6), out(6);
  corpus.read(2, 2, 3, in.data(), out.data());  // sequences 2 and 3 (= 0)
  EXPECT_EQ(in, (std::vector<int>{'g', 'h', 'i', 'a', 'b', 'c'}));
  EXPECT_EQ(out, (std::vector<int>{'h', 'i', 'j', 'b', 'c', 'd'}));
}

TEST(TokenData, ReplicaShardsConcatenateToTheGlobalBatch) {
  const TokenCorpus corpus = TokenCorpus::synthetic(1, 4000, 256);
  constexpr int kT = 8, kB = 2, kM = 3, kD = 2;
  std::vector<int> all(kD * kM * kB * kT), targets(all.size());
  corpus.read(100, kD * kM * kB, kT, all.data(), targets.data());
  for (int r = 0; r < kD; ++r) {
    std::vector<int> shard(kM * kB * kT), shard_targets(shard.size());
    corpus.read(100 + r * kM * kB, kM * kB, kT, shard.data(), shard_targets.data());
    EXPECT_TRUE(std::equal(shard.begin(), shard.end(), all.begin() + r * shard.size()));
  }
}

TEST(TokenData, RejectsWhatCannotBeByteTokens) {
  EXPECT_THROW(TokenCorpus::synthetic(1, 100, 128), ConfigError);
  EXPECT_THROW(TokenCorpus::from_file("/nonexistent/corpus.txt", 256), ConfigError);
  try {
    TokenCorpus::synthetic(1, 10, 256).sequences(16);
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_STREQ(e.what(),
                 "synthetic corpus (seed 1): 10 tokens, fewer than one sequence of 16 + 1");
  }
}

}  // namespace
}  // namespace tessel::stage
