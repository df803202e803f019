#include "kube/lease_client.h"

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>

#include "kube/clock.h"
#include "kube/leader_election.h"
#include "tests/kube/fake_transport.h"
#include "tests/kube/fixtures.h"
#include "tests/kube/recorded_request.h"

namespace tessel::kube {
namespace {

using nlohmann::json;
using testing::expect_fixture_request;
using testing::fixture;
using testing::fixture_answer;
using testing::fixture_body;

class LeaseClientTest : public ::testing::Test {
 protected:
  LeaseClientTest() {
    ClientOptions options;
    options.qps = 0;
    options.sleeper = [](std::chrono::nanoseconds) {};
    client_ = std::make_unique<Client>(transport_, options);
    leases_ = std::make_unique<RestLeaseClient>(*client_);
  }

  std::shared_ptr<testing::FakeTransport> transport_ = std::make_shared<testing::FakeTransport>();
  std::unique_ptr<Client> client_;
  std::unique_ptr<RestLeaseClient> leases_;
};

TEST_F(LeaseClientTest, GetsTheLease) {
  transport_->push(fixture_answer("200-lease-get.json"));
  EXPECT_EQ(leases_->get("tessel-system", "tessel-operator-leader"),
            fixture_body("200-lease-get.json"));
  expect_fixture_request(transport_->request(0), "200-lease-get.json");
}

TEST_F(LeaseClientTest, AMissingLeaseIsNotFound) {
  transport_->push(fixture_answer("404-lease-not-found.json"));
  try {
    leases_->get("tessel-system", "tessel-operator-leader");
    FAIL() << "expected ApiError";
  } catch (const ApiError& error) {
    EXPECT_TRUE(error.is_not_found());
  }
}

TEST_F(LeaseClientTest, CreatesTheLease) {
  transport_->push(fixture_answer("201-lease-create.json"));
  EXPECT_EQ(leases_->create(fixture("201-lease-create.json")["request"]["body"]),
            fixture_body("201-lease-create.json"));
  expect_fixture_request(transport_->request(0), "201-lease-create.json");
}

TEST_F(LeaseClientTest, UpdatesWithThePut) {
  transport_->push(fixture_answer("200-lease-update-renew.json"));
  EXPECT_EQ(leases_->update(fixture("200-lease-update-renew.json")["request"]["body"]),
            fixture_body("200-lease-update-renew.json"));
  expect_fixture_request(transport_->request(0), "200-lease-update-renew.json");
}

TEST_F(LeaseClientTest, AStaleUpdateIsAConflict) {
  transport_->push(fixture_answer("409-lease-update-conflict.json"));
  try {
    leases_->update(fixture("409-lease-update-conflict.json")["request"]["body"]);
    FAIL() << "expected ApiError";
  } catch (const ApiError& error) {
    EXPECT_TRUE(error.is_conflict());
  }
}

TEST_F(LeaseClientTest, RefusesWhatIsNotALease) {
  EXPECT_THROW(leases_->create(json{{"kind", "Pod"}}), std::invalid_argument);
  EXPECT_EQ(transport_->request_count(), 0u);
}

// The elector drives the REST client: no lease -> create it -> leader; then renew with a PUT.
TEST_F(LeaseClientTest, LeaderElectorAcquiresAndRenewsThroughRest) {
  FakeClock clock;
  LeaderElectionConfig config;
  config.lease_namespace = "tessel-system";
  config.lease_name = "tessel-operator-leader";
  config.identity = "tessel-operator-7d9f8-abcde";
  LeaderElector elector(*leases_, config, {[] {}, [] {}, {}}, clock);

  transport_->push(fixture_answer("404-lease-not-found.json"));
  json created = fixture_body("201-lease-create.json");
  created["spec"]["holderIdentity"] = config.identity;
  transport_->push(testing::answer(201, created));
  EXPECT_TRUE(elector.try_acquire_or_renew());
  EXPECT_TRUE(elector.is_leader());

  transport_->push(testing::answer(200, created));
  json renewed = created;
  renewed["metadata"]["resourceVersion"] = "999";
  transport_->push(testing::answer(200, renewed));
  clock.advance(std::chrono::seconds(2));
  EXPECT_TRUE(elector.try_acquire_or_renew());

  ASSERT_EQ(transport_->request_count(), 4u);
  const std::string lease_path = "/apis/coordination.k8s.io/v1/namespaces/tessel-system/leases";
  EXPECT_EQ(transport_->request(0).method, "GET");
  EXPECT_EQ(transport_->request(0).target, lease_path + "/tessel-operator-leader");
  EXPECT_EQ(transport_->request(1).method, "POST");
  EXPECT_EQ(transport_->request(1).target, lease_path);
  EXPECT_EQ(transport_->request(3).method, "PUT");
  EXPECT_EQ(transport_->request(3).target, lease_path + "/tessel-operator-leader");
  const json put = json::parse(transport_->request(3).body);
  EXPECT_EQ(put["metadata"]["resourceVersion"], created["metadata"]["resourceVersion"]);
  EXPECT_EQ(put["spec"]["holderIdentity"], config.identity);
}

}  // namespace
}  // namespace tessel::kube
