// The state behind the Rendezvous service (proto/tessel/v1alpha1/rendezvous.proto), without
// gRPC: the jobs a server serves, each rank's join (incarnation and address) in the current
// generation, the table once every rank has joined, and the values published in a generation.
// Thread-safe; the waiting calls block on a condition variable until their deadline.
//
// Every input is bounded and checked before it is stored, and a refusal says which field is at
// fault (RendezvousError::Code says how the service answers it).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace tessel::rendezvous {

inline constexpr int kMaxWorldSize = 8192;       // placement's device limit
inline constexpr size_t kMaxAddressBytes = 261;  // a DNS name (253) + ':' + a port
inline constexpr size_t kMaxKeyBytes = 128;
inline constexpr size_t kMaxValueBytes = 64 << 10;
inline constexpr size_t kMaxValuesPerGeneration = 4096;
inline constexpr size_t kMinTokenBytes = 16;

class RendezvousError : public std::runtime_error {
 public:
  enum class Code { kInvalidArgument, kUnauthenticated, kNotFound, kDeadlineExceeded, kExhausted };
  RendezvousError(Code code, const std::string& message)
      : std::runtime_error(message), code_(code) {}
  Code code() const { return code_; }

 private:
  Code code_;
};

// Whether two tokens are equal, compared without stopping at the first difference, so that the
// time taken says nothing of the token.
bool same_token(const std::string& a, const std::string& b);

struct JoinedTable {
  uint64_t generation = 0;
  std::vector<std::string> addresses;  // index = rank
};

class RendezvousTable {
 public:
  using Clock = std::chrono::steady_clock;

  // Serves job `job_id` of `world_size` ranks, whose processes carry `token` (at least
  // kMinTokenBytes). Adding a job again replaces it (its joins and values are forgotten).
  void add_job(uint64_t job_id, int world_size, const std::string& token);
  void remove_job(uint64_t job_id);

  // Records the join and waits until every rank has joined this generation; throws
  // RendezvousError (kDeadlineExceeded naming the missing ranks, or a refusal).
  JoinedTable join(uint64_t job_id, const std::string& token, int world_size, int rank,
                   uint64_t incarnation, const std::string& address, Clock::time_point deadline);

  // The value under `key` in `generation`: `value` if it is the first, else the first one.
  std::string publish(uint64_t job_id, const std::string& token, uint64_t generation, int rank,
                      const std::string& key, const std::string& value);
  // Waits for a value under `key` in `generation`.
  std::string lookup(uint64_t job_id, const std::string& token, uint64_t generation, int rank,
                     const std::string& key, Clock::time_point deadline);

  // The job's current generation, and how many ranks have joined it (nullopt: no such job).
  struct Progress {
    uint64_t generation = 0;
    int joined = 0;
  };
  std::optional<Progress> progress(uint64_t job_id);
  // The job's table once every rank has joined the current generation.
  std::optional<JoinedTable> table(uint64_t job_id);

  // Wakes every waiting call, which fails as if its deadline had passed (a server stopping).
  void shut_down();

 private:
  struct Member {
    uint64_t incarnation = 0;
    std::string address;
  };
  struct Job {
    int world_size = 0;
    std::string token;
    uint64_t generation = 1;
    std::map<int, Member> members;  // of the current generation
    bool complete = false;
    std::map<std::string, std::string> values;  // of the current generation
  };

  // The job, after checking the token and the rank; the lock must be held.
  Job& checked_job(uint64_t job_id, const std::string& token, int rank);
  void check_generation(const Job& job, uint64_t job_id, uint64_t generation) const;
  static std::string missing_ranks(const Job& job);
  static JoinedTable table_of(const Job& job);

  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<uint64_t, Job> jobs_;
  bool shut_down_ = false;
};

}  // namespace tessel::rendezvous
