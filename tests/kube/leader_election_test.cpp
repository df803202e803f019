#include "kube/leader_election.h"

#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <mutex>
#include <optional>
#include <regex>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "fixtures.h"
#include "kube/api_error.h"
#include "kube/clock.h"
#include "kube/object.h"
#include "waiting.h"

namespace tessel::kube {
namespace {

using testing::eventually;
using testing::kFailureTimeout;
using testing::require;

using nlohmann::json;
using std::chrono::milliseconds;
using std::chrono::seconds;
using testing::fixture;

const std::string kNamespace = "tessel-system";
const std::string kLeaseName = "tessel-operator-leader";  // as in the fixtures

json response_body(const std::string& fixture_name) {
  return fixture(fixture_name)["response"]["body"];
}

json request_body(const std::string& fixture_name) {
  return fixture(fixture_name)["request"]["body"];
}

std::set<std::string> keys(const json& object) {
  std::set<std::string> names;
  for (const auto& [key, value] : object.items()) names.insert(key);
  return names;
}

bool is_micro_time(const json& value) {
  static const std::regex kMicroTime(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z)");
  return value.is_string() && std::regex_match(value.get<std::string>(), kMicroTime);
}

// The API server's Lease semantics, in memory: one resourceVersion counter, 404 when absent,
// 409 on a stale resourceVersion or an existing name, 400 when a MicroTime does not parse.
class InMemoryLeaseServer final : public LeaseClient {
 public:
  json get(const std::string& lease_namespace, const std::string& name) override {
    std::lock_guard lock(mutex_);
    if (!lease_ || object_namespace(*lease_) != lease_namespace || object_name(*lease_) != name) {
      throw ApiError(404, response_body("404-lease-not-found.json").dump());
    }
    return *lease_;
  }

  json create(const json& lease) override {
    check_micro_times(lease);
    std::lock_guard lock(mutex_);
    writes_.push_back(lease);
    if (lease_) {
      throw ApiError(409, json{{"kind", "Status"},
                               {"apiVersion", "v1"},
                               {"status", "Failure"},
                               {"message", "leases.coordination.k8s.io \"" + object_name(lease) +
                                               "\" already exists"},
                               {"reason", "AlreadyExists"},
                               {"code", 409}}
                              .dump());
    }
    json stored = lease;
    stored["metadata"]["uid"] = "07235cae-15c1-449f-acbd-0845be6b4b54";
    stored["metadata"]["creationTimestamp"] = "2026-11-21T23:02:08Z";
    stored["metadata"]["resourceVersion"] = std::to_string(++resource_version_);
    lease_ = stored;
    return stored;
  }

  json update(const json& lease) override {
    if (auto race = std::exchange(before_next_update, nullptr)) race();
    check_micro_times(lease);
    std::lock_guard lock(mutex_);
    writes_.push_back(lease);
    if (!lease_) throw ApiError(404, response_body("404-lease-not-found.json").dump());
    if (object_resource_version(lease) != object_resource_version(*lease_)) {
      throw ApiError(409, response_body("409-lease-update-conflict.json").dump());
    }
    json stored = lease;
    stored["metadata"]["resourceVersion"] = std::to_string(++resource_version_);
    lease_ = stored;
    return stored;
  }

  // Seeds the stored Lease, e.g. with a fixture's response body.
  void put(json lease) {
    std::lock_guard lock(mutex_);
    resource_version_ = std::stoi(object_resource_version(lease));
    lease_ = std::move(lease);
  }

  json spec() const {
    std::lock_guard lock(mutex_);
    return lease_ ? (*lease_)["spec"] : json();
  }

  std::vector<json> writes() const {
    std::lock_guard lock(mutex_);
    return writes_;
  }

  // Runs once, before the next update is applied: another candidate's write racing it.
  std::function<void()> before_next_update;

 private:
  static void check_micro_times(const json& lease) {
    for (const char* field : {"acquireTime", "renewTime"}) {
      const json& value = lease["spec"].value(field, json());
      if (!value.is_string()) continue;
      try {
        parse_micro_time(value.get<std::string>());
      } catch (const std::invalid_argument&) {
        throw ApiError(400, response_body("400-lease-bad-microtime.json").dump());
      }
    }
  }

  mutable std::mutex mutex_;
  std::optional<json> lease_;
  int resource_version_ = 0;
  std::vector<json> writes_;  // request bodies of create and update, rejected ones included
};

// One candidate's connection to the server: records when it was last used (on the fake clock)
// and can be made to fail like an unreachable API server.
class CandidateClient final : public LeaseClient {
 public:
  CandidateClient(LeaseClient& server, Clock& clock) : server_(server), clock_(clock) {}

  json get(const std::string& lease_namespace, const std::string& name) override {
    attempt();
    return server_.get(lease_namespace, name);
  }
  json create(const json& lease) override {
    attempt();
    return server_.create(lease);
  }
  json update(const json& lease) override {
    attempt();
    return server_.update(lease);
  }

  Clock::time_point last_attempt() const { return Clock::time_point(last_attempt_.load()); }

  std::atomic<bool> failing = false;

 private:
  void attempt() {
    last_attempt_ = clock_.now().time_since_epoch();
    if (failing) throw ApiError(500, R"({"kind":"Status","reason":"InternalError","code":500})");
  }

  LeaseClient& server_;
  Clock& clock_;
  std::atomic<Clock::duration> last_attempt_{};
};

LeaderElectionConfig config_for(const std::string& identity) {
  LeaderElectionConfig config;
  config.lease_namespace = kNamespace;
  config.lease_name = kLeaseName;
  config.identity = identity;
  return config;  // 15s / 10s / 2s, as client-go's usual settings
}

// What a candidate's callbacks reported, in order.
struct Events {
  std::mutex mutex;
  std::vector<std::string> log;
  std::atomic<bool> leading = false;
  std::optional<Clock::time_point> started_at, stopped_at;

  LeaderCallbacks callbacks(Clock& clock) {
    return {[this, &clock] {
              std::lock_guard lock(mutex);
              log.push_back("started");
              started_at = clock.now();
              leading = true;
            },
            [this, &clock] {
              std::lock_guard lock(mutex);
              leading = false;
              log.push_back("stopped");
              stopped_at = clock.now();
            },
            [this](const std::string& identity) {
              std::lock_guard lock(mutex);
              log.push_back("leader " + identity);
            }};
  }

  std::vector<std::string> snapshot() {
    std::lock_guard lock(mutex);
    return log;
  }
};

LeaderCallbacks ignore_callbacks() {
  return {[] {}, [] {}, nullptr};
}

// --- MicroTime ------------------------------------------------------------------------------

TEST(MicroTimeTest, FormatsSixFractionalDigitsInUtc) {
  const auto time = std::chrono::sys_days(std::chrono::year(2026) / 11 / 21) +
                    std::chrono::hours(23) + std::chrono::minutes(2) + seconds(8) +
                    std::chrono::nanoseconds(819817999);
  EXPECT_EQ(format_micro_time(time), "2026-11-21T23:02:08.819817Z");
  EXPECT_EQ(format_micro_time(std::chrono::sys_days(std::chrono::year(2026) / 1 / 2)),
            "2026-01-02T00:00:00.000000Z");
}

TEST(MicroTimeTest, ParsesWhatTheFixturesCarryAndRoundTrips) {
  const json spec = response_body("200-lease-update-renew.json")["spec"];
  for (const char* field : {"acquireTime", "renewTime"}) {
    const std::string text = spec[field];
    EXPECT_EQ(format_micro_time(parse_micro_time(text)), text);
  }
  EXPECT_EQ(parse_micro_time("2026-11-22T00:02:08.819817+01:00"),
            parse_micro_time("2026-11-21T23:02:08.819817Z"));
}

TEST(MicroTimeTest, RejectsWhatTheServerRejects) {
  const std::string bad = request_body("400-lease-bad-microtime.json")["spec"]["renewTime"];
  for (const std::string& text :
       {bad, std::string("2026-11-21T23:02:08Z"), std::string("2026-11-21T23:02:08.8198Z"),
        std::string("2026-11-21T23:02:08.8198170Z"), std::string("2026-11-21T23:02:08.819817"),
        std::string("2026-02-30T23:02:08.819817Z"), std::string("2026-11-21T24:02:08.819817Z"),
        std::string("2026-11-21t23:02:08.819817z")}) {
    EXPECT_THROW(parse_micro_time(text), std::invalid_argument) << text;
  }
}

TEST(InMemoryLeaseServerTest, AnswersABadMicroTimeAsTheRealServerDoes) {
  InMemoryLeaseServer server;
  try {
    server.create(request_body("400-lease-bad-microtime.json"));
    FAIL() << "accepted a bad MicroTime";
  } catch (const ApiError& error) {
    EXPECT_TRUE(error.is_bad_request());
    EXPECT_EQ(error.message(), response_body("400-lease-bad-microtime.json")["message"]);
  }
}

// --- configuration --------------------------------------------------------------------------

TEST(LeaderElectionConfigTest, AcceptsClientGoDefaults) {
  EXPECT_NO_THROW(validate(config_for("a")));
}

TEST(LeaderElectionConfigTest, RejectsInconsistentDurationsWithClearMessages) {
  const auto message_of = [](const LeaderElectionConfig& config) -> std::string {
    try {
      validate(config);
    } catch (const std::invalid_argument& error) {
      return error.what();
    }
    return "accepted";
  };
  LeaderElectionConfig config = config_for("a");
  config.renew_deadline = seconds(15);
  EXPECT_EQ(message_of(config),
            "leader election: leaseDuration (15000ms) must be greater than renewDeadline "
            "(15000ms)");

  config = config_for("a");
  config.retry_period = milliseconds(8500);  // 10.2s with jitter
  EXPECT_EQ(message_of(config),
            "leader election: renewDeadline (10000ms) must be greater than "
            "retryPeriod*JitterFactor (8500ms * 1.2)");

  config = config_for("a");
  config.retry_period = Clock::duration::zero();
  EXPECT_EQ(message_of(config), "leader election: retryPeriod must be greater than zero");

  config = config_for("a");
  config.lease_duration = milliseconds(15500);
  EXPECT_NE(message_of(config).find("whole number of seconds"), std::string::npos);

  EXPECT_EQ(message_of(config_for("")), "leader election: the candidate identity is empty");
  config = config_for("a");
  config.lease_name.clear();
  EXPECT_EQ(message_of(config), "leader election: the lease name is empty");
}

TEST(LeaderElectionConfigTest, ElectorRefusesBadConfigAndMissingCallbacks) {
  InMemoryLeaseServer server;
  LeaderElectionConfig config = config_for("a");
  config.renew_deadline = seconds(20);
  EXPECT_THROW(LeaderElector(server, config, ignore_callbacks()), std::invalid_argument);
  EXPECT_THROW(LeaderElector(server, config_for("a"), LeaderCallbacks{nullptr, [] {}, nullptr}),
               std::invalid_argument);
  EXPECT_THROW(LeaderElector(server, config_for("a"), LeaderCallbacks{[] {}, nullptr, nullptr}),
               std::invalid_argument);
}

// --- one attempt at a time ------------------------------------------------------------------

TEST(LeaderElectorTest, FirstCandidateCreatesTheLeaseInTheFixtureShape) {
  FakeClock clock;
  InMemoryLeaseServer server;
  LeaderElector a(server, config_for("a"), ignore_callbacks(), clock);

  EXPECT_TRUE(a.try_acquire_or_renew());
  EXPECT_TRUE(a.is_leader());

  ASSERT_EQ(server.writes().size(), 1u);
  const json written = server.writes()[0];
  const json expected = request_body("201-lease-create.json");
  EXPECT_EQ(keys(written), keys(expected));
  EXPECT_EQ(written["apiVersion"], expected["apiVersion"]);
  EXPECT_EQ(written["kind"], expected["kind"]);
  EXPECT_EQ(written["metadata"], (json{{"name", kLeaseName}, {"namespace", kNamespace}}));
  EXPECT_EQ(keys(written["spec"]), keys(expected["spec"]));
  EXPECT_EQ(written["spec"]["holderIdentity"], "a");
  EXPECT_EQ(written["spec"]["leaseDurationSeconds"], 15);
  EXPECT_EQ(written["spec"]["leaseTransitions"], 0);
  EXPECT_TRUE(is_micro_time(written["spec"]["acquireTime"]));
  EXPECT_EQ(written["spec"]["renewTime"], written["spec"]["acquireTime"]);
}

TEST(LeaderElectorTest, SecondCandidateWaitsWhileTheHolderRenews) {
  FakeClock clock;
  InMemoryLeaseServer server;
  LeaderElector a(server, config_for("a"), ignore_callbacks(), clock);
  LeaderElector b(server, config_for("b"), ignore_callbacks(), clock);
  ASSERT_TRUE(a.try_acquire_or_renew());
  const json acquired = server.spec();

  EXPECT_FALSE(b.try_acquire_or_renew());
  EXPECT_FALSE(b.is_leader());
  EXPECT_EQ(b.leader(), "a");

  // The holder renews every retry period; the other never sees the lease go stale.
  for (int i = 0; i < 20; ++i) {
    clock.advance(seconds(2));
    ASSERT_TRUE(a.try_acquire_or_renew());
    ASSERT_FALSE(b.try_acquire_or_renew());
  }
  const json renewed = server.spec();
  EXPECT_EQ(renewed["holderIdentity"], "a");
  EXPECT_EQ(renewed["acquireTime"], acquired["acquireTime"]);
  EXPECT_EQ(parse_micro_time(renewed["renewTime"].get<std::string>()) -
                parse_micro_time(acquired["renewTime"].get<std::string>()),
            seconds(40));
  EXPECT_EQ(renewed["leaseTransitions"], 0);

  // A renew is a PUT of the whole object carrying the resourceVersion last read.
  const std::vector<json> writes = server.writes();
  const json renew = writes.back();
  const json expected = request_body("200-lease-update-renew.json");
  EXPECT_EQ(keys(renew), keys(expected));
  EXPECT_EQ(keys(renew["spec"]), keys(expected["spec"]));
  EXPECT_TRUE(is_micro_time(renew["spec"]["renewTime"]));
  EXPECT_FALSE(object_resource_version(renew).empty());
}

TEST(LeaderElectorTest, TakesOverOnlyWhenTheLeaseHasNotChangedForItsDurationLocally) {
  FakeClock clock;
  InMemoryLeaseServer server;
  // Another operator pod holds the lease (the captured one), with a renewTime in the past: the
  // remote time does not matter, only when this candidate saw the record change.
  server.put(response_body("200-lease-get.json"));
  LeaderElector b(server, config_for("tessel-operator-7d9f8-abcde_3f1c2b7e"), ignore_callbacks(),
                  clock);

  EXPECT_FALSE(b.try_acquire_or_renew());
  clock.advance(seconds(14) + milliseconds(999));
  EXPECT_FALSE(b.try_acquire_or_renew());
  clock.advance(milliseconds(1));
  EXPECT_TRUE(b.try_acquire_or_renew());

  const json spec = server.spec();
  EXPECT_EQ(spec["holderIdentity"], "tessel-operator-7d9f8-abcde_3f1c2b7e");
  EXPECT_EQ(spec["leaseTransitions"], 2);
  EXPECT_EQ(spec["acquireTime"], spec["renewTime"]);
  const json takeover = server.writes().back();
  const json expected = request_body("200-lease-update-takeover.json");
  EXPECT_EQ(keys(takeover), keys(expected));
  EXPECT_EQ(keys(takeover["metadata"]), keys(expected["metadata"]));
  EXPECT_EQ(keys(takeover["spec"]), keys(expected["spec"]));
  EXPECT_EQ(object_resource_version(takeover), "371");
}

TEST(LeaderElectorTest, ARenewSeenLateRestartsTheWait) {
  FakeClock clock;
  InMemoryLeaseServer server;
  LeaderElector a(server, config_for("a"), ignore_callbacks(), clock);
  LeaderElector b(server, config_for("b"), ignore_callbacks(), clock);
  ASSERT_TRUE(a.try_acquire_or_renew());
  clock.advance(seconds(5));
  EXPECT_FALSE(b.try_acquire_or_renew());  // first sight at +5s: expires at +20s for b
  clock.advance(seconds(5));
  ASSERT_TRUE(a.try_acquire_or_renew());  // last renew at +10s
  clock.advance(seconds(9));
  EXPECT_FALSE(b.try_acquire_or_renew());  // sees the renew at +19s: expires at +34s
  clock.advance(seconds(14));
  EXPECT_FALSE(b.try_acquire_or_renew());
  clock.advance(seconds(1));
  EXPECT_TRUE(b.try_acquire_or_renew());
  EXPECT_EQ(server.spec()["leaseTransitions"], 1);
}

TEST(LeaderElectorTest, CandidateThatLosesTheUpdateRaceDoesNotLead) {
  FakeClock clock;
  InMemoryLeaseServer server;
  LeaderElector a(server, config_for("a"), ignore_callbacks(), clock);
  LeaderElector b(server, config_for("b"), ignore_callbacks(), clock);
  LeaderElector c(server, config_for("c"), ignore_callbacks(), clock);
  ASSERT_TRUE(a.try_acquire_or_renew());
  ASSERT_FALSE(b.try_acquire_or_renew());
  ASSERT_FALSE(c.try_acquire_or_renew());
  clock.advance(seconds(15));  // a stopped renewing

  // c writes between b's GET and b's PUT.
  server.before_next_update = [&] { EXPECT_TRUE(c.try_acquire_or_renew()); };
  EXPECT_FALSE(b.try_acquire_or_renew());
  EXPECT_FALSE(b.is_leader());
  EXPECT_TRUE(c.is_leader());
  EXPECT_EQ(server.spec()["holderIdentity"], "c");
  EXPECT_EQ(server.spec()["leaseTransitions"], 1);

  // b now sees c's fresh record and waits for it.
  EXPECT_FALSE(b.try_acquire_or_renew());
  EXPECT_EQ(b.leader(), "c");
}

TEST(LeaderElectorTest, CandidateThatLosesTheCreateRaceDoesNotLead) {
  FakeClock clock;
  InMemoryLeaseServer server;
  // a's GET found nothing, but b created the lease before a's POST.
  struct CreateRace final : LeaseClient {
    InMemoryLeaseServer& server;
    explicit CreateRace(InMemoryLeaseServer& s) : server(s) {}
    json get(const std::string& ns, const std::string& name) override {
      try {
        return server.get(ns, name);
      } catch (const ApiError&) {
        server.create(json{{"metadata", {{"name", kLeaseName}, {"namespace", kNamespace}}},
                           {"spec", {{"holderIdentity", "b"}, {"leaseDurationSeconds", 15}}}});
        throw;
      }
    }
    json create(const json& lease) override { return server.create(lease); }
    json update(const json& lease) override { return server.update(lease); }
  } racing(server);
  LeaderElector a(racing, config_for("a"), ignore_callbacks(), clock);
  EXPECT_FALSE(a.try_acquire_or_renew());
  EXPECT_FALSE(a.is_leader());
  EXPECT_EQ(server.spec()["holderIdentity"], "b");
}

TEST(LeaderElectorTest, ReleaseLetsTheNextCandidateTakeOverAtOnce) {
  FakeClock clock;
  InMemoryLeaseServer server;
  LeaderElector a(server, config_for("a"), ignore_callbacks(), clock);
  LeaderElector b(server, config_for("b"), ignore_callbacks(), clock);
  ASSERT_TRUE(a.try_acquire_or_renew());
  ASSERT_FALSE(b.try_acquire_or_renew());
  clock.advance(seconds(3));

  EXPECT_TRUE(a.release());
  EXPECT_FALSE(a.is_leader());
  const json released = server.spec();
  EXPECT_EQ(released["holderIdentity"], "");
  EXPECT_EQ(released["leaseDurationSeconds"], 1);
  EXPECT_EQ(released["leaseTransitions"], 0);
  EXPECT_TRUE(is_micro_time(released["renewTime"]));

  EXPECT_TRUE(b.try_acquire_or_renew());
  EXPECT_EQ(server.spec()["leaseTransitions"], 1);
  EXPECT_EQ(server.spec()["leaseDurationSeconds"], 15);

  const std::size_t writes = server.writes().size();
  EXPECT_TRUE(a.release());  // not the holder: nothing to write
  EXPECT_EQ(server.writes().size(), writes);
}

// --- run() on threads -----------------------------------------------------------------------

// A candidate running LeaderElector::run() on its own thread.
struct Candidate {
  Candidate(InMemoryLeaseServer& server, FakeClock& clock, const std::string& identity,
            LeaderCallbacks callbacks)
      : client(server, clock), elector(client, config_for(identity), std::move(callbacks), clock) {}

  void start() {
    thread = std::thread([this] {
      elector.run();
      running = false;
    });
  }
  void stop_and_join() {
    elector.stop();
    require(eventually([&] { return !running; }), "run() returns after stop()");
    thread.join();
  }

  CandidateClient client;
  LeaderElector elector;
  std::atomic<bool> running = true;
  std::thread thread;
};

// Waits until every running candidate is blocked on the clock and has used its client within a
// (jittered) retry period. Moving the fake clock only then keeps each candidate's work at one
// instant and no candidate behind the clock: a lagging one would be a paused process, whose
// lease others may rightly take while it still believes it leads.
void settle(FakeClock& clock, const std::vector<Candidate*>& candidates) {
  const auto slack = std::chrono::duration_cast<Clock::duration>(seconds(2) * (1 + kJitterFactor));
  require(eventually([&] {
            int running = 0;
            for (const Candidate* candidate : candidates) {
              if (!candidate->running) continue;
              ++running;
              if (candidate->client.last_attempt() + slack < clock.now()) return false;
            }
            return clock.await_waiters(running, milliseconds(0));
          }),
          "candidates keep pace with the clock");
}

// Moves the fake clock in half-second steps until done() (true) or `limit` has passed (false).
template <typename Done>
bool advance_until(FakeClock& clock, const std::vector<Candidate*>& candidates,
                   Clock::duration limit, Done done) {
  const Clock::time_point end = clock.now() + limit;
  while (!done()) {
    if (clock.now() >= end) return false;
    settle(clock, candidates);
    clock.advance(milliseconds(500));
  }
  return true;
}

void advance_for(FakeClock& clock, const std::vector<Candidate*>& candidates,
                 Clock::duration duration) {
  advance_until(clock, candidates, duration, [] { return false; });
}

TEST(LeaderElectorRunTest, SuccessorTakesOverAfterLeaseDurationWithCallbacksInOrder) {
  FakeClock clock;
  InMemoryLeaseServer server;
  LeaderElector a(server, config_for("a"), ignore_callbacks(), clock);
  ASSERT_TRUE(a.try_acquire_or_renew());  // and never renews
  const Clock::time_point acquired = clock.now();

  Events events;
  Candidate b(server, clock, "b", events.callbacks(clock));
  b.start();
  ASSERT_TRUE(advance_until(clock, {&b}, seconds(30), [&] { return events.leading.load(); }));
  {
    std::lock_guard lock(events.mutex);
    // First sight at `acquired` at the latest; then retries up to 2.2 retry periods apart.
    EXPECT_GE(*events.started_at, acquired + seconds(15));
    EXPECT_LE(*events.started_at, acquired + seconds(15) + milliseconds(4400) + milliseconds(500));
  }
  EXPECT_EQ(server.spec()["leaseTransitions"], 1);

  advance_for(clock, {&b}, seconds(10));
  EXPECT_EQ(server.spec()["holderIdentity"], "b");  // renewed all along

  b.stop_and_join();
  EXPECT_EQ(events.snapshot(),
            (std::vector<std::string>{"leader a", "leader b", "started", "stopped"}));
  EXPECT_EQ(server.spec()["holderIdentity"], "");  // released on stop
}

TEST(LeaderElectorRunTest, LeaderGivesUpWhenItCannotRenewWithinTheDeadline) {
  FakeClock clock;
  InMemoryLeaseServer server;
  Events events;
  Candidate a(server, clock, "a", events.callbacks(clock));
  a.start();
  require(eventually([&] { return events.leading.load(); }), "a leads");
  const Clock::time_point acquired = clock.now();

  a.client.failing = true;
  ASSERT_TRUE(advance_until(clock, {&a}, seconds(30), [&] { return !a.running; }));
  {
    std::lock_guard lock(events.mutex);
    EXPECT_GE(*events.stopped_at, acquired + seconds(10));
    EXPECT_LT(*events.stopped_at, acquired + seconds(15));  // before anyone could take over
  }
  EXPECT_EQ(events.snapshot(), (std::vector<std::string>{"leader a", "started", "stopped"}));
  a.thread.join();
}

TEST(LeaderElectorRunTest, StopReleasesAndTheSuccessorAcquiresAtOnce) {
  FakeClock clock;
  InMemoryLeaseServer server;
  Events a_events;
  Candidate a(server, clock, "a", a_events.callbacks(clock));
  a.start();
  require(eventually([&] { return a_events.leading.load(); }), "a leads");
  LeaderElector b(server, config_for("b"), ignore_callbacks(), clock);
  ASSERT_FALSE(b.try_acquire_or_renew());

  a.stop_and_join();
  EXPECT_EQ(a_events.snapshot(), (std::vector<std::string>{"leader a", "started", "stopped"}));
  EXPECT_TRUE(b.try_acquire_or_renew());  // same instant: no waiting for the lease to expire
  EXPECT_EQ(server.spec()["leaseTransitions"], 1);
}

TEST(LeaderElectorRunTest, StopBeforeLeadingReturnsWithoutCallbacks) {
  FakeClock clock;
  InMemoryLeaseServer server;
  LeaderElector a(server, config_for("a"), ignore_callbacks(), clock);
  ASSERT_TRUE(a.try_acquire_or_renew());
  Events events;
  Candidate b(server, clock, "b", events.callbacks(clock));
  b.start();
  require(clock.await_waiters(1, kFailureTimeout), "b waits to retry");
  b.stop_and_join();
  EXPECT_EQ(events.snapshot(), (std::vector<std::string>{"leader a"}));
}

TEST(LeaderElectorRunTest, TwoCandidatesOnTwoThreadsNeverLeadAtOnce) {
  FakeClock clock;
  InMemoryLeaseServer server;
  std::atomic<int> leaders = 0;
  std::atomic<bool> both_led = false;
  std::array<std::atomic<bool>, 2> leading{};
  const auto callbacks = [&](int index) {
    return LeaderCallbacks{[&, index] {
                             leading[index] = true;
                             if (++leaders > 1) both_led = true;
                           },
                           [&, index] {
                             leading[index] = false;
                             --leaders;
                           },
                           nullptr};
  };
  Candidate first(server, clock, "first", callbacks(0));
  Candidate second(server, clock, "second", callbacks(1));
  const std::vector<Candidate*> both{&first, &second};
  first.start();
  second.start();

  ASSERT_TRUE(advance_until(clock, both, seconds(10), [&] { return leaders == 1; }));
  const int leader = leading[0] ? 0 : 1;
  Candidate& holder = *both[leader];
  Candidate& follower = *both[1 - leader];

  // The holder renews; the follower keeps waiting.
  advance_for(clock, both, seconds(30));
  EXPECT_TRUE(leading[leader]);
  EXPECT_EQ(server.spec()["leaseTransitions"], 0);

  // The holder loses the API server: it steps down, then the follower takes over.
  holder.client.failing = true;
  ASSERT_TRUE(advance_until(clock, both, seconds(40), [&] { return leading[1 - leader].load(); }));
  EXPECT_FALSE(holder.running);
  EXPECT_EQ(server.spec()["leaseTransitions"], 1);

  follower.stop_and_join();
  holder.thread.join();
  EXPECT_FALSE(both_led);
  EXPECT_EQ(leaders, 0);
}

}  // namespace
}  // namespace tessel::kube
