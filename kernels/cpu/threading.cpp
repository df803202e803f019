#include "kernels/cpu/threading.h"

#include <cblas.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace tessel::kernels::cpu {
namespace {

using Body = std::function<void(int64_t, int64_t)>;

// True on a thread while it runs parallel_for chunks: a nested parallel_for runs inline.
thread_local bool t_in_body = false;

// Like the pool: every chunk runs, then the first exception is rethrown.
void run_serially(int64_t n, int64_t grain, const Body& body) {
  const bool was_in_body = std::exchange(t_in_body, true);
  std::exception_ptr error;
  for (int64_t begin = 0; begin < n; begin += grain) {
    try {
      body(begin, std::min(n, begin + grain));
    } catch (...) {
      if (!error) error = std::current_exception();
    }
  }
  t_in_body = was_in_body;
  if (error) std::rethrow_exception(error);
}

// Workers sleep on a condition variable between jobs (no spinning: the cores are shared with
// the transport threads and, in tests, with other processes).
class Pool {
 public:
  Pool() { openblas_set_num_threads(1); }
  ~Pool() { resize(1); }
  Pool(const Pool&) = delete;
  Pool& operator=(const Pool&) = delete;

  int size() const { return size_.load(std::memory_order_relaxed); }

  // Callers hold the call mutex, so no job is in flight.
  void resize(int threads) {
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    for (auto& worker : workers_) worker.join();
    workers_.clear();
    stop_ = false;
    for (int i = 1; i < threads; ++i) workers_.emplace_back([this, g = generation_] { work(g); });
    size_.store(threads, std::memory_order_relaxed);
    openblas_set_num_threads(1);
  }

  void run(int64_t n, int64_t grain, const Body& body) {
    {
      std::lock_guard lock(mutex_);
      body_ = &body;
      n_ = n;
      grain_ = grain;
      chunks_ = (n - 1) / grain + 1;
      next_chunk_.store(0, std::memory_order_relaxed);
      busy_workers_ = static_cast<int>(workers_.size());
      error_ = nullptr;
      ++generation_;
    }
    wake_.notify_all();
    run_chunks();
    std::unique_lock lock(mutex_);
    done_.wait(lock, [this] { return busy_workers_ == 0; });
    body_ = nullptr;
    if (error_) std::rethrow_exception(error_);
  }

 private:
  void work(uint64_t seen_generation) {
    for (;;) {
      {
        std::unique_lock lock(mutex_);
        wake_.wait(lock, [&] { return stop_ || generation_ != seen_generation; });
        if (stop_) return;
        seen_generation = generation_;
      }
      run_chunks();
      std::lock_guard lock(mutex_);
      if (--busy_workers_ == 0) done_.notify_one();
    }
  }

  void run_chunks() {
    t_in_body = true;
    for (;;) {
      const int64_t chunk = next_chunk_.fetch_add(1, std::memory_order_relaxed);
      if (chunk >= chunks_) break;
      const int64_t begin = chunk * grain_;
      try {
        (*body_)(begin, std::min(n_, begin + grain_));
      } catch (...) {
        std::lock_guard lock(mutex_);
        if (!error_) error_ = std::current_exception();
      }
    }
    t_in_body = false;
  }

  std::mutex mutex_;
  std::condition_variable wake_;  // a new job, or stop
  std::condition_variable done_;  // the last worker finished its chunks
  std::vector<std::thread> workers_;
  std::atomic<int> size_{1};
  bool stop_ = false;
  uint64_t generation_ = 0;
  // The job in flight (written under mutex_ before generation_ changes).
  const Body* body_ = nullptr;
  int64_t n_ = 0;
  int64_t grain_ = 1;
  int64_t chunks_ = 0;
  std::atomic<int64_t> next_chunk_{0};
  int busy_workers_ = 0;
  std::exception_ptr error_;
};

std::mutex& call_mutex() {
  static std::mutex mutex;
  return mutex;
}

Pool& pool() {
  static Pool instance;
  return instance;
}

}  // namespace

void set_num_threads(int threads) {
  if (threads < 1 || threads > kMaxThreads) {
    throw std::invalid_argument("set_num_threads: threads=" + std::to_string(threads) +
                                " is outside [1, " + std::to_string(kMaxThreads) + "]");
  }
  if (t_in_body) {
    // The pool cannot resize while it runs the caller's own job.
    throw std::logic_error("set_num_threads: called from inside a parallel_for body");
  }
  Pool& p = pool();
  std::lock_guard lock(call_mutex());
  if (p.size() != threads) p.resize(threads);
}

int num_threads() { return pool().size(); }

void parallel_for(int64_t n, int64_t grain, const Body& body) {
  if (n < 0) throw std::invalid_argument("parallel_for: n=" + std::to_string(n) + " is negative");
  if (grain < 1) {
    throw std::invalid_argument("parallel_for: grain=" + std::to_string(grain) +
                                " must be at least 1");
  }
  Pool& p = pool();  // also pins OpenBLAS to one thread before any kernel's first sgemm
  if (n > grain && p.size() > 1 && !t_in_body) {
    std::unique_lock lock(call_mutex(), std::try_to_lock);
    if (lock.owns_lock()) {
      p.run(n, grain, body);
      return;
    }
  }
  run_serially(n, grain, body);
}

}  // namespace tessel::kernels::cpu
