#include "tests/support/api_admission_client.h"

#include <curl/curl.h>

#include <memory>

namespace tessel::testing {
namespace {

std::size_t append_body(char* data, std::size_t size, std::size_t count, void* out) {
  static_cast<std::string*>(out)->append(data, size * count);
  return size * count;
}

// "host:port" of a URL ("https://a.b:8443/x" -> "a.b:8443"; no port: 443).
std::string authority_of(const std::string& url) {
  const std::size_t start = url.find("://") == std::string::npos ? 0 : url.find("://") + 3;
  std::string authority = url.substr(start, url.find('/', start) - start);
  const bool bracketed = !authority.empty() && authority[0] == '[';
  const std::size_t colon = authority.rfind(':');
  const bool has_port = colon != std::string::npos && (!bracketed || colon > authority.find(']'));
  return has_port ? authority : authority + ":443";
}

// The part of a Go error after `Post "<url>": ` for a libcurl failure.
std::string go_error(CURLcode code, const std::string& detail, const std::string& dialed) {
  switch (code) {
    case CURLE_OPERATION_TIMEDOUT:
      return "context deadline exceeded";
    case CURLE_COULDNT_CONNECT:
      return "dial tcp " + dialed + ": connect: connection refused";
    case CURLE_COULDNT_RESOLVE_HOST:
      return "dial tcp: lookup " + dialed.substr(0, dialed.rfind(':')) + ": no such host";
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CACERT_BADFILE:
      if (detail.find("subject name") != std::string::npos ||
          detail.find("does not match") != std::string::npos) {
        return "x509: certificate is not valid for the requested host (" + detail + ")";
      }
      return "x509: certificate signed by unknown authority";
    case CURLE_GOT_NOTHING:
    case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR:
      return "EOF";
    default:
      return detail.empty() ? curl_easy_strerror(code) : detail;
  }
}

}  // namespace

WebhookReply post_admission_review(const WebhookEndpoint& endpoint, const std::string& body,
                                   std::chrono::seconds timeout) {
  static const bool initialised = curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK;
  const std::string url = endpoint.url + "?timeout=" + std::to_string(timeout.count()) + "s";
  WebhookReply reply;
  if (!initialised) {
    reply.error = "Post \"" + url + "\": the HTTP client could not be initialised";
    return reply;
  }
  std::unique_ptr<CURL, decltype(&curl_easy_cleanup)> curl(curl_easy_init(), curl_easy_cleanup);
  curl_slist* headers = nullptr;
  headers = curl_slist_append(headers, "Content-Type: application/json");
  headers = curl_slist_append(headers, "Accept: application/json, */*");
  std::unique_ptr<curl_slist, decltype(&curl_slist_free_all)> header_list(headers,
                                                                          curl_slist_free_all);
  curl_slist* connect_to = nullptr;
  std::string dialed = authority_of(endpoint.url);
  if (!endpoint.connect_host.empty()) {
    // CURLOPT_CONNECT_TO "host:port:connect-host:connect-port": TLS still checks `host`.
    dialed = endpoint.connect_host + ":" + std::to_string(endpoint.connect_port);
    connect_to = curl_slist_append(connect_to, (authority_of(endpoint.url) + ":" + dialed).c_str());
  }
  std::unique_ptr<curl_slist, decltype(&curl_slist_free_all)> connect_list(connect_to,
                                                                           curl_slist_free_all);
  char error_buffer[CURL_ERROR_SIZE] = {0};
  CURL* handle = curl.get();
  curl_easy_setopt(handle, CURLOPT_URL, url.c_str());
  curl_easy_setopt(handle, CURLOPT_POST, 1L);
  curl_easy_setopt(handle, CURLOPT_POSTFIELDS, body.data());
  curl_easy_setopt(handle, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size()));
  curl_easy_setopt(handle, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(handle, CURLOPT_USERAGENT, "kube-apiserver-admission");
  curl_easy_setopt(handle, CURLOPT_PROTOCOLS_STR, "https");
  curl_easy_setopt(handle, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(handle, CURLOPT_NOPROXY, "*");
  curl_easy_setopt(handle, CURLOPT_TIMEOUT_MS, static_cast<long>(timeout.count() * 1000));
  curl_easy_setopt(handle, CURLOPT_SSL_VERIFYPEER, 1L);
  curl_easy_setopt(handle, CURLOPT_SSL_VERIFYHOST, 2L);
  if (connect_to != nullptr) curl_easy_setopt(handle, CURLOPT_CONNECT_TO, connect_to);
  curl_blob ca{const_cast<char*>(endpoint.ca_bundle.data()), endpoint.ca_bundle.size(),
               CURL_BLOB_COPY};
  if (!endpoint.ca_bundle.empty()) curl_easy_setopt(handle, CURLOPT_CAINFO_BLOB, &ca);
  curl_easy_setopt(handle, CURLOPT_ERRORBUFFER, error_buffer);
  curl_easy_setopt(handle, CURLOPT_WRITEFUNCTION, append_body);
  curl_easy_setopt(handle, CURLOPT_WRITEDATA, &reply.body);
  const CURLcode code = curl_easy_perform(handle);
  if (code != CURLE_OK) {
    reply.error = "Post \"" + url + "\": " + go_error(code, error_buffer, dialed);
    reply.body.clear();
    return reply;
  }
  long status = 0;
  curl_easy_getinfo(handle, CURLINFO_RESPONSE_CODE, &status);
  reply.status = static_cast<int>(status);
  return reply;
}

}  // namespace tessel::testing
