// The admission webhook over real HTTPS (cpprestsdk), called as kube-apiserver calls it: a POST
// of an AdmissionReview to /validate over TLS verified against the CA of the webhook's
// certificate (what the webhook configuration's caBundle holds).
#include "operator/server/webhook.h"

#include <curl/curl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "api/yaml_json.h"
#include "tests/support/http_server.h"

namespace tessel::server {
namespace {

using nlohmann::json;

struct Answer {
  long status = 0;
  std::string body;
  std::string error;  // curl's, when the request failed
};

size_t collect(char* data, size_t size, size_t count, void* sink) {
  static_cast<std::string*>(sink)->append(data, size * count);
  return size * count;
}

Answer post(const std::string& url, const std::string& body, const std::string& ca_pem,
            const std::string& method = "POST") {
  Answer answer;
  CURL* curl = curl_easy_init();
  curl_blob ca{const_cast<char*>(ca_pem.data()), ca_pem.size(), CURL_BLOB_COPY};
  curl_slist* headers = curl_slist_append(nullptr, "Content-Type: application/json");
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_CAINFO_BLOB, &ca);
  curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, method.c_str());
  if (method == "POST") curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body.c_str());
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, collect);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &answer.body);
  curl_easy_setopt(curl, CURLOPT_TIMEOUT, 30L);
  const CURLcode code = curl_easy_perform(curl);
  if (code != CURLE_OK) answer.error = curl_easy_strerror(code);
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &answer.status);
  curl_slist_free_all(headers);
  curl_easy_cleanup(curl);
  return answer;
}

// A port the kernel had free a moment ago (the server is retried on another if it is taken).
uint16_t free_port() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address);
  socklen_t length = sizeof address;
  getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  close(fd);
  return ntohs(address.sin_port);
}

class Webhook : public ::testing::Test {
 protected:
  void SetUp() override {
    const testing::TestCertificate certificate = ca_.issue_server();
    for (int attempt = 0; attempt < 5 && !server_; ++attempt) {
      try {
        server_ = start_https_server("127.0.0.1", free_port(), certificate.cert_pem,
                                     certificate.key_pem, handle_webhook);
      } catch (const HttpsServerError&) {
        // the port was taken in between: another
      }
    }
    ASSERT_TRUE(server_);
  }

  json review_of(const json& object) const {
    return {{"apiVersion", "admission.k8s.io/v1"},
            {"kind", "AdmissionReview"},
            {"request",
             {{"uid", "e911857d-c318-11e8-bbad-025000000001"},
              {"kind", {{"group", "tessel.dev"}, {"version", "v1alpha1"}, {"kind", "TrainingJob"}}},
              {"operation", "CREATE"},
              {"object", object}}}};
  }

  json example_job() const {
    const std::string path = std::string(TESSEL_SOURCE_DIR) + "/examples/trainingjobs/fables.yaml";
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    return api::yaml_to_json(text.str(), path);
  }

  testing::TestCertificateAuthority ca_;
  std::unique_ptr<HttpsServer> server_;
};

TEST_F(Webhook, AnswersAdmissionReviewsOverVerifiedTls) {
  const Answer good =
      post(server_->url() + "validate", review_of(example_job()).dump(), ca_.ca_pem());
  ASSERT_EQ(good.error, "");
  EXPECT_EQ(good.status, 200);
  const json allowed = json::parse(good.body);
  EXPECT_EQ(allowed["response"]["uid"], "e911857d-c318-11e8-bbad-025000000001");
  EXPECT_EQ(allowed["response"]["allowed"], true);

  json bad = example_job();
  bad["spec"]["parallelism"]["stages"] = 9;
  const json refused =
      json::parse(post(server_->url() + "validate", review_of(bad).dump(), ca_.ca_pem()).body);
  EXPECT_EQ(refused["response"]["allowed"], false);
  EXPECT_EQ(refused["response"]["status"]["message"],
            "spec.parallelism.stages: stages x virtualStages = 9 x 1 = 9 exceeds the model's 4 "
            "layers");
}

TEST_F(Webhook, WrongRequestsGetTheStatusThatSaysWhy) {
  EXPECT_EQ(post(server_->url() + "validate", "{not json", ca_.ca_pem()).status, 400);
  EXPECT_EQ(post(server_->url() + "validate", "{\"kind\": \"Pod\"}", ca_.ca_pem()).status, 400);
  EXPECT_EQ(post(server_->url() + "mutate", "{}", ca_.ca_pem()).status, 404);
  EXPECT_EQ(post(server_->url() + "validate", "", ca_.ca_pem(), "GET").status, 405);
  const Answer huge =
      post(server_->url() + "validate", std::string(kMaxRequestBytes + 1, ' '), ca_.ca_pem());
  EXPECT_EQ(huge.status, 413) << huge.error;
}

TEST_F(Webhook, AClientThatDoesNotTrustTheCaIsRefused) {
  const testing::TestCertificateAuthority other;
  const Answer answer = post(server_->url() + "validate", "{}", other.ca_pem());
  EXPECT_NE(answer.error, "");
  EXPECT_EQ(answer.status, 0);
}

TEST(HttpsServer, ABadCertificateOrKeyIsNamed) {
  try {
    start_https_server("127.0.0.1", 1, "not a certificate", "not a key", handle_webhook);
    FAIL() << "started";
  } catch (const HttpsServerError& e) {
    EXPECT_EQ(std::string(e.what()), "https://127.0.0.1:1/: the certificate is not PEM");
  }
}

}  // namespace
}  // namespace tessel::server
