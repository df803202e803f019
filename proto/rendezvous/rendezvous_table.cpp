#include "proto/rendezvous/rendezvous_table.h"

#include <algorithm>

namespace tessel::rendezvous {

namespace {

using Code = RendezvousError::Code;

[[noreturn]] void refuse(Code code, const std::string& message) {
  throw RendezvousError(code, message);
}

// host:port with a port in [1, 65535] and a host of printable characters without spaces.
void check_address(const std::string& address) {
  if (address.empty() || address.size() > kMaxAddressBytes) {
    refuse(Code::kInvalidArgument, "address: must be host:port of at most " +
                                       std::to_string(kMaxAddressBytes) + " bytes, got " +
                                       std::to_string(address.size()) + " bytes");
  }
  const size_t colon = address.rfind(':');
  const std::string port = colon == std::string::npos ? "" : address.substr(colon + 1);
  const bool port_ok =
      !port.empty() && port.size() <= 5 &&
      std::all_of(port.begin(), port.end(), [](char c) { return c >= '0' && c <= '9'; }) &&
      std::stoi(port) >= 1 && std::stoi(port) <= 65535;
  const bool host_ok = colon != std::string::npos && colon > 0 &&
                       std::all_of(address.begin(), address.begin() + colon,
                                   [](char c) { return c > ' ' && c < 127; });
  if (!port_ok || !host_ok) {
    refuse(Code::kInvalidArgument,
           "address: expected host:port with a port in [1, 65535], got '" + address + "'");
  }
}

}  // namespace

bool same_token(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

void RendezvousTable::add_job(uint64_t job_id, int world_size, const std::string& token) {
  if (world_size < 1 || world_size > kMaxWorldSize) {
    refuse(Code::kInvalidArgument, "world_size: must be in [1, " + std::to_string(kMaxWorldSize) +
                                       "], got " + std::to_string(world_size));
  }
  if (token.size() < kMinTokenBytes) {
    refuse(Code::kInvalidArgument, "token: must have at least " + std::to_string(kMinTokenBytes) +
                                       " bytes, got " + std::to_string(token.size()));
  }
  const std::lock_guard lock(mutex_);
  Job job;
  job.world_size = world_size;
  job.token = token;
  jobs_[job_id] = std::move(job);
  changed_.notify_all();
}

void RendezvousTable::remove_job(uint64_t job_id) {
  const std::lock_guard lock(mutex_);
  jobs_.erase(job_id);
  changed_.notify_all();
}

RendezvousTable::Job& RendezvousTable::checked_job(uint64_t job_id, const std::string& token,
                                                   int rank) {
  const auto it = jobs_.find(job_id);
  // An unknown job and a wrong token are answered alike: neither says which jobs exist.
  if (it == jobs_.end() || !same_token(it->second.token, token)) {
    refuse(Code::kUnauthenticated,
           "job " + std::to_string(job_id) + ": unknown job or wrong token");
  }
  if (rank < 0 || rank >= it->second.world_size) {
    refuse(Code::kInvalidArgument, "tasklet.rank: " + std::to_string(rank) +
                                       " is out of range [0, " +
                                       std::to_string(it->second.world_size) + ")");
  }
  return it->second;
}

void RendezvousTable::check_generation(const Job& job, uint64_t job_id, uint64_t generation) const {
  if (generation != job.generation || !job.complete) {
    refuse(Code::kNotFound, "job " + std::to_string(job_id) + ": generation " +
                                std::to_string(generation) + " is not the current one (" +
                                std::to_string(job.generation) +
                                (job.complete ? ")" : ", still joining)") + ": join again");
  }
}

JoinedTable RendezvousTable::table_of(const Job& job) {
  JoinedTable table;
  table.generation = job.generation;
  table.addresses.resize(static_cast<size_t>(job.world_size));
  for (const auto& [r, member] : job.members) table.addresses[r] = member.address;
  return table;
}

std::string RendezvousTable::missing_ranks(const Job& job) {
  std::string out;
  int listed = 0;
  int missing = 0;
  for (int r = 0; r < job.world_size; ++r) {
    if (job.members.count(r)) continue;
    ++missing;
    if (listed < 16) {
      out += (listed ? ", " : "") + std::to_string(r);
      ++listed;
    }
  }
  if (missing > listed) out += " and " + std::to_string(missing - listed) + " more";
  return out;
}

JoinedTable RendezvousTable::join(uint64_t job_id, const std::string& token, int world_size,
                                  int rank, uint64_t incarnation, const std::string& address,
                                  Clock::time_point deadline) {
  check_address(address);
  std::unique_lock lock(mutex_);
  Job& job = checked_job(job_id, token, rank);
  if (world_size != job.world_size) {
    refuse(Code::kInvalidArgument, "world_size: the job has " + std::to_string(job.world_size) +
                                       " ranks, this process says " + std::to_string(world_size));
  }
  const auto known = job.members.find(rank);
  const bool same_process = known != job.members.end() && known->second.incarnation == incarnation;
  if (job.complete && !same_process) {  // a restarted rank: everyone joins a new generation
    ++job.generation;
    job.members.clear();
    job.values.clear();
    job.complete = false;
  }
  if (!job.complete) {
    job.members[rank] = {incarnation, address};
    if (static_cast<int>(job.members.size()) == job.world_size) job.complete = true;
    changed_.notify_all();
  }
  const uint64_t generation = job.generation;
  while (true) {
    if (shut_down_) refuse(Code::kDeadlineExceeded, "the rendezvous server is stopping");
    const auto it = jobs_.find(job_id);
    if (it == jobs_.end()) {
      refuse(Code::kUnauthenticated, "job " + std::to_string(job_id) + ": no longer served");
    }
    Job& current = it->second;
    if (current.generation != generation) {
      refuse(Code::kDeadlineExceeded, "job " + std::to_string(job_id) + ": generation " +
                                          std::to_string(generation) +
                                          " was replaced (a rank restarted): join again");
    }
    if (current.complete) return table_of(current);
    if (changed_.wait_until(lock, deadline) == std::cv_status::timeout &&
        Clock::now() >= deadline) {
      const auto again = jobs_.find(job_id);
      if (again != jobs_.end() && again->second.generation == generation &&
          !again->second.complete) {
        refuse(Code::kDeadlineExceeded, "job " + std::to_string(job_id) + ": waiting for ranks " +
                                            missing_ranks(again->second) + " of " +
                                            std::to_string(again->second.world_size) + " to join");
      }
    }
  }
}

std::string RendezvousTable::publish(uint64_t job_id, const std::string& token, uint64_t generation,
                                     int rank, const std::string& key, const std::string& value) {
  if (key.empty() || key.size() > kMaxKeyBytes) {
    refuse(Code::kInvalidArgument, "key: must have 1 to " + std::to_string(kMaxKeyBytes) +
                                       " bytes, got " + std::to_string(key.size()));
  }
  if (value.size() > kMaxValueBytes) {
    refuse(Code::kInvalidArgument, "value: at most " + std::to_string(kMaxValueBytes) +
                                       " bytes, got " + std::to_string(value.size()));
  }
  const std::lock_guard lock(mutex_);
  Job& job = checked_job(job_id, token, rank);
  check_generation(job, job_id, generation);
  const auto it = job.values.find(key);
  if (it != job.values.end()) return it->second;
  if (job.values.size() >= kMaxValuesPerGeneration) {
    refuse(Code::kExhausted, "job " + std::to_string(job_id) + ": already " +
                                 std::to_string(kMaxValuesPerGeneration) +
                                 " values in this generation");
  }
  job.values.emplace(key, value);
  changed_.notify_all();
  return value;
}

std::string RendezvousTable::lookup(uint64_t job_id, const std::string& token, uint64_t generation,
                                    int rank, const std::string& key, Clock::time_point deadline) {
  std::unique_lock lock(mutex_);
  checked_job(job_id, token, rank);
  while (true) {
    if (shut_down_) refuse(Code::kDeadlineExceeded, "the rendezvous server is stopping");
    const auto it = jobs_.find(job_id);
    if (it == jobs_.end()) {
      refuse(Code::kUnauthenticated, "job " + std::to_string(job_id) + ": no longer served");
    }
    check_generation(it->second, job_id, generation);
    const auto value = it->second.values.find(key);
    if (value != it->second.values.end()) return value->second;
    if (changed_.wait_until(lock, deadline) == std::cv_status::timeout &&
        Clock::now() >= deadline) {
      const auto again = jobs_.find(job_id);
      if (again == jobs_.end() || !again->second.values.count(key)) {
        refuse(Code::kDeadlineExceeded,
               "job " + std::to_string(job_id) + ": nothing published under '" + key + "' yet");
      }
    }
  }
}

std::optional<RendezvousTable::Progress> RendezvousTable::progress(uint64_t job_id) {
  const std::lock_guard lock(mutex_);
  const auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return std::nullopt;
  return Progress{it->second.generation, static_cast<int>(it->second.members.size())};
}

std::optional<JoinedTable> RendezvousTable::table(uint64_t job_id) {
  const std::lock_guard lock(mutex_);
  const auto it = jobs_.find(job_id);
  if (it == jobs_.end() || !it->second.complete) return std::nullopt;
  return table_of(it->second);
}

void RendezvousTable::shut_down() {
  const std::lock_guard lock(mutex_);
  shut_down_ = true;
  changed_.notify_all();
}

}  // namespace tessel::rendezvous
