// Two replicas of the operator, one Lease: the leader is killed (SIGKILL, as a crashed pod that
// cannot release its Lease), and the other takes over once the Lease has expired, and then does
// the work: a job applied after the take-over trains to the end.
#include <gtest/gtest.h>

#include <csignal>
#include <cstring>
#include <ctime>
#include <iostream>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "tests/operator_e2e/e2e_fixture.h"

namespace tessel::testing {
namespace {

using nlohmann::json;
using std::chrono::seconds;

// A metav1.MicroTime ("2026-11-21T23:02:08.819817Z") in seconds since the epoch.
double micro_time_seconds(const std::string& text) {
  std::tm parts{};
  const char* rest = strptime(text.c_str(), "%Y-%m-%dT%H:%M:%S", &parts);
  if (rest == nullptr) throw std::invalid_argument("not a MicroTime: " + text);
  double fraction = 0;
  if (*rest == '.') fraction = std::stod("0" + std::string(rest, std::strcspn(rest, "Z")));
  return static_cast<double>(timegm(&parts)) + fraction;
}

TEST(E2eMicroTime, ParsesSecondsAndFractions) {
  EXPECT_DOUBLE_EQ(micro_time_seconds("1970-01-01T00:01:40.250000Z"), 100.25);
  EXPECT_DOUBLE_EQ(micro_time_seconds("1970-01-01T00:00:07Z"), 7);
  EXPECT_THROW(micro_time_seconds("yesterday"), std::invalid_argument);
}

const kube::ResourceInfo& builtin_pods() {
  static const kube::ResourceInfo pods = *kube::ResourceRegistry().find_resource("", "pods");
  return pods;
}

class LeaderElectionE2e : public OperatorE2e {
 protected:
  // The run's Lease held by one of `identities` (the operator's namespace holds no other);
  // null when there is none yet.
  json held_lease(const std::set<std::string>& identities) {
    kube::Client& hub = federation_->hub().admin();
    const json list = hub.list(hub.resource_for("coordination.k8s.io/v1", "Lease"),
                               federation_->namespace_name());
    for (const json& lease : list.value("items", json::array()))
      if (identities.count(lease.value("/spec/holderIdentity"_json_pointer, ""))) return lease;
    return nullptr;
  }
};

TEST_F(LeaderElectionE2e, TheLeaderKilledTheOtherReplicaTakesOverAfterTheLeaseExpires) {
  OperatorProcess& first = *operators_.front();
  OperatorProcess& second = start_operator("replica-1");
  // Each replica's identity is its Pod's name ($(POD_NAME) in the chart's Deployment).
  const std::set<std::string> replicas = {first.settings().identity, second.settings().identity};
  json lease;
  ASSERT_TRUE(wait_for(
      [&] {
        lease = held_lease(replicas);
        return !lease.is_null();
      },
      seconds(60)))
      << "no Lease in " << federation_->namespace_name() << " is held by either replica";
  const std::string leader = lease["spec"]["holderIdentity"];
  OperatorProcess& killed = leader == first.settings().identity ? first : second;
  OperatorProcess& survivor = leader == first.settings().identity ? second : first;

  killed.stop(SIGKILL);
  // Read after the kill: the dead leader's last renewal, which nobody renews again.
  const json orphaned = held_lease({leader});
  ASSERT_FALSE(orphaned.is_null()) << "the Lease changed hands before the leader's lease expired";
  const double last_renewal = micro_time_seconds(orphaned["spec"]["renewTime"]);
  const int lease_seconds = orphaned["spec"]["leaseDurationSeconds"];
  EXPECT_EQ(lease_seconds, kLeaseDurationSeconds);  // the chart's value the e2e sets

  const std::string heir = survivor.settings().identity;
  EXPECT_TRUE(wait_for(
      [&] {
        lease = held_lease({heir});
        return !lease.is_null();
      },
      seconds(3 * lease_seconds + 30)))
      << "replica " << heir << " did not take the Lease over; " << leader << " held it";
  ASSERT_FALSE(lease.is_null());
  // Never before the dead leader's lease ran out (the one guarantee a Lease gives); how long after
  // is what the retry period and the load decide (printed, not asserted).
  const double acquired = micro_time_seconds(lease["spec"]["acquireTime"]);
  EXPECT_GE(acquired - last_renewal, lease_seconds - 0.5) << lease.dump();
  std::cout << "take-over " << acquired - last_renewal << " s after the last renewal (lease "
            << lease_seconds << " s)\n";

  // The stage Service selects the new leader's Pod alone: the heir labels its own Pod and takes
  // the label off the dead leader's (the chart's Role lets its identity list and patch pods).
  const auto serving = [&](const std::string& pod) {
    return federation_->hub()
        .admin()
        .get(builtin_pods(), federation_->namespace_name(), pod)
        .value("/metadata/labels/tessel.dev~1stage-service"_json_pointer, std::string());
  };
  EXPECT_TRUE(
      wait_for([&] { return serving(heir) == "serving" && serving(leader).empty(); }, seconds(60)))
      << "the stage-service label: " << heir << " '" << serving(heir) << "', " << leader << " '"
      << serving(leader) << "'";

  // The new leader works: a job applied now trains to the end. The webhook follows the live
  // replica, as a Service would.
  register_webhook(survivor);
  kubectl_ok({"apply", "-f", example_job("after-failover", 20)});
  const json done = wait_for_phase("after-failover", "Succeeded", seconds(240));
  EXPECT_EQ(done.value("/status/progress/step"_json_pointer, 0), 20) << done["status"].dump();
}

}  // namespace
}  // namespace tessel::testing
