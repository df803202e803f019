// The operator end to end, as a user meets it (issue 11, "Tests and figures"): the members
// registered show Reachable with their nodes and GPUs; TrainingJobs
// applied in the hub with the real kubectl train across the GPU nodes of two member clusters,
// `kubectl get trainingjobs` shows their progress, and deleting one leaves nothing anywhere; a
// job too big for the free GPUs waits Pending and starts when another ends; suspend then resume
// continues the step count; an operator down as a job ends shows its final step from the pods;
// a bad job is refused by kubectl with the field named.
//
// Steps are few (the example has 300) to keep each case within a minute or so on two loaded
// cores; every time bound below is a generous timeout, not a measurement.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <csignal>
#include <nlohmann/json.hpp>
#include <string>

#include "tests/operator_e2e/e2e_fixture.h"

namespace tessel::testing {
namespace {

using nlohmann::json;
using std::chrono::seconds;

// From apply to every pod Running (placement, pods in two clusters, the stages' rendezvous).
constexpr seconds kStartTimeout{120};
// A short job's whole training on two loaded cores.
constexpr seconds kTrainTimeout{150};

std::string job_selector(const std::string& name) { return std::string(kJobLabel) + "=" + name; }

int64_t progress_step(const json& job) {
  return job.value("/status/progress/step"_json_pointer, int64_t{0});
}

bool mentions(const std::string& text, const std::string& word) {
  std::string lower = text, wanted = word;
  std::transform(lower.begin(), lower.end(), lower.begin(), ::tolower);
  std::transform(wanted.begin(), wanted.end(), wanted.begin(), ::tolower);
  return lower.find(wanted) != std::string::npos;
}

TEST_F(OperatorE2e, TheMembersAreReachableWithTheirNodesAndGpusCounted) {
  std::string table;
  const bool counted = wait_for(
      [&] {
        const ProcessResult listed = kubectl(
            {"get", "memberclusters", "-l", std::string(kRunLabel) + "=" + federation_->run_id()});
        table = listed.out;
        for (int m = 0; m < federation_->member_count(); ++m) {
          const std::string name = federation_->member_name(m);
          if (table_cell(table, name, "REACHABLE") != "True" ||
              table_cell(table, name, "NODES") != std::to_string(kNodesPerMember) ||
              table_cell(table, name, "GPUS") != std::to_string(kNodesPerMember * kGpusPerNode))
            return false;
        }
        return true;
      },
      kStartTimeout);
  EXPECT_TRUE(counted) << "kubectl get memberclusters:\n" << table;
}

TEST_F(OperatorE2e, TheExampleJobTrainsAcrossBothMembersAndDeletingItLeavesNothing) {
  constexpr int kSteps = 120;
  EXPECT_EQ(kubectl_ok({"apply", "-f", example_job("fables", kSteps)}),
            "trainingjob.tessel.dev/fables created\n");

  // One pod per tasklet (2 stages x 2 replicas), in both members: the fleet's 4 GPUs.
  size_t in_a = 0, in_b = 0;
  EXPECT_TRUE(wait_for(
      [&] {
        in_a = pods_in(0, job_selector("fables")).size();
        in_b = pods_in(1, job_selector("fables")).size();
        return in_a + in_b == 4;
      },
      kStartTimeout))
      << "pods in member a: " << in_a << ", in member b: " << in_b;
  EXPECT_GT(in_a, 0u);
  EXPECT_GT(in_b, 0u);

  // Running, with the step and the loss advancing, as `kubectl get trainingjobs` prints them.
  struct Seen {
    long step;
    double loss;
  };
  std::vector<Seen> seen;
  std::string table;
  wait_for(
      [&] {
        const ProcessResult listed = kubectl({"get", "trainingjobs"});
        if (listed.exit_code != 0) return false;
        table = listed.out;
        const std::string phase = table_cell(table, "fables", "PHASE").value_or("");
        const std::string step = table_cell(table, "fables", "STEP").value_or("");
        const std::string loss = table_cell(table, "fables", "LOSS").value_or("");
        if (phase == "Running" && !step.empty() && !loss.empty() &&
            (seen.empty() || std::stol(step) != seen.back().step))
          seen.push_back({std::stol(step), std::stod(loss)});
        return seen.size() >= 2 || phase == "Succeeded" || phase == "Failed";
      },
      kStartTimeout + kTrainTimeout);
  ASSERT_GE(seen.size(), 2u) << "kubectl get trainingjobs did not show two steps while Running; "
                             << "last:\n"
                             << table;
  EXPECT_GT(seen[1].step, seen[0].step) << table;
  EXPECT_NE(seen[1].loss, seen[0].loss) << table;
  const std::string clusters = table_cell(table, "fables", "CLUSTERS").value_or("");
  EXPECT_TRUE(mentions(clusters, federation_->member_name(0)) &&
              mentions(clusters, federation_->member_name(1)))
      << table;

  const json done = wait_for_phase("fables", "Succeeded", kTrainTimeout);
  const double entropy = example_data_entropy();
  EXPECT_EQ(progress_step(done), kSteps) << done["status"].dump();
  EXPECT_LT(done.value("/status/progress/loss"_json_pointer, 1e9), entropy)
      << "the final loss is not below the unigram entropy of the data (" << entropy << ")";
  EXPECT_EQ(condition_of(done, "Succeeded").value("status", ""), "True") << done["status"].dump();

  // Delete: the finalizer sweeps every member clean of the job's pods, ConfigMaps and Secrets.
  const std::string uid = done["metadata"]["uid"];
  EXPECT_FALSE(leftovers(uid).empty()) << "the job's member objects carry no " << kJobUidLabel;
  EXPECT_EQ(kubectl_ok({"delete", "trainingjob", "fables", "--timeout=120s"}),
            "trainingjob.tessel.dev \"fables\" deleted\n");
  std::vector<std::string> left;
  EXPECT_TRUE(wait_for(
      [&] {
        left = leftovers(uid);
        return left.empty();
      },
      seconds(60)))
      << "left after delete: " << ::testing::PrintToString(left);
  EXPECT_TRUE(trainingjob("fables").is_null());
}

TEST_F(OperatorE2e, AJobTooBigForTheFreeGpusWaitsPendingAndStartsWhenAnotherEnds) {
  // "first" takes 2 of the 4 GPUs; "big" (the example, 4 GPUs) cannot fit until it ends.
  kubectl_ok({"apply", "-f", example_job("first", 80, [](json& job) {
                job["spec"]["parallelism"]["replicas"] = 1;
              })});
  wait_for_phase("first", "Running", kStartTimeout);
  kubectl_ok({"apply", "-f", example_job("big", 20)});

  json big;
  EXPECT_TRUE(wait_for(
      [&] {
        big = trainingjob("big");
        if (big.value("/status/phase"_json_pointer, "") != "Pending") return false;
        for (const json& condition : big["status"].value("conditions", json::array()))
          if (condition.value("status", "") == "False" &&
              mentions(condition.value("message", ""), "GPU"))
            return true;
        return false;
      },
      kStartTimeout))
      << "big is not Pending with a condition that says GPUs are short: " << big.dump();
  EXPECT_EQ(trainingjob("first").value("/status/phase"_json_pointer, ""), "Running")
      << "first ended before big was seen waiting: the case proves nothing";
  EXPECT_TRUE(pods_in(0, job_selector("big")).empty());
  EXPECT_TRUE(pods_in(1, job_selector("big")).empty());

  wait_for_phase("first", "Succeeded", kTrainTimeout);
  const json started = wait_for_phase("big", "Succeeded", kStartTimeout + kTrainTimeout);
  EXPECT_EQ(progress_step(started), 20) << started["status"].dump();
}

TEST_F(OperatorE2e, SuspendThenResumeContinuesTheStepCount) {
  constexpr int kSteps = 300;
  // The checkpoints must outlive the pods: a hostPath volume, mounted at its own path so that
  // the path in job.json is the same in the pod and on the node (the process kubelet's pods
  // see the host's file system). Every rank writes its own files there (checkpoint.shared is
  // false for operator jobs: one folder per rank, here all the same folder).
  const std::string checkpoints = work_dir_ + "/checkpoints-pausable";
  kubectl_ok({"apply", "-f", example_job("pausable", kSteps, [&](json& job) {
                job["spec"]["checkpoint"]["intervalSteps"] = 20;
                job["spec"]["checkpoint"]["path"] = checkpoints;
                job["spec"]["template"]["volumes"] = {
                    {{"name", "checkpoints"},
                     {"hostPath", {{"path", checkpoints}, {"type", "DirectoryOrCreate"}}}}};
                job["spec"]["template"]["volumeMounts"] = {
                    {{"name", "checkpoints"}, {"mountPath", checkpoints}}};
              })});
  json job;
  EXPECT_TRUE(wait_for(
      [&] {
        job = trainingjob("pausable");
        return progress_step(job) >= 60;
      },
      kStartTimeout + kTrainTimeout))
      << job.value("status", json::object()).dump();

  kubectl_ok(
      {"patch", "trainingjob", "pausable", "--type=merge", "-p", R"({"spec":{"suspend":true}})"});
  const json suspended = wait_for_phase("pausable", "Suspended", kStartTimeout);
  EXPECT_EQ(condition_of(suspended, "Suspended").value("status", ""), "True")
      << suspended["status"].dump();
  const std::string uid = suspended["metadata"]["uid"];
  EXPECT_TRUE(wait_for(
      [&] {
        return pods_in(0, job_selector("pausable")).empty() &&
               pods_in(1, job_selector("pausable")).empty();
      },
      seconds(60)))
      << "the pods of a suspended job are still there";
  // The phase says Suspended from the moment the pods are asked to stop (condition Suspended,
  // reason Suspending); the checkpoint the stages wrote as they stopped is in the status once
  // the pods are gone (reason Suspended).
  json stopped;
  EXPECT_TRUE(wait_for(
      [&] {
        stopped = trainingjob("pausable");
        return condition_of(stopped, "Suspended").value("reason", "") == "Suspended";
      },
      seconds(60)))
      << stopped.value("status", json::object()).dump();
  const int64_t checkpoint =
      stopped.value("/status/progress/lastCheckpointStep"_json_pointer, int64_t{0});
  const int64_t stopped_at = progress_step(stopped);
  EXPECT_GE(checkpoint, 60) << stopped["status"].dump();
  EXPECT_LT(stopped_at, kSteps) << "the job ended before it was suspended";

  kubectl_ok(
      {"patch", "trainingjob", "pausable", "--type=merge", "-p", R"({"spec":{"suspend":false}})"});
  // The first step reported after the resume continues from the checkpoint: a restart from
  // step 0 would report a step far below it (one status write a second, about ten steps each).
  int64_t resumed_step = 0;
  EXPECT_TRUE(wait_for(
      [&] {
        job = trainingjob("pausable");
        resumed_step = progress_step(job);
        return job.value("/status/phase"_json_pointer, "") != "Suspended" && resumed_step > 0 &&
               resumed_step != stopped_at;
      },
      kStartTimeout + kTrainTimeout))
      << job.value("status", json::object()).dump();
  EXPECT_GT(resumed_step, checkpoint) << "resumed from the checkpoint of step " << checkpoint;

  const json done = wait_for_phase("pausable", "Succeeded", kTrainTimeout);
  EXPECT_EQ(progress_step(done), kSteps) << done["status"].dump();
}

// The operator is down from mid-training until after every stage pod has finished: the stages'
// last progress events never reach an operator (they give up after 10 s and exit). The operator
// started afterwards shows the final step and loss all the same, from what the stages left in
// their pods' termination messages, instead of the step it last saw.
TEST_F(OperatorE2e, AnOperatorDownAsTheJobEndsShowsTheFinalStepFromThePods) {
  constexpr int kSteps = 300;
  kubectl_ok({"apply", "-f", example_job("unseen", kSteps)});
  json job;
  EXPECT_TRUE(wait_for(
      [&] {
        job = trainingjob("unseen");
        return progress_step(job) >= 20;
      },
      kStartTimeout + kTrainTimeout))
      << job.value("status", json::object()).dump();
  operators_.at(0)->stop(SIGKILL);
  const int64_t last_seen = progress_step(trainingjob("unseen"));
  ASSERT_LT(last_seen, kSteps) << "the job ended before the operator was stopped";

  std::vector<json> pods;
  EXPECT_TRUE(wait_for(
      [&] {
        pods = pods_in(0, job_selector("unseen"));
        for (const json& pod : pods_in(1, job_selector("unseen"))) pods.push_back(pod);
        return pods.size() == 4 && std::all_of(pods.begin(), pods.end(), [](const json& pod) {
                 return pod.value("/status/phase"_json_pointer, "") == "Succeeded";
               });
      },
      kTrainTimeout))
      << "the stage pods did not all finish while the operator was down";
  // Each stage pod says where training ended, as the kubelet copied it from the container.
  for (const json& pod : pods) {
    const json message = json::parse(
        pod.value("/status/containerStatuses/0/state/terminated/message"_json_pointer, "null"),
        nullptr, false);
    EXPECT_EQ(message.value("/done/step"_json_pointer, int64_t{-1}), kSteps)
        << pod["status"].dump();
  }

  restart_operator(0);
  const json done = wait_for_phase("unseen", "Succeeded", kStartTimeout);
  EXPECT_EQ(progress_step(done), kSteps)
      << "it showed step " << last_seen << " before; " << done["status"].dump();
  EXPECT_LT(done.value("/status/progress/loss"_json_pointer, 1e9), example_data_entropy())
      << done["status"].dump();
}

TEST_F(OperatorE2e, ABadJobIsRefusedByKubectlWithTheFieldNamed) {
  // A bound of one field: the CRD's schema refuses it.
  const ProcessResult zero_batch = kubectl(
      {"apply", "-f",
       example_job("zero-batch", 20, [](json& job) { job["spec"]["batch"]["microBatch"] = 0; })});
  EXPECT_EQ(zero_batch.exit_code, 1) << describe(zero_batch);
  EXPECT_NE(zero_batch.err.find("spec.batch.microBatch"), std::string::npos)
      << describe(zero_batch);

  // A rule across fields (global batch divisible by replicas x micro-batch): the webhook's.
  const std::string uneven = example_job("uneven-batch", 20, [](json& job) {
    job["spec"]["batch"]["globalBatch"] = 18;  // 2 replicas x 4 do not divide it
  });
  if (webhook_registered()) {
    const ProcessResult refused = kubectl({"apply", "-f", uneven});
    EXPECT_EQ(refused.exit_code, 1) << describe(refused);
    EXPECT_NE(refused.err.find("denied the request"), std::string::npos) << describe(refused);
    EXPECT_NE(refused.err.find("spec.batch.globalBatch"), std::string::npos) << describe(refused);
    EXPECT_TRUE(trainingjob("uneven-batch").is_null());
    return;
  }
  // No webhook (a real hub): the job is created, and the operator's reconcile flags it.
  kubectl_ok({"apply", "-f", uneven});
  json job;
  EXPECT_TRUE(wait_for(
      [&] {
        job = trainingjob("uneven-batch");
        const json valid = condition_of(job, "Valid");
        return valid.value("status", "") == "False" &&
               valid.value("message", "").find("spec.batch.globalBatch") != std::string::npos;
      },
      kStartTimeout))
      << job.value("status", json::object()).dump();
  GTEST_SKIP() << "the webhook part: a real API server cannot reach the webhook this machine "
                  "serves on 127.0.0.1 (checked instead: Valid=False naming the field)";
}

}  // namespace
}  // namespace tessel::testing
