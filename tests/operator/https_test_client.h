// What the tests of the operator's HTTPS server share: a server on a loopback port the kernel
// had free, and a libcurl client that verifies it against the test CA, as kube-apiserver (with
// the webhook configuration's caBundle) and the kubelet's probes call it.
#pragma once

#include <curl/curl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "operator/server/https_server.h"
#include "tests/support/http_server.h"

namespace tessel::server::testing {

struct HttpsAnswer {
  long status = 0;
  std::string body;
  std::map<std::string, std::string> headers;  // names in lower case
  std::string error;                           // curl's, when the request failed

  // The value of a header (`name` in lower case); "" when absent.
  std::string header(const std::string& name) const {
    const auto found = headers.find(name);
    return found == headers.end() ? "" : found->second;
  }
};

inline size_t collect_body(char* data, size_t size, size_t count, void* sink) {
  static_cast<std::string*>(sink)->append(data, size * count);
  return size * count;
}

inline size_t collect_header(char* data, size_t size, size_t count, void* sink) {
  const std::string line(data, size * count);
  const auto colon = line.find(':');
  if (colon != std::string::npos) {
    std::string name = line.substr(0, colon);
    std::transform(name.begin(), name.end(), name.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    const auto begin = line.find_first_not_of(" \t", colon + 1);
    const auto end = line.find_last_not_of(" \t\r\n");
    (*static_cast<std::map<std::string, std::string>*>(sink))[name] =
        begin == std::string::npos || end < begin ? "" : line.substr(begin, end - begin + 1);
  }
  return size * count;
}

// One request; a body is sent with Content-Type application/json.
inline HttpsAnswer https_request(const std::string& method, const std::string& url,
                                 const std::string& body, const std::string& ca_pem) {
  HttpsAnswer answer;
  CURL* curl = curl_easy_init();
  curl_blob ca{const_cast<char*>(ca_pem.data()), ca_pem.size(), CURL_BLOB_COPY};
  curl_slist* headers = curl_slist_append(nullptr, "Content-Type: application/json");
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_CAINFO_BLOB, &ca);
  curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, method.c_str());
  if (method == "POST") {
    curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body.c_str());
    curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size()));
  }
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, collect_body);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &answer.body);
  curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, collect_header);
  curl_easy_setopt(curl, CURLOPT_HEADERDATA, &answer.headers);
  curl_easy_setopt(curl, CURLOPT_TIMEOUT, 30L);
  const CURLcode code = curl_easy_perform(curl);
  if (code != CURLE_OK) answer.error = curl_easy_strerror(code);
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &answer.status);
  curl_slist_free_all(headers);
  curl_easy_cleanup(curl);
  return answer;
}

// A port the kernel had free a moment ago (the server is retried on another if it is taken).
inline uint16_t free_port() {
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

// `handler` over HTTPS on 127.0.0.1 with a certificate of `ca`; nullptr when five ports in a
// row were taken before the server bound them.
inline std::unique_ptr<HttpsServer> start_test_https_server(
    const tessel::testing::TestCertificateAuthority& ca, HttpsHandler handler) {
  const tessel::testing::TestCertificate certificate = ca.issue_server();
  for (int attempt = 0; attempt < 5; ++attempt) {
    try {
      return start_https_server("127.0.0.1", free_port(), certificate.cert_pem, certificate.key_pem,
                                handler);
    } catch (const HttpsServerError&) {
      // the port was taken in between: another
    }
  }
  return nullptr;
}

}  // namespace tessel::server::testing
