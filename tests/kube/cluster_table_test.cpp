// A CRD's additionalPrinterColumns through the Table Accept header that kubectl sends, against
// a cluster: column definitions in order, cells rendered server-side (missing values null,
// dates as ages), PartialObjectMetadata rows, includeObject=None, and an unknown Table version
// refused with 406.
#include <gtest/gtest.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <vector>

#include "kube/client.h"
#include "kube/http_transport.h"
#include "kube/object.h"
#include "tests/support/test_cluster.h"

namespace tessel::kube {
namespace {

using nlohmann::json;
using tessel::testing::test_job;
using tessel::testing::TestCluster;

// kubectl's Accept header for `kubectl get` (see the spec's TABLE).
constexpr char kTableAccept[] =
    "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;"
    "g=meta.k8s.io,application/json";

class ClusterTableTest : public ::testing::Test {
 protected:
  ClusterTableTest() : jobs_(cluster_.ensure_test_crd()), ns_(cluster_.namespace_name()) {}

  HttpResponse get(const std::string& target, const std::string& accept) {
    HttpRequest request;
    request.target = target;
    request.headers = {{"Accept", accept}};
    return transport_->round_trip(request);
  }

  json get_table(const std::string& target) {
    const HttpResponse response = get(target, kTableAccept);
    EXPECT_EQ(response.status, 200) << response.body;
    return json::parse(response.body);
  }

  TestCluster cluster_;
  const ResourceInfo jobs_;
  const std::string ns_;
  const std::unique_ptr<HttpTransport> transport_ = make_curl_transport(cluster_.config());
};

TEST_F(ClusterTableTest, ListRendersThePrinterColumns) {
  Client& admin = cluster_.admin();
  admin.create(jobs_, ns_, test_job(ns_, "b-job", 4));
  const json running = admin.create(jobs_, ns_, test_job(ns_, "a-job", 2));
  json with_status = running;
  with_status["status"] = {{"phase", "Running"}};
  admin.update_status(jobs_, with_status);

  const json table = get_table(path(jobs_, ns_) + "?limit=500");
  EXPECT_EQ(table.value("kind", ""), "Table");
  EXPECT_EQ(table.value("apiVersion", ""), "meta.k8s.io/v1");
  EXPECT_FALSE(table["metadata"].value("resourceVersion", "").empty());

  std::vector<std::string> columns;
  std::vector<std::string> types;
  for (const json& column : table.at("columnDefinitions")) {
    columns.push_back(column.value("name", ""));
    types.push_back(column.value("type", ""));
  }
  EXPECT_EQ(columns, (std::vector<std::string>{"Name", "Model", "Replicas", "Phase", "Age"}));
  EXPECT_EQ(types, (std::vector<std::string>{"string", "string", "integer", "string", "date"}));
  EXPECT_EQ(table["columnDefinitions"][0].value("format", ""), "name");

  const json& rows = table.at("rows");
  ASSERT_EQ(rows.size(), 2u) << table.dump();
  const json& a = rows[0]["cells"];
  const json& b = rows[1]["cells"];
  EXPECT_EQ(a[0], "a-job");
  EXPECT_EQ(a[1], "gpt2-124m");
  EXPECT_EQ(a[2], 2);
  EXPECT_EQ(a[3], "Running");
  EXPECT_EQ(b[0], "b-job");
  EXPECT_EQ(b[2], 4);
  EXPECT_TRUE(b[3].is_null()) << b.dump();  // no status yet
  const std::regex age("[0-9]+s");
  EXPECT_TRUE(std::regex_match(a[4].get<std::string>(), age)) << a.dump();

  const json& object = rows[0].at("object");
  EXPECT_EQ(object.value("kind", ""), "PartialObjectMetadata");
  EXPECT_EQ(object.value("apiVersion", ""), "meta.k8s.io/v1");
  EXPECT_EQ(object["metadata"].value("name", ""), "a-job");
  EXPECT_EQ(object["metadata"].value("uid", ""), object_uid(running));
  EXPECT_FALSE(object.contains("spec"));
}

TEST_F(ClusterTableTest, SingleObjectAndIncludeObjectNone) {
  cluster_.admin().create(jobs_, ns_, test_job(ns_, "only", 3));
  const json single = get_table(path(jobs_, ns_, "only"));
  EXPECT_EQ(single.value("kind", ""), "Table");
  ASSERT_EQ(single.at("rows").size(), 1u);
  EXPECT_EQ(single["rows"][0]["cells"][0], "only");
  EXPECT_EQ(single["rows"][0]["cells"][2], 3);

  const json bare = get_table(path(jobs_, ns_) + "?includeObject=None");
  ASSERT_EQ(bare.at("rows").size(), 1u);
  EXPECT_TRUE(bare["rows"][0]["object"].is_null()) << bare.dump();
}

TEST_F(ClusterTableTest, UnknownTableVersionIsNotAcceptable) {
  const HttpResponse response =
      get(path(jobs_, ns_), "application/json;as=Table;v=v9;g=meta.k8s.io");
  EXPECT_EQ(response.status, 406) << response.body;
  // Plain JSON still gets the list itself.
  const HttpResponse list = get(path(jobs_, ns_), "application/json");
  ASSERT_EQ(list.status, 200);
  EXPECT_EQ(json::parse(list.body).value("kind", ""), "TestJobList");
}

}  // namespace
}  // namespace tessel::kube
