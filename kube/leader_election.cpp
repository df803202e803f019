#include "kube/leader_election.h"

#include <algorithm>
#include <cstdio>
#include <exception>
#include <stdexcept>
#include <type_traits>
#include <utility>

#include "kube/api_error.h"
#include "kube/object.h"

namespace tessel::kube {

namespace {

using std::chrono::duration_cast;
using std::chrono::milliseconds;
using std::chrono::system_clock;

constexpr std::string_view kMicroTimeLayout = "2006-01-02T15:04:05.000000Z07:00";

// The number written at text[at, at + width); -1 unless all of them are digits.
int digits_at(std::string_view text, std::size_t at, std::size_t width) {
  if (at + width > text.size()) return -1;
  int value = 0;
  for (std::size_t i = at; i < at + width; ++i) {
    if (text[i] < '0' || text[i] > '9') return -1;
    value = value * 10 + (text[i] - '0');
  }
  return value;
}

// A spec field, or fallback when it is missing, null or of another type (lenient reading).
template <typename T>
T spec_field(const nlohmann::json& spec, const char* key, T fallback) {
  const auto it = spec.find(key);
  if (it == spec.end()) return fallback;
  if constexpr (std::is_same_v<T, std::string>) {
    return it->is_string() ? it->template get<std::string>() : fallback;
  } else {
    return it->is_number_integer() ? it->template get<T>() : fallback;
  }
}

std::string in_ms(Clock::duration duration) {
  return std::to_string(duration_cast<milliseconds>(duration).count()) + "ms";
}

}  // namespace

std::string format_micro_time(system_clock::time_point time) {
  const auto micros = std::chrono::floor<std::chrono::microseconds>(time);
  const auto seconds = std::chrono::floor<std::chrono::seconds>(micros);
  std::string text = format_rfc3339(seconds);  // ends in "Z"
  char fraction[24];
  std::snprintf(fraction, sizeof fraction, ".%06lld",
                static_cast<long long>((micros - seconds).count()));
  text.insert(text.size() - 1, fraction);
  return text;
}

system_clock::time_point parse_micro_time(std::string_view text) {
  const auto invalid = [&] {
    return std::invalid_argument("MicroTime \"" + std::string(text) + "\" does not match \"" +
                                 std::string(kMicroTimeLayout) + "\"");
  };
  // 2026-11-21T23:02:08.819817 then Z or +hh:mm / -hh:mm
  constexpr std::size_t kZoneAt = 26;
  if (text.size() < kZoneAt + 1 || text[4] != '-' || text[7] != '-' || text[10] != 'T' ||
      text[13] != ':' || text[16] != ':' || text[19] != '.') {
    throw invalid();
  }
  const int year = digits_at(text, 0, 4), month = digits_at(text, 5, 2);
  const int day = digits_at(text, 8, 2), hour = digits_at(text, 11, 2);
  const int minute = digits_at(text, 14, 2), second = digits_at(text, 17, 2);
  const int micros = digits_at(text, 20, 6);
  if (year < 0 || month < 0 || day < 0 || hour < 0 || minute < 0 || second < 0 || micros < 0) {
    throw invalid();
  }
  const std::chrono::year_month_day date{std::chrono::year(year),
                                         std::chrono::month(static_cast<unsigned>(month)),
                                         std::chrono::day(static_cast<unsigned>(day))};
  if (!date.ok() || hour > 23 || minute > 59 || second > 59) throw invalid();

  std::chrono::minutes offset{0};
  const std::string_view zone = text.substr(kZoneAt);
  if (zone != "Z") {
    const int zone_hours = digits_at(zone, 1, 2), zone_minutes = digits_at(zone, 4, 2);
    if (zone.size() != 6 || (zone[0] != '+' && zone[0] != '-') || zone[3] != ':' ||
        zone_hours < 0 || zone_hours > 23 || zone_minutes < 0 || zone_minutes > 59) {
      throw invalid();
    }
    offset = std::chrono::hours(zone_hours) + std::chrono::minutes(zone_minutes);
    if (zone[0] == '-') offset = -offset;
  }
  return std::chrono::sys_days(date) + std::chrono::hours(hour) + std::chrono::minutes(minute) +
         std::chrono::seconds(second) + std::chrono::microseconds(micros) - offset;
}

LeaseRecord LeaseRecord::from_lease(const nlohmann::json& lease) {
  static const nlohmann::json kNoSpec = nlohmann::json::object();
  const auto spec_it = lease.find("spec");
  const nlohmann::json& spec = spec_it != lease.end() && spec_it->is_object() ? *spec_it : kNoSpec;
  return LeaseRecord{spec_field<std::string>(spec, "holderIdentity", ""),
                     spec_field<int>(spec, "leaseDurationSeconds", 0),
                     spec_field<std::string>(spec, "acquireTime", ""),
                     spec_field<std::string>(spec, "renewTime", ""),
                     spec_field<int>(spec, "leaseTransitions", 0)};
}

nlohmann::json LeaseRecord::to_spec() const {
  return {{"holderIdentity", holder_identity},
          {"leaseDurationSeconds", lease_duration_seconds},
          {"acquireTime", acquire_time},
          {"renewTime", renew_time},
          {"leaseTransitions", lease_transitions}};
}

void validate(const LeaderElectionConfig& config) {
  const auto fail = [](const std::string& message) {
    throw std::invalid_argument("leader election: " + message);
  };
  if (config.lease_namespace.empty()) fail("the lease namespace is empty");
  if (config.lease_name.empty()) fail("the lease name is empty");
  if (config.identity.empty()) fail("the candidate identity is empty");
  if (config.lease_duration <= Clock::duration::zero()) {
    fail("leaseDuration must be greater than zero");
  }
  if (config.renew_deadline <= Clock::duration::zero()) {
    fail("renewDeadline must be greater than zero");
  }
  if (config.retry_period <= Clock::duration::zero()) {
    fail("retryPeriod must be greater than zero");
  }
  if (config.lease_duration % std::chrono::seconds(1) != Clock::duration::zero()) {
    fail("leaseDuration (" + in_ms(config.lease_duration) +
         ") must be a whole number of seconds: it is written to leaseDurationSeconds");
  }
  if (config.lease_duration <= config.renew_deadline) {
    fail("leaseDuration (" + in_ms(config.lease_duration) +
         ") must be greater than renewDeadline (" + in_ms(config.renew_deadline) + ")");
  }
  if (config.renew_deadline <= config.retry_period * kJitterFactor) {
    fail("renewDeadline (" + in_ms(config.renew_deadline) +
         ") must be greater than retryPeriod*JitterFactor (" + in_ms(config.retry_period) +
         " * 1.2)");
  }
}

namespace {

const LeaderElectionConfig& validated(const LeaderElectionConfig& config) {
  validate(config);
  return config;
}

}  // namespace

LeaderElector::LeaderElector(LeaseClient& client, LeaderElectionConfig config,
                             LeaderCallbacks callbacks, Clock& clock)
    : client_(client),
      config_(validated(config)),
      callbacks_(std::move(callbacks)),
      clock_(clock),
      wall_origin_(system_clock::now()),
      clock_origin_(clock.now()),
      random_(std::random_device{}()),
      wake_(clock, mutex_) {
  if (!callbacks_.on_started_leading) {
    throw std::invalid_argument("leader election: on_started_leading must be set");
  }
  if (!callbacks_.on_stopped_leading) {
    throw std::invalid_argument("leader election: on_stopped_leading must be set");
  }
}

void LeaderElector::run() {
  Clock::time_point acquired_at;
  if (!acquire(acquired_at)) return;
  callbacks_.on_started_leading();
  renew(acquired_at);
  // Stop the leader's work before handing the lease over, so that it never overlaps with the
  // successor's.
  callbacks_.on_stopped_leading();
  if (config_.release_on_cancel) release();
}

void LeaderElector::stop() {
  std::lock_guard lock(mutex_);
  stopping_ = true;
  wake_.notify_all();
}

bool LeaderElector::try_acquire_or_renew() {
  const Clock::time_point now = clock_.now();
  const std::string now_text = wall_time(now);
  const int lease_seconds = static_cast<int>(
      std::chrono::duration_cast<std::chrono::seconds>(config_.lease_duration).count());
  LeaseRecord desired{config_.identity, lease_seconds, now_text, now_text, 0};
  try {
    nlohmann::json current;
    try {
      current = client_.get(config_.lease_namespace, config_.lease_name);
    } catch (const ApiError& error) {
      if (!error.is_not_found()) return false;
      lease_ = client_.create(
          {{"apiVersion", "coordination.k8s.io/v1"},
           {"kind", "Lease"},
           {"metadata", {{"name", config_.lease_name}, {"namespace", config_.lease_namespace}}},
           {"spec", desired.to_spec()}});
      observe(lease_, now);
      return true;
    }
    lease_ = current;
    observe(current, now);
    const LeaseRecord old = LeaseRecord::from_lease(current);
    const bool held_by_self = is_leader();
    if (!old.holder_identity.empty() && !held_by_self && observed_lease_valid(now)) return false;

    if (held_by_self) {
      desired.acquire_time = old.acquire_time;
      desired.lease_transitions = old.lease_transitions;
    } else {
      desired.lease_transitions = old.lease_transitions + 1;
    }
    nlohmann::json updated = current;
    updated["spec"] = desired.to_spec();
    lease_ = client_.update(updated);
    observe(lease_, now);
    return true;
  } catch (const std::exception&) {
    // An API error (409 lost race, 5xx) or a transport failure: this attempt failed, the next
    // one starts from a fresh GET.
    return false;
  }
}

bool LeaderElector::release() {
  if (!is_leader()) return true;
  const Clock::time_point now = clock_.now();
  const std::string now_text = wall_time(now);
  int transitions;
  {
    std::lock_guard lock(mutex_);
    transitions = observed_record_.lease_transitions;
  }
  nlohmann::json released = lease_;
  released["spec"] = LeaseRecord{"", 1, now_text, now_text, transitions}.to_spec();
  try {
    lease_ = client_.update(released);
    observe(lease_, now);
    return true;
  } catch (const std::exception&) {
    return false;
  }
}

bool LeaderElector::is_leader() const {
  std::lock_guard lock(mutex_);
  return observed_record_.holder_identity == config_.identity;
}

std::string LeaderElector::leader() const {
  std::lock_guard lock(mutex_);
  return observed_record_.holder_identity;
}

bool LeaderElector::acquire(Clock::time_point& acquired_at) {
  while (!stop_requested()) {
    acquired_at = clock_.now();
    const bool acquired = try_acquire_or_renew();
    report_new_leader();
    if (acquired) return true;
    if (!sleep_unless_stopped(clock_.now() + jittered_retry_period())) return false;
  }
  return false;
}

void LeaderElector::renew(Clock::time_point renewed_at) {
  for (;;) {
    // The deadline counts from the start of the last successful attempt: the lease may have
    // been written any time after it.
    const Clock::time_point deadline = renewed_at + config_.renew_deadline;
    if (!sleep_unless_stopped(std::min(clock_.now() + config_.retry_period, deadline))) return;
    const Clock::time_point attempt = clock_.now();
    if (attempt >= deadline) return;
    const bool renewed = try_acquire_or_renew();
    report_new_leader();
    if (renewed) {
      renewed_at = attempt;
    } else if (!is_leader()) {
      return;  // the lease names another holder: no point waiting for the deadline
    }
  }
}

bool LeaderElector::stop_requested() const {
  std::lock_guard lock(mutex_);
  return stopping_;
}

bool LeaderElector::sleep_unless_stopped(Clock::time_point deadline) {
  std::unique_lock lock(mutex_);
  while (!stopping_ && clock_.now() < deadline) wake_.wait_until(lock, deadline);
  return !stopping_;
}

Clock::duration LeaderElector::jittered_retry_period() {
  std::uniform_real_distribution<double> jitter(0.0, kJitterFactor);
  return config_.retry_period +
         duration_cast<Clock::duration>(config_.retry_period * jitter(random_));
}

void LeaderElector::report_new_leader() {
  const std::string holder = leader();
  if (holder == reported_leader_) return;
  reported_leader_ = holder;
  if (!holder.empty() && callbacks_.on_new_leader) callbacks_.on_new_leader(holder);
}

void LeaderElector::observe(const nlohmann::json& lease, Clock::time_point now) {
  LeaseRecord record = LeaseRecord::from_lease(lease);
  std::string version = object_resource_version(lease);
  std::lock_guard lock(mutex_);
  if (record == observed_record_ && version == observed_version_) return;
  observed_record_ = std::move(record);
  observed_version_ = std::move(version);
  observed_time_ = now;
}

bool LeaderElector::observed_lease_valid(Clock::time_point now) const {
  std::lock_guard lock(mutex_);
  return observed_time_ + std::chrono::seconds(observed_record_.lease_duration_seconds) > now;
}

std::string LeaderElector::wall_time(Clock::time_point now) const {
  return format_micro_time(wall_origin_ +
                           duration_cast<system_clock::duration>(now - clock_origin_));
}

}  // namespace tessel::kube
