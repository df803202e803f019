// The real kubectl against the cluster of tests/support/test_cluster.h (the API test server, or
// the real cluster TESSEL_TEST_KUBECONFIG names): the commands a user types to install the
// TestJob CRD and work with TestJobs, and the messages kubectl prints when the server refuses.
// Skipped visibly when no kubectl is on PATH.
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "kube/client.h"
#include "kube/object.h"
#include "tests/kubectl/child_process.h"
#include "tests/kubectl/kubectl_fixture.h"
#include "tests/support/test_cluster.h"

namespace tessel::testing {
namespace {

using nlohmann::json;

const std::string kCrdName = "testjobs.tests.tessel.dev";
// How long `kubectl get -w` may take to print what the test waits for.
constexpr auto kWatchTimeout = std::chrono::seconds(30);

class KubectlTest : public KubectlFixture {
 protected:
  // A TestJob manifest file, as a user writes it.
  std::string write_job(const std::string& name, int replicas, const std::string& extra_spec = "") {
    return write_file(name + ".yaml",
                      "apiVersion: tests.tessel.dev/v1alpha1\n"
                      "kind: TestJob\n"
                      "metadata:\n"
                      "  name: " +
                          name +
                          "\n"
                          "spec:\n"
                          "  model: gpt2-124m\n"
                          "  replicas: " +
                          std::to_string(replicas) + "\n" + extra_spec);
  }

  // `kubectl apply` of the CRD and `kubectl wait` for it, as an installation guide says.
  void install_crd() {
    const std::string applied = kubectl_ok({"apply", "-f", test_crd_file()});
    // On a real cluster the CRD may be there already (another test run, or test_cluster.cpp).
    EXPECT_TRUE(
        std::regex_search(applied, std::regex("^customresourcedefinition.apiextensions.k8s.io/" +
                                              kCrdName + " (created|configured|unchanged)\n$")))
        << applied;
    const std::string waited =
        kubectl_ok({"wait", "--for", "condition=established", "--timeout=30s", "crd/" + kCrdName});
    EXPECT_EQ(waited,
              "customresourcedefinition.apiextensions.k8s.io/" + kCrdName + " condition met\n");
  }

  // install_crd() and `kubectl apply` of a TestJob.
  void create_job(const std::string& name, int replicas) {
    install_crd();
    EXPECT_EQ(kubectl_ok({"apply", "-f", write_job(name, replicas)}),
              "testjob.tests.tessel.dev/" + name + " created\n");
  }

  // The stored object, read through the API rather than through kubectl.
  json live_job(const std::string& name) {
    kube::Client& admin = cluster_->admin();
    return admin.get(admin.resource_for("tests.tessel.dev/v1alpha1", "TestJob"), namespace_name(),
                     name);
  }
};

TEST_F(KubectlTest, AppliesTheCrdAndWaitsUntilItIsEstablished) {
  install_crd();
  const std::string listed = kubectl_ok({"get", "crd", kCrdName, "-o", "name"});
  EXPECT_EQ(listed, "customresourcedefinition.apiextensions.k8s.io/" + kCrdName + "\n");
}

TEST_F(KubectlTest, ReachesTheServerVersionTheServerReports) {
  const json version = json::parse(kubectl_ok({"version", "-o", "json"}));
  const json served = cluster_->admin().request("GET", "/version");
  EXPECT_EQ(version["serverVersion"]["gitVersion"], served["gitVersion"]) << version.dump(2);
}

TEST_F(KubectlTest, GetPrintsThePrinterColumns) {
  create_job("gpt-small", 2);
  const std::string table = kubectl_ok({"get", "testjobs"});
  const std::vector<std::string> lines = lines_of(table);
  ASSERT_EQ(lines.size(), 2u) << table;
  EXPECT_EQ(words_of(lines[0]),
            (std::vector<std::string>{"NAME", "MODEL", "REPLICAS", "PHASE", "AGE"}));
  // No status yet: the Phase cell is empty, so the row has one word less than the header.
  const std::vector<std::string> row = words_of(lines[1]);
  ASSERT_EQ(row.size(), 4u) << table;
  EXPECT_EQ(row[0], "gpt-small");
  EXPECT_EQ(row[1], "gpt2-124m");
  EXPECT_EQ(row[2], "2");
  EXPECT_TRUE(std::regex_match(row[3], std::regex("[0-9]+s"))) << "age: " << row[3];

  // The short name from the CRD works too.
  EXPECT_EQ(rows_named(kubectl_ok({"get", "ttj"}), "gpt-small").size(), 1u);
}

TEST_F(KubectlTest, GetAsYamlShowsTheStoredObjectWithDefaults) {
  create_job("gpt-small", 2);
  const YAML::Node job = YAML::Load(kubectl_ok({"get", "testjob", "gpt-small", "-o", "yaml"}));
  EXPECT_EQ(job["apiVersion"].as<std::string>(), "tests.tessel.dev/v1alpha1");
  EXPECT_EQ(job["kind"].as<std::string>(), "TestJob");
  EXPECT_EQ(job["metadata"]["name"].as<std::string>(), "gpt-small");
  EXPECT_EQ(job["metadata"]["namespace"].as<std::string>(), namespace_name());
  EXPECT_EQ(job["metadata"]["generation"].as<int>(), 1);
  EXPECT_FALSE(job["metadata"]["uid"].as<std::string>().empty());
  EXPECT_TRUE(job["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"]);
  EXPECT_EQ(job["spec"]["replicas"].as<int>(), 2);
  // Schema defaults, filled by the server.
  EXPECT_EQ(job["spec"]["stages"].as<int>(), 1);
  EXPECT_EQ(job["spec"]["schedule"].as<std::string>(), "1F1B");
  EXPECT_FALSE(job["status"]);
}

TEST_F(KubectlTest, DescribeShowsTheObjectAndItsEvents) {
  create_job("gpt-small", 2);
  const json job = live_job("gpt-small");
  kube::Client& admin = cluster_->admin();
  admin.create(admin.resource_for("v1", "Event"), namespace_name(),
               {{"apiVersion", "v1"},
                {"kind", "Event"},
                {"metadata", {{"name", "gpt-small.placed"}, {"namespace", namespace_name()}}},
                {"involvedObject",
                 {{"apiVersion", "tests.tessel.dev/v1alpha1"},
                  {"kind", "TestJob"},
                  {"name", "gpt-small"},
                  {"namespace", namespace_name()},
                  {"uid", kube::object_uid(job)}}},
                {"reason", "Placed"},
                {"message", "placed 2 replicas on 2 GPUs"},
                {"type", "Normal"},
                {"count", 1},
                {"source", {{"component", "tessel-operator"}}},
                {"firstTimestamp", kube::format_rfc3339(std::chrono::system_clock::now())},
                {"lastTimestamp", kube::format_rfc3339(std::chrono::system_clock::now())}});

  const std::string described = kubectl_ok({"describe", "testjob", "gpt-small"});
  for (const std::string& pattern : std::vector<std::string>{
           "^Name: +gpt-small$", "^Namespace: +" + namespace_name() + "$",
           "^API Version: +tests.tessel.dev/v1alpha1$", "^Kind: +TestJob$", "^Spec:$",
           "^  Model: +gpt2-124m$", "^  Replicas: +2$", "^  Schedule: +1F1B$", "^Events:$",
           "^  Normal +Placed +.*tessel-operator +placed 2 replicas on 2 GPUs$"}) {
    EXPECT_TRUE(std::regex_search(described, std::regex(pattern, std::regex::multiline)))
        << "no line matching /" << pattern << "/ in:\n"
        << described;
  }
}

TEST_F(KubectlTest, PatchesTheStatusSubresource) {
  create_job("gpt-small", 2);
  EXPECT_EQ(kubectl_ok({"patch", "testjob", "gpt-small", "--subresource=status", "--type=merge",
                        "-p", R"({"status":{"phase":"Running","observedGeneration":1}})"}),
            "testjob.tests.tessel.dev/gpt-small patched\n");

  const std::vector<std::vector<std::string>> rows =
      rows_named(kubectl_ok({"get", "testjobs"}), "gpt-small");
  ASSERT_EQ(rows.size(), 1u);
  ASSERT_EQ(rows[0].size(), 5u);
  EXPECT_EQ(rows[0][3], "Running");

  const json job = live_job("gpt-small");
  EXPECT_EQ(job["status"]["phase"], "Running");
  EXPECT_EQ(job["status"]["observedGeneration"], 1);
  EXPECT_EQ(kube::object_generation(job), 1) << "a status write must not bump generation";

  // The status subresource validates against the schema too.
  const std::string refused =
      kubectl_fails({"patch", "testjob", "gpt-small", "--subresource=status", "--type=merge", "-p",
                     R"({"status":{"phase":"Exploding"}})"});
  EXPECT_NE(refused.find("Unsupported value: \"Exploding\""), std::string::npos) << refused;
}

TEST_F(KubectlTest, WatchPrintsARowForEveryChange) {
  create_job("gpt-small", 2);
  std::unique_ptr<ChildProcess> watch = kubectl_->start({"get", "testjobs", "--watch"});
  // The rows printed whole: a read may end inside a line kubectl is still writing.
  const auto printed = [](const std::string& out) {
    return rows_named(out.substr(0, out.rfind('\n') + 1), "gpt-small");
  };
  const auto rows_with = [&](std::size_t count) {
    return [count, &printed](const std::string& out) { return printed(out).size() >= count; };
  };
  ASSERT_TRUE(watch->read_until(rows_with(1), kWatchTimeout)) << "stdout:\n"
                                                              << watch->out() << "stderr:\n"
                                                              << watch->err();
  EXPECT_EQ(words_of(lines_of(watch->out())[0]),
            (std::vector<std::string>{"NAME", "MODEL", "REPLICAS", "PHASE", "AGE"}));

  EXPECT_EQ(kubectl_ok({"patch", "testjob", "gpt-small", "--type=merge", "-p",
                        R"({"spec":{"replicas":3}})"}),
            "testjob.tests.tessel.dev/gpt-small patched\n");
  ASSERT_TRUE(watch->read_until(rows_with(2), kWatchTimeout)) << "stdout:\n"
                                                              << watch->out() << "stderr:\n"
                                                              << watch->err();
  EXPECT_EQ(printed(watch->out())[1][2], "3");

  const ProcessResult stopped = watch->stop();
  EXPECT_FALSE(stopped.timed_out) << describe(stopped);
  EXPECT_EQ(stopped.err, "");
}

// A server that ends watches after two seconds, as kube-apiserver does after 30 to 60 minutes.
class KubectlShortWatchTest : public KubectlTest {
 protected:
  ApiTestServerOptions server_options() const override {
    ApiTestServerOptions options;
    options.default_watch_timeout = std::chrono::seconds(2);
    return options;
  }
};

TEST_F(KubectlShortWatchTest, WatchEndsQuietlyWhenTheServerEndsTheStream) {
  TESSEL_REQUIRE_TEST_SERVER(*cluster_, "a watch timeout of seconds");
  create_job("gpt-small", 2);
  const ProcessResult watched = kubectl_->run({"get", "testjobs", "--watch"});
  EXPECT_EQ(watched.exit_code, 0) << describe(watched);
  EXPECT_EQ(rows_named(watched.out, "gpt-small").size(), 1u) << watched.out;
  EXPECT_EQ(watched.err, "");
}

TEST_F(KubectlTest, ApplyUpdatesAChangedObjectAndLeavesAnUnchangedOne) {
  create_job("gpt-small", 2);
  const std::string changed = write_job("gpt-small", 4, "  schedule: GPipe\n");
  EXPECT_EQ(kubectl_ok({"apply", "-f", changed}),
            "testjob.tests.tessel.dev/gpt-small configured\n");
  json job = live_job("gpt-small");
  EXPECT_EQ(job["spec"]["replicas"], 4);
  EXPECT_EQ(job["spec"]["schedule"], "GPipe");
  EXPECT_EQ(kube::object_generation(job), 2);

  EXPECT_EQ(kubectl_ok({"apply", "-f", changed}), "testjob.tests.tessel.dev/gpt-small unchanged\n");
  EXPECT_EQ(kube::object_resource_version(live_job("gpt-small")),
            kube::object_resource_version(job));

  // Dropping a field from the manifest removes it from the object (it was last applied).
  EXPECT_EQ(kubectl_ok({"apply", "-f", write_job("gpt-small", 4)}),
            "testjob.tests.tessel.dev/gpt-small configured\n");
  job = live_job("gpt-small");
  EXPECT_EQ(job["spec"]["schedule"], "1F1B") << "the removed field is defaulted again";
  EXPECT_EQ(kube::object_generation(job), 3);
}

TEST_F(KubectlTest, ServerSideApplyCreatesUpdatesAndReportsConflicts) {
  install_crd();
  EXPECT_EQ(kubectl_ok({"apply", "--server-side", "-f", write_job("gpt-ssa", 2)}),
            "testjob.tests.tessel.dev/gpt-ssa serverside-applied\n");
  EXPECT_EQ(kubectl_ok({"apply", "--server-side", "-f", write_job("gpt-ssa", 5)}),
            "testjob.tests.tessel.dev/gpt-ssa serverside-applied\n");
  json job = live_job("gpt-ssa");
  EXPECT_EQ(job["spec"]["replicas"], 5);
  EXPECT_EQ(kube::object_generation(job), 2);
  const json managers = job["metadata"]["managedFields"];
  ASSERT_EQ(managers.size(), 1u) << managers.dump(2);
  EXPECT_EQ(managers[0]["manager"], "kubectl");
  EXPECT_EQ(managers[0]["operation"], "Apply");

  // Another manager takes spec.replicas; applying a different value is then a conflict.
  kubectl_ok({"patch", "testjob", "gpt-ssa", "--type=merge", "-p", R"({"spec":{"replicas":6}})"});
  const std::string conflict =
      kubectl_fails({"apply", "--server-side", "-f", write_job("gpt-ssa", 7)});
  EXPECT_NE(conflict.find("Apply failed with 1 conflict: conflict with \"kubectl-patch\""),
            std::string::npos)
      << conflict;
  EXPECT_NE(conflict.find(".spec.replicas"), std::string::npos) << conflict;
  EXPECT_EQ(live_job("gpt-ssa")["spec"]["replicas"], 6);

  EXPECT_EQ(
      kubectl_ok({"apply", "--server-side", "--force-conflicts", "-f", write_job("gpt-ssa", 7)}),
      "testjob.tests.tessel.dev/gpt-ssa serverside-applied\n");
  EXPECT_EQ(live_job("gpt-ssa")["spec"]["replicas"], 7);
}

TEST_F(KubectlTest, AnnotatesTheObject) {
  create_job("gpt-small", 2);
  EXPECT_EQ(kubectl_ok({"annotate", "testjob", "gpt-small", "tessel.dev/owner=ml-team"}),
            "testjob.tests.tessel.dev/gpt-small annotated\n");
  json job = live_job("gpt-small");
  EXPECT_EQ(kube::get_annotation(job, "tessel.dev/owner"), "ml-team");
  EXPECT_EQ(kube::object_generation(job), 1) << "metadata changes do not bump generation";

  const std::string refused =
      kubectl_fails({"annotate", "testjob", "gpt-small", "tessel.dev/owner=infra"});
  EXPECT_NE(refused.find("--overwrite is false but found the following declared annotation(s): "
                         "'tessel.dev/owner' already has a value (ml-team)"),
            std::string::npos)
      << refused;

  EXPECT_EQ(kubectl_ok({"annotate", "testjob", "gpt-small", "tessel.dev/owner-"}),
            "testjob.tests.tessel.dev/gpt-small annotated\n");
  EXPECT_EQ(kube::get_annotation(live_job("gpt-small"), "tessel.dev/owner"), std::nullopt);
}

TEST_F(KubectlTest, DeletesTheObject) {
  create_job("gpt-small", 2);
  EXPECT_EQ(kubectl_ok({"delete", "testjob", "gpt-small"}),
            "testjob.tests.tessel.dev \"gpt-small\" deleted\n");
  const std::string missing = kubectl_fails({"get", "testjob", "gpt-small"});
  EXPECT_EQ(missing,
            "Error from server (NotFound): testjobs.tests.tessel.dev \"gpt-small\" not found\n");
  EXPECT_EQ(kubectl_ok({"get", "testjobs"}), "");
}

TEST_F(KubectlTest, DeleteWaitsForFinalizersToBeRemoved) {
  install_crd();
  EXPECT_EQ(
      kubectl_ok({"apply", "-f",
                  write_file("held.yaml",
                             "apiVersion: tests.tessel.dev/v1alpha1\nkind: TestJob\n"
                             "metadata:\n  name: held\n  finalizers: [tests.tessel.dev/hold]\n"
                             "spec:\n  model: gpt2-124m\n  replicas: 1\n")}),
      "testjob.tests.tessel.dev/held created\n");
  std::unique_ptr<ChildProcess> deletion = kubectl_->start({"delete", "testjob", "held"});
  // kubectl prints "deleted" once the DELETE is accepted, then waits for the object to go.
  ASSERT_TRUE(deletion->read_until(
      [](const std::string& out) { return out.find("deleted") != std::string::npos; },
      kWatchTimeout))
      << "stdout:\n"
      << deletion->out() << "stderr:\n"
      << deletion->err();
  EXPECT_TRUE(kube::is_being_deleted(live_job("held")));

  kubectl_ok(
      {"patch", "testjob", "held", "--type=merge", "-p", R"({"metadata":{"finalizers":null}})"});
  const ProcessResult deleted = deletion->wait(kKubectlTimeout);
  EXPECT_EQ(deleted.exit_code, 0) << describe(deleted);
  EXPECT_EQ(deleted.out, "testjob.tests.tessel.dev \"held\" deleted\n");
}

TEST_F(KubectlTest, ReportsSchemaViolationsAsInvalid) {
  install_crd();
  // kubectl turns a 422 with causes into one line per violation; the server lists them all.
  EXPECT_EQ(kubectl_fails({"apply", "-f", write_job("bad", 0, "  schedule: Zigzag\n")}),
            "The TestJob \"bad\" is invalid: \n"
            "* spec.replicas: Invalid value: 0: spec.replicas in body should be greater than or "
            "equal to 1\n"
            "* spec.schedule: Unsupported value: \"Zigzag\": supported values: \"GPipe\", "
            "\"1F1B\", \"Interleaved1F1B\"\n");
  EXPECT_EQ(kubectl_ok({"get", "testjobs"}), "") << "nothing was created";
}

TEST_F(KubectlTest, ReportsUnknownFieldsAsAStrictDecodingError) {
  install_crd();
  const std::string refused =
      kubectl_fails({"apply", "-f", write_job("typo", 1, "  replica: 3\n")});
  EXPECT_NE(refused.find("Error from server (BadRequest): error when creating \"" +
                         (work_dir_ / "typo.yaml").string() + "\": "),
            std::string::npos)
      << refused;
  EXPECT_NE(refused.find("strict decoding error: unknown field \"spec.replica\""),
            std::string::npos)
      << refused;
}

TEST_F(KubectlTest, ReportsForbiddenWhenTheAuthorizerDenies) {
  TESSEL_REQUIRE_TEST_SERVER(*cluster_, "an authorizer that denies");
  create_job("gpt-small", 2);
  ApiTestServer& server = *cluster_->server();
  server.add_token("viewer-token", {"viewer", {}});
  // The viewer may read TestJobs but not change them.
  server.set_authorizer([](const RequestAttributes& request) {
    if (request.user.name == "system:anonymous") return !request.resource_request;
    if (request.user.name != "viewer" || request.resource != "testjobs") return true;
    return request.verb == "get" || request.verb == "list" || request.verb == "watch";
  });
  const Kubectl viewer(server.write_kubeconfig((work_dir_ / "viewer-kubeconfig").string(),
                                               "viewer-token", namespace_name()),
                       namespace_name(), (work_dir_ / "viewer-cache").string());

  const ProcessResult listed = viewer.run({"get", "testjobs"});
  EXPECT_EQ(listed.exit_code, 0) << describe(listed);
  EXPECT_EQ(rows_named(listed.out, "gpt-small").size(), 1u) << listed.out;

  const ProcessResult deleted = viewer.run({"delete", "testjob", "gpt-small"});
  EXPECT_EQ(deleted.exit_code, 1) << describe(deleted);
  EXPECT_EQ(deleted.err,
            "Error from server (Forbidden): testjobs.tests.tessel.dev \"gpt-small\" "
            "is forbidden: User \"viewer\" cannot delete resource \"testjobs\" in API "
            "group \"tests.tessel.dev\" in the namespace \"" +
                namespace_name() + "\"\n");
  EXPECT_NO_THROW(live_job("gpt-small")) << "the denied delete left the object";
}

}  // namespace
}  // namespace tessel::testing
