// Leader election over a coordination.k8s.io/v1 Lease, as client-go's LeaderElector does it.
//
// Candidates race to write their identity into one Lease with optimistic concurrency (PUT with
// metadata.resourceVersion). The holder renews every retry period; the others take the lease
// only when its record has not changed for leaseDurationSeconds, measured on their own clock
// from when they observed the change: the remote renewTime is never trusted for expiry, so
// clock skew between machines does not matter, only their rates. The holder gives up when it
// could not renew within the renew deadline, which is shorter than the lease duration, so it
// stops leading before anyone else can start.
#pragma once

#include <chrono>
#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <string_view>

#include "kube/clock.h"

namespace tessel::kube {

// The Lease verbs leader election needs, in terms of the Lease JSON object (apiVersion
// coordination.k8s.io/v1, kind Lease). Implementations throw ApiError for error answers.
class LeaseClient {
 public:
  virtual ~LeaseClient() = default;

  // Throws ApiError 404 when the Lease does not exist.
  virtual nlohmann::json get(const std::string& lease_namespace, const std::string& name) = 0;
  // Throws ApiError 409 AlreadyExists when another candidate created it first.
  virtual nlohmann::json create(const nlohmann::json& lease) = 0;
  // A PUT carrying metadata.resourceVersion; throws ApiError 409 Conflict when it is stale.
  virtual nlohmann::json update(const nlohmann::json& lease) = 0;
};

// A MicroTime as the API server accepts it: RFC 3339 in UTC with exactly six fractional digits,
// "2026-11-21T23:02:08.819817Z". Sub-microsecond digits are truncated.
std::string format_micro_time(std::chrono::system_clock::time_point time);
// Parses what the server parses (Go layout "2006-01-02T15:04:05.000000Z07:00": six fractional
// digits, "Z" or a "+hh:mm" offset). Throws std::invalid_argument otherwise.
std::chrono::system_clock::time_point parse_micro_time(std::string_view text);

// The leader election fields of Lease.spec (client-go's LeaderElectionRecord).
struct LeaseRecord {
  std::string holder_identity;  // "" once released
  int lease_duration_seconds = 0;
  std::string acquire_time;  // MicroTime
  std::string renew_time;    // MicroTime
  int lease_transitions = 0;

  static LeaseRecord from_lease(const nlohmann::json& lease);
  nlohmann::json to_spec() const;
  bool operator==(const LeaseRecord&) const = default;
};

struct LeaderElectionConfig {
  std::string lease_namespace;
  std::string lease_name;
  std::string identity;  // unique per candidate process, e.g. pod name plus a random suffix
  // How long others wait, after they last saw the lease change, before taking it. Written to
  // leaseDurationSeconds, so a whole number of seconds.
  Clock::duration lease_duration = std::chrono::seconds(15);
  // How long the leader keeps trying to renew before it gives up leadership.
  Clock::duration renew_deadline = std::chrono::seconds(10);
  // How often the leader renews and candidates retry (candidates with jitter).
  Clock::duration retry_period = std::chrono::seconds(2);
  // On stop(), hand the lease over at once instead of letting it expire.
  bool release_on_cancel = true;
};

// Candidates wait retry_period * (1 + up to kJitterFactor) between attempts.
inline constexpr double kJitterFactor = 1.2;

// Throws std::invalid_argument unless lease_duration > renew_deadline > retry_period *
// kJitterFactor, all positive, lease_duration whole seconds, and the lease name, namespace and
// identity are set.
void validate(const LeaderElectionConfig& config);

// Called on the thread running LeaderElector::run(); they must return promptly (start work on
// other threads), since the leader cannot renew while one runs.
struct LeaderCallbacks {
  std::function<void()> on_started_leading;  // required
  std::function<void()> on_stopped_leading;  // required; called once after on_started_leading
  std::function<void(const std::string& identity)> on_new_leader;  // optional; self included
};

class LeaderElector {
 public:
  // Throws std::invalid_argument for an invalid config or a missing required callback. The
  // client and clock must outlive the elector.
  LeaderElector(LeaseClient& client, LeaderElectionConfig config, LeaderCallbacks callbacks,
                Clock& clock = Clock::real());
  LeaderElector(const LeaderElector&) = delete;
  LeaderElector& operator=(const LeaderElector&) = delete;

  // Blocks: tries to acquire the lease until it succeeds or stop() is called; then leads,
  // renewing, until stop() or until leadership is lost (renew deadline passed, or the lease
  // was seen naming another holder). Then calls on_stopped_leading and, if release_on_cancel,
  // releases the lease. Like client-go it does not campaign again: a process that lost
  // leadership should exit and start over.
  void run();
  // Makes run() return; thread-safe, may be called before run().
  void stop();

  // One attempt to acquire or renew the lease; true when this candidate now holds it. Not
  // thread-safe against run() or release(): for driving the elector step by step.
  bool try_acquire_or_renew();
  // If the last observed record names this candidate, writes holderIdentity "",
  // leaseDurationSeconds 1 and renewTime now, so a successor can take the lease at once.
  // Returns false when the write failed. Same threading rule as try_acquire_or_renew().
  bool release();

  // Whether the last lease record read or written names this candidate (client-go's
  // IsLeader). Thread-safe. run()'s own belief is what the callbacks report.
  bool is_leader() const;
  // The holder in the last lease record read or written; "" if none. Thread-safe.
  std::string leader() const;

 private:
  // Retries until the lease is held (true; acquired_at: when the winning attempt started) or
  // stop() is called (false).
  bool acquire(Clock::time_point& acquired_at);
  // Renews until stop() or until leadership is lost.
  void renew(Clock::time_point renewed_at);
  bool stop_requested() const;
  // Sleeps on the clock until deadline; false when stop() was called.
  bool sleep_unless_stopped(Clock::time_point deadline);
  Clock::duration jittered_retry_period();
  void report_new_leader();
  // Records the lease the server returned, and when it was seen changing, on the local clock.
  void observe(const nlohmann::json& lease, Clock::time_point now);
  bool observed_lease_valid(Clock::time_point now) const;
  std::string wall_time(Clock::time_point now) const;

  LeaseClient& client_;
  const LeaderElectionConfig config_;
  const LeaderCallbacks callbacks_;
  Clock& clock_;
  // The clock is steady (and fake in tests): MicroTimes are its time mapped onto the wall clock.
  const std::chrono::system_clock::time_point wall_origin_;
  const Clock::time_point clock_origin_;
  // Used only by the thread driving the elector (run(), or a test's direct calls).
  std::minstd_rand random_;
  std::string reported_leader_;  // the last holder passed to on_new_leader
  nlohmann::json lease_;         // the last Lease from the server; updates start from it

  mutable std::mutex mutex_;
  ClockCondition wake_;
  bool stopping_ = false;            // guarded by mutex_
  LeaseRecord observed_record_;      // guarded by mutex_
  std::string observed_version_;     // resourceVersion of observed_record_
  Clock::time_point observed_time_;  // when observed_record_ was first seen, local clock
};

}  // namespace tessel::kube
