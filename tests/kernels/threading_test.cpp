#include "kernels/cpu/threading.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>
#include <utility>
#include <vector>

#include "tests/kernels/kernel_test_support.h"

namespace tessel::kernels::cpu {
namespace {

using testing::expect_invalid;
using testing::ThreadCount;

// The chunks a parallel_for handed out, in any order.
std::set<std::pair<int64_t, int64_t>> chunks_of(int64_t n, int64_t grain) {
  std::mutex mutex;
  std::set<std::pair<int64_t, int64_t>> chunks;
  parallel_for(n, grain, [&](int64_t begin, int64_t end) {
    std::lock_guard lock(mutex);
    EXPECT_TRUE(chunks.emplace(begin, end).second)
        << "chunk [" << begin << ", " << end << ") twice";
  });
  return chunks;
}

TEST(ParallelFor, ChunksDependOnNAndGrainOnly) {
  for (int threads : {1, 2, 3, 8}) {
    ThreadCount scope(threads);
    EXPECT_EQ(num_threads(), threads);
    for (auto [n, grain] : {std::pair<int64_t, int64_t>{0, 1},
                            {1, 1},
                            {1, 7},
                            {10, 3},
                            {1000, 1},
                            {12345, 100},
                            {64, 64}}) {
      std::set<std::pair<int64_t, int64_t>> expected;
      for (int64_t b = 0; b < n; b += grain) expected.emplace(b, std::min(n, b + grain));
      EXPECT_EQ(chunks_of(n, grain), expected) << "n=" << n << " grain=" << grain;
    }
  }
}

TEST(ParallelFor, RunsChunksOnDistinctThreadsAtOnce) {
  ThreadCount scope(2);
  std::mutex mutex;
  std::condition_variable both_inside;
  std::set<std::thread::id> ids;
  bool overlapped = true;
  // Each chunk waits until the other has started: only two threads at once can pass (a thread
  // blocked in chunk 0 cannot claim chunk 1). The timeout only bounds a failure.
  parallel_for(2, 1, [&](int64_t, int64_t) {
    std::unique_lock lock(mutex);
    ids.insert(std::this_thread::get_id());
    both_inside.notify_all();
    if (!both_inside.wait_for(lock, std::chrono::seconds(30), [&] { return ids.size() == 2; })) {
      overlapped = false;
    }
  });
  EXPECT_TRUE(overlapped);
  EXPECT_EQ(ids.size(), 2u);
}

TEST(ParallelFor, NestedCallsRunInline) {
  ThreadCount scope(2);
  std::atomic<int64_t> total{0};
  parallel_for(4, 1, [&](int64_t, int64_t) {
    parallel_for(100, 7, [&](int64_t begin, int64_t end) { total += end - begin; });
  });
  EXPECT_EQ(total.load(), 400);
}

TEST(ParallelFor, ConcurrentCallersBothFinish) {
  ThreadCount scope(2);
  std::atomic<int64_t> a{0}, b{0};
  std::thread other([&] {
    for (int i = 0; i < 200; ++i) parallel_for(1000, 10, [&](int64_t s, int64_t e) { a += e - s; });
  });
  for (int i = 0; i < 200; ++i) parallel_for(1000, 10, [&](int64_t s, int64_t e) { b += e - s; });
  other.join();
  EXPECT_EQ(a.load(), 200'000);
  EXPECT_EQ(b.load(), 200'000);
}

TEST(ParallelFor, RethrowsABodysException) {
  for (int threads : {1, 2}) {
    ThreadCount scope(threads);
    std::atomic<int> ran{0};
    EXPECT_THROW(parallel_for(8, 1,
                              [&](int64_t begin, int64_t) {
                                ++ran;
                                if (begin == 5) throw std::runtime_error("chunk 5");
                              }),
                 std::runtime_error);
    EXPECT_EQ(ran.load(), 8);  // the other chunks still ran
    // The pool is usable afterwards.
    std::atomic<int64_t> total{0};
    parallel_for(100, 10, [&](int64_t s, int64_t e) { total += e - s; });
    EXPECT_EQ(total.load(), 100);
  }
}

TEST(ParallelFor, RejectsBadArguments) {
  auto body = [](int64_t, int64_t) {};
  expect_invalid([&] { parallel_for(-1, 1, body); }, {"parallel_for", "n=-1"});
  expect_invalid([&] { parallel_for(10, 0, body); }, {"parallel_for", "grain=0"});
  expect_invalid([] { set_num_threads(0); }, {"set_num_threads", "threads=0"});
  expect_invalid([] { set_num_threads(kMaxThreads + 1); }, {"set_num_threads", "threads=257"});
  for (int threads : {1, 2}) {
    ThreadCount scope(threads);
    EXPECT_THROW(parallel_for(2, 1, [](int64_t, int64_t) { set_num_threads(3); }),
                 std::logic_error);
    EXPECT_EQ(num_threads(), threads);
  }
}

}  // namespace
}  // namespace tessel::kernels::cpu
