// Request bodies in Kubernetes' protobuf encoding, as kubectl's typed clients send them: the
// kinds the server decodes, and a clear refusal of the others.
#include <gtest/gtest.h>

#include <string>

#include "tests/apiserver/api_test_client.h"
#include "tests/apiserver/plain_server.h"
#include "tests/support/api_test_server.h"

namespace tessel::testing {
namespace {

// Protobuf wire format: a length-delimited field (wire type 2).
std::string field(int number, const std::string& bytes) {
  std::string out(1, static_cast<char>((number << 3) | 2));
  std::size_t length = bytes.size();
  do {
    unsigned char byte = length & 0x7F;
    length >>= 7;
    if (length != 0) byte |= 0x80;
    out.push_back(static_cast<char>(byte));
  } while (length != 0);
  return out + bytes;
}

// The "k8s\0" envelope (runtime.Unknown) around an object's bytes.
std::string envelope(const std::string& api_version, const std::string& kind,
                     const std::string& raw) {
  return std::string("k8s\0", 4) + field(1, field(1, api_version) + field(2, kind)) +
         field(2, raw) + field(4, "application/vnd.kubernetes.protobuf");
}

class ProtobufBodyTest : public ::testing::Test {
 protected:
  ProtobufBodyTest()
      : server_(plain_options()), client_(server_.url(), "", {"admin-token", "", ""}) {}

  ClientResponse post(const std::string& path, const std::string& body) {
    return client_.request("POST", path, body, "application/vnd.kubernetes.protobuf");
  }

  ApiTestServer server_;
  TestClient client_;
};

TEST_F(ProtobufBodyTest, AServiceAccountIsDecodedWithItsMetadata) {
  // ObjectMeta: name (1), labels (11) as map entries {key 1, value 2}.
  const std::string metadata = field(1, "robot") + field(11, field(1, "team") + field(2, "llm"));
  const ClientResponse created = post("/api/v1/namespaces/default/serviceaccounts",
                                      envelope("v1", "ServiceAccount", field(1, metadata)));
  ASSERT_EQ(created.status, 201) << created.body;
  EXPECT_EQ(created.json()["metadata"]["name"], "robot");
  EXPECT_EQ(created.json()["metadata"]["labels"]["team"], "llm");
}

TEST_F(ProtobufBodyTest, OtherKindsAndBrokenBodiesAreRefusedByName) {
  const ClientResponse other = post("/api/v1/namespaces/default/configmaps",
                                    envelope("v1", "ConfigMap", field(1, field(1, "c"))));
  EXPECT_EQ(other.status, 400);
  EXPECT_EQ(other.json()["message"],
            "the API test server decodes protobuf bodies of v1 Namespace, ServiceAccount, "
            "authentication.k8s.io/v1 TokenRequest, rbac.authorization.k8s.io/v1 Role, "
            "ClusterRole, RoleBinding, ClusterRoleBinding and authorization.k8s.io/v1 "
            "SelfSubjectAccessReview, SelfSubjectRulesReview only, not v1 ConfigMap: send it as "
            "JSON");
  const ClientResponse truncated =
      post("/api/v1/namespaces/default/serviceaccounts", std::string("k8s\0", 4) + "\x0a\x20");
  EXPECT_EQ(truncated.status, 400);
  EXPECT_EQ(truncated.json()["message"], "protobuf body: a field of 32 bytes runs past the end");
  EXPECT_EQ(post("/api/v1/namespaces/default/serviceaccounts", "{}").json()["message"],
            "a protobuf body must start with the \"k8s\\x00\" magic");
}

}  // namespace
}  // namespace tessel::testing
