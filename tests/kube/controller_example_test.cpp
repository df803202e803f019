// The example controller of docs/kube-client.md, compiled and run against the API test server
// (or the real cluster TESSEL_TEST_KUBECONFIG names). The doc quotes the `testjob_controller`
// namespace below; keep the two in step.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <fstream>
#include <functional>
#include <iterator>
#include <nlohmann/json.hpp>
#include <stop_token>
#include <string>
#include <thread>
#include <utility>

#include "kube/client.h"
#include "kube/config.h"
#include "kube/controller.h"
#include "kube/event_recorder.h"
#include "kube/informer.h"
#include "kube/leader_election.h"
#include "kube/lease_client.h"
#include "kube/object.h"
#include "tests/support/test_cluster.h"

// --- the example ---------------------------------------------------------------------------
namespace testjob_controller {

namespace kube = tessel::kube;
using nlohmann::json;

constexpr int kMaxReplicas = 8;  // what this toy "cluster" can place

// Level-triggered: read the job as the cache has it now and write the status it should have.
// Called again for every change, on resync, and after a failure, so it must be idempotent.
kube::ReconcileResult reconcile(kube::Client& client, const kube::SharedInformer& jobs,
                                kube::EventRecorder& events, const std::string& key) {
  const kube::ObjectSnapshot cached = jobs.store().get(key);
  if (!cached || kube::is_being_deleted(*cached)) return {};  // gone, or going: nothing to do

  json job = *cached;  // snapshots are immutable: edit a copy
  const std::int64_t generation = kube::object_generation(job);
  const int replicas = job["spec"].value("replicas", 0);
  const bool fits = replicas <= kMaxReplicas;
  const std::string phase = fits ? "Running" : "Failed";
  const std::string reason = fits ? "Placed" : "TooManyReplicas";
  const std::string message = fits ? "placed " + std::to_string(replicas) + " replicas"
                                   : std::to_string(replicas) + " replicas do not fit in " +
                                         std::to_string(kMaxReplicas) + " GPUs";

  const std::string old_phase = job.value("/status/phase"_json_pointer, "");
  kube::Condition ready;
  ready.type = "Ready";
  ready.status = fits ? "True" : "False";
  ready.reason = reason;
  ready.message = message;
  ready.observed_generation = generation;
  bool changed = kube::set_condition(job, ready);  // lastTransitionTime only when status flips
  changed |= old_phase != phase;
  changed |= job.value("/status/observedGeneration"_json_pointer, std::int64_t{0}) != generation;
  if (!changed) return {};  // already as it should be: write nothing

  job["status"]["phase"] = phase;
  job["status"]["observedGeneration"] = generation;
  // Through the status subresource: a merge patch of .status only (its lists are replaced
  // whole, which is what we want for conditions we own entirely).
  client.patch(jobs.resource(), kube::object_namespace(job), kube::object_name(job),
               kube::PatchType::kMerge, {{"status", job["status"]}}, {}, "status");
  if (old_phase != phase) {
    events.record(job, fits ? kube::EventType::kNormal : kube::EventType::kWarning, reason,
                  message);
  }
  return {};  // an exception instead would retry the key with backoff
}

// Informer + controller for the TestJobs of `ns`, until `stop`.
void run_controller(kube::Client& client, const kube::ResourceInfo& resource, const std::string& ns,
                    kube::EventRecorder& events, std::stop_token stop) {
  kube::InformerOptions informer_options;
  informer_options.resync_period = std::chrono::minutes(10);  // revisit everything now and then
  kube::SharedInformer jobs(client, resource, ns, informer_options);

  kube::ControllerOptions controller_options;
  controller_options.name = "testjob";
  controller_options.workers = 2;  // different keys in parallel, one key never twice at once
  kube::Controller controller(
      [&](const std::string& key) { return reconcile(client, jobs, events, key); },
      std::move(controller_options));
  controller.watch(jobs);
  jobs.start();
  controller.run(stop);  // waits for the cache to sync, then works until stop
  jobs.stop();           // before the queue its handler feeds goes away with the controller
}

// The whole program: one client, events, and the controller running only while this process
// holds the Lease `testjob-controller` in `ns`.
void run(const kube::ClusterConfig& config, const std::string& ns, const std::string& identity,
         std::stop_token stop) {
  kube::ClientOptions client_options;
  client_options.qps = 20;
  client_options.burst = 40;
  client_options.user_agent = "testjob-controller";  // also the field manager of its writes
  const auto client = kube::Client::from_config(config, client_options);
  // Discovery finds the CRD's resource (plural, scope) from apiVersion and kind.
  const kube::ResourceInfo resource = client->resource_for("tests.tessel.dev/v1alpha1", "TestJob");

  kube::EventSource source;
  source.component = "testjob-controller";
  source.instance = identity;
  kube::EventRecorder events(*client, source);

  kube::LeaderElectionConfig election;
  election.lease_namespace = ns;
  election.lease_name = "testjob-controller";
  election.identity = identity;  // unique per process, e.g. the pod name
  kube::LeaderCallbacks callbacks;
  std::jthread controller;
  callbacks.on_started_leading = [&] {
    controller = std::jthread(
        [&](std::stop_token leading) { run_controller(*client, resource, ns, events, leading); });
  };
  callbacks.on_stopped_leading = [&] { controller = std::jthread(); };  // stops and joins it
  kube::RestLeaseClient leases(*client);
  kube::LeaderElector elector(leases, election, callbacks);
  std::stop_callback stop_electing(stop, [&] { elector.stop(); });
  elector.run();  // blocks; releases the lease when stopped
}

}  // namespace testjob_controller
// --- end of the example --------------------------------------------------------------------

namespace tessel::testing {
namespace {

using nlohmann::json;

// The state arrives through the server; poll it (a real cluster gives no other signal).
bool eventually(const std::function<bool()>& condition) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!condition()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

class ControllerExampleTest : public ::testing::Test {
 protected:
  void SetUp() override { jobs_ = cluster_.ensure_test_crd(); }

  json job(const std::string& name) {
    return cluster_.admin().get(jobs_, cluster_.namespace_name(), name);
  }

  // The job's status says it has seen `generation`, with this phase and Ready condition.
  bool status_is(const std::string& name, std::int64_t generation, const std::string& phase,
                 const std::string& ready) {
    const json live = job(name);
    const auto condition = kube::find_condition(live, "Ready");
    return live.value("/status/observedGeneration"_json_pointer, std::int64_t{0}) == generation &&
           live.value("/status/phase"_json_pointer, "") == phase && condition &&
           condition->status == ready && condition->observed_generation == generation;
  }

  json lease() {
    kube::Client& admin = cluster_.admin();
    return admin.get(admin.resource_for("coordination.k8s.io/v1", "Lease"),
                     cluster_.namespace_name(), "testjob-controller");
  }

  TestCluster cluster_;
  kube::ResourceInfo jobs_;
};

TEST_F(ControllerExampleTest, WritesStatusConditionsAndEventsWhileLeading) {
  const std::string ns = cluster_.namespace_name();
  kube::Client& admin = cluster_.admin();
  admin.create(jobs_, ns, test_job(ns, "small", 2));
  admin.create(jobs_, ns, test_job(ns, "huge", 64));

  std::jthread controller([&](std::stop_token stop) {
    testjob_controller::run(cluster_.config(), ns, "example-0", stop);
  });

  ASSERT_TRUE(eventually([&] { return status_is("small", 1, "Running", "True"); }))
      << job("small").dump(2);
  ASSERT_TRUE(eventually([&] { return status_is("huge", 1, "Failed", "False"); }))
      << job("huge").dump(2);
  EXPECT_EQ(kube::find_condition(job("huge"), "Ready")->reason, "TooManyReplicas");
  EXPECT_EQ(lease()["spec"]["holderIdentity"], "example-0");

  ASSERT_TRUE(eventually([&] { return !kube::events_for_object(admin, job("small")).empty(); }));
  const std::vector<json> events = kube::events_for_object(admin, job("small"));
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0]["reason"], "Placed");
  EXPECT_EQ(events[0]["type"], "Normal");
  EXPECT_EQ(events[0]["message"], "placed 2 replicas");
  EXPECT_EQ(events[0]["source"]["component"], "testjob-controller");

  // A spec change bumps generation; the controller catches up.
  admin.patch(jobs_, ns, "huge", kube::PatchType::kMerge, {{"spec", {{"replicas", 4}}}});
  ASSERT_TRUE(eventually([&] { return status_is("huge", 2, "Running", "True"); }))
      << job("huge").dump(2);

  controller.request_stop();
  controller.join();
  EXPECT_EQ(lease()["spec"].value("holderIdentity", ""), "") << "released on stop";
}

// The doc quotes the example above; a change to one without the other fails here.
TEST(ControllerExampleDocTest, QuotesTheExampleVerbatim) {
  const auto read = [](const std::string& path) {
    std::ifstream in(std::string(TESSEL_SOURCE_DIR) + "/" + path);
    EXPECT_TRUE(in) << "cannot read " << path;
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  const std::string source = read("tests/kube/controller_example_test.cpp");
  const std::string begin = "namespace testjob_controller {";
  const std::string end = "}  // namespace testjob_controller";
  const std::size_t from = source.find(begin);
  const std::size_t to = source.find(end);
  ASSERT_NE(from, std::string::npos);
  ASSERT_NE(to, std::string::npos);
  const std::string example = source.substr(from, to + end.size() - from);
  EXPECT_NE(read("docs/kube-client.md").find("```cpp\n" + example + "\n```"), std::string::npos)
      << "docs/kube-client.md does not quote the testjob_controller namespace of this file";
}

}  // namespace
}  // namespace tessel::testing
