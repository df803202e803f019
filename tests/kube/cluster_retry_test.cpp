// The client's retries against the API test server's injected faults: 429 with Retry-After
// waited for and retried for every verb, 5xx retried only where repeating cannot apply a write
// twice, a Retry-After beyond the backoff cap handed back to the caller, requests retried
// across a partition, and latency within the request timeout tolerated, beyond it a timeout.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "kube/api_error.h"
#include "kube/client.h"
#include "kube/http_transport.h"
#include "kube/object.h"
#include "tests/support/test_cluster.h"

namespace tessel::kube {
namespace {

using nlohmann::json;
using std::chrono::milliseconds;
using std::chrono::steady_clock;
using tessel::testing::test_job;
using tessel::testing::TestCluster;

class ClusterRetryTest : public ::testing::Test {
 protected:
  ClusterRetryTest() : jobs_(cluster_.ensure_test_crd()), ns_(cluster_.namespace_name()) {}

  void SetUp() override { TESSEL_REQUIRE_TEST_SERVER(cluster_, "fault injection"); }

  // A client whose backoff starts at `initial` (the default 500 ms makes tests slow).
  std::shared_ptr<Client> client(milliseconds initial = milliseconds(10)) {
    ClientOptions options = TestCluster::unlimited();
    options.backoff.initial = initial;
    return cluster_.client(options);
  }

  // Requests the server saw for `method` on the TestJob named `name` (or its collection).
  int requests(const std::string& method, const std::string& name = "") {
    const std::string target = method + " " + path(jobs_, ns_, name);
    const auto log = cluster_.server()->request_log();
    return static_cast<int>(std::count_if(log.begin(), log.end(), [&](const std::string& line) {
      return line == target || line.starts_with(target + "?");
    }));
  }

  TestCluster cluster_;
  const ResourceInfo jobs_;
  const std::string ns_;
};

TEST_F(ClusterRetryTest, TooManyRequestsIsRetriedAfterRetryAfterForEveryVerb) {
  const auto client = this->client();
  cluster_.server()->fail_next(1, 429, 1);
  const auto started = steady_clock::now();
  const json created = client->create(jobs_, ns_, test_job(ns_, "busy"));
  EXPECT_GE(steady_clock::now() - started, std::chrono::seconds(1));
  EXPECT_EQ(object_name(created), "busy");
  EXPECT_EQ(requests("POST"), 2);  // a 429 comes before any handler: nothing was applied

  cluster_.server()->fail_next(2, 429, 0);
  EXPECT_EQ(client->patch(jobs_, ns_, "busy", PatchType::kMerge,
                          {{"spec", {{"replicas", 2}}}})["spec"]["replicas"],
            2);
  EXPECT_EQ(requests("PATCH", "busy"), 3);
}

TEST_F(ClusterRetryTest, ServerErrorsAreRetriedOnlyWhereRepeatingIsSafe) {
  const auto client = this->client();
  client->create(jobs_, ns_, test_job(ns_, "flaky"));

  cluster_.server()->fail_next(2, 500, 0);
  EXPECT_EQ(object_name(client->get(jobs_, ns_, "flaky")), "flaky");
  EXPECT_EQ(requests("GET", "flaky"), 3);

  cluster_.server()->fail_next(1, 503);  // no Retry-After: the client's own backoff
  json live = client->get(jobs_, ns_, "flaky");
  live["spec"]["replicas"] = 3;
  EXPECT_EQ(client->update(jobs_, live)["spec"]["replicas"], 3);

  // A POST that got a 500 may have been applied: it is handed back, not repeated.
  cluster_.server()->fail_next(1, 500, 0);
  try {
    client->create(jobs_, ns_, test_job(ns_, "unsure"));
    ADD_FAILURE() << "a POST answered 500 was retried";
  } catch (const ApiError& error) {
    EXPECT_EQ(error.code(), 500) << error.what();
  }
  EXPECT_EQ(requests("POST"), 2);  // flaky's and unsure's, once each
}

TEST_F(ClusterRetryTest, RetryAfterBeyondTheBackoffCapIsHandedBack) {
  ClientOptions options = TestCluster::unlimited();
  options.backoff.cap = std::chrono::seconds(1);
  const auto client = cluster_.client(options);
  cluster_.server()->fail_next(1, 429, 30);
  const int lists_before = requests("GET");
  try {
    client->list(jobs_, ns_);
    ADD_FAILURE() << "a 30 s Retry-After was waited for";  // the retry would have succeeded
  } catch (const ApiError& error) {
    EXPECT_TRUE(error.is_too_many_requests()) << error.what();
    EXPECT_EQ(error.retry_after_seconds(), 30);
  }
  EXPECT_EQ(requests("GET"), lists_before + 1);  // handed back without a retry
}

TEST_F(ClusterRetryTest, RequestsAreRetriedAcrossAPartition) {
  const auto client = this->client(milliseconds(100));
  client->create(jobs_, ns_, test_job(ns_, "far"));
  cluster_.server()->partition(milliseconds(300));
  const auto started = steady_clock::now();
  EXPECT_EQ(object_name(client->get(jobs_, ns_, "far")), "far");
  EXPECT_GE(steady_clock::now() - started, milliseconds(250));
}

TEST_F(ClusterRetryTest, LatencyWithinTheTimeoutIsToleratedBeyondItTimesOut) {
  client()->create(jobs_, ns_, test_job(ns_, "slow"));
  cluster_.server()->set_latency(milliseconds(200));
  ClientOptions patient = TestCluster::unlimited();
  patient.request_timeout = milliseconds(2000);
  const auto started = steady_clock::now();
  EXPECT_EQ(object_name(cluster_.client(patient)->get(jobs_, ns_, "slow")), "slow");
  EXPECT_GE(steady_clock::now() - started, milliseconds(200));

  ClientOptions hasty = TestCluster::unlimited();
  hasty.request_timeout = milliseconds(50);
  hasty.backoff.steps = 2;
  hasty.backoff.initial = milliseconds(10);
  try {
    cluster_.client(hasty)->get(jobs_, ns_, "slow");
    ADD_FAILURE() << "a request slower than its timeout succeeded";
  } catch (const TransportError& error) {
    EXPECT_TRUE(error.timed_out()) << error.what();
  }
  cluster_.server()->set_latency(milliseconds(0));
}

}  // namespace
}  // namespace tessel::kube
